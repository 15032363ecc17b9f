"""Controller state layer: the events that change the replica state (Java's
``controller.impl.event``: ``ApplyBrokerIdEvent``, ``ElectMasterEvent``, ``AlterSyncStateSetEvent``,
``CleanBrokerDataEvent``, ``UpdateBrokerAddressEvent``).

A request is answered from the state as it is, and what it changes is written as events; the
events are then applied (:meth:`~rocketpy.controller.replicas.ReplicasInfoManager.apply_event`)
and, on a durable controller, appended to its event log first. Java's DLedger log holds the same
events; rocketpy writes each as one JSON object (:func:`event_to_obj`), so a restart replays them.
"""
from dataclasses import asdict, dataclass

__all__ = ["ApplyBrokerIdEvent", "ElectMasterEvent", "AlterSyncStateSetEvent",
           "CleanBrokerDataEvent", "UpdateBrokerAddressEvent", "event_to_obj", "event_from_obj",
           "EVENT_TYPES"]


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    """A broker took ``broker_id`` in its group (the first one creates the group)."""

    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int
    register_check_code: str


@dataclass(frozen=True)
class ElectMasterEvent:
    """A new master (``elected``), or none could be elected and the old one is gone."""

    broker_name: str
    new_master_broker_id: "int | None" = None
    elected: bool = True


@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    broker_name: str
    new_sync_state_set: tuple


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    """Forget ``broker_ids`` of a group (None or empty: the whole group)."""

    broker_name: str
    broker_ids: "tuple | None" = None


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


EVENT_TYPES = {cls.__name__: cls for cls in (
    ApplyBrokerIdEvent, ElectMasterEvent, AlterSyncStateSetEvent, CleanBrokerDataEvent,
    UpdateBrokerAddressEvent)}


def event_to_obj(event):
    """A JSON-ready dict of ``event`` (its type under ``"type"``)."""
    obj = asdict(event)
    obj["type"] = type(event).__name__
    return obj


def event_from_obj(obj):
    """The event :func:`event_to_obj` wrote; ValueError for anything else."""
    try:
        values = dict(obj)
        cls = EVENT_TYPES[values.pop("type")]
        for key in ("new_sync_state_set", "broker_ids"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        return cls(**values)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a controller event: {obj!r:.200}") from exc
