"""Controller state layer: the broker groups' ids, masters and sync state sets (Java
``ReplicasInfoManager`` with ``BrokerReplicaInfo`` and ``SyncStateInfo``, 5.3.3).

Pure: no I/O, no clock, no Twisted. Each request method reads the state and returns a
:class:`ControllerResult` (the answer's code, remark, typed header and body, and the events the
request causes) without changing anything; :meth:`ReplicasInfoManager.apply_event` changes the
state. Java runs the same two steps around its DLedger log (propose the events, apply them once
committed); the caller here applies them, after logging them when the controller is durable.

Whether a broker is alive is asked of a predicate ``alive(cluster, broker_name, broker_id)``
(the heartbeat table's, at the request's time), as Java's ``BrokerValidPredicate``.
"""
from dataclasses import dataclass, field
from typing import Any

from rocketpy.remoting import bodies as B, headers as H
from rocketpy.remoting.codes import ResponseCode as RC
from rocketpy.remoting.javahash import hashmap_order
from rocketpy.remoting.numbers import NumberError, parse_java_integer

from .events import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                     ElectMasterEvent, UpdateBrokerAddressEvent)

__all__ = ["ControllerResult", "BrokerReplicaInfo", "SyncStateInfo", "ReplicasInfoManager",
           "FIRST_BROKER_CONTROLLER_ID", "MAX_BROKERS", "NO_CHECK_CODE_REMARK", "java_set"]

#: ``MixAll.FIRST_BROKER_CONTROLLER_ID``: the controller numbers a group's brokers from 1.
FIRST_BROKER_CONTROLLER_ID = 1
#: broker ids the controller holds, all groups together (a rocketpy bound, far above any real
#: cluster: CONTROLLER_APPLY_BROKER_ID is open, and each new group name or id would stay in
#: memory and in the event log for ever)
MAX_BROKERS = 10_000
#: Java's answer to CONTROLLER_APPLY_BROKER_ID without ``registerCheckCode``: the event
#: handler's NullPointerException (JDK 15+'s helpful message), as the ExecutionException the
#: processor's ``future.get`` throws (``UtilAll.exceptionSimpleDesc`` of it; its first frame,
#: inside the JDK, is left out: it depends on the JDK build)
NO_CHECK_CODE_REMARK = ('java.util.concurrent.ExecutionException: java.lang.NullPointerException: '
                       'Cannot invoke "String.split(String)" because "registerCheckCode" is null')


def java_set(ids):
    """``ids`` in the order a Java ``HashSet<Long>`` iterates them (and fastjson writes them)."""
    return hashmap_order(sorted(ids))


@dataclass
class ControllerResult:
    """Java ``ControllerResult``: the answer, the events to apply before it is sent, and (set
    by the processor) the pushes that follow it and a file write it waits for."""

    code: int = RC.SUCCESS
    remark: "str | None" = None
    header: Any = None
    body: Any = None
    events: list = field(default_factory=list)
    pushes: list = field(default_factory=list)
    write: Any = None


class BrokerReplicaInfo:
    """One group's brokers: id -> (address, register check code), and the next id to hand out
    (it only grows: an id is never given twice, even after its broker is cleaned)."""

    __slots__ = ("cluster_name", "broker_name", "next_assign_broker_id", "brokers")

    def __init__(self, cluster_name, broker_name):
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.next_assign_broker_id = FIRST_BROKER_CONTROLLER_ID
        self.brokers = {}

    def add_broker(self, broker_id, address, register_check_code):
        self.brokers[broker_id] = (address, register_check_code)
        self.next_assign_broker_id += 1

    def address(self, broker_id):
        entry = self.brokers.get(broker_id)
        return None if entry is None else entry[0]

    def broker_id_table(self):
        """``getBrokerIdTable``: id -> address, in Java's HashMap order."""
        return {i: self.brokers[i][0] for i in java_set(self.brokers)}


class SyncStateInfo:
    """One group's master, its epoch, and the sync state set with its epoch."""

    __slots__ = ("cluster_name", "broker_name", "master_epoch", "sync_state_set_epoch",
                 "sync_state_set", "master_broker_id")

    def __init__(self, cluster_name, broker_name):
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.master_epoch = 0
        self.sync_state_set_epoch = 0
        self.sync_state_set = frozenset()
        self.master_broker_id = None

    def update_master(self, broker_id):
        self.master_broker_id = broker_id
        self.master_epoch += 1

    def update_sync_state_set(self, ids):
        self.sync_state_set = frozenset(ids)
        self.sync_state_set_epoch += 1

    @property
    def first_time_for_elect(self):
        return self.master_epoch == 0

    def sync_state_set_bean(self):
        return B.SyncStateSet(sync_state_set=java_set(self.sync_state_set),
                              sync_state_set_epoch=self.sync_state_set_epoch)


class ReplicasInfoManager:
    """The replica state of every broker group the controller knows.

    :param enable_elect_unclean_master: a callable returning the current setting (Java reads
        ``controllerConfig.isEnableElectUncleanMaster()`` at each election, and
        UPDATE_CONTROLLER_CONFIG may change it)."""

    def __init__(self, enable_elect_unclean_master=lambda: False, max_brokers=MAX_BROKERS):
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.max_brokers = max_brokers
        self.replica_info_table = {}       # broker name -> BrokerReplicaInfo
        self.sync_state_info_table = {}    # broker name -> SyncStateInfo
        self._broker_count = 0

    def _contains(self, broker_name):
        return (broker_name in self.replica_info_table
                and broker_name in self.sync_state_info_table)

    def broker_count(self):
        """Broker ids held, all groups together."""
        return self._broker_count

    def recount(self):
        """Count the broker ids again (after the tables were replaced, as by a snapshot)."""
        self._broker_count = sum(len(info.brokers) for info in self.replica_info_table.values())

    # -- requests ---------------------------------------------------------------------------

    def alter_sync_state_set(self, header, sync_state_set, alive):
        """CONTROLLER_ALTER_SYNC_STATE_SET: the master proposes a new sync state set."""
        name = header.broker_name
        result = ControllerResult(header=H.AlterSyncStateSetResponseHeader())
        if not self._contains(name):
            return _fail(result, RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                         "Broker metadata is not existed")
        new_set = frozenset(sync_state_set.sync_state_set)
        state = self.sync_state_info_table[name]
        replicas = self.replica_info_table[name]
        if state.sync_state_set == new_set:
            return _fail(result, RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                         "The newSyncStateSet is equal with oldSyncStateSet, "
                         "no needed to update syncStateSet")
        if state.master_broker_id is None or state.master_broker_id != header.master_broker_id:
            return _fail(result, RC.CONTROLLER_INVALID_MASTER,
                         "Rejecting alter syncStateSet request because the current leader is:"
                         f"{{{_java(state.master_broker_id)}}}, not {{{_java(header.master_broker_id)}}}")
        if header.master_epoch != state.master_epoch:
            return _fail(result, RC.CONTROLLER_FENCED_MASTER_EPOCH,
                         "Rejecting alter syncStateSet request because the current master epoch "
                         f"is:{{{state.master_epoch}}}, not {{{_java(header.master_epoch)}}}")
        if sync_state_set.sync_state_set_epoch != state.sync_state_set_epoch:
            return _fail(result, RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                         "Rejecting alter syncStateSet request because the current syncStateSet "
                         f"epoch is:{{{state.sync_state_set_epoch}}}, "
                         f"not {{{sync_state_set.sync_state_set_epoch}}}")
        for replica in java_set(new_set):
            if replica not in replicas.brokers:
                return _fail(result, RC.CONTROLLER_INVALID_REPLICAS,
                             "Rejecting alter syncStateSet request because the replicas "
                             f"{{{replica}}} don't exist")
            if not alive(replicas.cluster_name, replicas.broker_name, replica):
                return _fail(result, RC.CONTROLLER_BROKER_NOT_ALIVE,
                             "Rejecting alter syncStateSet request because the replicas "
                             f"{{{replica}}} don't alive")
        if state.master_broker_id not in new_set:
            return _fail(result, RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                         "Rejecting alter syncStateSet request because the newSyncStateSet don't "
                         f"contains origin leader {{{state.master_broker_id}}}")
        epoch = state.sync_state_set_epoch + 1
        result.header.new_sync_state_set_epoch = epoch
        result.body = B.SyncStateSet(sync_state_set=java_set(new_set), sync_state_set_epoch=epoch)
        result.events.append(AlterSyncStateSetEvent(name, tuple(java_set(new_set))))
        return result

    def elect_master(self, header, elect_policy):
        """CONTROLLER_ELECT_MASTER, from a broker, from mqadmin (``designateElect``) or from the
        controller itself for a group whose master died (``brokerId`` -1)."""
        name = header.broker_name
        broker_id = header.broker_id
        result = ControllerResult(header=H.ElectMasterResponseHeader())
        response = result.header
        if not self._contains(name):
            return _fail(result, RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                         "Broker hasn't been registered")
        state = self.sync_state_info_table[name]
        replicas = self.replica_info_table[name]
        sync_state_set = state.sync_state_set
        old_master = state.master_broker_id
        all_brokers = set(replicas.brokers) if self.enable_elect_unclean_master() else None
        new_master = broker_id if state.first_time_for_elect else None
        if new_master is None or new_master == -1:
            assigned = broker_id if header.designate_elect else None
            new_master = elect_policy.elect(replicas.cluster_name, replicas.broker_name,
                                            sync_state_set, all_brokers, old_master, assigned)
        if new_master is not None and new_master == old_master:
            response.master_epoch = state.master_epoch
            response.sync_state_set_epoch = state.sync_state_set_epoch
            response.master_broker_id = old_master
            response.master_address = replicas.address(old_master)
            result.body = B.ElectMasterResponseBody(sync_state_set=java_set(sync_state_set))
            return _fail(result, RC.CONTROLLER_MASTER_STILL_EXIST,
                         f"The old master {old_master} is still alive, not need to elect new "
                         f"master for broker {replicas.broker_name}")
        if new_master is not None:
            response.master_broker_id = new_master
            response.master_address = replicas.address(new_master)
            response.master_epoch = state.master_epoch + 1
            response.sync_state_set_epoch = state.sync_state_set_epoch + 1
            group = B.BrokerMemberGroup(broker_addrs=replicas.broker_id_table(),
                                        broker_name=replicas.broker_name,
                                        cluster=replicas.cluster_name)
            result.body = B.ElectMasterResponseBody(broker_member_group=group,
                                                    sync_state_set=[new_master])
            result.events.append(ElectMasterEvent(name, new_master))
            return result
        if broker_id is None or broker_id == -1:
            result.events.append(ElectMasterEvent(name, None, elected=False))
            return _fail(result, RC.CONTROLLER_MASTER_NOT_AVAILABLE,
                         "Old master has down and failed to elect a new broker master")
        return _fail(result, RC.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def get_next_broker_id(self, header):
        """CONTROLLER_GET_NEXT_BROKER_ID: the id a new broker of the group should apply for."""
        replicas = self.replica_info_table.get(header.broker_name)
        next_id = (FIRST_BROKER_CONTROLLER_ID if replicas is None
                   else replicas.next_assign_broker_id)
        return ControllerResult(header=H.GetNextBrokerIdResponseHeader(
            cluster_name=header.cluster_name, broker_name=header.broker_name,
            next_broker_id=next_id))

    def apply_broker_id(self, header):
        """CONTROLLER_APPLY_BROKER_ID: a broker takes an id (again, after a restart, with the
        same register check code). Without a check code Java's ``registerCheckCode.split``
        throws in the event handler and the processor answers that failure, changing nothing."""
        name, broker_id, check = header.broker_name, header.applied_broker_id, header.register_check_code
        if check is None:
            return ControllerResult(RC.SYSTEM_ERROR, NO_CHECK_CODE_REMARK)
        result = ControllerResult(header=H.ApplyBrokerIdResponseHeader(
            cluster_name=header.cluster_name, broker_name=name))
        address = check.split(";")[0]
        event = ApplyBrokerIdEvent(header.cluster_name, name, address, broker_id, check)
        replicas = self.replica_info_table.get(name)
        if ((replicas is None or broker_id not in replicas.brokers)
                and self.broker_count() >= self.max_brokers):
            return _fail(result, RC.SYSTEM_ERROR,
                         f"[REFUSED] the controller holds {self.max_brokers} broker ids, its "
                         "bound; nothing was applied")
        if replicas is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                result.events.append(event)
                return result
            return _fail(result, RC.CONTROLLER_BROKER_ID_INVALID,
                         f"Broker-set: {name} hasn't been registered in controller, but broker "
                         f"try to apply brokerId: {_java(broker_id)}")
        entry = replicas.brokers.get(broker_id)
        if entry is None or entry[1] == check:
            result.events.append(event)
            return result
        return _fail(result, RC.CONTROLLER_BROKER_ID_INVALID,
                     f"Fail to apply brokerId: {_java(broker_id)} in broker-set: {name}")

    def register_broker(self, header, alive):
        """CONTROLLER_REGISTER_BROKER: a broker with an id says where it listens; it learns the
        group's master (while that master is alive) and sync state set."""
        name, broker_id = header.broker_name, header.broker_id
        result = ControllerResult(header=H.RegisterBrokerToControllerResponseHeader(
            cluster_name=header.cluster_name, broker_name=name))
        if not self._contains(name):
            return _fail(result, RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                         f"Broker-set: {name} hasn't been registered in controller")
        replicas = self.replica_info_table[name]
        state = self.sync_state_info_table[name]
        if broker_id not in replicas.brokers:
            return _fail(result, RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                         f"BrokerId: {_java(broker_id)} hasn't been registered in broker-set: {name}")
        master = state.master_broker_id
        if master is not None and alive(header.cluster_name, name, master):
            result.header.master_broker_id = master
            result.header.master_address = replicas.address(master)
            result.header.master_epoch = state.master_epoch
            result.header.sync_state_set_epoch = state.sync_state_set_epoch
        result.body = state.sync_state_set_bean()
        if header.broker_address != replicas.address(broker_id):
            result.events.append(UpdateBrokerAddressEvent(header.cluster_name, name,
                                                          header.broker_address, broker_id))
        return result

    def get_replica_info(self, header):
        """CONTROLLER_GET_REPLICA_INFO: the group's master and sync state set."""
        name = header.broker_name
        result = ControllerResult(header=H.GetReplicaInfoResponseHeader())
        if not self._contains(name):
            return _fail(result, RC.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                         "Broker metadata is not existed")
        state = self.sync_state_info_table[name]
        replicas = self.replica_info_table[name]
        result.header.master_broker_id = state.master_broker_id
        result.header.master_address = replicas.address(state.master_broker_id)
        result.header.master_epoch = state.master_epoch
        result.body = state.sync_state_set_bean()
        return result

    def get_sync_state_data(self, broker_names, alive):
        """CONTROLLER_GET_SYNC_STATE_DATA (``mqadmin getSyncStateSet``): per known group, its
        replicas in and out of the sync state set, each with whether it is alive. A name
        asked twice is answered once (a body repeating a big group's name costs its length,
        not its length times the group)."""
        table = {}
        for name in dict.fromkeys(broker_names):
            if not self._contains(name):
                continue
            state = self.sync_state_info_table[name]
            replicas = self.replica_info_table[name]
            in_sync, not_in_sync = [], []
            for broker_id, address in replicas.broker_id_table().items():
                replica = B.ReplicaIdentity(
                    alive=alive(replicas.cluster_name, name, broker_id), broker_address=address,
                    broker_id=broker_id, broker_name=name)
                (in_sync if broker_id in state.sync_state_set else not_in_sync).append(replica)
            table[name] = B.ReplicasInfo(
                master_broker_id=state.master_broker_id,
                master_address=replicas.address(state.master_broker_id),
                master_epoch=state.master_epoch,
                sync_state_set_epoch=state.sync_state_set_epoch,
                in_sync_replicas=in_sync, not_in_sync_replicas=not_in_sync)
        return ControllerResult(body=B.BrokerReplicasInfo(
            replicas_info_table={k: table[k] for k in hashmap_order(list(table))}))

    def clean_broker_data(self, header, alive):
        """CLEAN_BROKER_DATA (``mqadmin cleanBrokerMetadata``): forget dead brokers of a group,
        or the whole group once it has no master (``isCleanLivingBroker`` skips both checks)."""
        name = header.broker_name
        ids_text = header.broker_controller_ids_to_clean
        result = ControllerResult()
        ids = None
        if not header.is_clean_living_broker:
            state = self.sync_state_info_table.get(name)
            if _blank(ids_text) and state is not None and state.master_broker_id is not None:
                return _fail(result, RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                             f"Broker {name} is still alive, clean up failure")
            if not _blank(ids_text):
                try:
                    ids = {_java_long(part) for part in ids_text.split(";")}
                except ValueError as exc:
                    return _fail(result, RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                 "Please set the option <brokerControllerIdsToClean> according "
                                 f"to the format, exception: {exc}")
                for broker_id in java_set(ids):
                    if alive(header.cluster_name, name, broker_id):
                        return _fail(result, RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                     f"Broker [{name},  {broker_id}] is still alive, clean up failure")
        if self._contains(name):
            result.events.append(CleanBrokerDataEvent(
                name, None if ids is None else tuple(java_set(ids))))
            return result
        return _fail(result, RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                     f"Broker {name} is not existed,clean broker data failure.")

    def scan_need_reelect_broker_sets(self, alive):
        """Groups whose master is not alive while another of their brokers is."""
        out = []
        for name, state in self.sync_state_info_table.items():
            master = state.master_broker_id
            if master is None or alive(state.cluster_name, name, master):
                continue
            replicas = self.replica_info_table.get(name)
            if replicas and any(alive(state.cluster_name, name, i) for i in replicas.brokers):
                out.append(name)
        return out

    # -- events -----------------------------------------------------------------------------

    def apply_event(self, event):
        """Change the state as ``event`` says (Java ``applyEvent``)."""
        handler = _APPLY.get(type(event))
        if handler is not None:
            handler(self, event)

    def _apply_alter(self, event):
        if self._contains(event.broker_name):
            self.sync_state_info_table[event.broker_name].update_sync_state_set(
                event.new_sync_state_set)

    def _apply_broker_id(self, event):
        name = event.broker_name
        if self._contains(name):
            replicas = self.replica_info_table[name]
            if event.broker_id not in replicas.brokers:
                replicas.add_broker(event.broker_id, event.broker_address,
                                    event.register_check_code)
                self._broker_count += 1
            return
        replicas = BrokerReplicaInfo(event.cluster_name, name)
        old = self.replica_info_table.get(name)
        self._broker_count += 1 - (0 if old is None else len(old.brokers))
        replicas.add_broker(event.broker_id, event.broker_address, event.register_check_code)
        self.replica_info_table[name] = replicas
        self.sync_state_info_table[name] = SyncStateInfo(event.cluster_name, name)

    def _apply_address(self, event):
        replicas = self.replica_info_table.get(event.broker_name)
        if replicas is not None and event.broker_id in replicas.brokers:
            check = replicas.brokers[event.broker_id][1]
            replicas.brokers[event.broker_id] = (event.broker_address, check)

    def _apply_elect(self, event):
        if not self._contains(event.broker_name):
            return
        state = self.sync_state_info_table[event.broker_name]
        if event.elected:
            state.update_master(event.new_master_broker_id)
            state.update_sync_state_set((event.new_master_broker_id,))
        else:
            state.update_master(None)

    def _apply_clean(self, event):
        name, ids = event.broker_name, event.broker_ids
        if not ids:
            gone = self.replica_info_table.pop(name, None)
            self._broker_count -= 0 if gone is None else len(gone.brokers)
            self.sync_state_info_table.pop(name, None)
            return
        if not self._contains(name):
            return
        replicas = self.replica_info_table[name]
        state = self.sync_state_info_table[name]
        for broker_id in ids:
            if replicas.brokers.pop(broker_id, None) is not None:
                self._broker_count -= 1
        state.sync_state_set = state.sync_state_set - frozenset(ids)   # one pass, not one per id
        if state.master_broker_id in ids:
            # Java keeps a cleaned (dead) master as master, outside its own sync state set;
            # rocketpy drops it, so the dead-master scan elects from what is left
            state.master_broker_id = None
        if not replicas.brokers:
            del self.replica_info_table[name]
        if not state.sync_state_set:
            del self.sync_state_info_table[name]


_APPLY = {
    AlterSyncStateSetEvent: ReplicasInfoManager._apply_alter,
    ApplyBrokerIdEvent: ReplicasInfoManager._apply_broker_id,
    UpdateBrokerAddressEvent: ReplicasInfoManager._apply_address,
    ElectMasterEvent: ReplicasInfoManager._apply_elect,
    CleanBrokerDataEvent: ReplicasInfoManager._apply_clean,
}


def _fail(result, code, remark):
    result.code = code
    result.remark = remark
    return result


def _java(value):
    """``String.valueOf`` of a boxed number (``null`` for None)."""
    return "null" if value is None else str(value)


def _blank(text):
    """``StringUtils.isBlank``."""
    return text is None or not text.strip()


def _java_long(text):
    """``Long.valueOf``; ValueError with Java's NumberFormatException text."""
    try:
        return parse_java_integer(text)
    except NumberError:
        pass
    raise ValueError(f'java.lang.NumberFormatException: For input string: "{text}"')
