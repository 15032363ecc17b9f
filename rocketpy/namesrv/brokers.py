"""NameServer policy layer: how registrations and unregistrations change the route tables (Java
``RouteInfoManager.registerBroker``, ``unRegisterBroker``, ``pickupTopicRouteData``,
``registerTopic`` of each release): :class:`Registration49` (live table keyed by address, the
whole topic table again on a new data version) and :class:`Registration5` (keyed by (cluster,
address), per-topic change detection, prime slave, acting master, zone, rejections, static-topic
mappings). They read the tables through a :class:`~rocketpy.namesrv.routeview.RouteView` (read
methods and read-only views, never the writer's dicts), take a registration as one
:class:`~rocketpy.namesrv.model.Registration`, and record what changes as ops in a
:class:`~rocketpy.namesrv.delta.RouteDelta`, which the tables apply (the one writer and
gate)."""
from dataclasses import replace

from .delta import (AddToCluster, MergeTopics, NotifyMinBrokerIdChanged, PutLive, PutQueueData,
                    PutTopics, RemoveLive, RemoveQueueData, SetBroker, SetMapping)
from .model import MASTER_ID, PERM_WRITE, SYNC_BROKER_MEMBER_GROUP_PREFIX, BrokerData, DataVersion, \
    MappingInfo, RegisterBrokerResult

__all__ = ["Registration49", "Registration5"]


def _topics(wrapper):
    """A registration's topic configs, in table order, as an op holds them, and the topics the
    tables lacked that its decode found (a hint for the writer), or None."""
    table, fresh = wrapper.topic_config_table, wrapper.fresh
    return tuple(table.values()), fresh if fresh is not None and fresh.source is table else None


class Registration49:
    """The 4.9.8 NameServer's rules."""

    #: 4.9 routes list only the filter servers a broker registered
    lists_missing_filter_servers = False
    #: REGISTER_TOPIC_IN_NAMESRV adds to a topic that exists
    merges_topics = True
    #: whether a master's registration with a new data version walks every topic through
    #: ``MergeTopics``, which ``RouteInfoManager.walk_view`` may narrow to the changed ones
    #: (5.x; 4.9's ``PutTopics`` walk is left whole)
    walks_present_topics = False

    def __init__(self, *, body_broker_version, queues_unregistrations):
        self._body_version = body_broker_version
        #: unregistrations wait in a queue (5.x ``BatchUnregistrationService``); 4.9 applies them
        #: at once
        self.queues_unregistrations = queues_unregistrations

    def live_key(self, cluster_name, broker_addr):
        return (None, broker_addr)

    def body_version(self, request_version):
        """The broker version a compressed registration body is read as: the request's, or the
        release's own (4.9.8 reads every body as a 4.9 one, 5.0.0 as a 5.0 one)."""
        return self._body_version or request_version

    def unregistered_ids(self, addrs, request):
        return [request.broker_id] if request.broker_id in addrs else []

    def answers_order_topic_config(self, namesrv_config):
        """Whether REGISTER_BROKER's answer carries ORDER_TOPIC_CONFIG (4.9: always)."""
        return True

    def unregistration(self, apply_batch, submit):
        """UNREGISTER_BROKER's ``unregister(request) -> bool``: queued (``submit``), or applied
        before the answer."""
        if self.queues_unregistrations:
            return submit
        return lambda request: apply_batch([request]) or True

    def finish_route(self, rim, topic, route):
        return route

    def register_topic(self, rim, topic, queue_datas, delta):
        """REGISTER_TOPIC_IN_NAMESRV: only brokers the NameServer knows; a topic that exists
        gains brokers when the release merges (Java stops at the first unknown broker)."""
        if not queue_datas:
            return
        known = rim.broker_addr_table
        if topic in rim.topic_queue_table:
            if not self.merges_topics:
                return
            for queue_data in queue_datas:
                if queue_data.broker_name not in known:
                    return
                delta.add(PutQueueData(topic, queue_data))
            return
        if any(qd.broker_name not in known for qd in queue_datas):
            return
        for queue_data in queue_datas:
            delta.add(PutQueueData(topic, queue_data))

    def may_apply_topics(self, broker_data, registration):
        """Whether a registration may put its topics in the table (for the route bounds, which
        count what it could add): a master's."""
        return registration.broker_id == MASTER_ID

    def register_broker(self, rim, registration, delta):
        """Record the changes of ``registration`` (a
        :class:`~rocketpy.namesrv.model.Registration`) in ``delta``; its result (see
        :meth:`RouteInfoManager.register_broker`), read from the tables before the change."""
        cluster_name, broker_addr = registration.cluster_name, registration.broker_addr
        broker_name, broker_id = registration.broker_name, registration.broker_id
        wrapper = registration.wrapper
        if broker_name not in rim.cluster_addr_table.get(cluster_name, ()):
            delta.add(AddToCluster(cluster_name, broker_name))
        known = rim.broker_addr_table.get(broker_name)
        if known is None:   # Java puts a new group in before it checks anything
            known = BrokerData(cluster_name, broker_name)
            delta.add(SetBroker.of(known))
        min_id_changed = broker_id < min(known.broker_addrs, default=0)
        addrs = {bid: addr for bid, addr in known.broker_addrs.items()   # slave -> master switch:
                 if broker_addr is None or addr != broker_addr or bid == broker_id}  # 1 id an addr
        if broker_id not in addrs or addrs[broker_id] != broker_addr:   # (the usual: no change)
            refused = self._refused(rim, registration, addrs, delta)
            if refused is not None:
                delta.add(SetBroker.of(self._group(known, addrs, registration)))
                return refused[0]
        first = not addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        broker_data = self._group(known, addrs, registration)
        delta.add(SetBroker.of(broker_data))
        if wrapper is not None:
            self._merge(rim, registration, broker_data, first, delta)
        filter_servers = registration.filter_servers
        now_ms = registration.now_ms
        delta.add(PutLive(
            self.live_key(cluster_name, broker_addr), now_ms,
            rim.live_timeout(registration.timeout_millis),
            wrapper.data_version if wrapper is not None else DataVersion(timestamp=now_ms),
            registration.channel_id, registration.ha_server_addr, broker_name,
            None if filter_servers is None else tuple(filter_servers)))
        if min_id_changed and self.notifies and rim.config.notify_min_broker_id_changed:
            delta.add(NotifyMinBrokerIdChanged(tuple(addrs.items()), None,
                                               registration.ha_server_addr))
        return rim.master_result(cluster_name, broker_id, addrs)

    def repeats_applied(self, rim, broker_data, registration):
        """Whether ``registration``, from a broker whose live entry already has its body's data
        version and whose group holds its address under its brokerId, would read none of its
        topics (4.9: never, without a new data version)."""
        return True

    # -- what 5.x does differently

    #: a new smallest brokerId is told to the group (``notifyMinBrokerIdChanged``, 5.x)
    notifies = False

    @staticmethod
    def _group(known, addrs, registration):
        """The group's record with ``addrs`` (``known`` itself when nothing changes; 4.9 has no
        acting master, no zone)."""
        if addrs == known.broker_addrs:
            return known
        return BrokerData(known.cluster, known.broker_name, addrs)

    def _refused(self, rim, registration, addrs, delta):
        """``(answer,)`` when the registration is refused (5.x), else None; asked only when its
        brokerId does not hold its address yet."""
        return None

    def _merge(self, rim, registration, broker_data, first, delta):
        """A master's topics, all again, on its first registration or a new data version."""
        wrapper = registration.wrapper
        if registration.broker_id == MASTER_ID and (first or rim.is_broker_topic_config_changed(
                registration.cluster_name, registration.broker_addr, wrapper.data_version)):
            configs, fresh = _topics(wrapper)
            delta.add(PutTopics(broker_data.broker_name, configs, False, fresh is not None),
                      fresh)


class Registration5(Registration49):
    """The 5.x NameServer's rules; ``wipe_needs_acting_master`` (5.1+: a prime slave's topics
    lose write permission only with acting master on), ``by_address`` (5.1+: an
    unregistration removes the address whatever its id) and ``merges_topics`` (5.1+:
    REGISTER_TOPIC_IN_NAMESRV adds to a topic that exists) tell the 5.x releases apart."""

    lists_missing_filter_servers = True
    walks_present_topics = True

    def __init__(self, *, wipe_needs_acting_master, by_address, merges_topics,
                 body_broker_version, queues_unregistrations):
        super().__init__(body_broker_version=body_broker_version,
                         queues_unregistrations=queues_unregistrations)
        self.wipe_needs_acting_master = wipe_needs_acting_master
        self.by_address = by_address
        self.merges_topics = merges_topics

    def live_key(self, cluster_name, broker_addr):
        return (cluster_name, broker_addr)

    def answers_order_topic_config(self, namesrv_config):
        return namesrv_config.return_order_topic_config_to_broker

    def unregistered_ids(self, addrs, request):
        if self.by_address:
            return [bid for bid, addr in addrs.items() if addr == request.broker_addr]
        return super().unregistered_ids(addrs, request)

    notifies = True

    @staticmethod
    def _group(known, addrs, registration):
        acting = bool(registration.enable_acting_master)
        zone_name = registration.zone_name
        if (addrs == known.broker_addrs and acting is known.enable_acting_master
                and zone_name == known.zone_name):
            return known
        return BrokerData(known.cluster, known.broker_name, addrs, acting, zone_name)

    def _refused(self, rim, registration, addrs, delta):
        """Refused: an address taken over by a broker whose old address has a newer state, or a
        single-topic registration (after ``updateTopic``) from a broker not registered yet."""
        broker_id, wrapper = registration.broker_id, registration.wrapper
        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != registration.broker_addr:
            old_live = rim.broker_live_info(registration.cluster_name, old_addr)
            new_state = wrapper.data_version.state_version if wrapper is not None else 0
            if old_live is not None and old_live.data_version.state_version > new_state:
                delta.add(RemoveLive(self.live_key(registration.cluster_name,
                                                   registration.broker_addr)))
                return (RegisterBrokerResult(),)
        if broker_id not in addrs and wrapper is not None and len(wrapper.topic_config_table) == 1:
            return (None,)
        return None

    def _merge(self, rim, registration, broker_data, first, delta):
        """A master's or prime slave's topics: the ones the queue table lacks, or all on a first
        registration or a new data version; a prime slave's without write permission."""
        broker_id, wrapper = registration.broker_id, registration.wrapper
        prime_slave = (registration.enable_acting_master is not None and broker_id != MASTER_ID
                       and broker_id == min(broker_data.broker_addrs))
        if broker_id != MASTER_ID and not prime_slave:
            return
        name = broker_data.broker_name
        table = wrapper.topic_config_table
        mapping = wrapper.topic_queue_mapping_info_map or {}
        if rim.config.delete_topic_with_broker_registration and not mapping:
            for topic in rim.topics_of_broker(name):
                if topic not in table:
                    delta.add(RemoveQueueData(topic, name))
        changed = rim.is_broker_topic_config_changed(registration.cluster_name,
                                                     registration.broker_addr, wrapper.data_version)
        wipe = prime_slave and (broker_data.enable_acting_master or not self.wipe_needs_acting_master)
        configs, fresh = _topics(wrapper)
        delta.add(MergeTopics(name, configs, wipe, first or changed, wrapper.digest,
                              fresh is not None), fresh)
        if changed or first:
            for topic, info in mapping.items():
                delta.add(SetMapping(topic, MappingInfo.of(info), name))

    def repeats_applied(self, rim, broker_data, registration):
        """... 5.x: a broker whose topics are not applied, or the topic table applied last for
        the group (its content digest), nothing of it removed since and none to delete."""
        if not self.may_apply_topics(broker_data, registration):
            return True
        digest = registration.wrapper.digest
        return (not rim.config.delete_topic_with_broker_registration and digest is not None
                and rim.applied_digest(broker_data.broker_name) == digest)

    def may_apply_topics(self, broker_data, registration):
        """A master's, or a prime slave's: the lowest id of its group, from a broker that sends
        ``enableActingMaster``."""
        broker_id = registration.broker_id
        if broker_id == MASTER_ID:
            return True
        if registration.enable_acting_master is None:
            return False
        addrs = broker_data.broker_addrs if broker_data is not None else {}
        return not addrs or broker_id <= min(addrs)

    def finish_route(self, rim, topic, route):
        """5.x adds the static-topic mappings (a copy: the route is a value) and, with
        ``supportActingMaster``, shows the smallest live id of a masterless read-only group as
        its master."""
        mapped = rim.topic_queue_mapping_info_table.get(topic)
        route.topic_queue_mapping_by_broker = None if mapped is None else dict(mapped)
        if rim.config.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
            route.broker_datas = [self._acting(broker_data, route.queue_datas)
                                  for broker_data in route.broker_datas]
        return route

    @staticmethod
    def _acting(broker_data, queue_datas):
        addrs = broker_data.broker_addrs
        if not addrs or MASTER_ID in addrs or not broker_data.enable_acting_master:
            return broker_data
        for queue_data in queue_datas:
            if queue_data.broker_name == broker_data.broker_name:
                if not queue_data.perm & PERM_WRITE:
                    addrs = dict(addrs)
                    addrs[MASTER_ID] = addrs.pop(min(addrs))
                    return replace(broker_data, broker_addrs=addrs)
                break
        return broker_data
