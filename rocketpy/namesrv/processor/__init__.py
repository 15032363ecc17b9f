"""NameServer processor layer: request code -> handler (Java ``DefaultRequestProcessor``,
``ClientRequestProcessor`` and ``NettyRemotingAbstract.processRequestCommand``'s answer rules).

One table maps each request code the Java 5.x NameServer serves to one small handler
``handler(processor, request, channel, now_ms) -> Reply``; the handlers live in modules by
group (:mod:`.kv`, :mod:`.broker`, :mod:`.route`, :mod:`.topics`, :mod:`.admin`). The table
depends on the :class:`~rocketpy.namesrv.profile.BehaviourProfile`: 217/901/904 exist from
5.0, 47 only in 5.0.

:meth:`DefaultRequestProcessor.process` never raises for bad input: a malformed header or body
becomes a SYSTEM_ERROR answer with a Java-style remark (Java answers a processor exception the
same way). Oneway requests are applied and get no answer. Unknown codes get
REQUEST_CODE_NOT_SUPPORTED with the opaque echoed, except under the 4.9 profile, where the
Java processor returns null and nothing is sent.

A handler may return a :class:`~rocketpy.namesrv.pending.Pending`: REGISTER_BROKER with a big
body (its decode), PUT_KV_CONFIG, DELETE_KV_CONFIG and UPDATE_NAMESRV_CONFIG (their file write,
answered once it is durable). ``process`` finishes it at once, or, for a transport that asked
(``offload=True``), hands back the Pending of the answer so the work can run on the pool of its
lane (the decode pool, the writer thread).

Before a handler runs, the :class:`~rocketpy.namesrv.acl.AccessControl` may refuse an
administrative request, and the :class:`~rocketpy.namesrv.broker_access.BrokerAccessPolicy` a
broker request, with NO_PERMISSION (rocketpy's additions, off unless configured).
"""
import logging

from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import FLAG_RESPONSE, JAVA, JSON, RemotingCommand
from rocketpy.remoting.errors import (BodyDecodeError, InvalidFieldError, MissingFieldError,
                                      RemotingCodecError)
from rocketpy.remoting.javahash import hashmap_ordered

from ..acl import AccessControl
from ..broker_access import BrokerAccessPolicy
from ..config import Configuration
from ..configguard import ConfigUpdateGuard
from ..pending import Pending
from ..route_bounds import RouteBounds
from ..route_cache import RouteCache
from . import admin, broker, kv, route, topics
from .registration import RegistrationBodies, max_topics_from_properties
from .replies import Reply, java_exception_remark

__all__ = ["DefaultRequestProcessor", "handler_table", "Reply"]

log = logging.getLogger("rocketpy.namesrv")

_COMMON = {
    RequestCode.PUT_KV_CONFIG: kv.put_kv_config,
    RequestCode.GET_KV_CONFIG: kv.get_kv_config,
    RequestCode.DELETE_KV_CONFIG: kv.delete_kv_config,
    RequestCode.GET_KVLIST_BY_NAMESPACE: kv.get_kv_list_by_namespace,
    RequestCode.REGISTER_BROKER: broker.register_broker,
    RequestCode.UNREGISTER_BROKER: broker.unregister_broker,
    RequestCode.QUERY_DATA_VERSION: broker.query_data_version,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: route.get_route_info_by_topic,
    RequestCode.GET_BROKER_CLUSTER_INFO: route.get_broker_cluster_info,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: topics.wipe_write_perm_of_broker,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: topics.add_write_perm_of_broker,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: topics.get_all_topic_list_from_nameserver,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: topics.delete_topic_in_namesrv,
    RequestCode.GET_TOPICS_BY_CLUSTER: topics.get_topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: topics.get_system_topic_list_from_ns,
    RequestCode.GET_UNIT_TOPIC_LIST: topics.get_unit_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: topics.get_has_unit_sub_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: topics.get_has_unit_sub_un_unit_topic_list,
    RequestCode.UPDATE_NAMESRV_CONFIG: admin.update_namesrv_config,
    RequestCode.GET_NAMESRV_CONFIG: admin.get_namesrv_config,
}
_SINCE_5 = {
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: topics.register_topic_in_namesrv,
    RequestCode.GET_BROKER_MEMBER_GROUP: broker.get_broker_member_group,
    RequestCode.BROKER_HEARTBEAT: broker.broker_heartbeat,
}
_ONLY_5_0 = {RequestCode.GET_CLIENT_CONFIG: admin.get_client_config}
#: Handlers whose answers a transport may reuse: code -> (handler, its module's stamp function)
#: (see :meth:`DefaultRequestProcessor.answer_stamp`).
_STAMPS = {int(RequestCode.GET_ROUTEINFO_BY_TOPIC): (route.get_route_info_by_topic, route.answer_stamp)}


def handler_table(profile):
    """The codes a NameServer of ``profile`` serves, each with its handler."""
    table = {int(code): fn for code, fn in _COMMON.items()}
    if profile.serve_5x_codes:
        table.update({int(code): fn for code, fn in _SINCE_5.items()})
    if profile.serve_get_client_config:
        table.update({int(code): fn for code, fn in _ONLY_5_0.items()})
    return table


_REMOTING_EXCEPTION = "org.apache.rocketmq.remoting.exception.RemotingCommandException"


def _failure_remark(exc):
    """A Java-like ``exceptionSimpleDesc`` for what went wrong with the request."""
    if isinstance(exc, MissingFieldError):
        return java_exception_remark(_REMOTING_EXCEPTION, f"the custom field <{exc.field}> is null")
    if isinstance(exc, InvalidFieldError):
        return java_exception_remark(
            _REMOTING_EXCEPTION, f"the custom field <{exc.field}> is not a valid value: {exc.value!r}")
    if isinstance(exc, BodyDecodeError):
        return java_exception_remark("com.alibaba.fastjson.JSONException", str(exc))
    return java_exception_remark(f"{type(exc).__module__}.{type(exc).__name__}", str(exc) or None)


class DefaultRequestProcessor:
    """Answers NameServer requests as the Java NameServer of ``profile`` answers them.

    The :class:`~rocketpy.namesrv.config.NamesrvConfig` of ``configuration`` (or
    ``namesrv_config``, by default the route manager's) should be the object the
    :class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager` reads, so that runtime config
    updates (supportActingMaster, deleteTopicWithBrokerRegistration...) reach the tables.
    """

    def __init__(self, route_info_manager, kv_config_manager, namesrv_config=None,
                 netty_server_config=None, submit_unregistration=None,
                 notify_min_broker_id_changed=None, *, profile=None, configuration=None,
                 startup_ms=0, route_cache=None, access_control=None, config_guard=None,
                 route_bounds=None, broker_access=None):
        self.route_info_manager = route_info_manager
        self.kv_config_manager = kv_config_manager
        self.profile = profile or route_info_manager.profile
        if configuration is None:
            # one NamesrvConfig object for both, so UPDATE_NAMESRV_CONFIG reaches the tables
            configuration = Configuration(namesrv_config or route_info_manager.config,
                                          netty_server_config, profile=self.profile)
        self.configuration = configuration
        self.namesrv_config = configuration.namesrv_config
        self.netty_server_config = configuration.netty_server_config
        self.submit_unregistration = submit_unregistration or (lambda request: False)
        if notify_min_broker_id_changed is not None:
            route_info_manager.notify_min_broker_id_changed = notify_min_broker_id_changed
        self.startup_ms = startup_ms
        # Java reads these once, when the processor is built
        self.config_guard = config_guard or ConfigUpdateGuard.from_configuration(configuration)
        self.cluster_test = bool(self.namesrv_config.cluster_test)
        self.route_cache = route_cache or RouteCache(route_info_manager)
        self.registration_bodies = RegistrationBodies()
        self.register_max_topics = max_topics_from_properties(configuration.all_configs)
        self.route_bounds = route_bounds or RouteBounds.from_properties(configuration.all_configs)
        self.handlers = handler_table(self.profile)
        # read once, like the black list; AclConfigError (a bad setting) stops the start
        if access_control is None:
            access_control = AccessControl.from_properties(configuration.all_configs)
        self.access_control = access_control
        if broker_access is None:
            broker_access = BrokerAccessPolicy.from_properties(configuration.all_configs,
                                                               route_info_manager)
        self.broker_access = broker_access
        # guards that may refuse a request before its handler runs, each with the codes it
        # looks at: administrative requests, broker requests
        self._guards = tuple(g for g in (access_control, broker_access) if g.codes)
        self._guarded = frozenset().union(*(g.codes for g in self._guards))

    def process(self, request, channel, now_ms, offload=False):
        """The answer to ``request`` from ``channel`` at ``now_ms``; None when nothing is sent.

        A request with costly pure work (a big registration body) is answered after that work;
        with ``offload`` it is answered by a :class:`~rocketpy.namesrv.pending.Pending` of the
        answer instead, for a caller that runs its ``work`` on another thread.
        """
        handler = self.handlers.get(request.code)
        if handler is not None and request.code in self._guarded:
            for guard in self._guards:
                refusal = guard.decide(request, channel) if request.code in guard.codes else None
                if refusal is not None:
                    log.warning("request %s from %s refused: %s", request.code,
                                getattr(channel, "remote_addr", channel), refusal)
                    return self._answer(request, Reply(ResponseCode.NO_PERMISSION, refusal))
        failed = False
        try:
            if handler is None:
                if not self.profile.answer_unknown_code:
                    return None
                reply = Reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                              f" request type {request.code} not supported")
            else:
                reply = handler(self, request, channel, now_ms)
        except Exception as exc:  # never let a request take the server down
            reply = self._failure(exc, request, channel)
            failed = True
        if reply.__class__ is Pending:
            pending = self._later(reply, request, channel)
            return pending if offload else pending.run()
        return self._answer(request, reply, failed)

    def _answer(self, request, reply, failed=False):
        return None if request.is_oneway else self.respond(request, reply, failed)

    def _failure(self, exc, request, channel):
        """SYSTEM_ERROR with a Java-like remark for a request that raised; a codec error
        (bad input) is a warning, anything else a bug, logged with its traceback."""
        if isinstance(exc, (RemotingCodecError, ValueError, TypeError, KeyError, AttributeError)):
            log.warning("request %s from %s failed: %s", request.code,
                        getattr(channel, "remote_addr", channel), exc)
        else:
            log.error("request %s failed", request.code, exc_info=exc)
        return Reply(ResponseCode.SYSTEM_ERROR, _failure_remark(exc))

    def _later(self, pending, request, channel):
        """A handler's Pending reply as the Pending of the answer frame, on the same lane with
        the same work: an exception in its work (on whatever thread) or its finish is answered
        as a handler's would be (or by the handler's own ``fail``)."""
        def fail(exc):
            if pending.fail is not None:
                try:
                    return self._answer(request, pending.fail(exc), True)
                except Exception as raised:
                    exc = raised
            return self._answer(request, self._failure(exc, request, channel), True)

        def finish(result):
            try:
                return self._answer(request, pending.finish(result))
            except Exception as exc:
                return fail(exc)

        return Pending(pending.work, finish, pending.lane, fail)

    def answer_stamp(self, request, channel, now_ms):
        """For a transport that reuses encoded answers (:mod:`rocketpy.transport.answercache`):
        a zero-argument callable whose value changes whenever the answer to ``request`` may
        change, or None when that answer must be computed afresh. Each handler module knows
        its own inputs (:func:`.route.answer_stamp`); only route queries are worth it."""
        code = request.code
        entry = _STAMPS.get(code)
        if (entry is None or self.handlers.get(code) is not entry[0]
                or code in self._guarded or request.is_oneway):
            return None
        return entry[1](self, request, channel, now_ms)

    def overload_response(self, request):
        """Java's answer when its request pool is full (SYSTEM_BUSY "[OVERLOAD]..."), for a
        transport that sheds load; None for a oneway request, which Java drops silently."""
        if request.is_oneway:
            return None
        return self.respond(request, Reply(ResponseCode.SYSTEM_BUSY,
                                           "[OVERLOAD]system busy, start flow control for a while"),
                            failed=True)

    def respond(self, request, reply, failed=False):
        """``reply`` as the frame Java writes: same opaque, the server's version; 4.9 keeps the
        request's serialisation on success (its error path uses the server's own, JSON)."""
        if self.profile.reply_in_request_serialize_type and not failed:
            serialize_type = request.serialize_type
        else:
            serialize_type = JSON
        ext = reply.ext_fields
        if ext:
            ext = hashmap_ordered(ext)
        return RemotingCommand(code=int(reply.code), language=JAVA,
                               version=self.profile.server_version, opaque=request.opaque,
                               flag=FLAG_RESPONSE, remark=reply.remark, ext_fields=ext,
                               body=reply.body, serialize_type=serialize_type)
