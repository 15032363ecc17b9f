"""NameServer processor layer: request code -> handler (Java ``DefaultRequestProcessor``,
``ClientRequestProcessor`` and ``NettyRemotingAbstract.processRequestCommand``'s answer rules).

Handlers are grouped by what they need (:mod:`.kv`, :mod:`.broker`, :mod:`.route`,
:mod:`.topics`, :mod:`.admin`), each group getting only its own dependencies, never this
dispatcher. Each handler binds to its code's declaration in the protocol catalogue
(:func:`rocketpy.remoting.catalogue.responder`); the catalogue says which codes the release
serves and which header each carries, and building the processor fails at start when a served
code has no handler or a handler no declaration. The dispatcher decodes the header, calls the
handler and turns its :class:`~rocketpy.namesrv.replies.Reply` into the frame Java writes.

:meth:`DefaultRequestProcessor.process` never raises for bad input: a malformed header or body
(the codec's own errors) is a SYSTEM_ERROR with a Java-style remark (as Java answers a
processor exception). Anything else a handler raises is a bug: answered the same, but logged
with its traceback and counted (:attr:`DefaultRequestProcessor.handler_failures`). Oneway
requests get no answer; unknown codes get REQUEST_CODE_NOT_SUPPORTED, except under 4.9, whose
processor returns null and sends nothing.

A handler may return a :class:`~rocketpy.namesrv.pending.Pending` (the decode of a request body
past a few hundred bytes, a KV or config file write); ``process`` finishes it at once or, with
``offload=True``, hands back the Pending of the answer for the transport to run on its lane's
pool (and the Pending a finish hands back, on its own lane).

Before a handler runs, :class:`~rocketpy.namesrv.acl.AccessControl` (administrative requests) and
:class:`~rocketpy.namesrv.broker_access.BrokerAccessPolicy` (broker requests) may refuse it with
NO_PERMISSION (rocketpy's additions, off unless configured); what only a request's body says
(the groups a REGISTER_TOPIC_IN_NAMESRV or a static topic mapping names, the keys an
UPDATE_NAMESRV_CONFIG sets) the handler asks the guard once the body is decoded."""
import logging

from rocketpy.remoting.catalogue import NAMESRV, bind
from rocketpy.remoting.codes import OVERLOAD_REMARK, ResponseCode, not_supported_remark
from rocketpy.remoting.command import FLAG_RESPONSE, JAVA, RemotingCommand
from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.headers import REQUEST_HEADERS

from ..acl import AccessControl
from ..broker_access import BrokerAccessPolicy
from ..config import Configuration
from ..pending import Pending
from ..policy import as_policies
from ..replies import Reply, ReusableResponse, failure_remark
from ..route_bounds import RouteBounds
from .admin import AdminHandlers
from .broker import BrokerHandlers
from .configguard import ConfigUpdateGuard
from .kv import KVHandlers
from .registration import (RegistrationReader, decode_budget_from_properties,
                           max_topics_from_properties)
from .route import RouteHandlers
from .topics import TopicHandlers

__all__ = ["DefaultRequestProcessor", "Reply"]

log = logging.getLogger("rocketpy.namesrv")

class DefaultRequestProcessor:
    """Answers NameServer requests as the Java NameServer of a release answers them.

    :param submit_unregistration: ``submit(request) -> bool``: the batch unregistration queue.
    :param profile: the :class:`~rocketpy.namesrv.policy.Policies` (or a profile; default: the
        route tables').
    :param configuration: the :class:`~rocketpy.namesrv.config.Configuration`; its
        ``NamesrvConfig`` should be the route tables', so runtime updates reach them."""

    def __init__(self, route_info_manager, kv_config_manager, *, submit_unregistration=None,
                 profile=None, configuration=None, startup_ms=0, access_control=None,
                 config_guard=None, route_bounds=None, broker_access=None):
        rim = route_info_manager
        self.route_info_manager = rim
        self.kv_config_manager = kv_config_manager
        self.policies = policies = rim.policies if profile is None else as_policies(profile)
        if configuration is None:
            # one NamesrvConfig object for both, so UPDATE_NAMESRV_CONFIG reaches the tables
            configuration = Configuration(rim.config, None, profile=policies.config)
        self.configuration = configuration
        config = configuration.namesrv_config
        self._wire = policies.wire
        #: the fastjson release whose parser the transport reads JSON headers with
        self.header_dialect = policies.wire.header_dialect
        self._answers_unknown_code = policies.handlers.answers_unknown_code
        unregister = policies.routes.unregistration(
            rim.unregister_brokers, submit_unregistration or (lambda request: False))
        self.reader = RegistrationReader(
            policies.routes, policies.wire, lambda key: rim.broker_live_info(*key) is not None,
            max_topics_from_properties(configuration.all_configs),
            decode_budget_from_properties(configuration.all_configs),
            repeats_applied=rim.repeats_applied)
        # Java reads the black list once, when the processor is built
        self.config_guard = config_guard or ConfigUpdateGuard.from_configuration(configuration)
        self.route_bounds = route_bounds or RouteBounds.from_properties(configuration.all_configs)
        # read once, like the black list; AclConfigError (a bad setting) stops the start
        if access_control is None:
            access_control = AccessControl.from_properties(configuration.all_configs)
        self.access_control = access_control
        if broker_access is None:
            broker_access = BrokerAccessPolicy.from_properties(configuration.all_configs, rim)
        self.broker_access = broker_access
        bindings = bind((
            KVHandlers(kv_config_manager),
            BrokerHandlers(rim, kv_config_manager, config, self.reader, unregister, policies,
                           self.route_bounds, broker_access),
            RouteHandlers(rim, kv_config_manager, config, policies, startup_ms,
                          bool(config.cluster_test)),   # Java reads clusterTest once
            TopicHandlers(rim, config, policies.handlers, self.route_bounds, self.header_dialect,
                          policies.wire.null_body_remark, broker_access),
            AdminHandlers(configuration, rim.invalidate_routes, self.config_guard,
                          self.header_dialect, access_control)), NAMESRV, policies.release)
        #: request code -> handler(header, request, channel, now_ms), for the codes the release
        #: serves
        self.handlers = {code: b.handler for code, b in bindings.items()}
        self._headers = {code: REQUEST_HEADERS[code] for code in bindings
                         if code in REQUEST_HEADERS}
        self._java_decoded = frozenset(code for code, b in bindings.items() if b.java_decode)
        #: the codes whose handler may change state (``responder(writes=True)``)
        self.writes = frozenset(code for code, b in bindings.items() if b.handler.writes)
        #: handler bugs (anything but the codec's errors) since start, by request code
        self.handler_failures = {}
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
        code = request.code
        handler = self.handlers.get(code)
        if handler is not None and code in self._guarded:
            for guard in self._guards:
                refusal = guard.decide(request, channel, now_ms) if code in guard.codes else None
                if refusal is not None:
                    log.warning("request %s from %s refused: %s", code,
                                getattr(channel, "remote_addr", channel), refusal)
                    return self._answer(request, Reply(ResponseCode.NO_PERMISSION, refusal))
        failed = False
        try:
            if handler is None:
                if not self._answers_unknown_code:
                    return None
                reply = Reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(code))
            else:
                header_class = self._headers.get(code)
                header = (None if header_class is None
                          else header_class.from_ext_fields(
                              request.ext_fields, strict=code not in self._java_decoded))
                reply = handler(header, request, channel, now_ms)
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
        """SYSTEM_ERROR with a Java-like remark for a request that raised: the codec's own
        errors (bad input) are a warning; anything else is a handler bug, logged with its
        traceback and counted."""
        if isinstance(exc, RemotingCodecError):
            log.warning("request %s from %s failed: %s", request.code,
                        getattr(channel, "remote_addr", channel), exc)
        else:
            code = request.code
            self.handler_failures[code] = self.handler_failures.get(code, 0) + 1
            log.error("request %s from %s: handler failed", code,
                      getattr(channel, "remote_addr", channel), exc_info=exc)
        return Reply(ResponseCode.SYSTEM_ERROR, failure_remark(exc))

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
                reply = pending.finish(result)
                if reply.__class__ is Pending:   # more work (a body decoded, then written)
                    return self._later(reply, request, channel)
                return self._answer(request, reply)
            except Exception as exc:
                return fail(exc)

        return Pending(pending.work, finish, pending.lane, fail, pending.cancel, pending.budget)

    def overload_response(self, request):
        """Java's answer when its request pool is full (SYSTEM_BUSY "[OVERLOAD]..."), for a
        transport that sheds load; None for a oneway request, which Java drops silently."""
        if request.is_oneway:
            return None
        return self.respond(request, Reply(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK), failed=True)

    def respond(self, request, reply, failed=False):
        """``reply`` as the frame Java writes: same opaque, the server's version, the release's
        serialisation. A reply computed from one route snapshot alone (``reuse``) comes back as
        a :class:`~.replies.ReusableResponse`, unless access control looks at this code."""
        wire = self._wire
        header, body = reply.header, reply.body
        if body is not None and body.__class__ is not bytes:
            body = body.to_json()
        ext = None if header is None else header.to_ext_fields()
        stype = wire.serialize_type(request, failed)
        if reply.reuse is not None and request.code not in self._guarded:
            return ReusableResponse(int(reply.code), JAVA, wire.own_version, request.opaque,
                                    FLAG_RESPONSE, reply.remark, ext, body, stype,
                                    reuse=reply.reuse)
        return RemotingCommand(int(reply.code), JAVA, wire.own_version, request.opaque,
                               FLAG_RESPONSE, reply.remark, ext, body, stype)
