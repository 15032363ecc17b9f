"""Web layer: a read-only view of one NameServer's state as plain, JSON-ready data (what
``mqadmin clusterList``, ``topicList``/``topicRoute`` and ``getKVListByNamespace`` show, plus
what only the server knows: heartbeat ages, connection states, queue depth).

The status page, the JSON API and the Prometheus gauges read the state only through this class
and only on the reactor thread (the tables have no locks). It is handed the narrow things it
reads, never a controller, and changes nothing.

A broker's version and language are those of the latest request on its connection (Java keeps
neither). Its role is said in words, as rocketmq-dashboard does: ``master`` (id 0), ``acting
master`` (the smallest id of a masterless group with acting master on), ``slave``. System topics
are Java's ``TopicValidator.isSystemTopic`` ones plus the cluster and broker names brokers
register as topics (GET_SYSTEM_TOPIC_LIST_FROM_NS) and the clusters' reply topics.

Names are in natural order (``broker-2`` before ``broker-10``: :func:`natural_key`). What a
page shows is cut on the server: a page of broker groups (:meth:`NameServerView.broker_groups`)
and of topics, and per-cluster counts (:meth:`NameServerView.cluster_summaries`) in one pass
over the brokers, so a page costs the same at 20 or 2,000 brokers. Topic names come sorted from
an index and are filtered a step per reactor turn (:mod:`rocketpy.web.topicsearch`)."""
import re
import time

from ..namesrv.model import (MASTER_ID, ORDER_TOPIC_CONFIG, PERM_INHERIT, PERM_READ, PERM_WRITE,
                             SYSTEM_TOPIC_PREFIX, SYSTEM_TOPICS, is_system_topic)
from ..remoting.codes import language_name, version_name
from .topicsearch import TopicIndex, TopicSearch

__all__ = ["NameServerView", "perm_text", "broker_role", "natural_key", "DEFAULT_LIMIT",
           "MAX_LIMIT"]

#: Topics per page / API call unless asked otherwise, and the most one call returns.
DEFAULT_LIMIT = 100
MAX_LIMIT = 5000


_DIGITS = re.compile(r"(\d+)")
#: Java ``MixAll.REPLY_TOPIC_POSTFIX`` after the cluster name
_REPLY_SUFFIX = "_REPLY_TOPIC"


def natural_key(name):
    """Sort key putting ``broker-2`` before ``broker-10`` (digit runs compare as numbers)."""
    parts = _DIGITS.split(name)
    return tuple((0, int(p), p) if i % 2 else (1, p.lower(), p) for i, p in enumerate(parts))


def perm_text(perm):
    """Java ``PermName.perm2String``: ``RW-`` for read+write, ``R--`` after a write wipe."""
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + \
        ("X" if perm & PERM_INHERIT else "-")


def broker_role(broker_id, broker_addrs, enable_acting_master):
    """``master``, ``acting master`` or ``slave`` for ``broker_id`` of a group with these ids."""
    if broker_id == MASTER_ID:
        return "master"
    if enable_acting_master and MASTER_ID not in broker_addrs and broker_id == min(broker_addrs):
        return "acting master"
    return "slave"


def _rocketpy_version():
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("rocketpy")
    except PackageNotFoundError:   # a checkout on PYTHONPATH: its setup.cfg says
        import os
        import re
        cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "setup.cfg")
        try:
            with open(cfg, encoding="utf-8") as f:
                m = re.search(r"^version\s*=\s*(\S+)", f.read(), re.M)
        except OSError:
            m = None
        return m.group(1) if m else "unknown"


class NameServerView:
    """What the web endpoint shows, computed on demand.

    :param route_info_manager: the :class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager`.
    :param kv_config_manager: the :class:`~rocketpy.namesrv.kvconfig.KVConfigManager` or None.
    :param clock: an ``IReactorTime`` (heartbeat ages, uptime).
    :param connections: the transport's ``{channel_id: protocol}`` (``RemotingServerFactory.connections``).
    :param unregistration: the ``BatchUnregistrationService`` (``len()`` is its queue depth).
    :param metrics: the transport's :class:`~rocketpy.transport.metrics.ServerMetrics`.
    :param policies: the :class:`~rocketpy.namesrv.policy.Policies` of the release answered like
        (default: the route tables').
    :param access_control: the processor's :class:`~rocketpy.namesrv.acl.AccessControl` or None.
    :param answer_cache: the transport's answer cache or None.
    :param listen: the remoting endpoint description, shown on the page.
    :param rates: a :class:`~rocketpy.web.rates.TrafficRates` or None.
    :param peer_watch: a :class:`~rocketpy.web.peers.PeerWatch` (``--peers``) or None.
    :param workers: the :class:`~rocketpy.service.workers.WorkerSupervisor` of a server of
        several processes (``connections`` are then every process's), or None.
    """

    def __init__(self, route_info_manager, kv_config_manager=None, *, clock, connections=None,
                 unregistration=None, metrics=None, policies=None, access_control=None,
                 answer_cache=None, listen=None, rates=None, peer_watch=None, workers=None):
        self.route_info_manager = route_info_manager
        self.kv_config_manager = kv_config_manager
        self.clock = clock
        self.worker_processes = workers
        if workers is not None:
            connections = workers.connections
        self.connections = connections if connections is not None else {}
        self.unregistration = unregistration
        self.metrics = metrics
        self.policies = policies or route_info_manager.policies
        self.access_control = access_control
        self.answer_cache = answer_cache
        self.listen = listen
        self.rates = rates
        self.peer_watch = peer_watch
        self.started = clock.seconds()
        self.version = _rocketpy_version()
        self.topic_index = TopicIndex(route_info_manager.shapes)
        self.search = TopicSearch(self.topic_index, self._keep,
                                  lambda: route_info_manager.snapshots.generation, clock)

    # ------------------------------------------------------------------ small facts

    def now_ms(self):
        return int(self.clock.seconds() * 1000)

    def counts(self):
        """The gauges: clusters, broker groups, live brokers, topics, connections, queue."""
        rim = self.route_info_manager
        queue = self.unregistration
        return {
            "clusters": len(rim.cluster_addr_table),
            "brokerGroups": len(rim.broker_addr_table),
            "brokers": len(rim.broker_live_table),
            "provisionalBrokers": len(rim.provisional),
            "topics": len(rim.topic_queue_table),
            "connections": len(self.connections),
            "unregistrationQueueDepth": len(queue) if queue is not None else 0,
            "unregistrationQueueCapacity": getattr(queue, "capacity", 0) if queue is not None else 0,
            "kvNamespaces": len(self.kv_config_manager.config_table) if self.kv_config_manager else 0,
        }

    def traffic_sources(self):
        """``[(worker label, ServerMetrics)]`` of each process (one process: its counters,
        label None)."""
        if self.worker_processes is None:
            return [(None, self.metrics)]
        return self.worker_processes.metrics_sources(self.metrics)

    def workers(self):
        """One entry per process of a server of several (worker 0, the route writer, first),
        else None."""
        if self.worker_processes is None:
            return None
        return self.worker_processes.status(len(self.connections.local))

    def worker_of(self, peer):
        """The worker whose connection has the peer ``host:port`` (0: the writer's), or None."""
        for proto in self.connections.local.values():
            if getattr(proto, "remote_addr", None) == peer:
                return 0
        for remote in self.worker_processes.channels.values():
            if remote.remote_addr == peer:
                return remote.worker.slot
        return None

    def summary(self):
        now = self.clock.seconds()
        out = {"server": "rocketpy", "version": self.version, "profile": self.policies.name,
               "listen": self.listen, "serverTime": int(now * 1000),
               "startTime": int(self.started * 1000), "uptimeSeconds": round(now - self.started, 3),
               "wallClock": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        out.update(self.counts())
        out["traffic"] = self.rates.rates() if self.rates is not None else None
        return out

    def connection_state(self, channel_id):
        """``open``, ``paused`` (the peer is not reading its answers), ``closing``, ``closed``
        (the connection is gone) or ``none`` (registered without a connection)."""
        if channel_id is None:
            return "none"
        proto = self.connections.get(channel_id)
        if proto is None:
            return "closed"
        if getattr(proto, "closing", False):
            return "closing"
        if getattr(proto, "paused", False):
            return "paused"
        return "open"

    def _live(self, cluster, addr):
        return self.route_info_manager.broker_live_table.get(self._live_key(cluster, addr))

    def _live_key(self, cluster, addr):
        table = self.route_info_manager.broker_live_table
        key = (cluster, addr)    # 5.x keys the live table by (cluster, address)
        return key if key in table else (None, addr)   # 4.9: by address

    # ------------------------------------------------------------------ brokers

    def broker(self, cluster, broker_id, addr, role, now_ms=None):
        now_ms = self.now_ms() if now_ms is None else now_ms
        key = self._live_key(cluster, addr)
        live = self.route_info_manager.broker_live_table.get(key)
        out = {"brokerId": broker_id, "address": addr, "role": role, "live": live is not None,
               # loaded from a route snapshot, not registered since (a warm restart)
               "provisional": key in self.route_info_manager.provisional,
               "version": None, "versionCode": None, "language": None, "dataVersion": None,
               "lastHeartbeatMs": None, "secondsSinceHeartbeat": None,
               "heartbeatTimeoutSeconds": None, "haServerAddr": None, "channelId": None,
               "remoteAddr": None, "connection": "none"}
        if live is None:
            return out
        timeout = live.heartbeat_timeout_ms
        dv = live.data_version
        out.update(dataVersion={"counter": dv.counter, "timestamp": dv.timestamp,
                                "stateVersion": dv.state_version},
                   lastHeartbeatMs=live.last_update_ms,
                   secondsSinceHeartbeat=round((now_ms - live.last_update_ms) / 1000.0, 3),
                   heartbeatTimeoutSeconds=timeout / 1000.0, haServerAddr=live.ha_server_addr,
                   channelId=live.channel_id, connection=self.connection_state(live.channel_id))
        proto = self.connections.get(live.channel_id)
        if proto is not None:
            out["remoteAddr"] = getattr(proto, "remote_addr", None)
            version = getattr(proto, "peer_version", None)
            language = getattr(proto, "peer_language", None)
            if version is not None:
                out["versionCode"] = version
                out["version"] = version_name(version) or str(version)
            if language is not None:
                out["language"] = language_name(language) or str(language)
        return out

    def _group(self, cluster, name, data, now_ms):
        """One group; its topic count read from the shared layouts naming it (proportional to
        those layouts, not to the topics: a page costs the same at 1,000 or 1 M topics)."""
        return {"brokerName": name, "cluster": data.cluster, "zoneName": data.zone_name,
                "enableActingMaster": data.enable_acting_master,
                "topicCount": self.route_info_manager.topic_count_of_broker(name),
                "brokers": [self.broker(cluster, bid, data.broker_addrs[bid],
                                        broker_role(bid, data.broker_addrs,
                                                    data.enable_acting_master), now_ms)
                            for bid in sorted(data.broker_addrs)]}

    def clusters(self):
        """Clusters -> broker groups -> brokers, names in natural order."""
        rim = self.route_info_manager
        now_ms = self.now_ms()
        out = []
        for cluster in sorted(rim.cluster_addr_table, key=natural_key):
            groups = []
            for name in sorted(rim.cluster_addr_table[cluster], key=natural_key):
                data = rim.broker_addr_table.get(name)
                if data is not None:
                    groups.append(self._group(cluster, name, data, now_ms))
            out.append({"cluster": cluster, "brokerGroups": groups})
        return out

    def _group_names(self, query=None):
        """``[(cluster, group)]`` in natural order; with ``query``, those whose cluster, group
        name or one of whose addresses contains it (case-insensitive)."""
        rim = self.route_info_manager
        q = (query or "").lower()
        out = []
        for cluster in sorted(rim.cluster_addr_table, key=natural_key):
            for name in sorted(rim.cluster_addr_table[cluster], key=natural_key):
                data = rim.broker_addr_table.get(name)
                if data is None:
                    continue
                if q and not (q in cluster.lower() or q in name.lower()
                              or any(q in a.lower() for a in data.broker_addrs.values())):
                    continue
                out.append((cluster, name))
        return out

    def broker_groups(self, query=None, offset=0, limit=DEFAULT_LIMIT):
        """A page of broker groups: ``{"total", "matched", "offset", "limit", "groups"}``."""
        rim = self.route_info_manager
        names = self._group_names(query)
        offset = max(0, int(offset))
        limit = max(1, min(int(limit), MAX_LIMIT))
        page = names[offset:offset + limit]
        now_ms = self.now_ms()
        return {"query": query or "", "total": len(rim.broker_addr_table), "matched": len(names),
                "offset": offset, "limit": limit,
                "groups": [self._group(c, n, rim.broker_addr_table[n], now_ms)
                           for c, n in page]}

    def cluster_summaries(self):
        """Per cluster, counts only: broker groups, brokers, live, late (past half their
        timeout), expired, groups without a master; one pass over the brokers."""
        rim = self.route_info_manager
        now_ms = self.now_ms()
        out = []
        for cluster in sorted(rim.cluster_addr_table, key=natural_key):
            row = {"cluster": cluster, "brokerGroups": 0, "brokers": 0, "live": 0, "late": 0,
                   "expired": 0, "noMaster": 0}
            for name in rim.cluster_addr_table[cluster]:
                data = rim.broker_addr_table.get(name)
                if data is None:
                    continue
                row["brokerGroups"] += 1
                if MASTER_ID not in data.broker_addrs:
                    row["noMaster"] += 1
                for addr in data.broker_addrs.values():
                    row["brokers"] += 1
                    live = self._live(cluster, addr)
                    if live is None:
                        continue
                    row["live"] += 1
                    age, timeout = now_ms - live.last_update_ms, live.heartbeat_timeout_ms
                    if timeout and age > timeout:
                        row["expired"] += 1
                    elif timeout and age > timeout / 2:
                        row["late"] += 1
            out.append(row)
        return out

    def brokers(self):
        """Every broker address as one flat list (cluster and group on each entry)."""
        out = []
        for cluster in self.clusters():
            for group in cluster["brokerGroups"]:
                for broker in group["brokers"]:
                    out.append(dict(broker, cluster=cluster["cluster"],
                                    brokerName=group["brokerName"], topicCount=group["topicCount"]))
        return out

    # ------------------------------------------------------------------ topics

    def is_system_topic(self, topic):
        """Java's system topics, the cluster and broker names registered as topics, and each
        cluster's reply topic (``MixAll.getReplyTopic``: ``<cluster>_REPLY_TOPIC``, which every
        broker creates)."""
        rim = self.route_info_manager
        return (is_system_topic(topic) or topic in rim.cluster_addr_table
                or topic in rim.broker_addr_table
                or (topic.endswith(_REPLY_SUFFIX) and topic[:-len(_REPLY_SUFFIX)] in rim.cluster_addr_table))

    def topic_names(self, query=None, hide_system=False):
        """A Deferred of the sorted topic names; with ``query``, those whose name or one of whose
        broker names contains it (case-insensitive); without the system topics if
        ``hide_system``. Filtered a step per reactor turn (:mod:`rocketpy.web.topicsearch`);
        it fails with :class:`~rocketpy.web.topicsearch.SearchBusy` when too many are asked."""
        return self.search.search(query, hide_system)

    def _keep(self, query, hide_system):
        """The predicate of one search (``query`` in lower case), made once: the broker names
        that match and the system topics' names are found first, so a topic costs a case fold,
        a substring test and a set lookup or two."""
        rim = self.route_info_manager
        shapes = rim.shapes
        # the layouts naming a matching broker: as many as the distinct layouts, not the topics
        layouts = {id(shape) for name in (shapes.broker_names() if query else ())
                   if query in name.lower() for shape in shapes.shapes_of_broker(name)}
        layout_of = rim.topic_queue_table.get
        system = set()
        if hide_system:
            system.update(SYSTEM_TOPICS, rim.cluster_addr_table, rim.broker_addr_table,
                          (cluster + _REPLY_SUFFIX for cluster in rim.cluster_addr_table))

        def keep(topic):
            if system and (topic in system or topic.startswith(SYSTEM_TOPIC_PREFIX)):
                return False
            return (not query or query in topic.lower()
                    or (layouts and id(layout_of(topic)) in layouts))
        return keep

    def topic(self, name):
        """One topic: its queue data per broker and the route a client would get, or None."""
        rim = self.route_info_manager
        queue_map = rim.topic_queue_table.get(name)
        if queue_map is None:
            return None
        queue_datas = [{"brokerName": qd.broker_name, "readQueueNums": qd.read_queue_nums,
                        "writeQueueNums": qd.write_queue_nums, "perm": qd.perm,
                        "permText": perm_text(qd.perm), "topicSysFlag": qd.topic_sys_flag}
                       for _, qd in sorted(queue_map.items(), key=lambda kv: natural_key(kv[0]))]
        route = rim.pickup_topic_route_data(name)
        broker_datas = []
        filters = {}
        if route is not None:
            for bd in sorted(route.broker_datas, key=lambda b: natural_key(b.broker_name)):
                broker_datas.append({"cluster": bd.cluster, "brokerName": bd.broker_name,
                                     "brokerAddrs": {str(k): v for k, v in sorted(bd.broker_addrs.items())},
                                     "zoneName": bd.zone_name,
                                     "enableActingMaster": bd.enable_acting_master})
            filters = {k: v for k, v in route.filter_server_table.items() if v}
        out = {"topic": name, "queueDatas": queue_datas, "brokerDatas": broker_datas,
               "routable": route is not None, "system": self.is_system_topic(name)}
        if filters:
            out["filterServerTable"] = filters
        if self.kv_config_manager is not None:
            order = self.kv_config_manager.get_kv_config(ORDER_TOPIC_CONFIG, name)
            if order is not None:
                out["orderTopicConf"] = order
        return out

    def topics(self, names, query=None, offset=0, limit=DEFAULT_LIMIT):
        """A page of ``names`` (what :meth:`topic_names` found for ``query``): ``{"total",
        "matched", "offset", "limit", "topics": [...]}``."""
        offset = max(0, int(offset))
        limit = max(1, min(int(limit), MAX_LIMIT))
        page = names[offset:offset + limit]
        return {"query": query or "", "total": len(self.route_info_manager.topic_queue_table),
                "matched": len(names), "offset": offset, "limit": limit,
                "topics": [t for t in map(self.topic, page) if t is not None]}

    def peers(self):
        """The latest comparison with the peer NameServers (:mod:`rocketpy.web.peers`):
        ``None`` without ``--peers``; ``{"checkedMs": None}`` before the first one."""
        watch = self.peer_watch
        if watch is None:
            return None
        out = {"peers": list(watch.peers), "checkedMs": watch.checked_ms,
               "intervalSeconds": watch.interval}
        if watch.report is not None:
            out.update(watch.report)
        return out

    # ------------------------------------------------------------------ KV config

    def kv(self):
        """``{namespace: {key: value}}``, sorted (what GET_KVLIST_BY_NAMESPACE answers)."""
        if self.kv_config_manager is None:
            return {}
        table = self.kv_config_manager.config_table
        return {ns: dict(sorted(table[ns].items())) for ns in sorted(table)}
