"""Admin layer: the NameServer half of Java's ``DefaultMQAdminExt`` (and the ``MQClientAPIImpl``
calls behind it), over the transport's :class:`~rocketpy.transport.client.RemotingClient`.
Every method returns a Deferred.

Requests are built from the codec's typed headers as Java's client builds them, so they are
byte-identical to genuine ``mqadmin``'s, opaque aside (``tests/test_admin_requests.py`` checks
the ``rmq49-mqadmin-*`` captures). Where a request goes follows ``MQClientAPIImpl``: reads go to
*one* NameServer (:meth:`RemotingClient.invoke_any`); KV writes and deletes to *every* one, in
parallel here, failing with the last error code seen (Java's ``errResponse``); config, write-perm
and deleteTopic calls to each address given; GET_BROKER_RUNTIME_INFO, QUERY_TOPIC_CONSUME_BY_WHO
and DELETE_TOPIC_IN_BROKER to brokers. An error code fails with
:class:`~rocketpy.transport.client.RemotingCommandError` ("CODE: 17 DESC: ...")."""
import random

from twisted.internet.defer import Deferred, DeferredList, inlineCallbacks
from twisted.python.failure import Failure

from ..namesrv.javaprops import body_to_properties, format_properties
from ..remoting.bodies import ClusterInfo, GroupList, KVTable, TopicList, TopicRouteData
from ..remoting.codes import MQVersion, RequestCode, SerializeType
from ..remoting.command import RemotingCommand
from ..remoting.headers import (AddWritePermOfBrokerRequestHeader,
                                AddWritePermOfBrokerResponseHeader, DeleteKVConfigRequestHeader,
                                DeleteTopicFromNamesrvRequestHeader, DeleteTopicRequestHeader,
                                GetKVConfigRequestHeader, GetKVConfigResponseHeader,
                                GetKVListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
                                PutKVConfigRequestHeader, QueryTopicConsumeByWhoRequestHeader,
                                WipeWritePermOfBrokerRequestHeader,
                                WipeWritePermOfBrokerResponseHeader)
from ..remoting.javahash import hashmap_order
from ..transport.client import check_response

__all__ = ["MQAdmin", "ADMIN_TIMEOUT", "BROKER_CONCURRENCY", "BROKER_DEADLINE", "DeadlineError",
           "ORDER_TOPIC_CONFIG", "MASTER_ID", "select_broker_addr"]

#: ``DefaultMQAdminExt.timeoutMillis``
ADMIN_TIMEOUT = 5.0
#: Brokers asked at once by :meth:`MQAdmin.fetch_broker_runtime_stats_of` (each connection is
#: closed once answered, so about twice this bounds the descriptors a 20,000-broker cluster
#: takes: a closed connection's goes on the reactor's next turn).
BROKER_CONCURRENCY = 32
#: Seconds :meth:`MQAdmin.fetch_broker_runtime_stats_of` asks brokers for, in all: what has not
#: answered by then fails (2,000 silent brokers, 32 at a time x 5 s, took ~5 min; mqadmin asks
#: one by one and has no bound)
BROKER_DEADLINE = 30.0
#: ``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
#: ``MixAll.MASTER_ID``
MASTER_ID = 0


class DeadlineError(Exception):
    """A broker not asked, or not answering, before the overall deadline."""

    def __init__(self, addr, deadline):
        super().__init__(f"no answer within the overall deadline of {deadline:g} s")
        self.addr = addr


def select_broker_addr(broker_data, rng=random):
    """``BrokerData.selectBrokerAddr``: the master's address, else any member's."""
    addrs = broker_data.broker_addrs or {}
    if MASTER_ID in addrs:
        return addrs[MASTER_ID]
    return rng.choice(list(addrs.values())) if addrs else None


class MQAdmin:
    """Administrative calls against ``namesrv_addrs`` (mqadmin's ``-n "a;b"``), through ``client``
    (with the ACL signing hook when keys are configured), every request carrying ``version``
    (mqadmin 4.9.8: 409) in ``serialize_type`` headers (Java ``rocketmq.serialize.type``);
    at most ``concurrency`` brokers are asked at once, for ``deadline`` seconds in all."""

    def __init__(self, client, namesrv_addrs, *, version=MQVersion.V4_9_8,
                 serialize_type=SerializeType.JSON, timeout=ADMIN_TIMEOUT,
                 concurrency=BROKER_CONCURRENCY, deadline=BROKER_DEADLINE):
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency} is not a positive number")
        if not deadline > 0:
            raise ValueError(f"deadline {deadline} is not a positive number of seconds")
        self.concurrency = concurrency
        self.deadline = deadline
        self.client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.version = int(version)
        self.serialize_type = int(serialize_type)
        self.timeout = timeout

    def _request(self, code, header=None, body=None):
        return RemotingCommand.request(int(code), None if header is None else header.to_ext_fields(),
                                       body, version=self.version,
                                       serialize_type=self.serialize_type)

    @inlineCallbacks
    def _any(self, request, at=None):
        """Ask one NameServer (``at``, else any); the successful answer (else
        RemotingCommandError)."""
        if at is not None:
            answer = yield self._call(at, request)
            return answer
        addr, answer = yield self.client.invoke_any(self.namesrv_addrs, request, self.timeout)
        return check_response(answer, addr)

    @inlineCallbacks
    def _call(self, addr, request):
        answer = yield self.client.invoke(addr, request, self.timeout)
        return check_response(answer, addr)

    @inlineCallbacks
    def _every(self, request, addrs=None):
        """Ask every NameServer at once; fail with the last error (Java's errResponse)."""
        addrs = self.namesrv_addrs if addrs is None else addrs
        results = yield DeferredList([self._call(addr, request) for addr in addrs],
                                     consumeErrors=True)
        failures = [value for ok, value in results if not ok]
        if failures:
            failures[-1].raiseException()
        return [value for _, value in results]

    # -- cluster and routes ----------------------------------------------------------------------

    @inlineCallbacks
    def examine_broker_cluster_info(self, at=None):
        """GET_BROKER_CLUSTER_INFO (of the NameServer ``at``, else of any): a
        :class:`~rocketpy.remoting.bodies.ClusterInfo`."""
        answer = yield self._any(self._request(RequestCode.GET_BROKER_CLUSTER_INFO), at)
        return ClusterInfo.from_json(answer.body)

    @inlineCallbacks
    def examine_topic_route_info(self, topic, at=None):
        """GET_ROUTEINFO_BY_TOPIC (of ``at``, else of any NameServer): a
        :class:`~rocketpy.remoting.bodies.TopicRouteData`."""
        answer = yield self._any(self._request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                               GetRouteInfoRequestHeader(topic=topic)), at)
        return TopicRouteData.from_json(answer.body)

    @inlineCallbacks
    def fetch_all_topic_list(self, at=None):
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (of ``at``, else of any NameServer): a
        :class:`~rocketpy.remoting.bodies.TopicList`."""
        answer = yield self._any(self._request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), at)
        return TopicList.from_json(answer.body)

    @inlineCallbacks
    def get_topic_cluster_list(self, topic):
        """``getTopicClusterList``: cluster info, then the route; the clusters holding the
        route's first broker, in the order of Java's ``HashSet``."""
        info = yield self.examine_broker_cluster_info()
        route = yield self.examine_topic_route_info(topic)
        clusters = cluster_of(info, route, every=True)
        return hashmap_order(clusters)

    # -- NameServer configuration ------------------------------------------------------------------

    @inlineCallbacks
    def get_name_server_config(self, addrs=None):
        """GET_NAMESRV_CONFIG to each address: ``{addr: {key: value}}`` (the answer's order)."""
        request = self._request(RequestCode.GET_NAMESRV_CONFIG)
        answers = yield self._every(request, addrs)
        return {addr: body_to_properties(answer.body or b"")
                     for addr, answer in zip(addrs or self.namesrv_addrs, answers)}

    def update_name_server_config(self, properties, addrs=None):
        """UPDATE_NAMESRV_CONFIG (``key=value`` lines) to each address."""
        body = format_properties(properties.items()).encode("utf-8")
        return self._every(self._request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body), addrs)

    # -- KV config -------------------------------------------------------------------------------

    def put_kv_config(self, namespace, key, value):
        """PUT_KV_CONFIG to every NameServer."""
        return self._every(self._request(RequestCode.PUT_KV_CONFIG, PutKVConfigRequestHeader(
            namespace=namespace, key=key, value=value)))

    def delete_kv_config(self, namespace, key):
        """DELETE_KV_CONFIG to every NameServer."""
        return self._every(self._request(RequestCode.DELETE_KV_CONFIG, DeleteKVConfigRequestHeader(
            namespace=namespace, key=key)))

    @inlineCallbacks
    def get_kv_config(self, namespace, key):
        """GET_KV_CONFIG from one NameServer: the value."""
        answer = yield self._any(self._request(RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(
            namespace=namespace, key=key)))
        return GetKVConfigResponseHeader.from_ext_fields(answer.ext_fields, strict=False).value

    @inlineCallbacks
    def get_kv_list_by_namespace(self, namespace):
        """GET_KVLIST_BY_NAMESPACE from one NameServer: a :class:`KVTable`."""
        answer = yield self._any(self._request(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                               GetKVListByNamespaceRequestHeader(namespace=namespace)))
        return KVTable.from_json(answer.body) if answer.body else KVTable()

    # -- broker write permission -----------------------------------------------------------------

    @inlineCallbacks
    def wipe_write_perm_of_broker(self, addr, broker_name):
        """WIPE_WRITE_PERM_OF_BROKER to ``addr``: how many topics lost write permission."""
        answer = yield self._call(addr, self._request(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                                      WipeWritePermOfBrokerRequestHeader(
                                                          broker_name=broker_name)))
        return WipeWritePermOfBrokerResponseHeader.from_ext_fields(answer.ext_fields).wipe_topic_count

    @inlineCallbacks
    def add_write_perm_of_broker(self, addr, broker_name):
        """ADD_WRITE_PERM_OF_BROKER to ``addr``: how many topics got write permission back."""
        answer = yield self._call(addr, self._request(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                                      AddWritePermOfBrokerRequestHeader(
                                                          broker_name=broker_name)))
        return AddWritePermOfBrokerResponseHeader.from_ext_fields(answer.ext_fields).add_topic_count

    # -- topics ------------------------------------------------------------------------------------

    def delete_topic_in_name_server(self, addrs, topic, cluster_name):
        """DELETE_TOPIC_IN_NAMESRV to each address."""
        return self._every(self._request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                         DeleteTopicFromNamesrvRequestHeader(
                                             topic=topic, cluster_name=cluster_name)), addrs)

    def delete_topic_in_broker(self, broker_addrs, topic):
        """DELETE_TOPIC_IN_BROKER to each broker."""
        return self._every(self._request(RequestCode.DELETE_TOPIC_IN_BROKER,
                                         DeleteTopicRequestHeader(topic=topic)), broker_addrs)

    @inlineCallbacks
    def fetch_master_addr_by_cluster_name(self, cluster_name):
        """``CommandUtil.fetchMasterAddrByClusterName``: the cluster's master addresses (None
        when the NameServer knows no such cluster)."""
        info = yield self.examine_broker_cluster_info()
        names = (info.cluster_addr_table or {}).get(cluster_name)
        if names is None:
            return None
        masters = []
        for name in names:
            broker = (info.broker_addr_table or {}).get(name)
            if broker is not None and MASTER_ID in (broker.broker_addrs or {}):
                masters.append(broker.broker_addrs[MASTER_ID])
        return hashmap_order(dict.fromkeys(masters))

    # -- brokers -----------------------------------------------------------------------------------

    @inlineCallbacks
    def fetch_broker_runtime_stats(self, broker_addr):
        """GET_BROKER_RUNTIME_INFO to a broker: its statistics, a :class:`KVTable`."""
        answer = yield self._call(broker_addr, self._request(RequestCode.GET_BROKER_RUNTIME_INFO))
        return KVTable.from_json(answer.body)

    def fetch_broker_runtime_stats_of(self, broker_addrs):
        """:meth:`fetch_broker_runtime_stats` of every address, at most ``concurrency`` at once,
        each broker's connection closed once it answered; a Deferred of ``[(ok, KVTable or
        Failure)]`` in the order given (a DeferredList's). Once ``deadline`` seconds have passed,
        what is still asked is cut off and what is not asked yet is not: both fail with
        :class:`DeadlineError`, and the list is what was answered by then."""
        addrs = list(broker_addrs)
        results = [Deferred() for _ in addrs]
        asking = {}                                  # index -> addr, being asked
        state = {"next": 0, "late": False}

        def start():
            while state["next"] < len(addrs) and len(asking) < self.concurrency:
                i = state["next"]
                state["next"] += 1
                if state["late"]:
                    results[i].errback(DeadlineError(addrs[i], self.deadline))
                    continue
                asking[i] = addrs[i]
                self.fetch_broker_runtime_stats(addrs[i]).addBoth(answered, i)

        def answered(result, i):
            addr = asking.pop(i)
            if addr not in self.namesrv_addrs:
                self.client.close_channel(addr)
            if not isinstance(result, Failure):
                results[i].callback(result)
            elif state["late"]:
                results[i].errback(DeadlineError(addr, self.deadline))
            else:
                results[i].errback(result)
            if not pumping:          # a request that failed at once: start() goes on
                run()

        pumping = []

        def run():
            pumping.append(True)
            try:
                start()
            finally:
                pumping.clear()

        def expire():
            state["late"] = True
            for i, addr in list(asking.items()):
                if addr not in self.namesrv_addrs:
                    self.client.close_channel(addr)  # its request fails: cut off
            run()

        timer = self.client.clock.callLater(self.deadline, expire)
        run()
        done = DeferredList(results, consumeErrors=True)
        return done.addBoth(lambda result: (timer.active() and timer.cancel(), result)[1])

    @inlineCallbacks
    def query_topic_consume_by_who(self, topic):
        """``queryTopicConsumeByWho``: the route, then QUERY_TOPIC_CONSUME_BY_WHO to the first
        broker group's chosen member; its consumer groups (None when the route has no broker)."""
        route = yield self.examine_topic_route_info(topic)
        for broker in route.broker_datas or []:
            addr = select_broker_addr(broker)
            if addr is None:
                break
            answer = yield self._call(addr, self._request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                          QueryTopicConsumeByWhoRequestHeader(topic=topic)))
            return GroupList.from_json(answer.body).group_list
        return None


def cluster_of(info, route, every=False):
    """The cluster(s) holding the route's first broker group (``findTopicBelongToWhichCluster``
    and ``getTopicClusterList``): the first in the cluster table's ``HashMap`` order, or all."""
    if not route.broker_datas:
        raise ValueError("the route has no broker")
    name = route.broker_datas[0].broker_name
    table = info.cluster_addr_table or {}
    found = [cluster for cluster in hashmap_order(table) if name in table[cluster]]
    return found if every else (found[0] if found else None)
