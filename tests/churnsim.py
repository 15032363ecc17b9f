"""Test helper: broker churn against the NameServer core, checked against a reference model
(issue 6, part 3), shared by tests/test_churn.py and bench/churn_soak.py.

Hundreds of simulated brokers (master/slave groups in a few clusters) register, re-register
(every ~30 s of simulated time, sometimes with a changed topic table), freeze until they expire,
drop their connections, come back on new connections, unregister gracefully, and poll
QUERY_DATA_VERSION / BROKER_HEARTBEAT. Every request is a real frame: built from a genuine
REGISTER_BROKER / UNREGISTER_BROKER / QUERY_DATA_VERSION / BROKER_HEARTBEAT request of the captures
(its header style -- JSON or ROCKETMQ binary --, version, extra fields, and its body re-encoded
with other topics, JSON or zlib-compressed as the genuine one was) with the broker's own names and
addresses and a recomputed ``bodyCrc32``; it is encoded, decoded and processed by a
:class:`~rocketpy.namesrv.processor.DefaultRequestProcessor` over a
:class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager`. Unregistrations go through a
synchronous stand-in for ``BatchUnregistrationService``: a list drained as one batch at the end
of each tick (and at random moments), or applied at once for the 4.9 profile (Java 4.9 has no
queue), so a drop whose unregistration is still queued when the broker reconnects and registers
again exercises apache/rocketmq#11043.

:class:`Model` is the reference: plain dicts and the rules of the Java NameServer in a few lines
(a master's registration adds/updates its topics' queue data; a group's routes go when its last
address goes; a channel-caused unregistration is ignored if the broker has registered since;
expiry is ``last update + 120 s < now``). After *every* step the route tables, the live table
and its channel index must equal the model, and the scan must expire exactly the model's brokers;
routes are also read through real GET_ROUTEINFO_BY_TOPIC frames (legacy and standard JSON) and
compared. At the end every broker goes away and every table, index and cache must be empty.
"""
import copy
import random
from dataclasses import dataclass, field

import golden
from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv import Channel, Configuration, KVConfigManager, RouteInfoManager, profile_for
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.remoting import bodies, decode_frame, fastjson
from rocketpy.remoting.codes import MQVersion
from rocketpy.remoting.catalogue import NAMESRV, declaration
from rocketpy.remoting.command import RemotingCommand

__all__ = ["Simulation", "Model", "Mismatch", "templates"]

TIMEOUT_MS = 120_000
TICK_MS = 5_000


class Mismatch(AssertionError):
    """The NameServer's state differs from the model."""


# ---------------------------------------------------------------------------- genuine templates

@dataclass
class Template:
    command: RemotingCommand          # the genuine request, decoded
    compressed: bool = False          # its body is the zlib form
    body: object = None               # its body, decoded (RegisterBrokerBody)
    topic_samples: list = field(default_factory=list)


def templates(generation):
    """Genuine broker requests of the captures of ``generation`` ("rmq49" or "rmq50"):
    ``{code: [Template]}``, one per distinct header style / body form / oneway flag."""
    out = {}
    seen = set()
    for frame in golden.all_frames():
        if not frame.capture.startswith(generation):
            continue
        naive = golden.naive(frame.data)
        if naive.flag & 1 or naive.code not in (103, 104, 322, 904):
            continue
        cmd = decode_frame(frame.data)
        ext = cmd.ext_fields or {}
        if "heartbeatTimeoutMillis" in ext or ext.get("enableActingMaster") == "true":
            continue  # acting-master brokers: another liveness rule, not modelled here
        compressed = bool(cmd.body) and cmd.body[:1] != b"{"
        style = (cmd.code, cmd.serialize_type, compressed, cmd.flag, cmd.version,
                 "enableActingMaster" in ext)
        if style in seen:
            continue
        template = Template(cmd, compressed)
        if cmd.code == 103:
            if not cmd.body:
                continue
            template.body = bodies.RegisterBrokerBody.decode(cmd.body, compressed, cmd.version)
            template.topic_samples = list(template.body.topic_config_table.values())
            if not template.topic_samples:
                continue
        seen.add(style)
        out.setdefault(cmd.code, []).append(template)
    return out


# ---------------------------------------------------------------------------- the model

@dataclass
class LiveM:
    name: str
    broker_id: int
    channel_id: int
    generation: int
    last_ms: int
    data_version: tuple


class Model:
    """What the Java NameServer's tables should hold; the rules in plain Python."""

    def __init__(self, profile):
        self.profile = profile
        self.live = {}        # (cluster, addr) -> LiveM
        self.groups = {}      # broker name -> (cluster, {id: addr})
        self.topics = {}      # broker name -> {topic: (read, write, perm, sysflag)}
        self.generation = 0
        self.stale_ignored = 0

    def key(self, cluster, addr):
        return (cluster, addr) if self.profile.v5_registration else (None, addr)

    def register(self, cluster, name, broker_id, addr, table, data_version, channel_id, now_ms):
        """Returns the master address a slave is told about (None for a master or no master)."""
        _, addrs = self.groups.setdefault(name, (cluster, {}))
        addrs[broker_id] = addr
        if broker_id == 0:
            self.topics.setdefault(name, {}).update(table)
        self.generation += 1
        self.live[self.key(cluster, addr)] = LiveM(name, broker_id, channel_id, self.generation,
                                                   now_ms, data_version)
        if broker_id != 0 and 0 in addrs and self.key(cluster, addrs[0]) in self.live:
            return addrs[0]
        return None

    def unregister(self, cluster, name, broker_id, addr, channel_id=None, generation=None):
        live = self.live.get(self.key(cluster, addr))
        if channel_id is not None and live is not None and (
                live.channel_id != channel_id or live.generation != generation):
            self.stale_ignored += 1
            return  # the broker registered again since (apache/rocketmq#11043)
        self.live.pop(self.key(cluster, addr), None)
        group = self.groups.get(name)
        if group is None:
            return
        addrs = group[1]
        if addrs.get(broker_id) == addr or (not self.profile.unregister_by_address and broker_id in addrs):
            del addrs[broker_id]
        if not addrs:
            del self.groups[name]
            self.topics.pop(name, None)

    def setup_unregister(self, key):
        """``setupUnRegisterRequest``: (cluster, addr, name, id) of the address a live entry
        names, or None when no broker group holds that address any more."""
        cluster, addr = key
        live = self.live[key]
        first = [live.name] if live.name in self.groups else []
        for names in (first, list(self.groups)):
            for name in names:
                group_cluster, addrs = self.groups[name]
                if cluster is not None and group_cluster != cluster:
                    continue
                for bid, a in addrs.items():
                    if a == addr:
                        return (group_cluster if cluster is None else cluster, addr, name, bid)
        return None

    def channel_requests(self, channel_id):
        """What a closed channel causes: one request per live entry on it that a group holds."""
        out = []
        for key, live in self.live.items():
            if live.channel_id == channel_id:
                found = self.setup_unregister(key)
                if found is not None:
                    out.append(found + (channel_id, live.generation))
        return out

    def scan(self, now_ms):
        """Expired entries: requests for those a group holds; the others are just removed."""
        out = []
        for key in sorted(self.expired(now_ms), key=str):
            live = self.live[key]
            found = self.setup_unregister(key)
            if found is None:
                del self.live[key]
            else:
                out.append(found + (live.channel_id, live.generation))
        return out

    def refresh(self, cluster, addr, now_ms):
        live = self.live.get(self.key(cluster, addr))
        if live is not None:
            live.last_ms = now_ms

    def expired(self, now_ms):
        return {key for key, live in self.live.items() if live.last_ms + TIMEOUT_MS < now_ms}

    def routes(self):
        """{topic: {broker name: queue data}} as the route tables should hold it."""
        out = {}
        for name, table in self.topics.items():
            if name in self.groups:
                for topic, queue_data in table.items():
                    out.setdefault(topic, {})[name] = queue_data
        return out


# ---------------------------------------------------------------------------- simulated brokers

@dataclass
class Group:
    name: str
    cluster: str
    template: Template                 # the masters' registration style
    table: dict                        # topic -> (read, write, perm, sysflag) as sent
    counter: int = 1
    timestamp: int = 0


@dataclass
class Instance:
    group: Group
    broker_id: int
    addr: str
    template: Template
    channel: "Channel | None" = None
    frozen_until_ms: int = 0
    next_register_ms: int = 0


class Simulation:
    """One NameServer core, ``groups`` broker groups (~30% with a slave), and the model."""

    def __init__(self, profile_name="5.3", groups=200, seed=1, topics=80, clusters=4, readdress=0.3):
        self.rng = random.Random(seed)
        self.readdress = readdress
        self._addresses = 0
        self.max_live = 0
        self.profile = profile_for(profile_name)
        self.steps = 0
        self.ticks = 0
        self.now_ms = 1_700_000_000_000
        self.counts = {}
        gen = "rmq49" if self.profile.name == "4.9" else "rmq50"
        self.templates = templates(gen)
        old = templates("rmq49")
        # 4.9 slaves beside the masters; Java 5.0.0 reads every compressed body as a 5.0 one,
        # so a 4.9 broker registers with it only uncompressed
        as_50 = self.profile.compressed_body_broker_version == MQVersion.V5_0_0
        self.slave_templates = [t for t in old[103]
                                if "enableActingMaster" not in (t.command.ext_fields or {})
                                and not (as_50 and t.compressed)]
        self.unregister_templates = self.templates[104]
        self.query_templates = self.templates.get(322, [])
        self.heartbeat_templates = (self.templates.get(904, [])
                                    if declaration(904).served_by(NAMESRV, self.profile.release) else [])
        self.route_templates = [decode_frame(f) for f in route_frames()]
        self.topic_pool = [f"churn-topic-{i:03d}" for i in range(topics)]
        self.clusters = [f"ChurnCluster{c}" for c in range(clusters)]
        self._channel_ids = iter(range(1, 1 << 62))
        self._opaque = 0
        self.model = Model(self.profile)
        self.queue = []
        self._build_core()
        self.instances = []
        for g in range(groups):
            template = self.rng.choice(self.templates[103])
            group = Group(f"churn-broker-{g:04d}", self.rng.choice(self.clusters), template,
                          self._random_table(template))
            port = 10000 + g * 10
            self.instances.append(Instance(group, 0, f"10.{g // 250}.{g % 250}.1:{port}", template))
            if self.rng.random() < 0.3:
                self.instances.append(Instance(group, 1, f"10.{g // 250}.{g % 250}.2:{port + 1}",
                                               self.rng.choice(self.slave_templates)))
        for inst in self.instances:
            inst.next_register_ms = self.now_ms + self.rng.randrange(0, 30_000)

    def _build_core(self):
        props = {"kvConfigPath": "/nonexistent/rocketpy-churn/kvConfig.json"}
        configuration = Configuration.from_properties(props, as_policies(self.profile))
        self.rim = RouteInfoManager(configuration.namesrv_config, self.profile)
        kv = KVConfigManager(configuration.namesrv_config.kv_config_path)
        self.processor = DefaultRequestProcessor(
            self.rim, kv, submit_unregistration=self._submit, profile=self.profile,
            configuration=configuration)

    # -- the BatchUnregistrationService stand-in ----------------------------------------------

    def _submit(self, request, expected=None):
        """Queue ``request`` (the processor's submit callable) with the model's own version of
        it (``expected``: (cluster, addr, name, id, channel, generation); for UNREGISTER_BROKER
        it is the request itself, which carries no channel)."""
        if expected is None:
            expected = (request.cluster_name, request.broker_addr, request.broker_name,
                        request.broker_id, None, None)
        if not self.profile.queued_unregistration:
            self._apply([(request, expected)])
        else:
            self.queue.append((request, expected))
        return True

    def drain(self):
        if self.queue:
            batch = list({r: (r, e) for r, e in self.queue}.values())  # duplicates dropped
            self.queue.clear()
            self._apply(batch)

    def _apply(self, batch):
        self.rim.unregister_brokers([r for r, _ in batch])
        for _, (cluster, addr, name, bid, channel_id, generation) in batch:
            self.model.unregister(cluster, name, bid, addr, channel_id, generation)

    def _submit_matched(self, requests, expected, what):
        """Submit the route manager's channel/expiry requests, each with the model's twin."""
        def ident(r):
            return (r.cluster_name, r.broker_addr, r.broker_name, r.broker_id, r.channel_id)
        mine = {e[:5]: e for e in expected}
        got = [ident(r) for r in requests]
        if sorted(got, key=str) != sorted(mine, key=str):
            raise Mismatch(f"{what}: route manager asks {sorted(got, key=str)[:3]}, "
                           f"model {sorted(mine, key=str)[:3]}")
        for request in requests:
            self._submit(request, mine[ident(request)])

    # -- frames ---------------------------------------------------------------------------------

    def _random_table(self, template):
        rng = self.rng
        names = rng.sample(self.topic_pool, rng.choice((2, 3, 4, 6, 8, 12)))
        table = {}
        for name in names:
            table[name] = (rng.choice((1, 4, 8, 16)), rng.choice((1, 4, 8, 16)),
                           rng.choice((2, 4, 6, 6, 6, 7)),
                           0 if template.compressed else rng.choice((0, 0, 0, 1, 2)))
        return table

    def _request(self, template, ext, body=None):
        """The genuine request with our fields: encoded to bytes and decoded back."""
        cmd = copy.copy(getattr(template, "command", template))
        merged = dict(cmd.ext_fields or {})
        merged.update(ext)
        self._opaque += 1
        cmd.ext_fields = merged
        cmd.body = body
        cmd.opaque = self._opaque
        return decode_frame(cmd.encode())

    def _register_frame(self, inst):
        group = inst.group
        template = inst.template
        body = template.body          # the genuine body, with our topics and version for a moment
        wrapper = body.topic_config_serialize_wrapper
        saved = (wrapper.topic_config_table, wrapper.data_version)
        configs = {}
        for topic, (read, write, perm, flag) in group.table.items():
            sample = copy.copy(self.rng.choice(template.topic_samples))
            sample.topic_name = topic
            sample.read_queue_nums, sample.write_queue_nums = read, write
            sample.perm, sample.topic_sys_flag = perm, flag
            configs[topic] = sample
        version = copy.copy(saved[1])
        version.counter, version.timestamp = group.counter, group.timestamp
        wrapper.topic_config_table, wrapper.data_version = configs, version
        try:
            raw = body.encode(compress=template.compressed, broker_version=template.command.version)
        finally:
            wrapper.topic_config_table, wrapper.data_version = saved
        ext = {"brokerName": group.name, "brokerAddr": inst.addr, "clusterName": group.cluster,
               "haServerAddr": inst.addr.rsplit(":", 1)[0] + ":10912", "brokerId": str(inst.broker_id),
               "compressed": "true" if template.compressed else "false",
               "bodyCrc32": str(bodies.body_crc32(raw))}
        return self._request(template, ext, raw), (group.counter, group.timestamp)

    # -- actions ----------------------------------------------------------------------------------

    def _count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1
        self.steps += 1

    def register(self, inst):
        if inst.channel is None:
            if self.rng.random() < self.readdress:      # restarted elsewhere (a new pod IP)
                self._addresses += 1
                host, port = inst.addr.rsplit(":", 1)
                net = host.rsplit(".", 1)[0]
                inst.addr = f"{net}.{self._addresses % 250 + 3}:{int(port) + self._addresses}"
            inst.channel = Channel(next(self._channel_ids), inst.addr)
        group = inst.group
        if inst.broker_id == 0 and self.rng.random() < 0.1:   # the broker's topics changed
            group.table = self._random_table(inst.template) if self.rng.random() < 0.5 else dict(
                group.table, **self._random_table(inst.template))
            group.counter += 1
            group.timestamp = self.now_ms
        request, version = self._register_frame(inst)
        answer = self.processor.process(request, inst.channel, self.now_ms)
        table = {t: (q[0], q[1], q[2], 0 if inst.template.compressed else q[3])
                 for t, q in group.table.items()}
        master_addr = self.model.register(group.cluster, group.name, inst.broker_id, inst.addr,
                                          table, version, inst.channel.channel_id, self.now_ms)
        if request.is_oneway:
            if answer is not None:
                raise Mismatch(f"answer to a oneway registration: {answer}")
        elif answer is None or answer.code != 0:
            raise Mismatch(f"registration of {inst.addr} failed: {answer}")
        elif (answer.ext_fields or {}).get("masterAddr") != master_addr:
            raise Mismatch(f"{inst.addr}: masterAddr {answer.ext_fields} != model {master_addr}")
        inst.next_register_ms = self.now_ms + self.rng.randrange(20_000, 40_000)
        self._count("register")

    def drop(self, inst):
        """The connection closes (kill -9, network): the channel event's unregistrations."""
        if inst.channel is None:
            return
        channel_id = inst.channel.channel_id
        self._submit_matched(self.rim.on_channel_destroy(inst.channel),
                             self.model.channel_requests(channel_id), f"close of {inst.addr}")
        inst.channel = None
        self._count("drop")

    def unregister(self, inst):
        """Graceful shutdown: UNREGISTER_BROKER, then the connection closes."""
        if inst.channel is None:
            return
        group = inst.group
        request = self._request(self.rng.choice(self.unregister_templates), {
            "brokerName": group.name, "brokerAddr": inst.addr, "clusterName": group.cluster,
            "brokerId": str(inst.broker_id)})
        answer = self.processor.process(request, inst.channel, self.now_ms)
        if answer is None or answer.code != 0:
            raise Mismatch(f"UNREGISTER_BROKER of {inst.addr}: {answer}")
        if not self.profile.queued_unregistration:   # 4.9 applies it inside the handler
            self.model.unregister(group.cluster, group.name, inst.broker_id, inst.addr)
        self._count("unregister")
        self.check_group(group.name)
        self.drop(inst)

    def query_data_version(self, inst):
        if inst.channel is None or not self.query_templates:
            return
        group = inst.group
        template = self.rng.choice(self.query_templates)
        body = b'{"counter":%d,"timestamp":%d}' % (group.counter, group.timestamp)
        request = self._request(template, {"brokerName": group.name, "brokerAddr": inst.addr,
                                           "clusterName": group.cluster,
                                           "brokerId": str(inst.broker_id)}, body)
        answer = self.processor.process(request, inst.channel, self.now_ms)
        live = self.model.live.get(self.model.key(group.cluster, inst.addr))
        changed = live is None or live.data_version != (group.counter, group.timestamp)
        if self.profile.query_data_version_always_refreshes or not changed:
            self.model.refresh(group.cluster, inst.addr, self.now_ms)
        if not request.is_oneway:
            if answer is None or answer.code != 0:
                raise Mismatch(f"QUERY_DATA_VERSION of {inst.addr}: {answer}")
            if answer.ext_fields.get("changed") != ("true" if changed else "false"):
                raise Mismatch(f"QUERY_DATA_VERSION of {inst.addr}: {answer.ext_fields} vs {changed}")
        self._count("query_data_version")

    def heartbeat(self, inst):
        if inst.channel is None or not self.heartbeat_templates:
            return
        group = inst.group
        request = self._request(self.rng.choice(self.heartbeat_templates), {
            "brokerName": group.name, "brokerAddr": inst.addr, "clusterName": group.cluster,
            "brokerId": str(inst.broker_id)})
        self.processor.process(request, inst.channel, self.now_ms)
        self.model.refresh(group.cluster, inst.addr, self.now_ms)
        self._count("heartbeat")

    def scan(self):
        """The liveness scan: expired brokers are unregistered and their channels closed."""
        expired = self.rim.scan_not_active_broker(self.now_ms)
        self._submit_matched([r for r, _ in expired], self.model.scan(self.now_ms), "expiry scan")
        by_channel = {inst.channel.channel_id: inst for inst in self.instances if inst.channel}
        for _, channel_id in expired:
            inst = by_channel.get(channel_id)
            if inst is not None:              # the transport closes the expired channel
                self.drop(inst)
        self._count("scan")

    # -- the run ----------------------------------------------------------------------------------

    def tick(self):
        """~5 s of simulated time: every broker does what is due, in random order."""
        rng = self.rng
        self.now_ms += TICK_MS + rng.randrange(-500, 500)
        order = list(self.instances)
        rng.shuffle(order)
        for inst in order:
            if inst.frozen_until_ms > self.now_ms:
                continue                       # SIGSTOPped: silent, connection still open
            roll = rng.random()
            if inst.channel is not None and roll < 0.004:
                inst.frozen_until_ms = self.now_ms + rng.randrange(60_000, 200_000)
                continue
            if inst.channel is not None and roll < 0.012:
                self.drop(inst)
                if rng.random() < 0.4:         # restarts at once: registers again while the
                    self.check_group(inst.group.name)   # close's unregistration is queued
                    self.register(inst)
            elif inst.channel is not None and roll < 0.018:
                self.unregister(inst)
            elif inst.channel is None and roll < 0.25:
                self.register(inst)            # back on a new connection
            elif inst.channel is not None and self.now_ms >= inst.next_register_ms:
                self.register(inst)
            elif inst.channel is not None and roll < 0.05:
                self.query_data_version(inst)
            elif inst.channel is not None and roll < 0.08:
                self.heartbeat(inst)
            else:
                continue
            self.check_group(inst.group.name, routes=rng.random() < 0.1)
            if rng.random() < 0.05:
                self.drain()
                self.check()
        self.scan()
        self.drain()
        self.check(routes=True)
        self.ticks += 1

    def run(self, ticks):
        for _ in range(ticks):
            self.tick()

    # -- checks -----------------------------------------------------------------------------------

    def check(self, routes=False):
        model, rim = self.model, self.rim
        groups = {name: (bd.cluster, dict(bd.broker_addrs)) for name, bd in rim.broker_addr_table.items()}
        if groups != model.groups:
            diff = {k for k in set(groups) | set(model.groups) if groups.get(k) != model.groups.get(k)}
            raise Mismatch(f"brokerAddrTable differs for {sorted(diff)[:5]}: "
                           f"{[(groups.get(k), model.groups.get(k)) for k in sorted(diff)[:3]]}")
        clusters = {}
        for name, (cluster, _) in model.groups.items():
            clusters.setdefault(cluster, set()).add(name)
        if {c: set(names) for c, names in rim.cluster_addr_table.items()} != clusters:
            raise Mismatch("clusterAddrTable differs")
        tables = {topic: {name: (q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                          for name, q in queues.items()}
                  for topic, queues in rim.topic_queue_table.items()}
        want = model.routes()
        if tables != want:
            diff = sorted(t for t in set(tables) | set(want) if tables.get(t) != want.get(t))
            raise Mismatch(f"topicQueueTable differs for {diff[:5]}: "
                           f"{[(tables.get(t), want.get(t)) for t in diff[:2]]}")
        live = {key: (l.channel_id, l.last_update_ms, (l.data_version.counter, l.data_version.timestamp))
                for key, l in rim.broker_live_table.items()}
        model_live = {key: (l.channel_id, l.last_ms, l.data_version) for key, l in model.live.items()}
        if live != model_live:
            diff = sorted(k for k in set(live) | set(model_live) if live.get(k) != model_live.get(k))
            raise Mismatch(f"brokerLiveTable differs for {diff[:3]}: "
                           f"{[(live.get(k), model_live.get(k)) for k in diff[:3]]}")
        index = {}
        for key, l in model.live.items():
            index.setdefault(l.channel_id, set()).add(key)
        if {cid: set(keys) for cid, keys in rim._by_channel.items()} != index:
            raise Mismatch("channel index differs from the live table")
        if rim.queue_data_count != sum(map(len, rim.topic_queue_table.values())):
            raise Mismatch(f"queue_data_count {rim.queue_data_count} differs from the queue table")
        self.max_live = max(self.max_live, len(model.live))
        cache = self.processor.reader.cache
        if len(cache._last) > 2 * self.max_live + 64:
            raise Mismatch(f"registration body cache holds {len(cache._last)} entries; at most "
                           f"{self.max_live} brokers were ever live at once")
        if routes:
            self.check_routes(want, self.rng.sample(self.topic_pool, 5))

    def check_group(self, name, routes=False):
        """After a step that only one broker group took part in: that group in full (addresses,
        queue data of all its topics, live entries) and the sizes of every table; the rest is
        compared in full after each drain, scan and tick (:meth:`check`)."""
        model, rim = self.model, self.rim
        bd = rim.broker_addr_table.get(name)
        got = None if bd is None else (bd.cluster, dict(bd.broker_addrs))
        if got != model.groups.get(name):
            raise Mismatch(f"brokerAddrTable[{name}]: {got} vs model {model.groups.get(name)}")
        want = model.topics.get(name, {}) if name in model.groups else {}
        topics = set(rim.topics_of_broker(name)) | set(want)
        for topic in topics:
            q = rim.topic_queue_table.get(topic, {}).get(name)
            got = None if q is None else (q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
            if got != want.get(topic):
                raise Mismatch(f"queue data of {name} for {topic}: {got} vs model {want.get(topic)}")
        for key, l in model.live.items():
            if l.name == name:
                got = rim.broker_live_table.get(key)
                if got is None or (got.channel_id, got.last_update_ms) != (l.channel_id, l.last_ms):
                    raise Mismatch(f"live entry {key}: {got} vs model {l}")
        if len(rim.broker_live_table) != len(model.live) or len(rim.broker_addr_table) != len(model.groups):
            raise Mismatch("table sizes differ from the model")
        if routes:
            self.check_routes(model.routes(), self.rng.sample(self.topic_pool, 3) + list(want)[:2])

    def check_routes(self, want, topics):
        """Real GET_ROUTEINFO_BY_TOPIC frames (legacy and standard JSON) against the model."""
        for topic in topics:
            template = self.rng.choice(self.route_templates)
            request = self._request(template, {"topic": topic})
            answer = self.processor.process(request, Channel(0, "127.0.0.1:1"), self.now_ms)
            expected = want.get(topic)
            if expected is None:
                if answer.code != 17:
                    raise Mismatch(f"route of {topic}: code {answer.code}, model has none")
                continue
            if answer.code != 0:
                raise Mismatch(f"route of {topic}: code {answer.code} {answer.remark}")
            route = fastjson.loads(answer.body)
            queues = {q["brokerName"]: (q["readQueueNums"], q["writeQueueNums"], q["perm"],
                                        q["topicSysFlag"]) for q in route["queueDatas"]}
            brokers = {b["brokerName"]: (b["cluster"], {int(k): v for k, v in b["brokerAddrs"].items()})
                       for b in route["brokerDatas"]}
            if queues != expected or brokers != {n: self.model.groups[n] for n in expected}:
                raise Mismatch(f"route of {topic} differs: {queues} vs {expected}")

    def finish(self):
        """Every broker goes away (a third each: graceful, dropped, expired); all must be empty."""
        rng = self.rng
        for inst in self.instances:
            inst.frozen_until_ms = 0
            if inst.channel is None:
                continue
            roll = rng.random()
            if roll < 0.33:
                self.unregister(inst)
            elif roll < 0.66:
                self.drop(inst)
            self.check_group(inst.group.name)
        self.drain()
        self.now_ms += TIMEOUT_MS + 10_000
        self.scan()
        self.drain()
        self.check()
        self.assert_empty()

    def assert_empty(self):
        rim = self.rim
        leftovers = {name: len(getattr(rim, name)) for name in (
            "topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
            "filter_server_table", "topic_queue_mapping_info_table", "_by_channel",
            "shapes", "snapshots", "expiry")}
        leftovers = {k: v for k, v in leftovers.items() if v}
        if leftovers or self.queue:
            raise Mismatch(f"entries left after every broker went away: {leftovers}, queue {self.queue}")
        for topic in self.topic_pool:
            if self.rim.route_snapshot(topic) is not None:
                raise Mismatch(f"route snapshot still answers for {topic}")


def route_frames():
    """Genuine GET_ROUTEINFO_BY_TOPIC requests: one legacy-JSON (version < 401) and one
    standard-JSON client style, JSON and ROCKETMQ headers."""
    out = {}
    for frame in golden.all_frames():
        naive = golden.naive(frame.data)
        if naive.code == 105 and not naive.flag & 1:
            out.setdefault((naive.serialize_type, naive.version >= 401), frame.data)
    return list(out.values())
