"""Web layer: divergence between NameServers on the status page (``--peers``).

NameServers never talk to each other; each builds its routes from the brokers' registrations
alone, so after a partial registration or a restart they can disagree (apache/rocketmq#4807,
#9411). Given its peers, the web endpoint asks each one, every :data:`PEER_INTERVAL` seconds
(the brokers' registration period), what ``mqadmin clusterList`` and ``topicList`` ask --
GET_BROKER_CLUSTER_INFO and GET_ALL_TOPIC_LIST_FROM_NAMESERVER -- reduces each answer and its
own tables to a :func:`digest`, and shows :func:`compare_digests`' report. Every topic's route is
``rocketpy-admin``'s job (thousands of requests per peer); the page compares which brokers
(cluster, group, id -> address) and which topics each NameServer knows.

:func:`digest` and :func:`compare_digests` are plain functions of plain data, so another
comparison (the admin command's) can take their place."""
import hashlib

from twisted.internet import defer

from ..remoting import RemotingCommand
from ..remoting.bodies import ClusterInfo, TopicList
from ..remoting.codes import MQVersion, RequestCode, ResponseCode
from ..service.periodic import PeriodicService

__all__ = ["digest", "local_digest", "compare_digests", "PeerWatch", "PEER_INTERVAL",
           "DIFFERENCES_SHOWN", "SELF"]

#: seconds between two comparisons (Java brokers register every 30 s)
PEER_INTERVAL = 30.0
#: seconds a peer has to answer
PEER_TIMEOUT = 5.0
#: differences listed per kind (all are counted)
DIFFERENCES_SHOWN = 50
#: how the local server is named in a report
SELF = "this NameServer"


def digest(broker_addr_table, topics):
    """``{"brokers": {"cluster/group/id": addr}, "topics": frozenset, "hash": str}`` from a
    ``{group: BrokerData-like}`` table (``cluster``, ``broker_addrs``) and topic names."""
    brokers = {}
    for group, data in broker_addr_table.items():
        for broker_id, addr in data.broker_addrs.items():
            brokers[f"{data.cluster}/{group}/{broker_id}"] = addr
    topics = frozenset(topics)
    h = hashlib.sha256()
    for key in sorted(brokers):
        h.update(f"b {key} {brokers[key]}\n".encode("utf-8", "surrogatepass"))
    for topic in sorted(topics):
        h.update(f"t {topic}\n".encode("utf-8", "surrogatepass"))
    return {"brokers": brokers, "topics": topics, "hash": h.hexdigest()[:16]}


def local_digest(route_info_manager):
    """The digest of this server's own tables (what it would answer to the same requests)."""
    return digest(route_info_manager.broker_addr_table, route_info_manager.topic_queue_table)


def compare_digests(digests, shown=DIFFERENCES_SHOWN):
    """A report over ``{nameserver: digest, or an error text}``: ``agree`` (every NameServer
    answered and all digests are equal), one line per NameServer, and the brokers and topics
    that differ (``shown`` of each listed, all counted). Linear in the digests' sizes."""
    answered = {ns: d for ns, d in digests.items() if isinstance(d, dict)}
    rows = [{"nameserver": ns, "error": None if isinstance(d, dict) else str(d),
             "hash": d["hash"] if isinstance(d, dict) else None,
             "brokers": len(d["brokers"]) if isinstance(d, dict) else None,
             "topics": len(d["topics"]) if isinstance(d, dict) else None}
            for ns, d in digests.items()]
    names = list(answered)
    broker_diffs, topic_diffs = [], []
    n_brokers = n_topics = 0
    if len({d["hash"] for d in answered.values()}) > 1:
        keys = set().union(*(d["brokers"] for d in answered.values()))
        for key in sorted(keys):
            values = [answered[ns]["brokers"].get(key) for ns in names]
            if len(set(values)) > 1:
                n_brokers += 1
                if len(broker_diffs) < shown:
                    broker_diffs.append({"broker": key, "addresses": dict(zip(names, values))})
        topics = set().union(*(d["topics"] for d in answered.values()))
        for topic in sorted(topics):
            missing = [ns for ns in names if topic not in answered[ns]["topics"]]
            if missing:
                n_topics += 1
                if len(topic_diffs) < shown:
                    topic_diffs.append({"topic": topic, "missingOn": missing})
    return {"agree": len(answered) == len(digests) and n_brokers == 0 and n_topics == 0,
            "nameservers": rows, "brokerDifferences": n_brokers, "topicDifferences": n_topics,
            "brokers": broker_diffs, "topics": topic_diffs}


class PeerWatch(PeriodicService):
    """Every ``interval`` seconds, the digests of the peers (over ``client``, a
    :class:`~rocketpy.transport.client.RemotingClient`) and of this server, compared;
    :attr:`report` is the latest (None before the first), :attr:`checked_ms` its time."""

    name = "peer-watch"

    def __init__(self, peers, route_info_manager, client, clock, interval=PEER_INTERVAL,
                 compare=compare_digests):
        super().__init__(interval, clock)
        self.peers = list(peers)
        self.route_info_manager = route_info_manager
        self.client = client
        self.compare = compare
        self.report = None
        self.checked_ms = None
        self._running = None

    def startService(self):
        super().startService()
        self.run_once()                         # a first report without waiting a period

    def stopService(self):
        super().stopService()
        self.client.shutdown()

    def run_once(self):
        if self._running is not None:           # a slow peer: never two rounds at once
            return
        self._running = defer.DeferredList([self._peer_digest(p) for p in self.peers])
        self._running.addCallback(self._compare)

    @defer.inlineCallbacks
    def _peer_digest(self, addr):
        try:
            info = yield self._ask(addr, RequestCode.GET_BROKER_CLUSTER_INFO)
            topics = yield self._ask(addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            info, topics = ClusterInfo.from_json(info), TopicList.from_json(topics)
        except Exception as exc:            # unreachable, refused, a body that does not parse
            return addr, f"{type(exc).__name__}: {exc}"
        return addr, digest(info.broker_addr_table or {}, topics.topic_list)

    @defer.inlineCallbacks
    def _ask(self, addr, code):
        request = RemotingCommand.request(int(code), version=int(MQVersion.V4_9_8))   # as mqadmin
        answer = yield self.client.invoke(addr, request, PEER_TIMEOUT)
        if answer.code != ResponseCode.SUCCESS:
            raise ValueError(f"answered code {answer.code}: {answer.remark}")
        return answer.body

    def _compare(self, results):
        self._running = None
        digests = {SELF: local_digest(self.route_info_manager)}
        digests.update(value for _, value in results)
        self.report = self.compare(digests)
        self.checked_ms = int(self.clock.seconds() * 1000)
