"""Broker layer: many simulated brokers with a genuine broker's cadence, for load and churn
tests of NameServers (``rocketpy-brokersim``; no Java counterpart).

Each :class:`SimulatedBroker` does what one Java ``BrokerController`` does towards its
NameServers, through its own :class:`~rocketpy.transport.client.RemotingClient` and
:class:`~rocketpy.broker.outer_api.BrokerOuterAPI`:

* ``registerBrokerAll`` forced on start, then every ``registerNameServerPeriod`` with a random
  jitter (so N brokers do not beat in step), forced or, with ``forceRegister=false``, only after
  QUERY_DATA_VERSION says a NameServer's copy differs; one still in flight makes the next skipped
  (Java's ``registerBrokerAll`` is synchronized);
* 5.x acting masters: a heartbeat every ``brokerHeartbeatInterval``, QUERY_DATA_VERSION oneway
  (``compatibleWithOldNameSrv``) or BROKER_HEARTBEAT; ``refreshMetadata`` every 5 s;
* a graceful stop sends UNREGISTER_BROKER; a kill just drops the connections.

Brokers form groups of ``replicas`` (brokerId 0 the master) over ``clusters`` clusters and
``zones`` zones (``__ZONE_NAME``, as a broker-side RPC hook adds it); each group hosts ``topics``
topics shared by ``topic_spread`` neighbouring groups, plus a broker's system topics.

With ``listen`` each broker also listens on its own address while it is up and answers what
admin tools ask brokers (:mod:`rocketpy.broker.answers`). Broker names are ``broker_prefix``
and the group number, so two simulators against one NameServer keep apart with different
prefixes (and base ports).

Churn (``churn`` a minute): kill a broker (back after ``down`` s), restart one gracefully, or
create a topic on a master (registered at once, as ``updateTopic`` does). :meth:`BrokerSim.verify`
stops the churn and checks every NameServer's cluster table and routes against the brokers up.
Registration latency (on the reactor's clock, this process's queueing included) is kept per
NameServer for p50/p99; errors by kind."""
import collections
import dataclasses
import random

from twisted.internet.defer import DeferredList, inlineCallbacks
from twisted.internet.error import CannotListenError
from twisted.internet.task import LoopingCall, deferLater

from ..remoting.bodies import ClusterInfo, TopicConfig, TopicRouteData
from ..remoting.codes import MQVersion, RequestCode, ResponseCode, SerializeType
from ..remoting.command import RemotingCommand
from ..remoting.headers import ZONE_NAME, GetRouteInfoRequestHeader
from ..transport.client import RemotingClient, RemotingCommandError
from ..transport.factory import RemotingServerFactory
from .answers import BrokerRequestProcessor
from .outer_api import BrokerConfig, BrokerOuterAPI, BrokerRelease
from .topics import TopicConfigManager

__all__ = ["SimOptions", "BrokerSim", "SimulatedBroker", "SimStats", "percentile",
           "describe_difference"]

#: ``refreshMetadata`` period of a 5.x broker
REFRESH_METADATA_PERIOD = 5.0


@dataclasses.dataclass
class SimOptions:
    """What to simulate (see the module docstring); times in seconds."""

    namesrv_addrs: list
    brokers: int = 10
    topics: int = 10
    clusters: int = 1
    replicas: int = 1
    zones: int = 0
    topic_spread: int = 1
    topic_prefix: str = "SimTopic-"
    broker_prefix: str = "broker-"
    listen: bool = False                  # listen on each broker's address and answer there
    version: int = MQVersion.V4_9_8
    serialize_type: int = SerializeType.JSON
    compressed: bool = False
    force_register: bool = True
    period: float = 30.0
    jitter: float = 0.1
    ramp: "float | None" = None          # first registrations spread over this (default: period)
    acting_master: bool = False
    broker_heartbeat: bool = False        # BROKER_HEARTBEAT instead of QUERY_DATA_VERSION
    heartbeat_interval: float = 1.0
    refresh_metadata: "bool | None" = None  # default: on for 5.x
    system_topics: bool = True
    churn: float = 0.0
    churn_after: "float | None" = 0.0     # seconds of calm before the churn (None: start_churn)
    down: float = 5.0
    broker_host: str = "127.0.0.1"
    base_port: int = 20911
    timeout: "float | None" = None
    seed: "int | None" = None
    #: controller mode: the controller's address (brokers get ids there, elect, fail over)
    controller_addr: "str | None" = None


def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), int(-(-fraction * len(sorted_values) // 1))))
    return sorted_values[rank - 1]


class SimStats:
    """Counters and per-NameServer registration latencies."""

    def __init__(self, namesrv_addrs):
        self.latency = {addr: [] for addr in namesrv_addrs}
        self.ok = collections.Counter()
        self.failed = collections.Counter()
        self.errors = collections.Counter()
        self.counts = collections.Counter()
        self.last_error = None

    def registered(self, addr, seconds):
        self.ok[addr] += 1
        self.latency[addr].append(seconds * 1000.0)

    def failure(self, addr, failure, what="registration"):
        self.failed[addr] += 1
        value = failure.value
        if isinstance(value, RemotingCommandError):
            kind = f"code {value.code}"
        else:
            kind = type(value).__name__.replace("Remoting", "").replace("Error", "").lower() or "error"
        self.errors[f"{what}: {kind}"] += 1
        self.last_error = f"{addr}: {' '.join(failure.getErrorMessage().split())}"

    def per_namesrv(self):
        """``{addr: {ok, failed, p50, p99, max}}`` (milliseconds)."""
        out = {}
        for addr, values in self.latency.items():
            ordered = sorted(values)
            out[addr] = {"ok": self.ok[addr], "failed": self.failed[addr],
                         "p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99),
                         "max_ms": ordered[-1] if ordered else None}
        return out


def _members(members):
    return "{" + ", ".join(f"{i}={a}" for i, a in sorted(members.items())) + "}"


def describe_difference(have, want, at_most=5):
    """What ``have`` (``{broker name: {id: address}}``, a NameServer's) lacks, has too many of,
    and holds with other members than ``want``, the first ``at_most`` of each, naming the
    members: ``missing broker-3; unexpected broker-9; broker-0 has {0=a} where {0=a, 1=b}``."""
    parts = []
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    other = sorted(n for n in set(have) & set(want) if have[n] != want[n])
    for label, names in (("missing", missing), ("unexpected", extra)):
        if names:
            more = f" and {len(names) - at_most} more" if len(names) > at_most else ""
            parts.append(f"{label} {', '.join(names[:at_most])}{more}")
    for name in other[:at_most]:
        parts.append(f"{name} has {_members(have[name])} where {_members(want[name])}")
    if len(other) > at_most:
        parts.append(f"{len(other) - at_most} more with other members")
    return "; ".join(parts)


def _zone_hook(zone):
    """The RPC hook a zoned deployment gives its brokers: ``__ZONE_NAME`` on every request."""
    def hook(addr, request):
        request.ext_fields = dict(request.ext_fields or {}, **{ZONE_NAME: zone})
        return request
    return hook


class SimulatedBroker:
    """One broker (see the module docstring)."""

    def __init__(self, sim, index, config, topics, zone):
        self.sim = sim
        self.index = index
        self.config = config
        self.zone = zone
        self.manager = TopicConfigManager(config.broker_cluster_name, config.broker_name,
                                          sim.now_ms(), topics, version=sim.options.version,
                                          with_system_topics=sim.options.system_topics)
        self.alive = False
        self.client = None
        self.api = None
        self.port = None             # the listening port, with ``listen``
        self.server = None
        self.boot_ms = None
        self._timers = []
        self._loops = []
        self._registering = False
        self._cached = None          # (data version key, request): 4.x bodies have no clock in them
        self.controller = None       # a ControllerMember in controller mode

    @property
    def is_master(self):
        return self.config.broker_id == 0

    # -- life --------------------------------------------------------------------------------------

    def start(self, delay=0.0):
        """Connect and register after ``delay``, then keep the cadence."""
        sim = self.sim
        hook = _zone_hook(self.zone) if self.zone is not None else None
        self.client = RemotingClient(sim.reactor, clock=sim.clock, rpc_hook=hook)
        self.api = BrokerOuterAPI(self.client, sim.release, sim.options.serialize_type)
        self.boot_ms = sim.now_ms()
        if sim.options.listen:   # a port in use fails here, before anything registers
            server = RemotingServerFactory(BrokerRequestProcessor(self), clock=sim.clock,
                                           idle_seconds=0)
            self.port = sim.reactor.listenTCP(self.config.listen_port, server,
                                              interface=self.config.broker_ip1)
            self.server = server
        self.alive = True
        self._later(delay, self._first)

    def _first(self):
        if self.controller is not None:
            self.controller.start()      # registers at the NameServers once its role is known
        self.register()
        options = self.sim.options
        self._later(self.sim.next_period(), self._tick)
        if options.acting_master and options.version >= MQVersion.V5_0_0:
            self._loop(options.heartbeat_interval, self.heartbeat)
        if self.sim.refresh_metadata:
            self._loop(REFRESH_METADATA_PERIOD, self.refresh_metadata)

    def _later(self, delay, f):
        self._timers = [t for t in self._timers if t.active()]
        self._timers.append(self.sim.clock.callLater(delay, f))

    def _loop(self, interval, f):
        loop = LoopingCall(f)
        loop.clock = self.sim.clock
        loop.start(interval, now=False)
        self._loops.append(loop)

    def _halt(self):
        self.alive = False
        if self.controller is not None:
            self.controller.stop()
        for timer in self._timers:
            if timer.active():
                timer.cancel()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._timers, self._loops = [], []

    def _halt_and_forget(self):
        self._halt()
        self.sim.member_down(self)
        if self.port is not None:   # what asked this broker is cut off, as by a dead process
            self.port.stopListening()
            self.server.close_all()
            self.port = self.server = None

    def kill(self):
        """Drop every connection without a word (the NameServer sees them close)."""
        self._halt_and_forget()
        self.client.shutdown()

    @inlineCallbacks
    def stop(self):
        """Graceful shutdown: UNREGISTER_BROKER to every NameServer, then close."""
        self._halt_and_forget()
        results = yield self.api.unregister_broker_all(self.sim.options.namesrv_addrs, self.config)
        for addr, (ok, value) in zip(self.sim.options.namesrv_addrs, results):
            if not ok:
                self.sim.stats.failure(addr, value, "unregister")
        self.sim.stats.counts["unregistrations"] += 1
        self.client.shutdown()

    # -- cadence -----------------------------------------------------------------------------------

    def _tick(self):
        if not self.alive:
            return
        self._later(self.sim.next_period(), self._tick)
        if self.sim.options.force_register:
            self.register()
        else:
            self.register_if_changed()

    @inlineCallbacks
    def register_if_changed(self):
        """``needRegister`` first (forceRegister=false)."""
        self.sim.stats.counts["query_data_version"] += 1
        changed = yield self.api.need_register(self.sim.options.namesrv_addrs, self.config,
                                               self.manager.data_version, self.sim.options.timeout)
        if any(changed) and self.alive:
            self.register()

    def _request(self):
        dv = self.manager.data_version
        key = (dv.counter, dv.timestamp)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        request = self.api.registration(self.config, self.manager.wrapper(self.sim.now_ms()),
                                        compressed=self.sim.options.compressed)
        if self.sim.options.version < MQVersion.V5_0_0:
            self._cached = (key, request)
        return request

    def register(self):
        """``registerBrokerAll`` to every NameServer; latencies and failures into the stats."""
        if not self.alive or self.config.broker_id < 0:
            return None
        stats = self.sim.stats
        if self._registering:
            stats.counts["skipped (previous registration in flight)"] += 1
            return None
        self._registering = True
        request = self._request()
        clock = self.sim.clock
        calls = []
        for addr in self.sim.options.namesrv_addrs:
            started = clock.seconds()
            d = self.api.register_broker(addr, request, timeout=self.sim.options.timeout)
            d.addCallbacks(self._answered, self._failed, callbackArgs=(addr, started),
                           errbackArgs=(addr,))
            calls.append(d)
        stats.counts["registrations"] += 1
        d = DeferredList(calls)
        d.addBoth(self._registered)
        return d

    def _answered(self, _, addr, started):
        self.sim.stats.registered(addr, self.sim.clock.seconds() - started)
        if self.is_master and self.alive:
            self.sim.routable.add((addr, self.config.broker_name))

    def _failed(self, failure, addr):
        if self.alive:
            self.sim.stats.failure(addr, failure)
        else:  # this broker was killed or stopped meanwhile: not the NameServer's doing
            self.sim.stats.counts["registrations cut by churn"] += 1

    def _registered(self, _):
        self._registering = False

    def heartbeat(self):
        options = self.sim.options
        if options.broker_heartbeat:
            d = self.api.send_heartbeat(options.namesrv_addrs, self.config)
        else:
            d = self.api.send_heartbeat_via_data_version(options.namesrv_addrs, self.config,
                                                         self.manager.data_version)
        self.sim.stats.counts["heartbeats"] += 1
        return d

    def refresh_metadata(self):
        d = self.api.get_broker_cluster_info(self.sim.options.namesrv_addrs)
        self.sim.stats.counts["cluster info refreshes"] += 1
        d.addErrback(lambda f: self.sim.stats.failure("(any)", f, "refreshMetadata"))
        return d

    def delete_topic(self, name):
        """DELETE_TOPIC_IN_BROKER: the topic leaves the table (and the next registration)."""
        if self.manager.delete_topic(name, self.sim.now_ms()) and self.is_master:
            self.sim.group_topics[self.config.broker_name].discard(name)

    def update_topic(self, topic):
        """UPDATE_AND_CREATE_TOPIC: ``topic`` (a TopicConfig) into the table, registered at once."""
        self.manager.update_topic(topic, self.sim.now_ms())
        self.sim.group_topics[self.config.broker_name].add(topic.topic_name)
        return self.register()

    def create_topic(self):
        """``updateTopic`` on this broker: a new topic, registered at once."""
        name = f"ChurnTopic-{self.config.broker_name}-{len(self.manager)}"
        self.manager.update_topic(TopicConfig(topic_name=name, read_queue_nums=4,
                                              write_queue_nums=4), self.sim.now_ms())
        self.sim.group_topics[self.config.broker_name].add(name)
        return self.register()


class BrokerSim:
    """The whole simulation: ``run(duration)``, ``verify()``, ``stop()``, ``report()``.

    :param reactor: ``IReactorTCP`` + ``IReactorTime``.
    :param emit: ``emit(line)`` for progress lines (None: silent).
    """

    def __init__(self, reactor, options, *, clock=None, emit=None):
        self.reactor = reactor
        self.clock = clock if clock is not None else reactor
        self.options = options
        if options.controller_addr and options.version < MQVersion.V5_1_1:
            raise ValueError("controller mode needs a broker release of 5.1.1 or later")
        self.release = BrokerRelease.of(options.version)
        self.refresh_metadata = (options.refresh_metadata if options.refresh_metadata is not None
                                 else options.version >= MQVersion.V5_0_0)
        self.rng = random.Random(options.seed)
        self.stats = SimStats(options.namesrv_addrs)
        self.emit = emit
        self.group_topics = collections.defaultdict(set)
        #: (NameServer, broker name) whose topics that NameServer routes: its master registered
        #: there since the group last had no member up (when the last member goes, the
        #: NameServer drops the group's topics; a slave alone does not bring them back)
        self.routable = set()
        self.brokers = self._layout()
        self.started_at = None
        self._churn = None
        self._churn_start = None
        self._progress = None
        self._down = {}          # broker index -> restart DelayedCall
        self._last = (0.0, 0)
        self.live_at_end = None
        self.verified = None     # (brokers up, topics checked) of the last verify()

    def now_ms(self):
        return int(self.clock.seconds() * 1000)

    def next_period(self):
        """``registerNameServerPeriod`` with this period's jitter."""
        o = self.options
        return o.period * (1.0 + self.rng.uniform(-o.jitter, o.jitter))

    def _layout(self):
        o = self.options
        brokers = []
        for i in range(o.brokers):
            group, broker_id = divmod(i, o.replicas)
            cluster = "DefaultCluster" if o.clusters == 1 else f"SimCluster-{group % o.clusters}"
            name = f"{o.broker_prefix}{group}"
            config = BrokerConfig(
                broker_cluster_name=cluster, broker_name=name, broker_id=broker_id,
                broker_ip1=o.broker_host, listen_port=o.base_port + 2 * i,
                ha_listen_port=o.base_port + 2 * i + 1,
                enable_slave_acting_master=o.acting_master and o.version >= MQVersion.V5_0_0,
                compressed_register=o.compressed, force_register=o.force_register,
                register_name_server_period=int(o.period * 1000),
                compatible_with_old_name_srv=not o.broker_heartbeat)
            block = group // max(o.topic_spread, 1)
            names = [f"{o.topic_prefix}{block * o.topics + j}" for j in range(o.topics)]
            topics = [TopicConfig(topic_name=t, read_queue_nums=8, write_queue_nums=8) for t in names]
            zone = f"zone-{group % o.zones}" if o.zones else None
            broker = SimulatedBroker(self, i, config, topics, zone)
            if o.controller_addr:
                from .simcontroller import ControllerMember
                broker.controller = ControllerMember(broker, o.controller_addr)
            self.group_topics[name].update(broker.manager.table)
            brokers.append(broker)
        return brokers

    # -- running -------------------------------------------------------------------------------------

    def start(self, progress=None):
        """Start every broker (first registrations spread over ``ramp``), the churn and the
        progress lines."""
        self.started_at = self.clock.seconds()
        ramp = self.options.period if self.options.ramp is None else self.options.ramp
        for broker in self.brokers:
            broker.start(self.rng.uniform(0, ramp) if ramp > 0 else 0.0)
        if self.options.churn > 0:
            self._churn = LoopingCall(self._churn_event)
            self._churn.clock = self.clock
            if self.options.churn_after is not None:
                self._churn_start = self.clock.callLater(self.options.churn_after,
                                                         self.start_churn)
        if progress and self.emit is not None:
            self._progress = LoopingCall(self._emit_progress)
            self._progress.clock = self.clock
            self._progress.start(progress, now=False)

    def start_churn(self):
        """The churn begins now (if it is on and has not begun)."""
        if self._churn is not None and not self._churn.running:
            if self._churn_start is not None and self._churn_start.active():
                self._churn_start.cancel()
            self._churn.start(60.0 / self.options.churn, False)

    def run(self, duration, progress=None):
        """Start, wait ``duration`` seconds; a Deferred that fires then (the brokers keep going
        until :meth:`stop`)."""
        self.start(progress)
        return deferLater(self.clock, duration, lambda: None)

    def live(self):
        return [b for b in self.brokers if b.alive]

    def member_down(self, broker):
        """``broker`` went away; its group's routes go when it was the last member up."""
        name = broker.config.broker_name
        if not any(b.alive for b in self.brokers if b.config.broker_name == name):
            self.routable = {(addr, n) for addr, n in self.routable if n != name}

    def _churn_event(self):
        broker = self.rng.choice(self.brokers)
        if not broker.alive:
            return
        kind = self.rng.choice(("kill", "restart", "topic") if broker.is_master else ("kill", "restart"))
        self.stats.counts[f"churn: {kind}"] += 1
        if kind == "topic":
            broker.create_topic()
            return
        if kind == "kill":
            broker.kill()
        else:
            broker.stop()
        self._down[broker.index] = self.clock.callLater(self.options.down, self._back, broker)

    def _back(self, broker):
        self._down.pop(broker.index, None)
        try:
            broker.start(0.0)
        except CannotListenError as exc:   # --listen: its port was taken meanwhile; stays down
            broker.client.shutdown()
            self.stats.errors["restart: listen"] += 1
            self.stats.last_error = f"{broker.config.broker_addr}: {' '.join(str(exc).split())}"

    def stop_churn(self):
        """No more churn events; brokers that are down stay down."""
        if self._churn_start is not None and self._churn_start.active():
            self._churn_start.cancel()
        if self._churn is not None and self._churn.running:
            self._churn.stop()
        for call in self._down.values():
            if call.active():
                call.cancel()
        self._down.clear()

    @inlineCallbacks
    def stop(self, graceful=True):
        """Stop the churn and every broker (UNREGISTER_BROKER first when ``graceful``)."""
        self.stop_churn()
        if self._progress is not None and self._progress.running:
            self._progress.stop()
        live = self.live()
        if self.live_at_end is None:
            self.live_at_end = len(live)
        if graceful:
            yield DeferredList([broker.stop() for broker in live])
        else:
            for broker in live:
                broker.kill()

    # -- verification --------------------------------------------------------------------------------

    @inlineCallbacks
    def verify(self, settle=2.0, max_topics=5000):
        """After the churn: each NameServer's brokers and routes against the brokers up, asked
        again every half second until they agree, for at most ``settle`` seconds (what the
        churn left in flight lands meanwhile, however busy the machine).

        Returns a list of problems (empty: consistent)."""
        self.stop_churn()
        deadline = self.clock.seconds() + settle
        while True:
            problems = yield self._check_namesrvs(max_topics)
            if not problems or self.clock.seconds() >= deadline:
                return problems
            yield deferLater(self.clock, min(0.5, max(0.0, deadline - self.clock.seconds())),
                             lambda: None)

    @inlineCallbacks
    def _check_namesrvs(self, max_topics):
        """One look at every NameServer (and the controller): the problems found."""
        client = RemotingClient(self.reactor, clock=self.clock)
        problems = []
        expected_members = {}
        for broker in self.live():
            c = broker.config
            if c.broker_id < 0:   # controller mode, no role yet: not registered (as Java)
                continue
            expected_members.setdefault(c.broker_name, {})[c.broker_id] = c.broker_addr
        topics = collections.defaultdict(set)
        for name, members in expected_members.items():
            for topic in self.group_topics[name]:
                topics[topic].add(name)
        checked = sorted(topics)
        own = set(self.group_topics)
        if len(checked) > max_topics:
            checked = sorted(self.rng.sample(checked, max_topics))
        try:
            for addr in self.options.namesrv_addrs:
                answer = yield client.invoke(addr, RemotingCommand.request(
                    int(RequestCode.GET_BROKER_CLUSTER_INFO), version=self.release.version), 10.0)
                info = ClusterInfo.from_json(answer.body)
                # this simulator's groups only: another one may share the NameServer
                seen = {name: dict(b.broker_addrs or {})
                        for name, b in (info.broker_addr_table or {}).items() if name in own}
                if seen != expected_members:
                    problems.append(f"{addr}: cluster table differs: "
                                    f"{describe_difference(seen, expected_members)}")
                for topic in checked:
                    request = RemotingCommand.request(
                        int(RequestCode.GET_ROUTEINFO_BY_TOPIC),
                        GetRouteInfoRequestHeader(topic=topic).to_ext_fields(),
                        version=self.release.version)
                    answer = yield client.invoke(addr, request, 10.0)
                    if answer.code != int(ResponseCode.SUCCESS):
                        if any((addr, name) in self.routable for name in topics[topic]):
                            problems.append(f"{addr}: no route for {topic} (code {answer.code})")
                        continue
                    route = TopicRouteData.from_json(answer.body)
                    have = {b.broker_name: dict(b.broker_addrs or {})
                            for b in route.broker_datas or [] if b.broker_name in own}
                    want = {name: expected_members[name] for name in topics[topic]
                            if (addr, name) in self.routable}
                    if have != want:
                        problems.append(f"{addr}: route of {topic} differs: "
                                        f"{describe_difference(have, want)}")
            if self.options.controller_addr:
                problems += yield self._verify_controller(client)
        finally:
            client.shutdown()
        self.verified = (len(self.live()), len(checked))
        return problems

    @inlineCallbacks
    def _verify_controller(self, client):
        """Controller mode: in every group with a live broker in its sync state set, exactly
        one live broker is master, the one the controller names; nowhere two."""
        from ..remoting.bodies import SyncStateSet
        from ..remoting.headers import GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader
        problems = []
        groups = collections.defaultdict(list)
        for broker in self.live():
            groups[broker.config.broker_name].append(broker)
        for name, members in sorted(groups.items()):
            masters = [b for b in members if b.config.broker_id == 0]
            answer = yield client.invoke(self.options.controller_addr, RemotingCommand.request(
                int(RequestCode.CONTROLLER_GET_REPLICA_INFO),
                GetReplicaInfoRequestHeader(broker_name=name).to_ext_fields(),
                version=int(MQVersion.V5_3_3)), 10.0)
            if answer.code != int(ResponseCode.SUCCESS):
                problems.append(f"controller: no replica info for {name} (code {answer.code})")
                continue
            header = GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields, strict=False)
            in_sync = set(SyncStateSet.from_json(answer.body).sync_state_set)
            live_ids = {b.controller.controller_id for b in members}
            if len(masters) > 1:
                problems.append(f"controller: {name} has {len(masters)} masters")
            elif header.master_broker_id in live_ids:
                if [b.controller.controller_id for b in masters] != [header.master_broker_id]:
                    problems.append(f"controller: {name}'s master is {header.master_broker_id}, "
                                    f"its brokers think {[b.controller.controller_id for b in masters]}")
            elif live_ids & in_sync:
                problems.append(f"controller: {name} has no live master though "
                                f"{sorted(live_ids & in_sync)} in sync are up")
        self.stats.counts["controller: groups verified"] += len(groups)
        return problems

    # -- reporting -----------------------------------------------------------------------------------

    def _emit_progress(self):
        now = self.clock.seconds()
        elapsed = now - self.started_at
        last_t, last_n = self._last
        total = self.stats.counts["registrations"]
        rate = (total - last_n) / (now - last_t) if now > last_t and last_t else total / max(elapsed, 1e-9)
        self._last = (now, total)
        parts = [f"[{elapsed:7.1f}s] live {len(self.live())}/{len(self.brokers)}",
                 f"registrations {total} ({rate:.1f}/s)"]
        if self._churn is not None:
            churned = sum(n for kind, n in self.stats.counts.items() if kind.startswith("churn: "))
            parts.append(f"churn {churned}")
        for addr, row in self.stats.per_namesrv().items():
            if row["p50_ms"] is not None:
                parts.append(f"{addr} p50 {row['p50_ms']:.1f} p99 {row['p99_ms']:.1f} ms")
        parts.append(f"errors {sum(self.stats.errors.values())}")
        self.emit("  ".join(parts))

    def report(self):
        """A JSON-ready summary."""
        o = self.options
        elapsed = self.clock.seconds() - self.started_at if self.started_at is not None else 0.0
        per = self.stats.per_namesrv()
        for row in per.values():
            row["rate_per_s"] = row["ok"] / elapsed if elapsed else 0.0
        return {
            "brokers": o.brokers, "groups": -(-o.brokers // o.replicas), "replicas": o.replicas,
            "clusters": o.clusters, "zones": o.zones, "topics_per_broker": o.topics,
            "version": MQVersion(o.version).name if o.version in MQVersion._value2member_map_ else o.version,
            "serialize_type": SerializeType(o.serialize_type).name, "compressed": o.compressed,
            "force_register": o.force_register, "period_s": o.period, "elapsed_s": elapsed,
            "live": len(self.live()) if self.live_at_end is None else self.live_at_end,
            "verified": None if self.verified is None else {
                "brokers_up": self.verified[0], "topics": self.verified[1]},
            "namesrv": per, "counts": dict(self.stats.counts),
            "errors": dict(self.stats.errors), "last_error": self.stats.last_error,
        }
