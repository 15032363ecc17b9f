"""NameServer state layer: the route tables (Java ``RouteInfoManager``).

Same tables as Java: ``topic_queue_table`` (topic -> broker name -> QueueData),
``broker_addr_table`` (broker name -> BrokerData), ``cluster_addr_table`` (cluster -> broker
names), ``broker_live_table`` (keyed by (cluster, address) in 5.x, by address in 4.9),
``filter_server_table`` and 5.x ``topic_queue_mapping_info_table``; same registration,
unregistration and lookup semantics, version differences chosen by the
:class:`~rocketpy.namesrv.profile.BehaviourProfile`.

What Java does not have:

* no locks: every call runs on one thread (the reactor), time comes in as ``now_ms``;
* an index from channel id to live entries, so a closed connection is found in O(1), and an
  index from broker name to its topics, so unregistering or re-permissioning a broker touches
  only its topics;
* channel-caused unregistrations are tied to the channel and registration they came from and
  are dropped if the broker registered again meanwhile (apache/rocketmq#11043);
* a per-topic route version, bumped by every change that can alter a topic's route answer, which
  the route response cache (:mod:`rocketpy.namesrv.route_cache`) checks;
* a note of the topic table each broker name last had applied: 5.x re-registrations with an
  unchanged data version only add the topics the queue table lacks (Java checks each topic,
  ``isTopicConfigChanged``), and when the same decoded table comes again and none of that
  broker's queue data was removed since, none can be lacking, so the walk is skipped.
  Decoded tables are never mutated (the processor hands the same object back for an identical
  body), which is what makes the identity test sound.
"""
from itertools import count

from .channel import Channel
from .javaorder import HighWater, hashmap_capacity, hashset_copy_capacity, ordered
from .model import (DEFAULT_BROKER_TIMEOUT_MS, FLAG_UNIT, FLAG_UNIT_SUB, MASTER_ID, PERM_READ,
                    PERM_WRITE, SYNC_BROKER_MEMBER_GROUP_PREFIX, BrokerData, BrokerLiveInfo,
                    DataVersion, QueueData, RegisterBrokerResult, TopicRouteData,
                    UnRegisterBrokerRequest)
from .profile import DEFAULT_PROFILE

__all__ = ["RouteInfoManager"]


class RouteInfoManager:
    def __init__(self, namesrv_config=None, profile=None, notify_min_broker_id_changed=None):
        if namesrv_config is None:
            from .config import NamesrvConfig
            namesrv_config = NamesrvConfig()
        self.config = namesrv_config
        self.profile = profile or DEFAULT_PROFILE
        #: ``notify(broker_addrs, request)``: send NOTIFY_MIN_BROKER_ID_CHANGE oneway to each.
        self.notify_min_broker_id_changed = notify_min_broker_id_changed
        self.topic_queue_table = {}
        self.broker_addr_table = {}
        self.cluster_addr_table = {}
        self.broker_live_table = {}
        self.filter_server_table = {}
        self.topic_queue_mapping_info_table = {}
        self._by_channel = {}          # channel id -> {live key: None}
        self._topics_by_broker = {}    # broker name -> {topic: None}
        self._applied = {}             # broker name -> (topic table, its size): all held
        self._queue_map_high = {}      # topic -> largest broker count of its queue map
        self._cluster_set_high = {}    # cluster -> largest broker-name count
        self._versions = {}            # topic -> route version
        #: QueueData entries (topic-broker pairs) in topic_queue_table, for the server-wide
        #: bounds (:mod:`rocketpy.namesrv.route_bounds`)
        self.queue_data_count = 0
        self._version_clock = count(1)
        self._generations = count(1)
        #: bumped when something outside the tables changes every answer (config update)
        self.epoch = 0
        concurrent = self.profile.concurrent_tables
        self._topics_high = HighWater(1024, concurrent)
        self._brokers_high = HighWater(128, concurrent)
        self._clusters_high = HighWater(32, concurrent)

    # ------------------------------------------------------------------ keys and versions

    def _key(self, cluster_name, broker_addr):
        """``BrokerAddrInfo`` in 5.x; 4.9 keys the live table by address alone."""
        if self.profile.v5_registration:
            return (cluster_name, broker_addr)
        return (None, broker_addr)

    def route_version(self, topic):
        """A number that changes whenever ``topic``'s route answer may change (None: no route)."""
        return self._versions.get(topic)

    def invalidate_routes(self):
        """Something every route answer depends on changed (e.g. supportActingMaster)."""
        self.epoch += 1

    def _touch(self, topic):
        self._versions[topic] = next(self._version_clock)

    def _touch_broker(self, broker_name):
        for topic in self._topics_by_broker.get(broker_name, ()):
            self._versions[topic] = next(self._version_clock)

    # ------------------------------------------------------------------ queue data

    def _put_queue_data(self, topic, queue_data):
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None:
            queue_map = self.topic_queue_table[topic] = {}
            self._topics_high.saw(len(self.topic_queue_table))
        name = queue_data.broker_name
        old = queue_map.get(name)
        if old == queue_data:
            return
        if old is None:
            self.queue_data_count += 1
        queue_map[name] = queue_data
        if len(queue_map) > self._queue_map_high.get(topic, 0):
            self._queue_map_high[topic] = len(queue_map)
        self._topics_by_broker.setdefault(name, {})[topic] = None
        self._touch(topic)

    def _remove_queue_data(self, topic, broker_name):
        queue_map = self.topic_queue_table.get(topic)
        if queue_map is None or queue_map.pop(broker_name, None) is None:
            return
        self.queue_data_count -= 1
        self._applied.pop(broker_name, None)
        topics = self._topics_by_broker.get(broker_name)
        if topics is not None:
            topics.pop(topic, None)
            if not topics:
                del self._topics_by_broker[broker_name]
        if not queue_map:
            self._drop_topic(topic)
        else:
            self._touch(topic)

    def _drop_topic(self, topic):
        queue_map = self.topic_queue_table.pop(topic, None)
        self.queue_data_count -= len(queue_map or ())
        for name in queue_map or ():
            self._applied.pop(name, None)
            topics = self._topics_by_broker.get(name)
            if topics is not None:
                topics.pop(topic, None)
                if not topics:
                    del self._topics_by_broker[name]
        self._queue_map_high.pop(topic, None)
        self._versions.pop(topic, None)

    # ------------------------------------------------------------------ live table

    def _put_live(self, key, live):
        old = self.broker_live_table.get(key)
        if old is not None and old.channel_id != live.channel_id:
            self._unindex_channel(old.channel_id, key)
        self.broker_live_table[key] = live
        if live.channel_id is not None:
            self._by_channel.setdefault(live.channel_id, {})[key] = None

    def _remove_live(self, key):
        live = self.broker_live_table.pop(key, None)
        if live is not None:
            self._unindex_channel(live.channel_id, key)
        return live

    def _unindex_channel(self, channel_id, key):
        keys = self._by_channel.get(channel_id)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self._by_channel[channel_id]

    def _set_filter_servers(self, key, broker_name, servers):
        if servers is None:
            return
        if not servers:
            if self.filter_server_table.pop(key, None) is not None:
                self._touch_broker(broker_name)
        elif self.filter_server_table.get(key) != servers:
            self.filter_server_table[key] = list(servers)
            self._touch_broker(broker_name)

    # ------------------------------------------------------------------ registration

    def register_broker(self, cluster_name, broker_addr, broker_name, broker_id, ha_server_addr,
                        topic_config_wrapper, filter_server_list, channel, now_ms, *,
                        zone_name=None, timeout_millis=None, enable_acting_master=None):
        """``registerBroker``: a result (``haServerAddr``/``masterAddr`` for a slave whose master
        is live), or None when 5.x refuses a single-topic registration from a broker that has not
        registered yet (the caller answers SYSTEM_ERROR "register broker failed")."""
        v5 = self.profile.v5_registration
        wrapper = topic_config_wrapper
        names = self.cluster_addr_table.get(cluster_name)
        if names is None:
            names = self.cluster_addr_table[cluster_name] = {}
            self._clusters_high.saw(len(self.cluster_addr_table))
        if broker_name not in names:
            names[broker_name] = None
            if len(names) > self._cluster_set_high.get(cluster_name, 0):
                self._cluster_set_high[cluster_name] = len(names)

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = self.broker_addr_table[broker_name] = BrokerData(cluster_name, broker_name)
            self._brokers_high.saw(len(self.broker_addr_table))
            self._touch_broker(broker_name)
        addrs = broker_data.broker_addrs

        is_old_version = enable_acting_master is None
        min_id_changed = False
        if v5:
            acting = bool(enable_acting_master)
            if broker_data.enable_acting_master != acting or broker_data.zone_name != zone_name:
                broker_data.enable_acting_master = acting
                broker_data.zone_name = zone_name
                self._touch_broker(broker_name)
            min_id_changed = broker_id < (min(addrs) if addrs else 0)

        # slave -> master switch: one address has one id
        stale = [bid for bid, addr in addrs.items()
                 if broker_addr is not None and addr == broker_addr and bid != broker_id]
        for bid in stale:
            del addrs[bid]
        if stale:
            self._touch_broker(broker_name)

        if v5:
            old_broker_addr = addrs.get(broker_id)
            if old_broker_addr is not None and old_broker_addr != broker_addr:
                old_live = self.broker_live_table.get(self._key(cluster_name, old_broker_addr))
                new_state = wrapper.data_version.state_version if wrapper is not None else 0
                if old_live is not None and old_live.data_version.state_version > new_state:
                    self._remove_live(self._key(cluster_name, broker_addr))
                    return RegisterBrokerResult()
            if broker_id not in addrs and wrapper is not None \
                    and len(wrapper.topic_config_table) == 1:
                return None

        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        if old_addr != broker_addr:
            self._touch_broker(broker_name)
        register_first = register_first or not old_addr

        is_master = broker_id == MASTER_ID
        is_prime_slave = v5 and not is_old_version and not is_master and broker_id == min(addrs)
        if wrapper is not None and (is_master or is_prime_slave):
            if v5:
                self._merge_topics_v5(cluster_name, broker_addr, broker_name, broker_data,
                                      wrapper, register_first, is_prime_slave)
            elif register_first or self.is_broker_topic_config_changed(
                    cluster_name, broker_addr, wrapper.data_version):
                self._apply_topic_configs(broker_name, wrapper.topic_config_table.values(),
                                          False, False)

        key = self._key(cluster_name, broker_addr)
        if self.profile.fixed_broker_timeout_ms is not None:
            timeout = self.profile.fixed_broker_timeout_ms
        else:
            timeout = DEFAULT_BROKER_TIMEOUT_MS if timeout_millis is None else timeout_millis
        channel_id = channel.channel_id if isinstance(channel, Channel) else channel
        self._put_live(key, BrokerLiveInfo(
            now_ms, timeout, wrapper.data_version if wrapper is not None else DataVersion(timestamp=now_ms),
            channel_id, ha_server_addr, broker_name, next(self._generations)))
        self._set_filter_servers(key, broker_name, filter_server_list)

        result = RegisterBrokerResult()
        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(self._key(cluster_name, master_addr))
                if master_live is not None:
                    result = RegisterBrokerResult(master_live.ha_server_addr, master_addr)

        if min_id_changed and self.config.notify_min_broker_id_changed:
            self._notify_min_broker_id_changed(addrs, None, ha_server_addr)
        return result

    def _merge_topics_v5(self, cluster_name, broker_addr, broker_name, broker_data, wrapper,
                         register_first, is_prime_slave):
        table = wrapper.topic_config_table
        mapping = wrapper.topic_queue_mapping_info_map or {}
        if self.config.delete_topic_with_broker_registration and not mapping:
            for topic in list(self._topics_by_broker.get(broker_name, ())):
                if topic not in table:
                    self._remove_queue_data(topic, broker_name)
        broker_changed = self.is_broker_topic_config_changed(
            cluster_name, broker_addr, wrapper.data_version)
        wipe = is_prime_slave and (broker_data.enable_acting_master
                                   or not self.profile.prime_slave_wipe_needs_acting_master)
        every = register_first or broker_changed
        applied = self._applied.get(broker_name)
        if every or applied is None or applied[0] is not table or applied[1] != len(table):
            self._apply_topic_configs(broker_name, table.values(), wipe, not every)
            self._applied[broker_name] = (table, len(table))
        if broker_changed or register_first:
            for topic, info in mapping.items():
                by_broker = self.topic_queue_mapping_info_table.setdefault(topic, {})
                by_broker[info.get("bname") if isinstance(info, dict) else None] = info
                if topic in self.topic_queue_table:
                    self._touch(topic)

    def _apply_topic_configs(self, broker_name, topic_configs, wipe, missing_only):
        """``createAndUpdateQueueData`` for each config (only those whose topic lacks this broker
        when ``missing_only``: Java's per-topic ``isTopicConfigChanged`` with an unchanged data
        version). Inlined: a 10,000-topic broker passes here on every data-version change."""
        queues = self.topic_queue_table
        put = self._put_queue_data
        for config in topic_configs:
            topic = config.topic_name
            perm = config.perm & ~PERM_WRITE if wipe else config.perm
            queue_map = queues.get(topic)
            if queue_map is not None:
                old = queue_map.get(broker_name)
                if old is not None and (missing_only or (
                        old.perm == perm and old.read_queue_nums == config.read_queue_nums
                        and old.write_queue_nums == config.write_queue_nums
                        and old.topic_sys_flag == config.topic_sys_flag)):
                    continue  # present (and equal: QueueData.equals)
            put(topic, QueueData(broker_name, config.read_queue_nums, config.write_queue_nums,
                                 perm, config.topic_sys_flag))

    def is_broker_topic_config_changed(self, cluster_name, broker_addr, data_version):
        previous = self.query_broker_topic_config(cluster_name, broker_addr)
        return previous is None or previous != data_version

    def broker_live_info(self, cluster_name, broker_addr):
        """The live entry of ``broker_addr`` (keyed as this profile keys it), or None."""
        return self.broker_live_table.get(self._key(cluster_name, broker_addr))

    def query_broker_topic_config(self, cluster_name, broker_addr):
        live = self.broker_live_info(cluster_name, broker_addr)
        return None if live is None else live.data_version

    def update_broker_info_update_timestamp(self, cluster_name, broker_addr, now_ms):
        live = self.broker_live_table.get(self._key(cluster_name, broker_addr))
        if live is not None:
            live.last_update_ms = now_ms

    # ------------------------------------------------------------------ unregistration

    def unregister_brokers(self, requests):
        """``unRegisterBroker(Set)``: apply a batch at once, then clean the topics once."""
        removed, reduced, notify = {}, {}, {}
        for request in requests:
            key = self._key(request.cluster_name, request.broker_addr)
            live = self.broker_live_table.get(key)
            if request.channel_id is not None and live is not None and (
                    live.channel_id != request.channel_id
                    or (request.live_generation is not None
                        and live.generation != request.live_generation)):
                continue  # the broker registered again since this channel event
            name = request.broker_name
            self._remove_live(key)
            if self.filter_server_table.pop(key, None) is not None:
                self._touch_broker(name)
            remove_name = False
            broker_data = self.broker_addr_table.get(name)
            if broker_data is not None:
                addrs = broker_data.broker_addrs
                min_id_changed = bool(addrs) and request.broker_id == min(addrs)
                if self.profile.unregister_by_address:
                    gone = [bid for bid, addr in addrs.items() if addr == request.broker_addr]
                else:
                    gone = [request.broker_id] if request.broker_id in addrs else []
                for bid in gone:
                    del addrs[bid]
                if gone:
                    self._touch_broker(name)
                if not addrs:
                    del self.broker_addr_table[name]
                    self._applied.pop(name, None)
                    self._touch_broker(name)
                    remove_name = True
                elif min_id_changed:
                    notify[name] = (dict(addrs), request.broker_addr)
            if remove_name:
                names = self.cluster_addr_table.get(request.cluster_name)
                if names is not None:
                    names.pop(name, None)
                    if not names:
                        del self.cluster_addr_table[request.cluster_name]
                        self._cluster_set_high.pop(request.cluster_name, None)
                removed[name] = None
            else:
                reduced[name] = None
        self._clean_topics(removed, reduced)
        if notify and self.config.notify_min_broker_id_changed:
            for name, (addrs, offline_addr) in notify.items():
                broker_data = self.broker_addr_table.get(name)
                if broker_data is not None and broker_data.enable_acting_master:
                    self._notify_min_broker_id_changed(addrs, offline_addr, None)

    def _clean_topics(self, removed, reduced):
        for name in removed:
            for topic in list(self._topics_by_broker.get(name, ())):
                self._remove_queue_data(topic, name)
        for name in reduced:
            broker_data = self.broker_addr_table.get(name)
            if broker_data is None or not broker_data.enable_acting_master:
                continue
            if broker_data.broker_addrs and min(broker_data.broker_addrs) == MASTER_ID:
                continue  # a master exists
            for topic in self._topics_by_broker.get(name, ()):
                queue_data = self.topic_queue_table[topic][name]
                if queue_data.perm & PERM_WRITE:
                    queue_data.perm &= ~PERM_WRITE
                    self._touch(topic)

    def _setup_unregister(self, key, live):
        """``setupUnRegisterRequest``: find the broker name and id now holding this address."""
        cluster_name, broker_addr = key
        broker_data = self.broker_addr_table.get(live.broker_name)
        candidates = [broker_data] if broker_data is not None else []
        candidates.append(None)  # fall back to a full search, as Java does
        for broker_data in candidates:
            pool = [broker_data] if broker_data is not None else self._broker_datas_in_order()
            for data in pool:
                if cluster_name is not None and data.cluster != cluster_name:
                    continue
                for bid, addr in data.broker_addrs.items():
                    if addr == broker_addr:
                        return UnRegisterBrokerRequest(
                            data.cluster if cluster_name is None else cluster_name, broker_addr,
                            data.broker_name, bid, live.channel_id, live.generation)
        return None

    def on_channel_destroy(self, channel):
        """The unregistrations a closed/idle/broken channel causes (usually zero or one)."""
        channel_id = channel.channel_id if isinstance(channel, Channel) else channel
        requests = []
        for key in list(self._by_channel.get(channel_id, ())):
            request = self._setup_unregister(key, self.broker_live_table[key])
            if request is not None:
                requests.append(request)
        return requests

    def scan_not_active_broker(self, now_ms):
        """Expired live entries as ``(request, channel_id)``; the caller submits the requests
        and closes the channels (Java's scanNotActiveBroker does both)."""
        fixed = self.profile.fixed_broker_timeout_ms
        expired = []
        for key, live in list(self.broker_live_table.items()):
            timeout = live.heartbeat_timeout_ms if fixed is None else fixed
            if live.last_update_ms + timeout < now_ms:
                request = self._setup_unregister(key, live)
                if request is None:
                    self._remove_live(key)  # no broker data left: nothing to unregister
                else:
                    expired.append((request, live.channel_id))
        return expired

    # ------------------------------------------------------------------ routes

    def pickup_topic_route_data(self, topic):
        """``pickupTopicRouteData``: the route, lists in Java order, or None."""
        queue_map = self.topic_queue_table.get(topic)
        if not queue_map:
            return None
        names = ordered(list(queue_map), hashmap_capacity(self._queue_map_high.get(topic, 0)))
        queue_datas = [queue_map[name] for name in names]
        broker_datas = []
        filters = {}
        for name in ordered(names, hashset_copy_capacity(len(names))):
            broker_data = self.broker_addr_table.get(name)
            if broker_data is None:
                continue
            clone = broker_data.clone()
            broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    servers = self.filter_server_table.get(self._key(clone.cluster, addr))
                    if servers is not None or self.profile.v5_registration:
                        filters[addr] = servers
        if not broker_datas:
            return None
        route = TopicRouteData(queue_datas, broker_datas, filters)
        if not self.profile.v5_registration:
            return route
        route.topic_queue_mapping_by_broker = self.topic_queue_mapping_info_table.get(topic)
        if self.config.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
            self._rewrite_acting_master(route)
        return route

    @staticmethod
    def _rewrite_acting_master(route):
        if not any(bd.broker_addrs and MASTER_ID not in bd.broker_addrs for bd in route.broker_datas):
            return
        for broker_data in route.broker_datas:
            addrs = broker_data.broker_addrs
            if not addrs or MASTER_ID in addrs or not broker_data.enable_acting_master:
                continue
            for queue_data in route.queue_datas:
                if queue_data.broker_name == broker_data.broker_name:
                    if not queue_data.perm & PERM_WRITE:
                        addrs[MASTER_ID] = addrs.pop(min(addrs))
                    break

    # ------------------------------------------------------------------ admin operations

    def _write_perm(self, broker_name, wipe):
        changed = 0
        for topic in list(self._topics_by_broker.get(broker_name, ())):
            queue_data = self.topic_queue_table[topic][broker_name]
            perm = queue_data.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
            if perm != queue_data.perm:
                queue_data.perm = perm
                self._touch(topic)
            changed += 1
        return changed

    def wipe_write_perm_of_broker(self, broker_name):
        """WIPE_WRITE_PERM_OF_BROKER: the number of topics the broker serves."""
        return self._write_perm(broker_name, True)

    def add_write_perm_of_broker(self, broker_name):
        """ADD_WRITE_PERM_OF_BROKER: perm becomes READ|WRITE; the number of topics."""
        return self._write_perm(broker_name, False)

    def delete_topic(self, topic, cluster_name=None):
        """DELETE_TOPIC_IN_NAMESRV, for all brokers or for the brokers of one cluster."""
        if not cluster_name:
            if topic in self.topic_queue_table:
                self._drop_topic(topic)
            return
        for name in list(self.cluster_addr_table.get(cluster_name, ())):
            self._remove_queue_data(topic, name)

    def register_topic(self, topic, queue_datas):
        """REGISTER_TOPIC_IN_NAMESRV (5.x): only brokers the NameServer knows."""
        if not queue_datas:
            return
        if topic in self.topic_queue_table:
            if not self.profile.register_topic_merges:
                return
            for queue_data in queue_datas:   # Java stops at the first unknown broker
                if queue_data.broker_name not in self.broker_addr_table:
                    return
                self._put_queue_data(topic, queue_data)
            return
        if any(qd.broker_name not in self.broker_addr_table for qd in queue_datas):
            return
        for queue_data in queue_datas:
            self._put_queue_data(topic, queue_data)

    def get_broker_member_group(self, broker_name):
        broker_data = self.broker_addr_table.get(broker_name)
        return {} if broker_data is None else dict(broker_data.broker_addrs)

    # ------------------------------------------------------------------ listings (Java order)

    def topics_in_order(self):
        """topicQueueTable's key order."""
        return ordered(list(self.topic_queue_table), self._topics_high.capacity())

    def brokers_in_order(self):
        return ordered(list(self.broker_addr_table), self._brokers_high.capacity())

    def _broker_datas_in_order(self):
        return [self.broker_addr_table[name] for name in self.brokers_in_order()]

    def clusters_in_order(self):
        return ordered(list(self.cluster_addr_table), self._clusters_high.capacity())

    def cluster_broker_names(self, cluster_name):
        """A cluster's HashSet of broker names, in its order."""
        names = self.cluster_addr_table.get(cluster_name, {})
        return ordered(list(names), hashmap_capacity(self._cluster_set_high.get(cluster_name, 0)))

    def _topic_list(self, items):
        """The Java ``TopicList.topicList`` set filled with ``items`` in this order."""
        kind = self.profile.topic_list_set
        unique = list(dict.fromkeys(items))
        if kind == "insertion":
            return unique
        if kind == "chm":
            from .javaorder import chm_capacity
            return ordered(unique, chm_capacity(len(unique)))
        return ordered(unique, hashmap_capacity(len(unique)))

    def get_all_topic_list(self):
        return self._topic_list(self.topics_in_order())

    def get_topics_by_cluster(self, cluster_name):
        if cluster_name not in self.cluster_addr_table:
            return []   # Java: NullPointerException, logged, empty list answered
        topics = self.topics_in_order()
        items = []
        for name in self.cluster_broker_names(cluster_name):
            items.extend(t for t in topics if name in self.topic_queue_table[t])
        return self._topic_list(items)

    def get_system_topic_list(self):
        """(topic list, brokerAddr or None): cluster names and broker names, and one address."""
        items = []
        for cluster in self.clusters_in_order():
            items.append(cluster)
            items.extend(self.cluster_broker_names(cluster))
        broker_addr = None
        for name in self.brokers_in_order():
            addrs = self.broker_addr_table[name].broker_addrs
            if addrs:
                broker_addr = addrs[ordered(list(addrs), hashmap_capacity(len(addrs)))[0]]
                break
        return self._topic_list(items), broker_addr

    def _first_queue_data_flag_topics(self, test):
        items = []
        for topic in self.topics_in_order():
            queue_map = self.topic_queue_table[topic]
            first = ordered(list(queue_map), hashmap_capacity(self._queue_map_high.get(topic, 0)))[0]
            if test(queue_map[first].topic_sys_flag):
                items.append(topic)
        return self._topic_list(items)

    def get_unit_topics(self):
        return self._first_queue_data_flag_topics(lambda f: f & FLAG_UNIT == FLAG_UNIT)

    def get_has_unit_sub_topic_list(self):
        return self._first_queue_data_flag_topics(lambda f: f & FLAG_UNIT_SUB == FLAG_UNIT_SUB)

    def get_has_unit_sub_un_unit_topic_list(self):
        return self._first_queue_data_flag_topics(
            lambda f: f & FLAG_UNIT != FLAG_UNIT and f & FLAG_UNIT_SUB == FLAG_UNIT_SUB)

    # ------------------------------------------------------------------ notifications

    def _notify_min_broker_id_changed(self, addrs, offline_addr, ha_addr):
        if not addrs or self.notify_min_broker_id_changed is None:
            return
        from rocketpy.remoting.command import FLAG_ONEWAY, RemotingCommand
        from rocketpy.remoting.javahash import hashmap_ordered
        min_id = min(addrs)
        ext = {"minBrokerId": str(min_id), "minBrokerAddr": addrs[min_id]}
        if offline_addr is not None:
            ext["offlineBrokerAddr"] = offline_addr
        if ha_addr is not None:
            ext["haBrokerAddr"] = ha_addr
        request = RemotingCommand(code=905, version=self.profile.server_version,
                                  flag=FLAG_ONEWAY, ext_fields=hashmap_ordered(ext))
        if offline_addr is not None or len(addrs) == 1:
            targets = list(addrs.values())
        else:
            targets = [addr for bid, addr in addrs.items() if bid != min_id]
        self.notify_min_broker_id_changed(targets, request)
