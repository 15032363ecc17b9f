"""Broker layer: what a simulated broker answers on its own address (``rocketpy-brokersim
--listen``), so that the admin commands which ask brokers -- ``clusterList``
(GET_BROKER_RUNTIME_INFO), ``deleteTopic`` (DELETE_TOPIC_IN_BROKER), ``topicList -c``
(QUERY_TOPIC_CONSUME_BY_WHO), ``updateTopic`` (UPDATE_AND_CREATE_TOPIC) -- succeed against a
simulated cluster, as they do against Java's ``AdminBrokerProcessor``; in controller mode it also
takes the controller's NOTIFY_BROKER_ROLE_CHANGED pushes (the port is the broker's one listen
port). Anything else gets REQUEST_CODE_NOT_SUPPORTED, as a broker answers a code it has no
processor for.

:class:`BrokerRequestProcessor` is a transport
:class:`~rocketpy.transport.interfaces.IRequestProcessor`: one simulated broker's listening
:class:`~rocketpy.transport.factory.RemotingServerFactory` hands it every request."""
from zope.interface import implementer

from ..remoting.bodies import TOPIC_FILTER_TYPES, GroupList, KVTable, TopicConfig
from ..remoting.codes import MQVersion, RequestCode, ResponseCode, not_supported_remark
from ..remoting.errors import RemotingCodecError
from ..remoting.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from ..transport.interfaces import IRequestProcessor

__all__ = ["BrokerRequestProcessor", "runtime_info", "SLAVE_REMARK"]

#: ``AdminBrokerProcessor.validateSlave``: topics are changed on masters only.
SLAVE_REMARK = ("Can't modify topic or subscription group from slave broker, please execute it "
                "from master broker.")


def runtime_info(version, boot_ms):
    """``AdminBrokerProcessor.prepareRuntimeInfo`` of an idle broker of release ``version``
    booted at ``boot_ms``: the keys ``clusterList`` (plain and ``-m``) reads, with nothing
    stored, sent or queued."""
    try:
        desc = MQVersion(version).name
    except ValueError:
        desc = str(version)
    zero_tps = "0.0 0.0 0.0"
    info = {"brokerVersionDesc": desc, "brokerVersion": str(int(version)),
            "bootTimestamp": str(boot_ms), "earliestMessageTimeStamp": str(boot_ms),
            "startAcceptSendRequestTimeStamp": "0", "commitLogDiskRatio": "0.0",
            "consumeQueueDiskRatio": "0.0", "commitLogMinOffset": "0", "commitLogMaxOffset": "0",
            "dispatchBehindBytes": "0", "pageCacheLockTimeMills": "0", "putTps": zero_tps,
            "getTransferedTps": zero_tps, "getFoundTps": zero_tps, "getMissTps": zero_tps,
            "getTotalTps": zero_tps}
    for when in ("YesterdayMorning", "TodayMorning", "TodayNow"):
        info[f"msgPutTotal{when}"] = info[f"msgGetTotal{when}"] = "0"
    for pool in ("send", "pull", "query"):
        info[f"{pool}ThreadPoolQueueSize"] = "0"
        info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
    return info


@implementer(IRequestProcessor)
class BrokerRequestProcessor:
    """Answers the broker-side admin requests for ``broker``, a
    :class:`~rocketpy.broker.sim.SimulatedBroker` (its topic manager, release and boot time).

    DELETE_TOPIC_IN_BROKER removes the topic from the broker's table (its data version moves
    on, so the next registration leaves it out), as ``deleteTopicConfig`` does;
    UPDATE_AND_CREATE_TOPIC adds or replaces it and registers at once. A slave refuses both."""

    def __init__(self, broker):
        self.broker = broker

    def process(self, request, channel, now_ms):
        code = request.code
        if code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED and self.broker.controller is not None:
            self.broker.controller.on_role_changed(request)   # the controller's oneway push
            return None
        if request.is_oneway:
            return None
        version = self.broker.sim.release.version
        if code == RequestCode.GET_BROKER_RUNTIME_INFO:
            body = KVTable(table=runtime_info(version, self.broker.boot_ms)).to_json()
            return request.create_response(int(ResponseCode.SUCCESS), body=body, version=version)
        if code in (RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_TOPIC) \
                and not self.broker.is_master:
            return request.create_response(int(ResponseCode.SYSTEM_ERROR), remark=SLAVE_REMARK,
                                           version=version)
        if code == RequestCode.UPDATE_AND_CREATE_TOPIC:
            return self._create_topic(request, version)
        if code in (RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO):
            try:
                topic = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields).topic
            except RemotingCodecError as exc:   # the same header for both: a topic, required
                return request.create_response(int(ResponseCode.SYSTEM_ERROR), remark=str(exc),
                                               version=version)
            if code == RequestCode.QUERY_TOPIC_CONSUME_BY_WHO:   # no consumer ever subscribed
                return request.create_response(int(ResponseCode.SUCCESS),
                                               body=GroupList(group_list=[]).to_json(),
                                               version=version)
            self.broker.delete_topic(topic)
            return request.create_response(int(ResponseCode.SUCCESS), version=version)
        return request.create_response(int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
                                       remark=not_supported_remark(code), version=version)

    def _create_topic(self, request, version):
        try:
            header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
            if header.topic_filter_type not in TOPIC_FILTER_TYPES:   # the header's checkFields
                raise ValueError(f"topicFilterType = [{header.topic_filter_type}] value invalid")
        except ValueError as exc:   # RemotingCodecError included
            return request.create_response(int(ResponseCode.SYSTEM_ERROR), remark=str(exc),
                                           version=version)
        self.broker.update_topic(TopicConfig(
            topic_name=header.topic, read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums, perm=header.perm,
            topic_filter_type=header.topic_filter_type,
            topic_sys_flag=header.topic_sys_flag or 0))   # order is not taken (Java's neither)
        return request.create_response(int(ResponseCode.SUCCESS), version=version)
