"""NameServer processor layer: requests brokers send (Java ``DefaultRequestProcessor``
registerBroker, unregisterBroker, queryBrokerTopicConfig, brokerHeartbeat,
getBrokerMemberGroup), and the one the NameServer sends them (NOTIFY_MIN_BROKER_ID_CHANGE).

A big registration body is decoded by a :class:`~rocketpy.namesrv.pending.Pending`, and the
answer follows it; meanwhile the header alone already shows the broker alive, so the live entry
its channel holds is refreshed at once (the decode may wait behind other peers' work, or be
refused SYSTEM_BUSY, longer than the broker's timeout: issue 20). A registration that would pass
a server-wide bound
(:mod:`rocketpy.namesrv.route_bounds`) is refused before it is applied.

A 5.x master's registration with a new data version walks every topic (Java
``createAndUpdateQueueData``), present and unchanged ones too: 100,000 topics held the reactor
~100 ms at 10 M pairs. From :data:`NARROW_WALK_FROM` topics the decode's work also finds, off the
reactor, the topics whose queue data would change (``RouteInfoManager.walk_view``), and the
reactor walks only those, unless this broker's queue data or live entry changed meanwhile.
Likewise the topics the tables lack (a broker's first registration: ~3 µs a topic in the walk,
1.5 s for 500,000) are found off the reactor and added in bulk
(:class:`~rocketpy.namesrv.shapes.FreshTopics`): the registration is still applied in one step,
as Java applies it under its write lock, so no reader sees part of it."""
import logging
from dataclasses import replace
from functools import partial

from rocketpy.remoting import bodies
from rocketpy.remoting.catalogue import responder
from rocketpy.remoting.codes import RequestCode, ResponseCode
from rocketpy.remoting.command import FLAG_ONEWAY, RemotingCommand
from rocketpy.remoting.headers import (NotifyMinBrokerIdChangeRequestHeader,
                                       QueryDataVersionResponseHeader, RegisterBrokerResponseHeader)

from ..model import ORDER_TOPIC_CONFIG, DataVersion, UnRegisterBrokerRequest
from ..pending import Pending, decoded
from ..replies import NOT_SET_REMARK, Reply, error, ok
from .registration import registration_of, with_body

__all__ = ["BrokerHandlers", "MinBrokerIdNotifier"]

log = logging.getLogger("rocketpy.namesrv")


#: topics of a registration from which its walk is narrowed off the reactor
NARROW_WALK_FROM = 20_000


#: the answer that names no master (a master's, a slave's without a live master): never
#: changed, shared by every registration
_MASTER_LESS = RegisterBrokerResponseHeader()


#: the header fields without which Java's registerBroker registers nothing (its wire names are
#: the header's own)
_REGISTERS_UNDER = ("cluster_name", "broker_addr", "broker_name")


class BrokerHandlers:
    """:param reader: the :class:`~.registration.RegistrationReader` of registration bodies.
    :param unregister: ``unregister(request) -> bool``: applied or queued (False: queue full).
    :param policies: the :class:`~rocketpy.namesrv.policy.Policies`.
    :param route_bounds: the server-wide :class:`~rocketpy.namesrv.route_bounds.RouteBounds`.
    :param broker_access: the :class:`~rocketpy.namesrv.broker_access.BrokerAccessPolicy`, asked
        about the groups a registration's static topic mappings name."""

    def __init__(self, route_info_manager, kv_config_manager, namesrv_config, reader, unregister,
                 policies, route_bounds, broker_access):
        self.routes = route_info_manager
        self.kv = kv_config_manager
        self.config = namesrv_config
        self.reader = reader
        self.unregister = unregister
        self.registration = policies.routes
        self.wire = policies.wire
        self.liveness = policies.liveness
        self.bounds = route_bounds
        self.access = broker_access
        #: topics from which a registration's walk is narrowed off the reactor
        self.narrow_walk_from = NARROW_WALK_FROM

    @responder(RequestCode.REGISTER_BROKER, java_decode=True, writes=True)
    def register_broker(self, header, request, channel, now_ms):
        registration = registration_of(header, request, channel, now_ms)
        decoded = self.reader.decode(request, header, registration)   # checks bodyCrc32 first,
        unusable = self._unusable_registration(header)                 # as Java
        if unusable is not None:
            if isinstance(decoded, Pending):
                return decoded.then(partial(self._unregistered, header, unusable))
            return self._unregistered(header, unusable, decoded)
        if isinstance(decoded, Pending):  # a big body: decoded first, maybe on another thread
            self._refresh_own(registration)
            view = self.routes.walk_view(registration)
            decoded = self._narrowed(decoded, view, self.routes.fresh_view())
            return decoded.then(partial(self._register, request, channel, registration))
        return self._register(request, channel, registration, decoded)

    def _unusable_registration(self, header):
        """What Java answers a registration whose header lacks a field it needs, after the
        body is read: without ``brokerId`` the processor's NullPointerException (the header's
        Long unboxed, nothing changed); without a cluster, address or name SUCCESS, as
        ``registerBroker`` catches and logs what it throws (5.x: a ConcurrentHashMap's null
        key, ``BrokerAddrInfo.hashCode``) or files the broker under null keys (4.9.8's
        HashMaps), and rocketpy registers nothing (Java's tables are left half-changed or
        holding nulls). None when the header has them all."""
        if header.broker_id is None:
            return error(ResponseCode.SYSTEM_ERROR, self.wire.null_register_id_remark)
        missing = [field.wire for field in header.FIELDS
                   if field.attr in _REGISTERS_UNDER and getattr(header, field.attr) is None]
        if not missing:
            return None
        log.warning("REGISTER_BROKER without %s (brokerId %s) registers nothing: answered "
                    "SUCCESS, as Java", " or ".join(missing), header.broker_id)
        body = None
        if self.registration.answers_order_topic_config(self.config):
            body = self.kv.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
        return ok(body, _MASTER_LESS)

    def _unregistered(self, header, reply, decoded):
        """``reply`` once the body is read (its own failure answers first); the body is not
        kept: it registered nothing."""
        self.reader.cache.forget((header.cluster_name, header.broker_addr))
        return decoded if isinstance(decoded, Reply) else reply

    def _narrowed(self, pending, view, find_fresh):
        """``pending`` (the decode) whose work also finds the topics the tables lack
        (``find_fresh``, added in bulk) and, with a walk ``view`` (``(prefilter,
        still_valid)``), the topics to walk; its result carries only those when that still
        holds on the reactor."""
        walk_from = self.narrow_walk_from
        prefilter, still_valid = view if view is not None else (None, None)

        def work():
            decoded = pending.work()
            if isinstance(decoded, Reply) or len(decoded[0].topic_config_table) < walk_from:
                return decoded, None, None
            table = decoded[0].topic_config_table
            changed = prefilter(decoded[0]) if prefilter is not None else None
            return decoded, changed, find_fresh(table if changed is None else changed)

        def finish(result):
            decoded, changed, fresh = result
            decoded = pending.finish(decoded)
            if isinstance(decoded, Reply):
                return decoded
            wrapper, filters = decoded
            if changed is not None:
                if not still_valid():   # the walk of all; ``fresh`` was found in the changed
                    return decoded
                wrapper = replace(wrapper, topic_config_table=changed)
            return replace(wrapper, fresh=fresh), filters
        return Pending(work, finish, pending.lane, pending.fail, pending.cancel,
                       pending.budget)

    def _refresh_own(self, registration):
        """Refresh the live entry of the registering broker if its channel holds it: a channel
        never keeps alive a broker another channel registered."""
        cluster_name, broker_addr = registration.cluster_name, registration.broker_addr
        live = self.routes.broker_live_info(cluster_name, broker_addr)
        if live is not None and live.channel_id is not None \
                and live.channel_id == registration.channel_id:
            self.routes.update_broker_info_update_timestamp(cluster_name, broker_addr,
                                                            registration.now_ms)

    def _register(self, request, channel, registration, decoded):
        if isinstance(decoded, Reply):
            return decoded
        registration = with_body(registration, *decoded)
        key = (registration.cluster_name, registration.broker_addr)
        refusal = self.access.mapping_refusal(
            registration.broker_name, registration.wrapper.topic_queue_mapping_info_map, channel)
        if refusal is not None:
            self.reader.cache.forget(key)
            log.warning("request %s from %s refused: %s", request.code,
                        getattr(channel, "remote_addr", channel), refusal)
            return error(ResponseCode.NO_PERMISSION, refusal)
        refusal = self.bounds.registration_refusal(self.routes, registration)
        if refusal is not None:   # and its body is not kept: it registered nothing
            self.reader.cache.forget(key)
            return refusal
        result = self.routes.register_broker(registration)
        if result is None:
            return error(ResponseCode.SYSTEM_ERROR, "register broker failed",
                         RegisterBrokerResponseHeader())
        body = None
        if self.registration.answers_order_topic_config(self.config):
            body = self.kv.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
        if result.master_addr is None and result.ha_server_addr is None:
            return ok(body, _MASTER_LESS)
        return ok(body, RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr,
                                                     master_addr=result.master_addr))

    @responder(RequestCode.UNREGISTER_BROKER, java_decode=True, writes=True)
    def unregister_broker(self, header, request, channel, now_ms):
        """A header without ``brokerId``: 4.9.8 unboxes it before unregistering (its
        NullPointerException); 5.x queues it and answers SUCCESS. A request without a field
        the route manager needs changes nothing (:meth:`RouteInfoManager.unregister_brokers`)."""
        if header.broker_id is None and self.wire.null_unregister_id_remark is not None:
            return error(ResponseCode.SYSTEM_ERROR, self.wire.null_unregister_id_remark)
        if not self.unregister(UnRegisterBrokerRequest(header.cluster_name, header.broker_addr,
                                                       header.broker_name, header.broker_id)):
            return error(ResponseCode.SYSTEM_ERROR, None)
        return ok()

    # Java's header decoding only logs a missing field: the body is decoded first, then 5.x
    # fails in BrokerAddrInfo.hashCode on a null cluster or address (nothing changed), and 4.9.8
    # finds nothing under a null address (changed, nothing refreshed); the other fields are
    # not read.
    @responder(RequestCode.QUERY_DATA_VERSION, java_decode=True, writes=True)
    def query_data_version(self, header, request, channel, now_ms):
        if request.body is None and self.wire.null_body_remark is not None:
            return error(ResponseCode.SYSTEM_ERROR, self.wire.null_body_remark)
        return decoded(request.body, self._data_version,
                       partial(self._query_data_version, header, now_ms))

    def _data_version(self, body, budget):
        # a body that is JSON null is a null DataVersion to Java: changed, as no body in 5.3.3
        return None if not body else bodies.DataVersion.from_request(
            body, self.wire.header_dialect, budget)

    def _query_data_version(self, header, now_ms, bean):
        rim = self.routes
        data_version = None
        if bean is not None:
            data_version = DataVersion(bean.counter or 0, bean.timestamp or 0, bean.state_version or 0)
        refusal = self.wire.broker_addr_remark(header.cluster_name, header.broker_addr)
        if refusal is not None:
            return error(ResponseCode.SYSTEM_ERROR, refusal)
        changed = rim.is_broker_topic_config_changed(header.cluster_name, header.broker_addr,
                                                     data_version)
        # a provisional entry (a warm restart's) is answered as Java's just-started NameServer
        # answers, which knows nothing: changed, so the broker registers (and binds its channel)
        provisional = rim.is_provisional(header.cluster_name, header.broker_addr)
        changed = changed or provisional
        if self.liveness.refreshes_on_query(changed):
            rim.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr, now_ms)
        stored = None if provisional else rim.query_broker_topic_config(header.cluster_name,
                                                                        header.broker_addr)
        return ok(None if stored is None else self.wire.data_version(stored),
                  QueryDataVersionResponseHeader(changed=changed))

    # 5.x only: a null cluster or address fails in BrokerAddrInfo.hashCode, nothing refreshed
    @responder(RequestCode.BROKER_HEARTBEAT, java_decode=True, writes=True)
    def broker_heartbeat(self, header, request, channel, now_ms):
        refusal = self.wire.broker_addr_remark(header.cluster_name, header.broker_addr)
        if refusal is not None:
            return error(ResponseCode.SYSTEM_ERROR, refusal)
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr,
                                                        now_ms)
        return ok()

    # Without a broker name Java's getBrokerMemberGroup asks its ConcurrentHashMap for null, which
    # throws; it logs that and answers the group it built, empty (5.0.0 and 5.3.3).
    @responder(RequestCode.GET_BROKER_MEMBER_GROUP, java_decode=True)
    def get_broker_member_group(self, header, request, channel, now_ms):
        addrs = {} if header.broker_name is None else \
            self.routes.get_broker_member_group(header.broker_name)
        body = self.wire.member_group(header.cluster_name, header.broker_name, addrs)
        return Reply(ResponseCode.SUCCESS, NOT_SET_REMARK, None, body)


class MinBrokerIdNotifier:
    """The route tables' :class:`~rocketpy.namesrv.model.MinBrokerIdChange` reports as
    NOTIFY_MIN_BROKER_ID_CHANGE requests (oneway, the server's version), handed to
    ``send(broker_addrs, command)`` (the transport's oneway client)."""

    def __init__(self, send, wire):
        self.send = send
        self.wire = wire

    def __call__(self, change):
        header = NotifyMinBrokerIdChangeRequestHeader(
            min_broker_id=change.min_broker_id, min_broker_addr=change.min_broker_addr,
            offline_broker_addr=change.offline_broker_addr, ha_broker_addr=change.ha_broker_addr)
        self.send(list(change.targets), RemotingCommand(
            code=int(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE), version=self.wire.own_version,
            flag=FLAG_ONEWAY, ext_fields=header.to_ext_fields()))
