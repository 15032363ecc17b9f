"""Controller processor layer: the controller's request codes (Java ``ControllerRequestProcessor``
and the parts of ``ControllerManager`` and ``DLedgerController`` that decide answers, pushes and
elections, 5.3.3).

One table from request code to handler, bound to the codes' declarations in the protocol
catalogue (:mod:`rocketpy.remoting.catalogue`: which codes the 5.3.3 controller serves, which
only its leader answers, which are administrative); a handler reads the state
(:class:`~rocketpy.controller.replicas.ReplicasInfoManager`) and returns a
:class:`~rocketpy.controller.replicas.ControllerResult`; :meth:`ControllerRequestProcessor.process`
applies its events, makes them durable (``persist``: the event log's
:class:`~rocketpy.namesrv.pending.FileWrite`, None when the controller keeps nothing on disk)
and writes the frame Java writes. With a durable store the answer is a DISK
:class:`~rocketpy.namesrv.pending.Pending`: it goes out once the change is on disk. A request
body past 1 KiB (ALTER_SYNC_STATE_SET's SyncStateSet, the broker names of
GET_SYNC_STATE_DATA, UPDATE_CONTROLLER_CONFIG's properties) is decoded first by a CPU Pending
with its own budget, as the NameServer decodes registration bodies (15 MiB lenient bodies held
the reactor 5-12 s: issue 31).

The controller also acts on its own: a broker's connection closing or its heartbeat timing out
(``on_channel_close``, ``scan_not_active_broker``) and the periodic check for groups without a
live master (``scan_inactive_master``) start an election, whose NOTIFY_BROKER_ROLE_CHANGED
pushes go out through ``notify(address, command)`` to every live broker of the group. Work the
controller starts itself runs through ``run(pending)`` (the service hands it to the writer; by
default it runs at once). Pure: no Twisted, time as ``now_ms``, channels as values.

A single controller is always the leader (GET_METADATA_INFO says so). Several controllers sharing
their state through etcd (:mod:`.replicated`) pass a ``leadership``: a controller that is not the
leader answers the requests Java's ``DLedgerController`` queues as events (:data:`LEADER_CODES`)
with CONTROLLER_NOT_LEADER, names the leader in GET_METADATA_INFO, and starts no election. The
controller codes of 5.3.3 are served, anything else is REQUEST_CODE_NOT_SUPPORTED as on Java's
controller port. Only the codec's own errors are a request's fault; anything else a handler
raises is a bug, answered SYSTEM_ERROR, logged with its traceback and counted
(:attr:`ControllerRequestProcessor.handler_failures`).
"""
import logging
from functools import partial

from rocketpy.namesrv.configupdate import update_properties, value_refusal
from rocketpy.namesrv.pending import CPU, DISK, Pending, decoded
from rocketpy.namesrv.replies import NOT_SET_REMARK, failure_remark
from rocketpy.remoting import bodies as B, headers as H
from rocketpy.remoting.catalogue import (CONTROLLER, Release, bind, codes_with, declaration,
                                         responder)
from rocketpy.remoting.codes import (CURRENT_VERSION, OVERLOAD_REMARK, RequestCode as R,
                                     ResponseCode as RC, not_supported_remark)
from rocketpy.remoting.command import FLAG_ONEWAY, FLAG_RESPONSE, JAVA, JSON, RemotingCommand
from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.javahash import hashmap_order

from .elect import DefaultElectPolicy
from .heartbeat import BrokerHeartbeatManager
from .replicas import ControllerResult, ReplicasInfoManager

__all__ = ["ControllerRequestProcessor", "ADMIN_CODES", "LEADER_CODES", "NOT_LEADER_REMARK",
           "RELEASE"]

#: The release whose controller this one answers like (``MQVersion.CURRENT_VERSION``).
RELEASE = Release.of(CURRENT_VERSION.name)
#: What only an operator sends (``mqadmin updateControllerConfig``, ``cleanBrokerMetadata``,
#: ``electMaster``): guarded by ``adminAllowNetworks`` / ``aclEnable`` when configured. A
#: broker's own CONTROLLER_ELECT_MASTER is not: only a designated one (its declaration's
#: ``admin_when``, ``designateElect=true``).
ADMIN_CODES = codes_with(CONTROLLER, lambda r: r.administrative)
#: What only the leader answers: the requests Java's controller appends to its event queue
#: (``DLedgerController``/``JRaftController``); heartbeats, metadata and the config are local.
LEADER_CODES = codes_with(CONTROLLER, lambda r: r.leader_only)
NOT_LEADER_REMARK = "The controller is not in leader state"
#: Elections tried at most for one dead master, whatever ``electMasterMaxRetryCount`` says
#: (UPDATE_CONTROLLER_CONFIG sets it from the wire; each failed try is a logged event).
MAX_ELECT_RETRIES = 16


def _sync_state_set(body, budget):
    return B.SyncStateSet.from_json(body, budget=budget)


def _administrative(request):
    """Whether ``request`` is an operator's: its code's declaration says so, or says which of its
    header's fields makes it so (read as leniently as any handler reads it)."""
    decl = declaration(request.code)
    if decl is None or request.code not in ADMIN_CODES:
        return False
    if decl.admin_when is None:
        return True
    header = H.REQUEST_HEADERS[request.code].from_ext_fields(request.ext_fields, strict=False)
    return bool(getattr(header, decl.admin_when))

log = logging.getLogger("rocketpy.controller")

class ControllerRequestProcessor:
    """Answers the controller's requests as a 5.3.3 controller leader does.

    :param configuration: the :class:`~rocketpy.controller.config.ControllerConfiguration`.
    :param persist: ``persist(events) -> FileWrite | None``: the write that makes applied
        events durable (:class:`~rocketpy.controller.store.Journal.record`).
    :param notify: ``notify(address, command)``: send a oneway push to a broker's listen address.
    :param run: ``run(pending)``: run the controller's own durable work (default: at once).
    :param access_control: an :class:`~rocketpy.namesrv.acl.AccessControl` over
        :data:`ADMIN_CODES` (None: every request runs, as on Java's controller).
    :param leadership: a :class:`~rocketpy.controller.replicated.Leadership` (None: a single
        controller, always the leader).
    :param broker_access: a :class:`~rocketpy.controller.access.ControllerBrokerAccess` over the
        brokers' requests (None: every broker request runs, as on Java's controller).
    :param entry_refusal: ``entry_refusal(events) -> remark | None``: why a change cannot be
        made durable at all (an etcd entry over its size bound), asked before it is applied:
        a refused change is answered SYSTEM_ERROR and changes nothing.
    :param value_check: ``value_check(key, value)`` -> None, or what the start-up check expects:
        UPDATE_CONTROLLER_CONFIG refuses such a value with INVALID_PARAMETER, as the
        NameServer's update does (Java answers "success" and drops it).
    """

    def __init__(self, configuration, *, replicas=None, heartbeats=None, persist=None,
                 notify=None, run=None, access_control=None, leadership=None,
                 broker_access=None, entry_refusal=None, value_check=None):
        self.configuration = configuration
        config = configuration.controller_config
        self.config = config
        self.replicas = replicas or ReplicasInfoManager(lambda: config.enable_elect_unclean_master)
        self.heartbeats = heartbeats or BrokerHeartbeatManager()
        self.persist = persist
        self.notify = notify or (lambda address, command: None)
        self.run = run or (lambda pending: pending.run())
        self.access_control = access_control
        self.broker_access = broker_access
        self.leadership = leadership
        self.entry_refusal = entry_refusal
        self.value_check = value_check
        # Java reads the black list once, when the processor is built
        self.black_list = configuration.black_list()
        #: master elections since start (a broker's request, or a dead master's group), by
        #: outcome: the dashboard's and the alert rules' (a rocketpy addition)
        self.elections = {"elected": 0, "failed": 0}
        #: handler bugs (anything but the codec's errors) since start, by request code
        self.handler_failures = {}
        #: request code -> handler(header, request, channel, now_ms), bound to the catalogue's
        #: declarations (a served code without a handler fails here, at start)
        self.handlers = {code: binding.handler
                         for code, binding in bind((self,), CONTROLLER, RELEASE).items()}

    # -- dispatch ---------------------------------------------------------------------------

    def process(self, request, channel, now_ms, offload=False):
        """The answer to ``request`` (None for a oneway one), or with ``offload`` and a durable
        store, the DISK Pending of the answer for a change that must reach the disk first."""
        handler = self.handlers.get(request.code)
        if handler is not None and self.access_control is not None and _administrative(request):
            refusal = self.access_control.decide(request, channel)
            if refusal is not None:
                log.warning("controller request %s from %s refused: %s", request.code,
                            getattr(channel, "remote_addr", channel), refusal)
                return self._answer(request, ControllerResult(RC.NO_PERMISSION, refusal))
        if handler is not None and self.broker_access is not None:
            refusal = self.broker_access.decide(request, channel, now_ms)
            if refusal is not None:
                log.warning("controller request %s from %s refused: %s", request.code,
                            getattr(channel, "remote_addr", channel), refusal)
                return self._answer(request, ControllerResult(RC.NO_PERMISSION, refusal))
        try:
            if request.code in LEADER_CODES and not self.is_leader(now_ms):
                result = ControllerResult(RC.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
            elif handler is None:
                result = ControllerResult(RC.REQUEST_CODE_NOT_SUPPORTED,
                                          not_supported_remark(request.code))
            else:
                cls = H.REQUEST_HEADERS.get(request.code)
                header = None if cls is None else cls.from_ext_fields(request.ext_fields)
                result = handler(header, request, channel, now_ms)
        except Exception as exc:  # a bad request never takes the controller down
            result = self._failed(request, exc)
        if result.__class__ is Pending:   # a request body decoded off the reactor first
            decode = result
            pending = Pending(
                decode.work,
                lambda value: self._settle(request, self._finished(request, decode, value),
                                           offload),
                CPU, lambda exc: self._settle(request, self._failed(request, exc), offload),
                decode.cancel, decode.budget)
            return pending if offload else pending.run()
        return self._settle(request, result, offload)

    def _failed(self, request, exc):
        """SYSTEM_ERROR with a Java-like remark: the codec's own errors (bad input) quietly,
        anything else as the bug it is, logged with its traceback and counted."""
        if not isinstance(exc, RemotingCodecError):
            code = request.code
            self.handler_failures[code] = self.handler_failures.get(code, 0) + 1
            log.error("controller request %s: handler failed", code, exc_info=exc)
        return ControllerResult(RC.SYSTEM_ERROR, failure_remark(exc))

    def _finished(self, request, decode, value):
        """A handler's result from its decoded body (on the reactor thread)."""
        try:
            return decode.finish(value)
        except Exception as exc:
            return self._failed(request, exc)

    def _settle(self, request, result, offload):
        """``result`` applied and answered: at once, or once its change is durable (a DISK
        Pending of the answer, with ``offload``)."""
        def then():
            self._send(result.pushes)
            return self._answer(request, result)

        pending = self._commit(result, then)
        if pending is None:
            return then()
        return pending if offload else pending.run()

    def is_leader(self, now_ms):
        return self.leadership is None or self.leadership.is_leader(now_ms)

    def _send(self, pushes):
        for address, command in pushes:
            self.notify(address, command)

    def _commit(self, result, then):
        """Apply ``result``'s events; the Pending of ``then()`` once they (or the result's own
        file write) are durable; None when nothing needs writing."""
        if result.events and self.entry_refusal is not None:
            remark = self.entry_refusal(result.events)
            if remark is not None:       # refused before anything is applied
                log.warning("controller change refused: %s", remark)
                result.code, result.remark, result.header, result.body = (
                    RC.SYSTEM_ERROR, remark, None, None)
                result.events, result.pushes = [], []
                return None
        for event in result.events:
            self.replicas.apply_event(event)
        job = result.write
        if result.events and self.persist is not None:
            job = self.persist(result.events)
        if job is None:
            return None

        def failed(exc):
            why = getattr(exc, "strerror", None) or exc
            log.error("controller change could not be written to disk: %s", why)
            if self.leadership is not None:
                # a group's leader that cannot commit drops the change (it reads the state
                # again from etcd): no broker may hear of a role that is not in the log
                result.pushes = []
            return self._unwritten(then, why)

        return Pending(job, lambda _: then(), DISK, failed)

    def _unwritten(self, then, why):
        answer = then()
        if answer is None:
            return None
        # the change stays in memory and goes out with the next write; the request is not
        # acknowledged (Java fails the request when its DLedger append fails)
        remark = f"the controller change could not be written to disk: {why}"
        return RemotingCommand(RC.SYSTEM_ERROR, JAVA, CURRENT_VERSION, answer.opaque,
                               FLAG_RESPONSE, remark, None, None, JSON)

    def _answer(self, request, result):
        if request.is_oneway:
            return None
        ext = None if result.header is None else result.header.to_ext_fields()
        body = result.body
        if body is not None and body.__class__ is not bytes:
            body = body.to_json()
        return RemotingCommand(int(result.code), JAVA, CURRENT_VERSION, request.opaque,
                               FLAG_RESPONSE, result.remark, ext, body, JSON)

    def overload_response(self, request):
        if request.is_oneway:
            return None
        return self._answer(request, ControllerResult(RC.SYSTEM_BUSY, OVERLOAD_REMARK))

    # -- handlers ---------------------------------------------------------------------------

    def _alive(self, now_ms):
        return self.heartbeats.alive_predicate(now_ms)

    def _policy(self, now_ms):
        return DefaultElectPolicy(self._alive(now_ms), self.heartbeats.broker_live_info)

    @responder(R.CONTROLLER_ALTER_SYNC_STATE_SET)
    def alter_sync_state_set(self, header, request, channel, now_ms):
        return decoded(request.body, _sync_state_set, lambda sync_state_set:
                       self.replicas.alter_sync_state_set(header, sync_state_set,
                                                          self._alive(now_ms)))

    @responder(R.CONTROLLER_ELECT_MASTER)
    def elect_master(self, header, request, channel, now_ms):
        result = self.replicas.elect_master(header, self._policy(now_ms))
        self.elections["elected" if result.code == RC.SUCCESS else "failed"] += 1
        if result.code == RC.SUCCESS and self.config.notify_broker_role_changed:
            result.pushes = self._pushes(result, now_ms)
        return result

    @responder(R.CONTROLLER_REGISTER_BROKER)
    def register_broker(self, header, request, channel, now_ms):
        return self.replicas.register_broker(header, self._alive(now_ms))

    @responder(R.CONTROLLER_GET_REPLICA_INFO)
    def get_replica_info(self, header, request, channel, now_ms):
        return self.replicas.get_replica_info(header)

    @responder(R.CONTROLLER_GET_METADATA_INFO)
    def get_metadata_info(self, header, request, channel, now_ms):
        config = self.config
        peers = config.peers()
        self_id = config.controller_d_leger_self_id
        text = "".join(f"{peer}:{peers[peer]};" for peer in hashmap_order(list(peers)))
        leader_id, leader_address = self_id, peers.get(self_id)
        if self.leadership is not None and not self.is_leader(now_ms):
            leader_id, leader_address = self.leadership.leader_id, self.leadership.leader_address
        return ControllerResult(header=H.GetMetaDataResponseHeader(
            group=config.controller_d_leger_group, controller_leader_id=leader_id,
            controller_leader_address=leader_address, is_leader=self.is_leader(now_ms),
            peers=text))

    @responder(R.CONTROLLER_GET_SYNC_STATE_DATA)
    def get_sync_state_data(self, header, request, channel, now_ms):
        if request.body is None:
            return self._sync_state_data(now_ms, None)
        return decoded(request.body, B.broker_name_list, partial(self._sync_state_data, now_ms))

    def _sync_state_data(self, now_ms, names):
        if names:
            return self.replicas.get_sync_state_data(names, self._alive(now_ms))
        # Java returns createResponseCommand(null): its placeholder code and remark
        return ControllerResult(RC.SYSTEM_ERROR, NOT_SET_REMARK)

    @responder(R.BROKER_HEARTBEAT)
    def broker_heartbeat(self, header, request, channel, now_ms):
        if header.broker_id is None:
            return ControllerResult(RC.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        group = self.replicas.replica_info_table.get(header.broker_name)
        known = (group is not None and group.cluster_name == header.cluster_name
                 and header.broker_id in group.brokers)
        if not self.heartbeats.on_broker_heartbeat(header, channel, now_ms, known):
            remark = (f"[REFUSED] the controller holds {self.heartbeats.max_brokers} live "
                      "brokers, its bound; nothing was applied")
            log.warning("heartbeat from %s refused: %s",
                        getattr(channel, "remote_addr", channel), remark)
            return ControllerResult(RC.SYSTEM_ERROR, remark)
        return ControllerResult(RC.SUCCESS, "Heart beat success")

    @responder(R.UPDATE_CONTROLLER_CONFIG)
    def update_controller_config(self, header, request, channel, now_ms):
        if request.body is None:
            return ControllerResult()
        return decoded(request.body, update_properties, self._update_config)

    def _update_config(self, read):
        props, refused = read
        if refused is not None:
            return ControllerResult(RC.SYSTEM_ERROR, refused)
        if self.black_list.intersection(props):
            return ControllerResult(RC.NO_PERMISSION, "Can not update config in black list.")
        refused = value_refusal(props, self.value_check)   # as UPDATE_NAMESRV_CONFIG refuses
        if refused is not None:
            return ControllerResult(RC.INVALID_PARAMETER, refused)
        result = ControllerResult()
        result.write = self.configuration.update(props)
        return result

    @responder(R.GET_CONTROLLER_CONFIG)
    def get_controller_config(self, header, request, channel, now_ms):
        text = self.configuration.all_configs_text()
        return ControllerResult(body=text.encode("utf-8") if text else None)

    @responder(R.CLEAN_BROKER_DATA)
    def clean_broker_data(self, header, request, channel, now_ms):
        return self.replicas.clean_broker_data(header, self._alive(now_ms))

    @responder(R.CONTROLLER_GET_NEXT_BROKER_ID)
    def get_next_broker_id(self, header, request, channel, now_ms):
        return self.replicas.get_next_broker_id(header)

    @responder(R.CONTROLLER_APPLY_BROKER_ID)
    def apply_broker_id(self, header, request, channel, now_ms):
        return self.replicas.apply_broker_id(header)

    # -- pushes and elections the controller starts -----------------------------------------

    def _pushes(self, result, now_ms):
        """``[(address, command)]``: NOTIFY_BROKER_ROLE_CHANGED to each live broker of the group
        of a successful election (Java ``ControllerManager.notifyBrokerRoleChanged``)."""
        header, body = result.header, result.body
        group = body.broker_member_group
        if group is None or header.master_broker_id is None:
            return []
        push = H.NotifyBrokerRoleChangedRequestHeader(
            master_address=header.master_address, master_broker_id=header.master_broker_id,
            master_epoch=header.master_epoch, sync_state_set_epoch=header.sync_state_set_epoch)
        sync = B.SyncStateSet(sync_state_set=list(body.sync_state_set),
                              sync_state_set_epoch=header.sync_state_set_epoch).to_json()
        out = []
        for broker_id, address in group.broker_addrs.items():
            if address and self.heartbeats.is_broker_active(group.cluster, group.broker_name,
                                                             broker_id, now_ms):
                out.append((address, RemotingCommand(
                    R.NOTIFY_BROKER_ROLE_CHANGED, JAVA, CURRENT_VERSION, 0, FLAG_ONEWAY, None,
                    push.to_ext_fields(), sync, JSON)))
        return out

    def on_channel_close(self, channel, now_ms):
        """A connection to the controller ended: its brokers are inactive; a group whose master
        was one of them elects a new one (Java: ``BrokerHousekeepingService`` ->
        ``onBrokerInactive``; only the leader elects)."""
        for cluster, name, broker_id in self.heartbeats.on_broker_channel_close(channel):
            self.on_broker_inactive(cluster, name, broker_id, now_ms)

    def scan_not_active_broker(self, now_ms):
        """The heartbeat timeout scan: expired brokers become inactive; the channels to close."""
        expired, channels = self.heartbeats.scan_not_active_broker(now_ms)
        for cluster, name, broker_id in expired:
            self.on_broker_inactive(cluster, name, broker_id, now_ms)
        return channels

    def scan_inactive_master(self, now_ms):
        """Java ``scanInactiveMasterAndTriggerReelect``: elect again where the master is dead
        and another broker of the group is alive (the leader only)."""
        if not self.is_leader(now_ms):
            return
        for name in self.replicas.scan_need_reelect_broker_sets(self._alive(now_ms)):
            self.trigger_elect_master(name, now_ms)

    def on_broker_inactive(self, cluster, name, broker_id, now_ms):
        if not self.is_leader(now_ms):
            log.info("broker %s of %s is inactive (not the leader: no election)", broker_id, name)
            return
        if broker_id is None:
            self.trigger_elect_master(name, now_ms)
            return
        info = self.replicas.get_replica_info(H.GetReplicaInfoRequestHeader(broker_name=name))
        if broker_id != info.header.master_broker_id:
            log.info("broker %s of %s is inactive", broker_id, name)
            return
        self.trigger_elect_master(name, now_ms)

    def trigger_elect_master(self, name, now_ms):
        """Elect a master for group ``name``, up to ``electMasterMaxRetryCount`` tries; True once
        one is elected (its pushes sent after the change is durable)."""
        for _ in range(min(max(self.config.elect_master_max_retry_count, 0),
                           MAX_ELECT_RETRIES)):
            header = H.ElectMasterRequestHeader(broker_name=name, cluster_name=None,
                                                broker_id=None, designate_elect=False)
            result = self.replicas.elect_master(header, self._policy(now_ms))
            if result.code == RC.SUCCESS and self.config.notify_broker_role_changed:
                result.pushes = self._pushes(result, now_ms)
            pending = self._commit(result, lambda result=result: self._send(result.pushes))
            if pending is None:
                self._send(result.pushes)
            else:
                self.run(pending)
            if result.code == RC.SUCCESS:
                log.info("controller elected broker %s master of %s (epoch %s)",
                         result.header.master_broker_id, name, result.header.master_epoch)
                self.elections["elected"] += 1
                return True
        log.warning("controller could not elect a master for %s", name)
        self.elections["failed"] += 1
        return False
