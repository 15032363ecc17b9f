"""NameServer state layer: the encoded GET_ROUTEINFO_BY_TOPIC body, cached per topic and JSON
style (the cache apache/rocketmq#10982 asks the Java NameServer for).

Every client polls every topic's route every 30 s, and the route rarely changes, so the body is
built once and reused. Correctness comes first: an entry is served only while

* the topic's route version in the :class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager`
  is unchanged (every mutation that can alter a topic's answer bumps it: queue data, perms,
  broker addresses, acting-master flag, zone, filter servers, static-topic mappings, topic
  deletion; versions come from one counter, so a deleted and re-created topic never matches an
  old entry);
* the manager's ``epoch`` is unchanged (bumped on config updates, e.g. supportActingMaster);
* the ``orderTopicConf`` value is the one the entry was built with (it comes from the KV store,
  so it is part of the key instead of being invalidated).

Keys are (topic, standard JSON?, orderTopicConf).

Nothing here reads a clock; the cache holds at most ``max_entries`` bodies and starts afresh when
full.
"""
from .answers import encode_topic_route

__all__ = ["RouteCache"]


class RouteCache:
    def __init__(self, route_info_manager, max_entries=100_000):
        self.rim = route_info_manager
        self.max_entries = max_entries
        self._entries = {}
        self.hits = 0
        self.misses = 0

    def lookup(self, topic, standard, order_topic_conf=None):
        """The route body for ``topic`` in the given JSON style, or None (no route)."""
        rim = self.rim
        version = rim.route_version(topic)
        if version is None:
            return None
        key = (topic, standard, order_topic_conf)
        entry = self._entries.get(key)
        if entry is not None and entry[0] == version and entry[1] == rim.epoch:
            self.hits += 1
            return entry[2]
        self.misses += 1
        body = self.build(topic, standard, order_topic_conf)
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[key] = (version, rim.epoch, body)
        return body

    def build(self, topic, standard, order_topic_conf=None):
        """The body computed afresh (what a cache miss stores)."""
        route = self.rim.pickup_topic_route_data(topic)
        if route is None:
            return None
        route.order_topic_conf = order_topic_conf
        return encode_topic_route(route, standard, self.rim.profile.v5_registration)

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)
