"""Broker layer: controller mode of the simulated brokers (``rocketpy-brokersim --controller``),
what a 5.3.3 broker with ``enableControllerMode=true`` does towards its controller (Java
``ReplicasManager``; the requests are the captured ones, ``rmq53-controller-*``):

* start: CONTROLLER_GET_METADATA_INFO; the first time CONTROLLER_GET_NEXT_BROKER_ID and
  CONTROLLER_APPLY_BROKER_ID (kept across restarts with its register check code, as the broker
  keeps them on disk; a lost race for an id asks again), CONTROLLER_REGISTER_BROKER; without a
  live master, CONTROLLER_ELECT_MASTER with its own id;
* a oneway BROKER_HEARTBEAT every second, CONTROLLER_GET_REPLICA_INFO every 5 s;
* a master keeps the sync state set at itself plus the group's live slaves
  (CONTROLLER_ALTER_SYNC_STATE_SET; a real master adds a slave once it has caught up);
* NOTIFY_BROKER_ROLE_CHANGED pushes arrive on the broker's listen port: at the broker's own
  server with ``--listen`` (:mod:`rocketpy.broker.answers`, as Java's broker takes them in
  ``AdminBrokerProcessor``), else at a listener of their own.

Whenever its role changes the broker registers at the NameServers at once, a master as brokerId
0, a slave with its controller id.
"""
from twisted.internet.defer import inlineCallbacks
from twisted.internet.error import CannotListenError
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure

from ..remoting import FrameSplitter, decode_frame
from ..remoting.bodies import SyncStateSet
from ..remoting.codes import MQVersion, RequestCode as R, ResponseCode as RC
from ..remoting.command import RemotingCommand
from ..remoting.headers import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
                                ElectMasterResponseHeader, GetNextBrokerIdRequestHeader,
                                GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
                                GetReplicaInfoResponseHeader, NotifyBrokerRoleChangedRequestHeader,
                                RegisterBrokerToControllerRequestHeader,
                                RegisterBrokerToControllerResponseHeader)

__all__ = ["ControllerMember", "REPLICA_INFO_PERIOD"]

#: ``ReplicasManager``'s schedule: heartbeat 1 s, replica info 5 s
HEARTBEAT_PERIOD = 1.0
REPLICA_INFO_PERIOD = 5.0
#: what the brokers' heartbeats say their timeout is (``controllerHeartbeatTimeoutMills``)
HEARTBEAT_TIMEOUT_MS = 10_000
VERSION = int(MQVersion.V5_3_3)
#: ids asked for and applied in a row before waiting for the next try
APPLY_TRIES = 3


class _Pushes(Protocol):
    def __init__(self, member):
        self.member = member
        self.splitter = FrameSplitter()

    def dataReceived(self, data):
        try:
            frames = self.splitter.feed(data)
        except Exception:
            self.transport.loseConnection()
            return
        for frame in frames:
            command = decode_frame(frame)
            if command.code == R.NOTIFY_BROKER_ROLE_CHANGED:
                self.member.on_role_changed(command)


class _PushFactory(Factory):
    def __init__(self, member):
        self.member = member

    def buildProtocol(self, addr):
        return _Pushes(self.member)


class ControllerMember:
    """The controller side of one :class:`~rocketpy.broker.sim.SimulatedBroker`."""

    def __init__(self, broker, controller_addr):
        self.broker = broker
        self.addr = controller_addr
        self.controller_id = None          # kept across restarts (the broker's identity file)
        self.check_code = None
        self.master_id = None
        self.master_epoch = 0
        self.port = None
        self._looping = False

    @property
    def names(self):
        c = self.broker.config
        return dict(cluster_name=c.broker_cluster_name, broker_name=c.broker_name)

    def _request(self, code, header=None, body=None, oneway=False):
        return RemotingCommand.request(int(code), None if header is None else header.to_ext_fields(),
                                       body, version=VERSION, oneway=oneway)

    def _call(self, code, header=None, body=None):
        return self.broker.client.invoke(self.addr, self._request(code, header, body), 3.0)

    # -- life -------------------------------------------------------------------------------

    def start(self):
        sim, config = self.broker.sim, self.broker.config
        config.broker_id = -1            # no NameServer registration before the role is known
        self.master_id = None
        self._looping = False
        if self.broker.port is None:   # with --listen the broker's own server takes the pushes
            try:
                self.port = sim.reactor.listenTCP(config.listen_port, _PushFactory(self),
                                                  interface=config.broker_ip1)
            except CannotListenError:   # the port is taken: no pushes, the 5 s poll still works
                sim.stats.failure(self.addr, Failure(), "listen")
        d = self.join()
        d.addErrback(self._failed, "join")

    def stop(self):
        if self.port is not None:
            self.port.stopListening()
            self.port = None

    def _failed(self, failure, what):
        if self.broker.alive:
            self.broker.sim.stats.failure(self.addr, failure, f"controller {what}")
            self.broker._later(REPLICA_INFO_PERIOD, self._rejoin)

    def _rejoin(self):
        if self.broker.alive:
            self.join().addErrback(self._failed, "join")

    @inlineCallbacks
    def join(self):
        broker, stats = self.broker, self.broker.sim.stats
        yield self._call(R.CONTROLLER_GET_METADATA_INFO)
        for _ in range(APPLY_TRIES):
            if self.controller_id is not None or not broker.alive:
                break
            answer = yield self._call(R.CONTROLLER_GET_NEXT_BROKER_ID,
                                      GetNextBrokerIdRequestHeader(**self.names))
            next_id = GetNextBrokerIdResponseHeader.from_ext_fields(
                answer.ext_fields, strict=False).next_broker_id
            if answer.code != RC.SUCCESS or next_id is None:
                raise ValueError(f"no next broker id: code {answer.code} {answer.remark or ''}")
            check = f"{broker.config.broker_addr};{broker.sim.now_ms()}"
            answer = yield self._call(R.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
                applied_broker_id=next_id, register_check_code=check, **self.names))
            if answer.code == RC.SUCCESS:
                self.controller_id, self.check_code = next_id, check
            else:
                stats.counts["controller: broker id race lost"] += 1
        if self.controller_id is None:
            raise ValueError("no broker id applied")   # tried again in 5 s
        if not broker.alive:
            return
        answer = yield self._call(R.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
            applied_broker_id=self.controller_id, register_check_code=self.check_code,
            **self.names))
        answer = yield self._call(R.CONTROLLER_REGISTER_BROKER, RegisterBrokerToControllerRequestHeader(
            broker_id=self.controller_id, broker_address=broker.config.broker_addr,
            invoke_time=broker.sim.now_ms(), **self.names))
        header = RegisterBrokerToControllerResponseHeader.from_ext_fields(answer.ext_fields,
                                                                          strict=False)
        self.heartbeat()
        if not self._looping:
            self._looping = True
            broker._loop(HEARTBEAT_PERIOD, self.heartbeat)
            broker._loop(REPLICA_INFO_PERIOD, self.poll)
        if header.master_broker_id is not None:
            self.set_role(header.master_broker_id, header.master_epoch)
            return
        yield self.elect()

    @inlineCallbacks
    def elect(self):
        answer = yield self._call(R.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(
            broker_id=self.controller_id, designate_elect=False,
            invoke_time=self.broker.sim.now_ms(), **self.names))
        self.broker.sim.stats.counts["controller: elections asked"] += 1
        if answer.code in (RC.SUCCESS, RC.CONTROLLER_MASTER_STILL_EXIST):
            header = ElectMasterResponseHeader.from_ext_fields(answer.ext_fields, strict=False)
            self.set_role(header.master_broker_id, header.master_epoch)

    # -- cadence ----------------------------------------------------------------------------

    def heartbeat(self):
        broker = self.broker
        if not broker.alive or self.controller_id is None:
            return
        header = BrokerHeartbeatRequestHeader(
            broker_addr=broker.config.broker_addr, broker_id=self.controller_id,
            epoch=self.master_epoch, max_offset=0, confirm_offset=0,
            heartbeat_timeout_mills=HEARTBEAT_TIMEOUT_MS, election_priority=(1 << 31) - 1,
            **self.names)
        broker.client.invoke_oneway(self.addr, self._request(R.BROKER_HEARTBEAT, header,
                                                             oneway=True)).addErrback(lambda f: None)
        broker.sim.stats.counts["controller: heartbeats"] += 1

    def poll(self):
        """CONTROLLER_GET_REPLICA_INFO: learn the master; as master, keep the sync state set."""
        d = self._poll()
        d.addErrback(self._failed, "replica info")
        return d

    @inlineCallbacks
    def _poll(self):
        answer = yield self._call(R.CONTROLLER_GET_REPLICA_INFO,
                                  GetReplicaInfoRequestHeader(broker_name=self.names["broker_name"]))
        if answer.code != RC.SUCCESS or not self.broker.alive:
            return
        header = GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields, strict=False)
        if header.master_broker_id is None:
            yield self.elect()
            return
        self.set_role(header.master_broker_id, header.master_epoch)
        if header.master_broker_id == self.controller_id and answer.body:
            yield self._keep_sync_state_set(SyncStateSet.from_json(answer.body))

    @inlineCallbacks
    def _keep_sync_state_set(self, current):
        sim = self.broker.sim
        wanted = {self.controller_id}
        for other in sim.brokers:
            member = getattr(other, "controller", None)
            if (other.alive and other is not self.broker and member is not None
                    and other.config.broker_name == self.broker.config.broker_name
                    and member.controller_id is not None and member.master_id == self.controller_id):
                wanted.add(member.controller_id)
        if wanted == set(current.sync_state_set):
            return
        answer = yield self._call(R.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(
            broker_name=self.names["broker_name"], master_broker_id=self.controller_id,
            master_epoch=self.master_epoch, invoke_time=sim.now_ms()),
            SyncStateSet(sync_state_set=sorted(wanted),
                         sync_state_set_epoch=current.sync_state_set_epoch).to_json())
        sim.stats.counts["controller: sync state set changes" if answer.code == RC.SUCCESS
                         else f"controller: sync state set refused ({answer.code})"] += 1

    # -- role -------------------------------------------------------------------------------

    def on_role_changed(self, command):
        header = NotifyBrokerRoleChangedRequestHeader.from_ext_fields(command.ext_fields,
                                                                      strict=False)
        self.broker.sim.stats.counts["controller: role pushes"] += 1
        if self.broker.alive and header.master_broker_id is not None:
            self.set_role(header.master_broker_id, header.master_epoch)

    def set_role(self, master_id, master_epoch):
        """Follow the controller's master (an older epoch is ignored); register at once when
        this broker's NameServer identity changes."""
        if master_epoch is not None and master_epoch < self.master_epoch:
            return
        self.master_id = master_id
        self.master_epoch = master_epoch or self.master_epoch
        config = self.broker.config
        broker_id = 0 if master_id == self.controller_id else self.controller_id
        if broker_id != config.broker_id:
            if broker_id == 0:
                self.broker.sim.stats.counts["controller: became master"] += 1
            config.broker_id = broker_id
            self.broker.register()
