"""NameServer state layer: the route tables (Java ``RouteInfoManager``): Java's tables and
semantics, with release differences in the policies (:mod:`rocketpy.namesrv.brokers`, liveness,
wire shape). Not in Java:

* no locks: every call runs on the reactor thread, time comes in as ``now_ms``;
* one writer: the tables change only in :meth:`RouteInfoManager.apply`, which applies the op
  records of a :class:`~rocketpy.namesrv.delta.RouteDelta` through one table (op type ->
  applier, :data:`APPLIERS`); outside it the tables are read-only views
  (:class:`~rocketpy.namesrv.routeview.RouteView`), and the policies read those and record ops;
* one mutation gate (:func:`_gate`): the appliers note the topics and broker groups they
  change; the outermost call reports them to
  :class:`~rocketpy.namesrv.snapshot.RouteSnapshots`, so a route's version changes exactly when
  the route may, and nobody lists by hand what a route depends on; and hands the ops it
  applied, as one batch, to ``journal`` (the stream a replica applies: the same batches on
  fresh tables give the same tables, versions and answers);
* indexes by channel id (a closed connection is found in O(1)), by broker name (its topics) and
  by deadline (:mod:`rocketpy.namesrv.expiry`);
* channel-caused unregistrations carry their channel and registration, and are dropped if the
  broker registered again meanwhile (apache/rocketmq#11043);
* a re-registration handing over the very same decoded topic table as last applied, with none of
  its queue data removed since, skips the topic walk;
* a warm restart fills empty tables from a route snapshot (:mod:`rocketpy.namesrv.routeimage`)
  through the same writer; its live entries are *provisional* (``provisional``) until their
  broker registers again, and expire as they would have."""
import logging
from dataclasses import replace
from functools import wraps
from itertools import count
from types import MappingProxyType

from . import delta as ops
from .channel import Channel
from .delta import RouteDelta, Touched
from .expiry import ExpiryIndex
from .javaorder import hashmap_capacity, hashset_copy_capacity, ordered
from .model import (FLAG_UNIT, FLAG_UNIT_SUB, MASTER_ID, PERM_READ, PERM_WRITE, BrokerData,
                    BrokerLiveInfo, MinBrokerIdChange, QueueData, RegisterBrokerResult,
                    TopicRouteData, UnRegisterBrokerRequest)
from .policy import as_policies
from .routeview import TableView
from .shapes import FreshTopics, ShapeTable
from .snapshot import RouteSnapshots

log = logging.getLogger("rocketpy.namesrv")

__all__ = ["RouteInfoManager", "APPLIERS", "mapping_weight"]

_NO_MASTER = RegisterBrokerResult()   # frozen: one for every registration that names no master


def _gate(method):
    """The one way into the tables: report what the outermost call touched when it returns,
    and hand the ops it applied to the journal."""
    @wraps(method)
    def gated(self, *args, **kwargs):
        self._depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._depth -= 1
            if not self._depth:
                if self._dirty or self._dirty_brokers:
                    self._publish()
                    self._shown = True
                if self._shown:
                    self.read_version += 1
                    self._shown = False
                if self._batch:
                    batch, self._batch = tuple(self._batch), []
                    self.journal(batch)
    return gated


def mapping_weight(info):
    """What a static-topic mapping counts in the route bounds: one, and one per ``currIdMap``
    entry (each takes memory as a topic-broker pair does)."""
    return 1 + len(info.curr_id_map or ())


def holds(queue_data, config, perm):
    """Whether ``queue_data`` equals the QueueData a broker's ``config`` makes with ``perm``
    (``QueueData.equals``): the one comparison of the walk and of its off-reactor prefilter."""
    return (queue_data.perm == perm and queue_data.read_queue_nums == config.read_queue_nums
            and queue_data.write_queue_nums == config.write_queue_nums
            and queue_data.topic_sys_flag == config.topic_sys_flag)


def _unindex(index, key, item):
    """Take ``item`` out of ``index[key]`` (a dict used as an ordered set), and the key when
    nothing is left."""
    items = index.get(key)
    if items is not None:
        items.pop(item, None)
        if not items:
            del index[key]


class RouteInfoManager:
    """The route tables.

    :param namesrv_config: the run-time :class:`~rocketpy.namesrv.config.NamesrvConfig` (the
        processor's, so UPDATE_NAMESRV_CONFIG reaches the tables).
    :param policies: the :class:`~rocketpy.namesrv.policy.Policies` (or a ``BehaviourProfile``).
    :param on_min_broker_id_changed: called with a :class:`~rocketpy.namesrv.model.MinBrokerIdChange`
        when ``notifyMinBrokerIdChanged`` is on and a group's smallest brokerId changes.
    :param journal: called with each batch of ops the tables applied (a tuple, in order: what
        one outermost change made), for a replica; None: nothing is kept.

    The tables (read-only views; :class:`~rocketpy.namesrv.routeview.RouteView`):
    ``topic_queue_table``, ``broker_addr_table``, ``cluster_addr_table``,
    ``broker_live_table``, ``filter_server_table``, ``topic_queue_mapping_info_table`` and
    ``provisional``."""

    def __init__(self, namesrv_config=None, policies=None, on_min_broker_id_changed=None,
                 journal=None):
        if namesrv_config is None:
            from .config import NamesrvConfig
            namesrv_config = NamesrvConfig()
        self.policies = policies = as_policies(policies)
        self.config = namesrv_config
        self.registration = policies.routes
        self.liveness = policies.liveness
        self.wire = policies.wire
        self.on_min_broker_id_changed = on_min_broker_id_changed
        self.journal = journal
        #: topic -> its queue layout (a shared :class:`~rocketpy.namesrv.shapes.RouteShape`)
        self.shapes = ShapeTable()
        self._brokers = {}             # broker name -> BrokerData
        self._clusters = {}            # cluster -> {broker name: None}
        self._live = {}                # live key -> BrokerLiveInfo
        self._filters = {}             # live key -> (filter server, ...)
        self._mapped = {}              # topic -> {broker name: MappingInfo}
        #: live key -> the host that registered it, for the live entries loaded from a route
        #: snapshot (:mod:`rocketpy.namesrv.routeimage`) that their broker has not registered
        #: again since: *provisional* (host None when the snapshot did not know it)
        self._provisional = {}
        self.topic_queue_table = MappingProxyType(self.shapes.topics)
        self.broker_addr_table = MappingProxyType(self._brokers)
        self.cluster_addr_table = TableView(self._clusters)
        self.broker_live_table = MappingProxyType(self._live)
        self.filter_server_table = MappingProxyType(self._filters)
        self.topic_queue_mapping_info_table = TableView(self._mapped)
        self.provisional = MappingProxyType(self._provisional)
        self.snapshots = RouteSnapshots(self.shapes, self._mapped)
        #: ``route_version(topic)``: a number that changes whenever the topic's route may change
        self.route_version = self.snapshots.version
        self.expiry = ExpiryIndex()
        self.live_key = policies.routes.live_key
        self._by_channel = {}          # channel id -> {live key: None}
        self._applied = {}             # broker name -> digest of the topic table applied last
        #: broker name -> when its QueueData last changed (a number from ``_epoch_clock``), for
        #: the brokers in the broker table alone: a departed broker's entry would outlive it
        self._epochs = {}
        self._epoch_clock = count(1)
        self._cluster_set_high = {}    # cluster -> largest broker-name count
        self._listings = {}            # topic list name -> (snapshots' generation, list)
        self._cluster_listings = {}    # cluster -> (generation, its GET_TOPICS_BY_CLUSTER list)
        #: QueueData entries (topic-broker pairs) in topic_queue_table, for the server-wide
        #: bounds (:mod:`rocketpy.namesrv.route_bounds`)
        self.queue_data_count = 0
        #: what topic_queue_mapping_info_table holds, likewise: each mapping (a topic-broker name
        #: pair) one, and one more per ``currIdMap`` entry (:func:`mapping_weight`)
        self.mapping_count = 0
        #: broker name -> {(topic, mapping's broker name): None}: the mappings its group
        #: registered, dropped with the group (Java keeps them for good); and the other way
        self._mappings_of = {}
        self._mapping_owner = {}
        self._generations = count(1)
        self._depth = 0
        self._dirty = False
        #: moves with every outermost change a request may read back: the routes and listings
        #: (the gate's report), a live entry's presence and what a request reads of it
        #: (channel, HA address, group, data version, provisional or not), a config update's
        #: new versions; not a refresh of its timestamps, which only the writer's scans read
        self.read_version = 0
        self._shown = False
        #: broker names whose group or filter servers changed, in order (a dict: the order the
        #: report moves their layouts' versions in is the same in every process)
        self._dirty_brokers = {}
        self._touched_topics = set()
        self._touched_bulk = []        # lists of topics a bulk step touched
        self._delta = None             # the delta being applied (its hints)
        self._batch = []               # the ops applied in this outermost change (journal)
        high_water = self.wire.high_water
        self._topics_high = high_water(1024)
        self._brokers_high = high_water(128)
        self._clusters_high = high_water(32)

    # ------------------------------------------------------------------ the gate's report

    def _publish(self):
        for name in self._dirty_brokers:
            self.shapes.touch_broker(name)
        self._dirty_brokers = {}
        self._touched_topics = set()
        self._touched_bulk = []
        self._dirty = False
        self.snapshots.changed()

    def route_snapshot(self, topic):
        """The :class:`~rocketpy.namesrv.snapshot.RouteSnapshot` of ``topic``, or None."""
        return self.snapshots.get(topic, self.pickup_topic_route_data)

    def invalidate_routes(self):
        """Something every route answer depends on changed (e.g. supportActingMaster)."""
        self.apply(RouteDelta((ops.InvalidateRoutes(),)))

    # ------------------------------------------------------------------ the one writer

    @_gate
    def apply(self, delta):
        """Make the changes ``delta`` (a :class:`~rocketpy.namesrv.delta.RouteDelta`) records,
        in order, each op through its applier (:data:`APPLIERS`); what they touched
        (:class:`~rocketpy.namesrv.delta.Touched`, empty when every change was already so)."""
        outer = self._touched_topics, self._touched_bulk, self._dirty_brokers, self._delta
        self._touched_topics, self._touched_bulk, self._dirty_brokers = set(), [], {}
        self._delta = delta
        done = 0
        try:
            for op in delta.ops:
                applier = APPLIERS.get(type(op))
                if applier is None:
                    raise TypeError(f"not a route op: {op!r:.80}")
                applier(self, op)
                done += 1
            touched = Touched(frozenset(self._touched_topics), frozenset(self._dirty_brokers),
                              self._touched_bulk, self.topic_queue_table)
        finally:   # what an enclosing gated call touched, and this delta, go to the report
            outer[0].update(self._touched_topics)
            outer[1].extend(self._touched_bulk)
            outer[2].update(self._dirty_brokers)
            self._touched_topics, self._touched_bulk, self._dirty_brokers, self._delta = outer
            if self.journal is not None:
                self._batch.extend(delta.ops[:done])
        return touched

    # ------------------------------------------------------------------ appliers: topics

    def _put_queue_data(self, op):
        self._put_topic(op.topic, op.queue_data)

    def _put_topic(self, topic, queue_data):
        held = self.shapes.topics.get(topic)
        if self.shapes.put(topic, queue_data):
            name = queue_data.broker_name
            self._changed(name)
            if held is None:
                self._topics_high.saw(len(self.shapes.topics))
            if held is None or queue_data.broker_name not in held:
                self.queue_data_count += 1
            self._touched_topics.add(topic)
            self._dirty = True

    def _remove_queue_data(self, op):
        topic, broker_name = op
        if self.shapes.remove(topic, broker_name):
            self._changed(broker_name)
            self.queue_data_count -= 1
            self._applied.pop(broker_name, None)
            self._touched_topics.add(topic)
            self._dirty = True

    def _remove_broker_topics(self, op):
        broker_name = op.broker_name
        touched = self.shapes.remove_broker(broker_name)
        if touched:
            self.queue_data_count -= sum(map(len, touched))
            self._changed(broker_name)
            self._applied.pop(broker_name, None)
            self._touched_bulk.extend(touched)
            self._dirty = True

    def _drop_topic(self, op):
        topic = op.topic
        held = self.shapes.topics.get(topic)
        if held is not None:
            self.queue_data_count -= self.shapes.drop(topic)
            for name in held:
                self._applied.pop(name, None)
                self._changed(name)
            self._touched_topics.add(topic)
            self._dirty = True

    def _changed(self, name):
        """Broker ``name``'s QueueData changed: a new epoch, or none once the group is gone (a
        group set again gets a new one, so an epoch read before is never seen again)."""
        if name in self._brokers:
            self._epochs[name] = next(self._epoch_clock)
        else:
            self._epochs.pop(name, None)

    def _put_topics(self, op):
        self._apply_topic_configs(op.broker_name, op.configs, op.wipe, False, op.bulk,
                                  self._delta.hint(op))

    def _merge_topics(self, op):
        """A registration's topic table: every topic, or only those the queue table lacks; not
        at all when a table with the same content digest was applied last and nothing of it
        was removed since."""
        name, digest = op.broker_name, op.digest
        if op.every or digest is None or self._applied.get(name) != digest:
            self._apply_topic_configs(name, op.configs, op.wipe, not op.every, op.bulk,
                                      self._delta.hint(op))
            self._applied[name] = digest

    def _apply_topic_configs(self, broker_name, configs, wipe, missing_only, bulk=False,
                             hint=None):
        """``createAndUpdateQueueData`` for each of ``configs`` (only those whose topic lacks
        this broker when ``missing_only``: Java's per-topic ``isTopicConfigChanged`` with an
        unchanged data version). With ``bulk`` the topics the table lacks are added first as
        bulk operations (:meth:`_add_fresh`; ``hint``, a
        :class:`~rocketpy.namesrv.shapes.FreshTopics` found off the reactor, saves finding
        them when still current) and the rest walked. Inlined: a 10,000-topic broker passes
        here on every data-version change; one QueueData per distinct value of the walk, so
        equal layouts find the same transition."""
        if bulk:
            shapes = self.shapes
            if hint is None or not self._add_fresh(broker_name, hint, wipe):
                hint = FreshTopics.find(configs, shapes.topics.get,
                                        (shapes.removals, shapes.arrivals))
                if hint is not None:
                    self._add_fresh(broker_name, hint, wipe)   # current: found just now
            if hint is not None:
                configs = hint.rest
        queues = self.shapes.topics
        put = self._put_topic
        made = {}
        for config in configs:
            topic = config.topic_name
            perm = config.perm & ~PERM_WRITE if wipe else config.perm
            queue_map = queues.get(topic)
            if queue_map is not None:
                old = queue_map.queues.get(broker_name)
                if old is not None and (missing_only or holds(old, config, perm)):
                    continue  # present (and equal: QueueData.equals)
            value = (config.read_queue_nums, config.write_queue_nums, perm, config.topic_sys_flag)
            queue_data = made.get(value)
            if queue_data is None:
                queue_data = made[value] = QueueData(broker_name, *value)
            put(topic, queue_data)

    def _add_fresh(self, broker_name, fresh, wipe):
        """The walk of ``fresh``'s topics, as bulk operations; False when it is stale."""
        def queue_data_of(value):
            read, write, perm, sys_flag = value
            return QueueData(broker_name, read, write, perm & ~PERM_WRITE if wipe else perm,
                             sys_flag)
        if not self.shapes.add_fresh(fresh, queue_data_of):
            return False
        if fresh.names:
            self._changed(broker_name)
            self._topics_high.saw(len(self.shapes.topics))
            self.queue_data_count += len(fresh.names)
            self._touched_bulk.append(fresh.names)
            self._dirty = True
        return True

    # ------------------------------------------------------------------ appliers: groups

    def _set_broker(self, op):
        """Put (or replace) a broker group; an equal one changes nothing."""
        name = op.broker_name
        addrs = dict(op.broker_addrs)
        old = self._brokers.get(name)
        if (old is not None and old.cluster == op.cluster and old.broker_addrs == addrs
                and old.enable_acting_master == op.enable_acting_master
                and old.zone_name == op.zone_name):
            return
        self._brokers[name] = BrokerData(op.cluster, name, addrs, op.enable_acting_master,
                                         op.zone_name)
        if old is None:
            self._changed(name)
            self._brokers_high.saw(len(self._brokers))
        self._dirty_brokers[name] = None

    def _remove_broker(self, op):
        name = op.broker_name
        if self._brokers.pop(name, None) is not None:
            self._applied.pop(name, None)
            self._epochs.pop(name, None)
            self._dirty_brokers[name] = None

    def _add_to_cluster(self, op):
        self._join_cluster(op.cluster_name, op.broker_name)

    def _join_cluster(self, cluster_name, broker_name):
        """A cluster's set gains a name: the listings (GET_TOPICS_BY_CLUSTER, the system topic
        list) change with it, so the gate's report moves their generation."""
        names = self._clusters.get(cluster_name)
        if names is None:
            names = self._clusters[cluster_name] = {}
            self._clusters_high.saw(len(self._clusters))
        if broker_name not in names:
            names[broker_name] = None
            if len(names) > self._cluster_set_high.get(cluster_name, 0):
                self._cluster_set_high[cluster_name] = len(names)
            self._dirty = True

    def _remove_from_cluster(self, op):
        cluster_name, broker_name = op
        names = self._clusters.get(cluster_name)
        if names is not None and names.pop(broker_name, False) is None:
            if not names:
                del self._clusters[cluster_name]
                self._cluster_set_high.pop(cluster_name, None)
            self._dirty = True

    # ------------------------------------------------------------------ appliers: mappings

    def _set_mapping(self, op):
        topic, info, owner = op
        by_broker = self._mapped.setdefault(topic, {})
        key = (topic, info.bname)
        old = by_broker.get(info.bname)
        if old is not None:
            self.mapping_count -= mapping_weight(old)
            _unindex(self._mappings_of, self._mapping_owner[key], key)
        by_broker[info.bname] = info
        self.mapping_count += mapping_weight(info)
        owner = info.bname if owner is None else owner
        self._mapping_owner[key] = owner
        self._mappings_of.setdefault(owner, {})[key] = None
        self._mapping_changed(topic)

    def _remove_broker_mappings(self, op):
        table = self._mapped
        for key in self._mappings_of.pop(op.broker_name, ()):
            del self._mapping_owner[key]
            topic, bname = key
            by_broker = table[topic]
            self.mapping_count -= mapping_weight(by_broker.pop(bname))
            if not by_broker:
                del table[topic]
            self._mapping_changed(topic)

    def _mapping_changed(self, topic):
        self.snapshots.mapping_changed(topic)
        self._touched_topics.add(topic)
        self._dirty = True

    # ------------------------------------------------------------------ appliers: live table

    def _put_live(self, op):
        """A live entry (a new generation) and its filter servers; a warm restart's is
        provisional."""
        key = op.key
        self._bind_live(key, BrokerLiveInfo(op.last_update_ms, op.timeout_ms, op.data_version,
                                            op.channel_id, op.ha_server_addr, op.broker_name,
                                            next(self._generations)))
        if op.provisional:
            self._provisional[key] = op.host
            self._shown = True
        self._set_filter_servers(key, op.broker_name, op.filter_servers)

    def _bind_live(self, key, live):
        old = self._live.get(key)
        if (self._provisional.pop(key, False) is not False or old is None
                or (old.channel_id, old.ha_server_addr, old.broker_name, old.data_version)
                != (live.channel_id, live.ha_server_addr, live.broker_name, live.data_version)):
            self._shown = True
        if old is not None and old.channel_id != live.channel_id:
            _unindex(self._by_channel, old.channel_id, key)
        self._live[key] = live
        self.expiry.set(key, live.last_update_ms + live.heartbeat_timeout_ms)
        if live.channel_id is not None:
            self._by_channel.setdefault(live.channel_id, {})[key] = None

    def _refresh_live(self, op):
        key, now_ms = op
        live = self._live.get(key)
        if live is not None:
            self._live[key] = BrokerLiveInfo(now_ms, live.heartbeat_timeout_ms, live.data_version,
                                             live.channel_id, live.ha_server_addr,
                                             live.broker_name, live.generation)
            self.expiry.set(key, now_ms + live.heartbeat_timeout_ms)

    def _remove_live(self, op):
        key = op.key
        live = self._live.pop(key, None)
        self._provisional.pop(key, None)
        if live is not None:
            self._shown = True
            self.expiry.remove(key)
            _unindex(self._by_channel, live.channel_id, key)

    def _set_filter_servers(self, key, broker_name, servers):
        if servers is None:
            return
        if not servers:
            if self._filters.pop(key, None) is not None:
                self._filters_changed(key, broker_name)
        elif self._filters.get(key) != servers:
            self._filters[key] = tuple(servers)
            self._filters_changed(key, broker_name)

    def _remove_filter_servers(self, op):
        if self._filters.pop(op.key, None) is not None:
            self._filters_changed(op.key, op.broker_name)

    def _filters_changed(self, key, broker_name):
        """An address's filter servers changed: the routes of every group listing it (under
        the key's cluster; 4.9 keys by address alone) show them. Usually the live entry's own
        group; rarely changed, so the groups are looked through."""
        self._dirty_brokers[broker_name] = None
        cluster, addr = key
        for name, data in self._brokers.items():
            if (cluster is None or data.cluster == cluster) and addr in data.broker_addrs.values():
                self._dirty_brokers[name] = None

    # ------------------------------------------------------------------ appliers: a warm restart

    def _restore_high_water(self, op):
        self._topics_high.saw(op.topics)
        self._brokers_high.saw(op.brokers)
        self._clusters_high.saw(op.clusters)

    def _restore_cluster(self, op):
        cluster_name = op.cluster_name
        for name in op.broker_names:
            self._join_cluster(cluster_name, name)
        if op.set_high > self._cluster_set_high.get(cluster_name, 0):
            self._cluster_set_high[cluster_name] = op.set_high

    def _restore_applied_digest(self, op):
        if op.broker_name in self._brokers:
            self._applied[op.broker_name] = op.digest

    def _restore_topics(self, op):
        """Topics the table lacks, all with one layout, in bulk (:meth:`ShapeTable.restore`)."""
        if not op.queue_datas:
            return
        names = self.shapes.restore(op.queue_datas, op.high, op.names)
        if not names:
            return
        for queue_data in op.queue_datas:
            self._changed(queue_data.broker_name)
        self._topics_high.saw(len(self.shapes.topics))
        self.queue_data_count += len(names) * len(self.shapes.topics[names[0]])
        self._touched_bulk.append(names)
        self._dirty = True

    # ------------------------------------------------------------------ appliers: effects

    def _invalidate_routes(self, op):
        self.snapshots.invalidate_all()
        self._shown = True

    def _notify_min_broker_id_changed(self, op):
        """Report a group's new smallest brokerId (Java ``notifyMinBrokerIdChanged``)."""
        addrs = dict(op.broker_addrs)
        if not addrs or self.on_min_broker_id_changed is None:
            return
        min_id = min(addrs)
        if op.offline_addr is not None or len(addrs) == 1:
            targets = tuple(addrs.values())
        else:
            targets = tuple(addr for bid, addr in addrs.items() if bid != min_id)
        self.on_min_broker_id_changed(MinBrokerIdChange(targets, min_id, addrs[min_id],
                                                        op.offline_addr, op.ha_addr))

    # ------------------------------------------------------------------ reading (RouteView)

    def high_water_marks(self):
        """``(topics, broker names, clusters)``: the largest sizes those tables reached."""
        return self._topics_high.mark, self._brokers_high.mark, self._clusters_high.mark

    def cluster_high_water(self, cluster_name):
        """The largest number of broker names ``cluster_name``'s set held."""
        return self._cluster_set_high.get(cluster_name, 0)

    def topics_of_broker(self, broker_name):
        """The topics whose queue layout names ``broker_name``."""
        return self.shapes.topics_of_broker(broker_name)

    def topic_count_of_broker(self, broker_name):
        """``len(topics_of_broker(broker_name))``, counted per shared layout (the status page's
        per-group count, read per request on the reactor)."""
        return self.shapes.topic_count(broker_name)

    def applied_digest(self, broker_name):
        """The content digest of the topic table applied last for ``broker_name``'s group, while
        nothing of it has been removed; else None."""
        return self._applied.get(broker_name)

    def mapping_owner(self, topic, broker_name):
        """The group that registered ``topic``'s static mapping for ``broker_name``, or None."""
        return self._mapping_owner.get((topic, broker_name))

    def live_timeout(self, requested_ms):
        """The heartbeat timeout of a registration asking for ``requested_ms`` (the release's)."""
        return self.liveness.timeout(requested_ms)

    def master_result(self, cluster_name, broker_id, addrs):
        """The registration's result: ``haServerAddr``/``masterAddr`` of a slave's live master."""
        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master = self._live.get(self.live_key(cluster_name, master_addr))
                if master is not None:
                    return RegisterBrokerResult(master.ha_server_addr, master_addr)
        return _NO_MASTER

    def is_broker_topic_config_changed(self, cluster_name, broker_addr, data_version):
        previous = self.query_broker_topic_config(cluster_name, broker_addr)
        return previous is None or previous != data_version

    def broker_live_info(self, cluster_name, broker_addr):
        """The live entry of ``broker_addr`` (keyed as this release keys it), or None."""
        return self._live.get(self.live_key(cluster_name, broker_addr))

    def query_broker_topic_config(self, cluster_name, broker_addr):
        live = self.broker_live_info(cluster_name, broker_addr)
        return None if live is None else live.data_version

    def is_provisional(self, cluster_name, broker_addr):
        """Whether the live entry of ``broker_addr`` was loaded from a snapshot and its broker
        has not registered since."""
        return self.live_key(cluster_name, broker_addr) in self._provisional

    # ------------------------------------------------------------------ registration

    def register_broker(self, registration):
        """``registerBroker`` of a :class:`~rocketpy.namesrv.model.Registration`: a result
        (``haServerAddr``/``masterAddr`` for a slave whose master is live), or None when 5.x
        refuses a single-topic registration from a broker that has not registered yet (the
        caller answers SYSTEM_ERROR "register broker failed"). The rules are the registration
        policy's."""
        delta = RouteDelta()
        result = self.registration.register_broker(self, registration, delta)
        self.apply(delta)
        return result

    def repeats_applied(self, registration):
        """True when registering ``registration`` (its wrapper's ``topic_config_table`` unread)
        would change no topic: the address is live with the body's data version, its group
        holds it under its brokerId, and the release would read none of its topics. The
        registration-body cache then needs no decoded table, only this answer."""
        wrapper = registration.wrapper
        live = self.broker_live_info(registration.cluster_name, registration.broker_addr)
        if live is None or live.data_version != wrapper.data_version:
            return False
        broker_data = self._brokers.get(registration.broker_name)
        if broker_data is None or broker_data.broker_addrs.get(
                registration.broker_id) != registration.broker_addr:
            return False
        return self.registration.repeats_applied(self, broker_data, registration)

    def walk_view(self, registration):
        """For a master's re-registration: ``(prefilter, still_valid)``, or None. ``prefilter(
        wrapper)`` (pure but for reading the topic table, which any thread may do: shapes are
        immutable, ``dict.get`` is atomic) gives the topic configs whose QueueData for this
        broker is missing or different, or None; ``still_valid()`` (on this thread) says
        whether that is still so: nothing of this broker's QueueData and no live entry changed
        since the view was taken. Then a walk of those alone is the walk of all (5.x, a new data
        version: Java's ``createAndUpdateQueueData`` of every topic), in time proportional to
        what changed."""
        cluster_name, broker_addr = registration.cluster_name, registration.broker_addr
        broker_name, broker_id = registration.broker_name, registration.broker_id
        if broker_id != MASTER_ID or not self.registration.walks_present_topics:
            return None
        live = self.broker_live_info(cluster_name, broker_addr)
        broker_data = self._brokers.get(broker_name)
        if (live is None or broker_data is None
                or broker_data.broker_addrs.get(broker_id) != broker_addr
                or self.config.delete_topic_with_broker_registration):
            return None
        epoch, topics_get, data_version = self._epochs.get(broker_name, 0), \
            self.shapes.topics.get, live.data_version
        generation = live.generation

        def prefilter(wrapper):
            if (wrapper.topic_queue_mapping_info_map or wrapper.data_version == data_version):
                return None
            changed = {}
            for key, config in wrapper.topic_config_table.items():
                shape = topics_get(config.topic_name)
                old = None if shape is None else shape.queues.get(broker_name)
                if old is None or not holds(old, config, config.perm):
                    changed[key] = config
            return changed

        def still_valid():   # a heartbeat moves the entry's time, not its generation
            held = self._brokers.get(broker_name)
            now = self.broker_live_info(cluster_name, broker_addr)
            return (self._epochs.get(broker_name, 0) == epoch
                    and now is not None and now.generation == generation
                    and held is not None and held.broker_addrs.get(broker_id) == broker_addr
                    and not self.config.delete_topic_with_broker_registration)
        return prefilter, still_valid

    def fresh_view(self):
        """``find(table)``: a :class:`~rocketpy.namesrv.shapes.FreshTopics` of a registration's
        topic table (or None), computed on any thread against the topic table as it is now; the
        writer adds those topics in bulk if none appeared and no topic left meanwhile."""
        shapes = self.shapes
        topics_get, counts = shapes.topics.get, (shapes.removals, shapes.arrivals)
        return lambda table: FreshTopics.find(table.values(), topics_get, counts, table)

    def update_broker_info_update_timestamp(self, cluster_name, broker_addr, now_ms):
        self.apply(RouteDelta((ops.RefreshLive(self.live_key(cluster_name, broker_addr),
                                               now_ms),)))

    # ------------------------------------------------------------------ unregistration

    @_gate
    def unregister_brokers(self, requests):
        """``unRegisterBroker(Set)``: apply a batch at once, then clean the topics once."""
        removed, reduced, notify = {}, {}, {}
        for request in requests:
            key = self.live_key(request.cluster_name, request.broker_addr)
            live = self._live.get(key)
            if live is not None and (
                    (request.channel_id is not None and live.channel_id != request.channel_id)
                    or (request.live_generation is not None
                        and live.generation != request.live_generation)):
                continue  # the broker registered again since this channel event or expiry
            name = request.broker_name
            if self._malformed(request):
                continue
            delta = RouteDelta()   # one per request: the next one reads what this one left
            delta.add(ops.RemoveLive(key))
            delta.add(ops.RemoveFilterServers(key, name))
            broker_data = self._brokers.get(name)
            if broker_data is not None:
                addrs = dict(broker_data.broker_addrs)
                min_id_changed = bool(addrs) and request.broker_id == min(addrs)
                for bid in self.registration.unregistered_ids(addrs, request):
                    del addrs[bid]
                if not addrs:
                    delta.add(ops.RemoveBroker(name))
                    delta.add(ops.RemoveFromCluster(request.cluster_name, name))
                    removed[name] = None
                    self.apply(delta)
                    continue
                delta.add(ops.SetBroker.of(replace(broker_data, broker_addrs=addrs)))
                if min_id_changed:
                    notify[name] = (addrs, request.broker_addr)
            reduced[name] = None
            self.apply(delta)
        self.apply(self._clean_topics(removed, reduced))
        if notify and self.config.notify_min_broker_id_changed:
            delta = RouteDelta()
            for name, (addrs, offline_addr) in notify.items():
                broker_data = self._brokers.get(name)
                if broker_data is not None and broker_data.enable_acting_master:
                    delta.add(ops.NotifyMinBrokerIdChanged(tuple(addrs.items()), offline_addr,
                                                           None))
            self.apply(delta)

    def _malformed(self, request):
        """Whether an UNREGISTER_BROKER header lacks a field its unregistration needs: a
        cluster, address or name (5.x's ``BrokerAddrInfo.hashCode`` or ConcurrentHashMap throws;
        4.9.8 removes what its HashMaps find under null, leaving the cluster's name set), or an
        id when its group holds addresses (Java's ``getBrokerId().equals`` throws after the
        live entry is gone). Java's batch stops there, dropping the requests after it and
        leaving this one half applied; rocketpy skips this one whole, logs it and goes on."""
        if None not in (request.cluster_name, request.broker_addr, request.broker_name):
            if request.broker_id is not None:
                return False
            broker_data = self._brokers.get(request.broker_name)
            if broker_data is None or not broker_data.broker_addrs:
                return False
        log.warning("UNREGISTER_BROKER without a field it needs changes nothing: clusterName=%s "
                    "brokerAddr=%s brokerName=%s brokerId=%s", request.cluster_name,
                    request.broker_addr, request.broker_name, request.broker_id)
        return True

    def _clean_topics(self, removed, reduced):
        """The delta that takes removed brokers out of their topics and, for a group left
        without a master under acting master, its write permission."""
        delta = RouteDelta()
        for name in removed:
            delta.add(ops.RemoveBrokerTopics(name))
            delta.add(ops.RemoveBrokerMappings(name))
        for name in reduced:
            broker_data = self._brokers.get(name)
            if broker_data is None or not broker_data.enable_acting_master:
                continue
            if broker_data.broker_addrs and min(broker_data.broker_addrs) == MASTER_ID:
                continue  # a master exists
            for topic in self.topics_of_broker(name):
                queue_data = self.shapes.topics[topic][name]
                if queue_data.perm & PERM_WRITE:
                    delta.add(ops.PutQueueData(topic, replace(queue_data,
                                                              perm=queue_data.perm & ~PERM_WRITE)))
        return delta

    def _setup_unregister(self, key, live):
        """``setupUnRegisterRequest``: find the broker name and id now holding this address."""
        cluster_name, broker_addr = key
        broker_data = self._brokers.get(live.broker_name)
        candidates = [broker_data] if broker_data is not None else []
        candidates.append(None)  # fall back to a full search, as Java does
        for broker_data in candidates:
            pool = [broker_data] if broker_data is not None else [
                self._brokers[name] for name in self.brokers_in_order()]
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
            request = self._setup_unregister(key, self._live[key])
            if request is not None:
                requests.append(request)
        return requests

    @_gate
    def scan_not_active_broker(self, now_ms):
        """Expired live entries as ``(request, channel_id)``; the caller submits the requests
        and closes the channels (Java's scanNotActiveBroker does both)."""
        expired, delta = [], RouteDelta()
        for key in self.expiry.expired(now_ms):
            live = self._live[key]
            request = self._setup_unregister(key, live)
            if request is None:
                delta.add(ops.RemoveLive(key))  # no broker data left: nothing to unregister
            else:
                expired.append((request, live.channel_id))
        self.apply(delta)
        return expired

    # ------------------------------------------------------------------ routes

    def pickup_topic_route_data(self, topic):
        """``pickupTopicRouteData``: the route, lists in Java order, or None."""
        queue_map = self.shapes.topics.get(topic)
        if not queue_map:
            return None
        names = queue_map.java_order()
        queue_datas = [queue_map[name] for name in names]
        broker_datas = []
        filters = {}
        keep_missing = self.registration.lists_missing_filter_servers
        brokers, filter_servers = self._brokers, self._filters
        for name in ordered(names, hashset_copy_capacity(len(names))):
            broker_data = brokers.get(name)
            if broker_data is None:
                continue
            broker_datas.append(broker_data)
            if filter_servers:
                for addr in broker_data.broker_addrs.values():
                    servers = filter_servers.get(self.live_key(broker_data.cluster, addr))
                    if servers is not None or keep_missing:
                        filters[addr] = servers
        if not broker_datas:
            return None
        return self.registration.finish_route(self, topic, TopicRouteData(queue_datas, broker_datas,
                                                                          filters))

    # ------------------------------------------------------------------ admin operations

    def _write_perm(self, broker_name, wipe):
        delta = RouteDelta()
        topics = self.topics_of_broker(broker_name)
        for topic in topics:
            queue_data = self.shapes.topics[topic][broker_name]
            perm = queue_data.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
            delta.add(ops.PutQueueData(topic, replace(queue_data, perm=perm)))
        self.apply(delta)
        return len(topics)

    def wipe_write_perm_of_broker(self, broker_name):
        """WIPE_WRITE_PERM_OF_BROKER: the number of topics the broker serves."""
        return self._write_perm(broker_name, True)

    def add_write_perm_of_broker(self, broker_name):
        """ADD_WRITE_PERM_OF_BROKER: perm becomes READ|WRITE; the number of topics."""
        return self._write_perm(broker_name, False)

    def delete_topic(self, topic, cluster_name=None):
        """DELETE_TOPIC_IN_NAMESRV, for all brokers or for the brokers of one cluster."""
        delta = RouteDelta()
        if not cluster_name:
            if topic in self.shapes.topics:
                delta.add(ops.DropTopic(topic))
        else:
            for name in self._clusters.get(cluster_name, ()):
                delta.add(ops.RemoveQueueData(topic, name))
        self.apply(delta)

    def register_topic(self, topic, queue_datas):
        """REGISTER_TOPIC_IN_NAMESRV (5.x): the release's rules, as a delta."""
        delta = RouteDelta()
        self.registration.register_topic(self, topic, queue_datas, delta)
        self.apply(delta)

    def get_broker_member_group(self, broker_name):
        broker_data = self._brokers.get(broker_name)
        return {} if broker_data is None else dict(broker_data.broker_addrs)

    # ------------------------------------------------------------------ listings (Java order)

    def topics_in_order(self):
        """topicQueueTable's key order."""
        return ordered(list(self.shapes.topics), self._topics_high.capacity())

    def brokers_in_order(self):
        return ordered(list(self._brokers), self._brokers_high.capacity())

    def clusters_in_order(self):
        return ordered(list(self._clusters), self._clusters_high.capacity())

    def cluster_broker_names(self, cluster_name):
        """A cluster's HashSet of broker names, in its order."""
        names = self._clusters.get(cluster_name, {})
        return ordered(list(names), hashmap_capacity(self._cluster_set_high.get(cluster_name, 0)))

    def _listing(self, name, build):
        """``build()``, kept until the tables change (keyed by the snapshots' generation, which
        every gated change of a topic moves)."""
        generation = self.snapshots.generation
        held = self._listings.get(name)
        if held is not None and held[0] == generation:
            return held[1]
        items = build()
        self._listings[name] = (generation, items)
        return items

    def get_all_topic_list(self):
        return self._listing("all", lambda: self.wire.topic_set(self.topics_in_order()))

    def all_topic_list_work(self):
        """None when the all-topic list is held for the current tables; else ``(work, keep)``:
        ``work()`` orders a copy of the topic names taken now and reads nothing else (any
        thread may run it: at 1 M topics Java's orders cost seconds of Python), ``keep(items)``
        (on this thread) holds the result if the tables have not changed since, and returns it."""
        generation = self.snapshots.generation
        held = self._listings.get("all")
        if held is not None and held[0] == generation:
            return None
        names, capacity, topic_set = list(self.shapes.topics), self._topics_high.capacity(), \
            self.wire.topic_set

        def keep(items):
            if self.snapshots.generation == generation:
                self._listings["all"] = (generation, items)
            return items
        return (lambda: topic_set(ordered(names, capacity))), keep

    def get_topics_by_cluster(self, cluster_name):
        """Java walks every topic for each broker name of the cluster; the same list, built
        from each broker's own topics sorted by their place in the topic table (O(T + pairs))."""
        if cluster_name not in self._clusters:
            return []   # Java: NullPointerException, logged, empty list answered
        held = self._cluster_listing(cluster_name)
        if held is not None:
            return held
        position = self._listing("position", lambda: {
            topic: i for i, topic in enumerate(self.topics_in_order())}).__getitem__
        items = []
        for name in self.cluster_broker_names(cluster_name):
            items.extend(sorted(self.topics_of_broker(name), key=position))
        return self._keep_cluster_listing(cluster_name, self.snapshots.generation,
                                          self.wire.topic_set(items))

    def _cluster_listing(self, cluster_name):
        """A cluster's topic list built for the current tables, or None."""
        held = self._cluster_listings.get(cluster_name)
        if held is not None and held[0] == self.snapshots.generation:
            return held[1]
        return None

    def _keep_cluster_listing(self, cluster_name, generation, items):
        """Hold ``items`` (built for ``generation``) while the tables stay as they were; lists
        of older tables are dropped, so at most one list per known cluster is held."""
        if self.snapshots.generation == generation:
            if any(g != generation for g, _ in self._cluster_listings.values()):
                self._cluster_listings = {c: held for c, held in self._cluster_listings.items()
                                          if held[0] == generation}
            self._cluster_listings[cluster_name] = (generation, items)
        return items

    def topics_by_cluster_work(self, cluster_name):
        """``get_topics_by_cluster`` as ``(work, keep)``: ``work()`` is pure work over copies
        taken now (any thread may run it), ``keep(items)`` (on this thread) holds its result
        while the tables stay as they were, as the all-topic list is; None for a cluster the
        tables do not know (its answer is the empty list) or one whose list is held."""
        if cluster_name not in self._clusters or \
                self._cluster_listing(cluster_name) is not None:
            return None
        generation = self.snapshots.generation
        names, capacity, topic_set = list(self.shapes.topics), self._topics_high.capacity(), \
            self.wire.topic_set
        per_broker = [self.topics_of_broker(name) for name in self.cluster_broker_names(cluster_name)]

        def work():
            position = {topic: i for i, topic in enumerate(ordered(names, capacity))}.__getitem__
            items = []
            for topics in per_broker:
                items.extend(sorted(topics, key=position))
            return topic_set(items)
        return work, lambda items: self._keep_cluster_listing(cluster_name, generation, items)

    def get_system_topic_list(self):
        """(topic list, brokerAddr or None): cluster names and broker names, and one address."""
        items = []
        for cluster in self.clusters_in_order():
            items.append(cluster)
            items.extend(self.cluster_broker_names(cluster))
        broker_addr = None
        for name in self.brokers_in_order():
            addrs = self._brokers[name].broker_addrs
            if addrs:
                broker_addr = addrs[ordered(list(addrs), hashmap_capacity(len(addrs)))[0]]
                break
        return self.wire.topic_set(items), broker_addr

    def _first_queue_data_flag_topics(self, test):
        items = []
        for topic in self.topics_in_order():
            queue_map = self.shapes.topics[topic]
            first = queue_map.java_order()[0]
            if test(queue_map[first].topic_sys_flag):
                items.append(topic)
        return self.wire.topic_set(items)

    def get_unit_topics(self):
        return self._listing("unit", lambda: self._first_queue_data_flag_topics(
            lambda f: f & FLAG_UNIT == FLAG_UNIT))

    def get_has_unit_sub_topic_list(self):
        return self._listing("unit_sub", lambda: self._first_queue_data_flag_topics(
            lambda f: f & FLAG_UNIT_SUB == FLAG_UNIT_SUB))

    def get_has_unit_sub_un_unit_topic_list(self):
        return self._listing("unit_sub_un_unit", lambda: self._first_queue_data_flag_topics(
            lambda f: f & FLAG_UNIT != FLAG_UNIT and f & FLAG_UNIT_SUB == FLAG_UNIT_SUB))


#: op type -> its applier: the one table ``apply`` dispatches by (every op of
#: :data:`~rocketpy.namesrv.delta.OPS`, checked when imported)
APPLIERS = {
    ops.AddToCluster: RouteInfoManager._add_to_cluster,
    ops.RemoveFromCluster: RouteInfoManager._remove_from_cluster,
    ops.SetBroker: RouteInfoManager._set_broker,
    ops.RemoveBroker: RouteInfoManager._remove_broker,
    ops.PutLive: RouteInfoManager._put_live,
    ops.RefreshLive: RouteInfoManager._refresh_live,
    ops.RemoveLive: RouteInfoManager._remove_live,
    ops.RemoveFilterServers: RouteInfoManager._remove_filter_servers,
    ops.MergeTopics: RouteInfoManager._merge_topics,
    ops.PutTopics: RouteInfoManager._put_topics,
    ops.PutQueueData: RouteInfoManager._put_queue_data,
    ops.RemoveQueueData: RouteInfoManager._remove_queue_data,
    ops.RemoveBrokerTopics: RouteInfoManager._remove_broker_topics,
    ops.DropTopic: RouteInfoManager._drop_topic,
    ops.SetMapping: RouteInfoManager._set_mapping,
    ops.RemoveBrokerMappings: RouteInfoManager._remove_broker_mappings,
    ops.RestoreHighWater: RouteInfoManager._restore_high_water,
    ops.RestoreCluster: RouteInfoManager._restore_cluster,
    ops.RestoreAppliedDigest: RouteInfoManager._restore_applied_digest,
    ops.RestoreTopics: RouteInfoManager._restore_topics,
    ops.NotifyMinBrokerIdChanged: RouteInfoManager._notify_min_broker_id_changed,
    ops.InvalidateRoutes: RouteInfoManager._invalidate_routes,
}
assert tuple(APPLIERS) == ops.OPS, "an op without an applier, or an applier without an op"
