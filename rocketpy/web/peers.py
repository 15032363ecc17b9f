"""Web layer: divergence between NameServers on the status page (``--peers``).

NameServers never talk to each other; each builds its routes from the brokers' registrations
alone, so after a partial registration or a restart they can disagree (apache/rocketmq#4807,
#9411). Given its peers, the web endpoint asks each one, every :data:`PEER_INTERVAL` seconds
(the brokers' registration period), what ``mqadmin clusterList`` and ``topicList`` ask --
GET_BROKER_CLUSTER_INFO and GET_ALL_TOPIC_LIST_FROM_NAMESERVER -- and compares the answers and
its own tables with ``rocketpy-admin compareNamesrv``'s comparison
(:func:`rocketpy.namesrv.consistency.compare_views`: clusters, broker groups with their
addresses, topics), one comparison for both. Every topic's route is ``rocketpy-admin``'s job
(thousands of requests per peer); the page compares which topics each NameServer knows.

The reactor only copies its own tables (the broker groups and the topic names: about 20 ms at
1 M topics); the views and the comparison, seconds at that size, run on the decode pool."""
from types import SimpleNamespace

from twisted.internet import defer

from ..namesrv.consistency import NamesrvView, compare_views, digest, view_of
from ..remoting import RemotingCommand
from ..remoting.bodies import ClusterInfo, TopicList
from ..remoting.codes import MQVersion, RequestCode, ResponseCode
from ..transport.periodic import PeriodicService

__all__ = ["peer_view", "local_copy", "report_of", "PeerWatch", "PEER_INTERVAL",
           "DIFFERENCES_SHOWN", "SELF"]

#: seconds between two comparisons (Java brokers register every 30 s)
PEER_INTERVAL = 30.0
#: seconds a peer has to answer
PEER_TIMEOUT = 5.0
#: differences listed per kind (all are counted)
DIFFERENCES_SHOWN = 50
#: how the local server is named in a report
SELF = "this NameServer"


def peer_view(addr, info, topic_list):
    """The :class:`~rocketpy.namesrv.consistency.NamesrvView` of a NameServer's cluster info and
    topic list (topics without their routes)."""
    return view_of(addr, info, dict.fromkeys(topic_list or ()))


def local_copy(route_info_manager):
    """What :func:`peer_view` needs of this server's own tables, copied (on the reactor) so the
    view can be built elsewhere: ``(info, topic names)``."""
    rim = route_info_manager
    brokers = {name: SimpleNamespace(cluster=data.cluster, broker_addrs=dict(data.broker_addrs))
               for name, data in rim.broker_addr_table.items()}
    clusters = {name: list(groups) for name, groups in rim.cluster_addr_table.items()}
    return (SimpleNamespace(broker_addr_table=brokers, cluster_addr_table=clusters),
            list(rim.topic_queue_table))


def report_of(comparison, shown=DIFFERENCES_SHOWN):
    """The page's report of a :class:`~rocketpy.namesrv.consistency.Comparison`: ``agree``, one
    row per NameServer, and per kind the differences (``shown`` listed, all counted)."""
    rows = [{"nameserver": view.addr, "error": view.error,
             "hash": None if view.error else digest(view.digests()),
             "clusters": None if view.error else len(view.clusters),
             "brokers": None if view.error else len(view.brokers),
             "topics": None if view.error else len(view.topics)}
            for view in comparison.views]
    out = {"agree": comparison.consistent, "nameservers": rows,
           "clusterDifferences": 0, "brokerDifferences": 0, "topicDifferences": 0,
           "clusters": [], "brokers": [], "topics": []}
    for diff in comparison.differences:
        kind = diff.kind
        out[f"{kind}Differences"] += 1
        listed = out[f"{kind}s"]
        if len(listed) >= shown:
            continue
        if kind == "topic":
            listed.append({"topic": diff.name,
                           "missingOn": [ns for ns, text in diff.values.items() if text is None]})
        else:
            listed.append({kind: diff.name, "values": dict(diff.values)})
    return out


class PeerWatch(PeriodicService):
    """Every ``interval`` seconds, the views of the peers (over ``client``, a
    :class:`~rocketpy.transport.client.RemotingClient`) and of this server, compared;
    :attr:`report` is the latest (None before the first), :attr:`checked_ms` its time."""

    name = "peer-watch"

    def __init__(self, peers, route_info_manager, client, clock, interval=PEER_INTERVAL,
                 offload=None):
        super().__init__(interval, clock)
        self.peers = list(peers)
        self.route_info_manager = route_info_manager
        self.client = client
        #: ``offload(work)``: a Deferred of ``work()`` run off the reactor, or None when it cannot
        #: take it now (the decode pool's ``submit``); None: run it here
        self.offload = offload
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
        running = self._running = defer.DeferredList([self._peer_view(p) for p in self.peers])
        running.addCallback(self._compare)
        running.addErrback(self._failed)        # whatever fails, the next round runs

    @defer.inlineCallbacks
    def _peer_view(self, addr):
        try:
            info = yield self._ask(addr, RequestCode.GET_BROKER_CLUSTER_INFO)
            topics = yield self._ask(addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            info, topics = ClusterInfo.from_json(info), TopicList.from_json(topics)
        except Exception as exc:            # unreachable, refused, a body that does not parse
            return addr, f"{type(exc).__name__}: {exc}"
        return addr, (info, topics.topic_list)

    @defer.inlineCallbacks
    def _ask(self, addr, code):
        request = RemotingCommand.request(int(code), version=int(MQVersion.V4_9_8))   # as mqadmin
        answer = yield self.client.invoke(addr, request, PEER_TIMEOUT)
        if answer.code != ResponseCode.SUCCESS:
            raise ValueError(f"answered code {answer.code}: {answer.remark}")
        return answer.body

    def _compare(self, results):
        answers = [(SELF, local_copy(self.route_info_manager))]
        answers += [value for _, value in results]

        def work():
            views = [NamesrvView(addr, error=answer) if isinstance(answer, str)
                     else peer_view(addr, *answer) for addr, answer in answers]
            return report_of(compare_views(views))

        d = None if self.offload is None else self.offload(work)
        if d is None and self.offload is not None:
            self._running = None                # the pool is full: the next round compares
            return None
        d = defer.maybeDeferred(work) if d is None else d
        d.addCallback(self._reported)
        d.addErrback(self._failed)
        return d

    def _reported(self, report):
        self._running = None
        self.report = report
        self.checked_ms = int(self.clock.seconds() * 1000)

    def _failed(self, failure):
        self._running = None
        self.log.failure("comparing with the peer NameServers failed", failure)
