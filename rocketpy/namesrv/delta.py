"""NameServer state layer: a change to the route tables, described before it is made, as a list
of operations.

A release's registration policy reads the tables through a
:class:`~rocketpy.namesrv.routeview.RouteView` and records what should change here, as op
records; :meth:`RouteInfoManager.apply
<rocketpy.namesrv.route_info_manager.RouteInfoManager.apply>` is the one writer: it applies each
op through one table (op type -> applier) and reports what the change touched
(:class:`Touched`). No policy holds a writer, so the gate sees every change, and an empty delta is
what "nothing to do" looks like (rocketmq-rust's ``RouteMutationCoordinator``).

An op is a plain immutable value (a named tuple of strings, numbers, None, tuples and frozen
records; never a connection or a callable), equal only to an op of its own type, and applying
the same ops in the same order to fresh tables gives the same tables, route versions and
answers: the stream a replica applies (:mod:`rocketpy.namesrv.opcodec` encodes it). A bulk step
(a registration's topic table, a departed broker's topics) is one op, not one per topic.

A delta may also carry *hints* for its bulk ops: what the decode found off the reactor (a
:class:`~rocketpy.namesrv.shapes.FreshTopics`), which makes an op faster to apply and never
changes what it does. Hints stay with the writer; a replica gets none."""
from typing import NamedTuple

__all__ = ["RouteDelta", "Touched", "OPS", "AddToCluster", "RemoveFromCluster", "SetBroker",
           "RemoveBroker", "PutLive", "RefreshLive", "RemoveLive", "RemoveFilterServers",
           "MergeTopics", "PutTopics", "PutQueueData", "RemoveQueueData", "RemoveBrokerTopics",
           "DropTopic", "SetMapping", "RemoveBrokerMappings", "RestoreHighWater",
           "RestoreCluster", "RestoreAppliedDigest", "RestoreTopics", "NotifyMinBrokerIdChanged",
           "InvalidateRoutes"]

#: every op type, in the order of their encoding tags (:mod:`rocketpy.namesrv.opcodec`)
OPS = []


def _same(self, other):
    return type(self) is type(other) and tuple.__eq__(self, other)


def _differ(self, other):
    return not _same(self, other)


def _op(cls):
    """An op type: a named tuple equal only to ops of its own type (``RemoveBroker("a")`` is
    not ``DropTopic("a")``)."""
    cls.__eq__, cls.__ne__, cls.__hash__ = _same, _differ, tuple.__hash__
    OPS.append(cls)
    return cls


# ------------------------------------------------------------------ clusters and groups

@_op
class AddToCluster(NamedTuple):
    """Put ``broker_name`` in ``cluster_name``'s set of broker names."""

    cluster_name: str
    broker_name: str


@_op
class RemoveFromCluster(NamedTuple):
    """Take ``broker_name`` out of ``cluster_name``'s set (the cluster goes with its last)."""

    cluster_name: str
    broker_name: str


@_op
class SetBroker(NamedTuple):
    """Put or replace a broker group (a :class:`~rocketpy.namesrv.model.BrokerData`);
    ``broker_addrs`` is ``((brokerId, address), ...)`` in the group's order. A group equal to
    the one held changes nothing."""

    cluster: str
    broker_name: str
    broker_addrs: tuple = ()
    enable_acting_master: bool = False
    zone_name: "str | None" = None

    @classmethod
    def of(cls, broker_data):
        return cls(broker_data.cluster, broker_data.broker_name,
                   tuple(broker_data.broker_addrs.items()), broker_data.enable_acting_master,
                   broker_data.zone_name)


@_op
class RemoveBroker(NamedTuple):
    """Drop the broker group ``broker_name`` (its topics are another op)."""

    broker_name: str


# ------------------------------------------------------------------ live brokers

@_op
class PutLive(NamedTuple):
    """A live entry under ``key`` (the release's live-table key, ``(cluster or None,
    address)``), a new generation, and its filter servers (None: left as they are; ``()``:
    none). A registration's is bound to ``channel_id``; a warm restart's is *provisional*
    (no channel), bound to ``host`` until its broker registers again. ``timeout_ms`` is the
    release's (already resolved)."""

    key: tuple
    last_update_ms: int
    timeout_ms: int
    data_version: object
    channel_id: "int | None"
    ha_server_addr: "str | None"
    broker_name: str
    filter_servers: "tuple | None" = None
    provisional: bool = False
    host: "str | None" = None


@_op
class RefreshLive(NamedTuple):
    """A heartbeat: the live entry's time and deadline move on (no route changes)."""

    key: tuple
    now_ms: int


@_op
class RemoveLive(NamedTuple):
    key: tuple


@_op
class RemoveFilterServers(NamedTuple):
    key: tuple
    broker_name: str


# ------------------------------------------------------------------ topics

@_op
class MergeTopics(NamedTuple):
    """5.x ``createAndUpdateQueueData`` for a registration's topics (``configs``: its
    :class:`~rocketpy.namesrv.model.TopicConfig` values in table order): all of them
    (``every``), or only those the queue table lacks, unless ``digest`` (the body's content
    digest) is what the group applied last; write permission taken away when ``wipe`` (a prime
    slave). ``bulk``: the topics the table lacks are added first, in bulk, then the others
    walked (what a big body's off-reactor decode prepared; the same tables either way)."""

    broker_name: str
    configs: tuple
    wipe: bool
    every: bool
    digest: "bytes | None"
    bulk: bool = False


@_op
class PutTopics(NamedTuple):
    """4.9: every topic of ``configs`` gets this broker's QueueData again; ``bulk`` as for
    :class:`MergeTopics`."""

    broker_name: str
    configs: tuple
    wipe: bool
    bulk: bool = False


@_op
class PutQueueData(NamedTuple):
    topic: str
    queue_data: object


@_op
class RemoveQueueData(NamedTuple):
    topic: str
    broker_name: str


@_op
class RemoveBrokerTopics(NamedTuple):
    """Take a departed broker out of every topic it serves: one op whatever their number (one
    per topic held ~150 MB of ops for a broker of 1 M topics)."""

    broker_name: str


@_op
class DropTopic(NamedTuple):
    topic: str


@_op
class SetMapping(NamedTuple):
    """Put a static-topic mapping (a :class:`~rocketpy.namesrv.model.MappingInfo`), kept as
    long as the group ``owner`` (the registering broker's name; None: the one the mapping
    names) is."""

    topic: str
    info: object
    owner: "str | None" = None


@_op
class RemoveBrokerMappings(NamedTuple):
    """Drop the static-topic mappings a departed group registered: one op whatever their
    number."""

    broker_name: str


# ------------------------------------------------------------------ a warm restart

@_op
class RestoreHighWater(NamedTuple):
    """The largest sizes the topic, broker-name and cluster tables had reached (their Java
    capacities, hence their orders)."""

    topics: int
    brokers: int
    clusters: int


@_op
class RestoreCluster(NamedTuple):
    """A cluster's broker names, in their order, and the largest size its set reached."""

    cluster_name: str
    broker_names: tuple
    set_high: int


@_op
class RestoreAppliedDigest(NamedTuple):
    """The content digest of the topic table the group applied last."""

    broker_name: str
    digest: bytes


@_op
class RestoreTopics(NamedTuple):
    """Topics the table lacks (``names``), all with the layout ``queue_datas`` whose HashMap
    reached ``high`` entries: one op whatever their number (topics already held are left)."""

    queue_datas: tuple
    high: int
    names: tuple


# ------------------------------------------------------------------ effects

@_op
class NotifyMinBrokerIdChanged(NamedTuple):
    """Report a group's new smallest brokerId (``broker_addrs`` as in :class:`SetBroker`) once
    the changes before it are made: an effect, not a table; a replica, built without a
    notifier, changes nothing."""

    broker_addrs: tuple
    offline_addr: "str | None"
    ha_addr: "str | None"


@_op
class InvalidateRoutes(NamedTuple):
    """Something every route answer reads changed (supportActingMaster): every version moves."""


OPS = tuple(OPS)


class Touched:
    """What :meth:`RouteInfoManager.apply` changed: ``topics`` whose layout or mapping changed,
    ``shapes`` the layouts those topics use (read from the tables when first asked: ask
    before the next change), and ``brokers``, the names whose group or filter servers changed.
    ``topics`` and ``shapes`` are built when read: a bulk registration touches 500,000 topics,
    which the writer hands over as lists, not copied into a set nobody may ask for."""

    __slots__ = ("brokers", "_parts", "_table", "_topics", "_shapes")

    def __init__(self, topics=frozenset(), brokers=frozenset(), bulk=(), table=None):
        self.brokers = brokers
        self._parts = (topics, *bulk)
        self._table = table
        self._topics = self._shapes = None

    def __bool__(self):
        return bool(self.brokers) or any(self._parts)

    @property
    def topics(self):
        if self._topics is None:
            self._topics = frozenset().union(*self._parts)
        return self._topics

    @property
    def shapes(self):
        if self._shapes is None:
            found = {}
            for shape in map(self._table.get, self.topics):
                if shape is not None:
                    found[id(shape)] = shape
            self._shapes = tuple(found.values())
        return self._shapes


class RouteDelta:
    """An ordered list of ops (``ops``), and the hints for some of them."""

    __slots__ = ("ops", "hints")

    def __init__(self, ops=()):
        self.ops = list(ops)
        #: id(op) -> (op, what speeds it up), or None
        self.hints = None

    def __bool__(self):
        return bool(self.ops)

    def __len__(self):
        return len(self.ops)

    def add(self, op, hint=None):
        """Append ``op``; ``hint`` (e.g. a :class:`~rocketpy.namesrv.shapes.FreshTopics` for a
        bulk op) goes with it to the writer alone."""
        self.ops.append(op)
        if hint is not None:
            if self.hints is None:
                self.hints = {}
            self.hints[id(op)] = (op, hint)

    def hint(self, op):
        """The hint added with ``op`` (this very object), or None."""
        entry = self.hints.get(id(op)) if self.hints is not None else None
        return entry[1] if entry is not None and entry[0] is op else None
