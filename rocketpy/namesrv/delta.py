"""NameServer state layer: a change to the route tables, described before it is made.

A release's registration policy reads the tables through the
:class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager`'s public read methods and
records what should change here; :meth:`RouteInfoManager.apply
<rocketpy.namesrv.route_info_manager.RouteInfoManager.apply>` is the one writer, and reports
what the change touched (:class:`Touched`). No policy holds a writer, so the gate sees every
change, and an empty delta is what "nothing to do" looks like. A bulk step (a registration's
topic table) is one entry, not one per topic: the writer walks it against the tables."""
__all__ = ["RouteDelta", "Touched"]


class Touched:
    """What :meth:`RouteInfoManager.apply` changed: ``topics`` whose layout or mapping changed,
    ``shapes`` the layouts those topics use (read from the tables when first asked: ask
    before the next change), and ``brokers``, the names whose group or filter servers changed.
    ``topics`` and ``shapes`` are built when read: a bulk registration touches 500,000 topics,
    which the writer hands over as lists, not copied into a set nobody may ask for."""

    __slots__ = ("brokers", "_parts", "_table", "_topics", "_shapes")

    def __init__(self, topics=frozenset(), brokers=frozenset(), bulk=(), table=None):
        self.brokers = brokers
        self._parts = (topics, *bulk)
        self._table = table
        self._topics = self._shapes = None

    def __bool__(self):
        return bool(self.brokers) or any(self._parts)

    @property
    def topics(self):
        if self._topics is None:
            self._topics = frozenset().union(*self._parts)
        return self._topics

    @property
    def shapes(self):
        if self._shapes is None:
            found = {}
            for shape in map(self._table.get, self.topics):
                if shape is not None:
                    found[id(shape)] = shape
            self._shapes = tuple(found.values())
        return self._shapes


class RouteDelta:
    """An ordered list of changes; each method names one and returns nothing."""

    __slots__ = ("ops",)

    def __init__(self):
        self.ops = []

    def __bool__(self):
        return bool(self.ops)

    def __len__(self):
        return len(self.ops)

    def add_to_cluster(self, cluster_name, broker_name):
        self.ops.append(("add_to_cluster", (cluster_name, broker_name)))

    def set_broker(self, broker_data):
        """Put or replace a broker group (an equal record changes nothing)."""
        self.ops.append(("set_broker", (broker_data,)))

    def remove_live(self, key):
        self.ops.append(("remove_live", (key,)))

    def refresh_live(self, key, now_ms):
        """A heartbeat: the live entry's time and deadline move on."""
        self.ops.append(("refresh_live", (key, now_ms)))

    def remove_filter_servers(self, key, broker_name):
        self.ops.append(("remove_filter_servers", (key, broker_name)))

    def remove_broker(self, broker_name):
        self.ops.append(("remove_broker", (broker_name,)))

    def remove_from_cluster(self, cluster_name, broker_name):
        self.ops.append(("remove_from_cluster", (cluster_name, broker_name)))

    def live(self, key, now_ms, timeout_millis, data_version, channel_id, ha_server_addr,
             broker_name, filter_servers):
        """A registration's live entry (a new generation) and filter servers."""
        self.ops.append(("live", (key, now_ms, timeout_millis, data_version, channel_id,
                                  ha_server_addr, broker_name, filter_servers)))

    def merge_topics(self, broker_name, wrapper, wipe, every):
        """``createAndUpdateQueueData`` for a registration's topics: all (``every``), or those
        the queue table lacks unless the same content was merged last."""
        self.ops.append(("merge_topics", (broker_name, wrapper, wipe, every)))

    def put_topics(self, broker_name, topic_configs, wipe, fresh=None):
        """Every topic of ``topic_configs`` gets this broker's QueueData (4.9: all again);
        ``fresh``: its :class:`~rocketpy.namesrv.shapes.FreshTopics`, if found."""
        self.ops.append(("put_topics", (broker_name, topic_configs, wipe, fresh)))

    def put_queue_data(self, topic, queue_data):
        self.ops.append(("put_queue_data", (topic, queue_data)))

    def remove_queue_data(self, topic, broker_name):
        self.ops.append(("remove_queue_data", (topic, broker_name)))

    def remove_broker_topics(self, broker_name):
        """Take a departed broker out of every topic it serves: one entry whatever their
        number (one per topic held ~150 MB of ops for a broker of 1 M topics)."""
        self.ops.append(("remove_broker_topics", (broker_name,)))

    def drop_topic(self, topic):
        self.ops.append(("drop_topic", (topic,)))

    def set_mapping(self, topic, info, owner=None):
        """Put a static-topic mapping, kept as long as the group ``owner`` (the registering
        broker's name; None: the one the mapping names) is."""
        self.ops.append(("set_mapping", (topic, info, owner)))

    def remove_broker_mappings(self, broker_name):
        """Drop the static-topic mappings a departed group registered: one entry whatever
        their number."""
        self.ops.append(("remove_broker_mappings", (broker_name,)))

    # -- a warm restart (:mod:`rocketpy.namesrv.routeimage`): tables loaded as they were

    def restore_high_water(self, topics, brokers, clusters):
        self.ops.append(("restore_high_water", (topics, brokers, clusters)))

    def restore_cluster(self, cluster_name, broker_names, set_high):
        self.ops.append(("restore_cluster", (cluster_name, broker_names, set_high)))

    def restore_group(self, broker_data, applied_digest):
        self.ops.append(("restore_group", (broker_data, applied_digest)))

    def restore_topics(self, queue_datas, high, names):
        """Topics the tables lack, with one layout: one entry whatever their number."""
        self.ops.append(("restore_topics", (queue_datas, high, names)))

    def restore_live(self, key, last_update_ms, timeout_ms, data_version, ha_server_addr,
                     broker_name, host, filter_servers):
        """A provisional live entry (no channel yet), bound to ``host``."""
        self.ops.append(("restore_live", (key, last_update_ms, timeout_ms, data_version,
                                          ha_server_addr, broker_name, host, filter_servers)))

    def notify_min_broker_id_changed(self, addrs, offline_addr, ha_addr):
        """Report a group's new smallest brokerId once the change is made."""
        self.ops.append(("notify_min_broker_id_changed", (addrs, offline_addr, ha_addr)))
