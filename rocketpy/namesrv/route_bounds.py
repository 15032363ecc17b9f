"""NameServer processor layer: server-wide bounds on the route state (a rocketpy addition;
Java's ``RouteInfoManager`` grows as long as anyone registers).

REGISTER_BROKER is open by design and ``registerBrokerMaxTopics`` bounds one registration, not
the server: a thousand registrations of a thousand new topics took the tables to 1 M entries
(53 -> 850 MiB), 3 M to 2.5 GB and a 12 s stall (issue 12). So the whole state is bounded
(:data:`ROUTE_BOUND_KEYS`, far above any real cluster): a registration or
REGISTER_TOPIC_IN_NAMESRV that would pass a bound is refused before anything is applied, with
SYSTEM_ERROR naming the bound, and counted (:attr:`RouteBounds.refused`).

The check is O(1) far from the bounds (a registration cannot add more than it carries) but for
the queues of its static topic mappings, each read once (one mapping holds at most
``namesrvMaxMappingQueues``); near one it counts, in one pass, what the registration could add
(new topics, topic-broker pairs, static topic mappings and their queues, broker addresses and
names, filter servers), never less than it adds. Eight registrations of 3 mappings x 250,000
queues took a server from 54 to 709 MiB with nothing counting them (issue 31)."""
import logging

from rocketpy.remoting.codes import ResponseCode

from .replies import error
from .route_info_manager import mapping_weight
from .settings import IntSettings

__all__ = ["RouteBounds", "ROUTE_BOUND_KEYS"]

log = logging.getLogger("rocketpy.namesrv")

#: ``(property key, attribute, default, meaning)``; 0 turns a bound off. 10 M topic-broker
#: pairs hold about 1.1 GiB of route state (``bench/route_state.py --pairs 10000000``: 116 bytes
#: a pair with one broker per topic, a few with many brokers per topic).
ROUTE_BOUND_KEYS = (
    ("namesrvMaxTopics", "max_topics", 10_000_000, "topics with a route, all brokers together"),
    ("namesrvMaxTopicBrokerPairs", "max_topic_broker_pairs", 10_000_000,
     "queue data entries (one per topic and broker name): the route table's size; and static "
     "topic mappings (likewise), one each and one per queue of their currIdMap"),
    ("namesrvMaxMappingQueues", "max_mapping_queues", 65_536,
     "queues (currIdMap entries) of one static topic mapping: what one topic's queues on a "
     "broker can be"),
    ("namesrvMaxBrokers", "max_brokers", 10_000,
     "live broker addresses, and broker names, each"),
    ("namesrvMaxFilterServers", "max_filter_servers", 10_000,
     "filter server addresses of all brokers together"),
)


class RouteBounds(IntSettings):
    """The bounds of :data:`ROUTE_BOUND_KEYS`, and the checks that apply them."""

    KEYS = ROUTE_BOUND_KEYS

    def __init__(self, **values):
        super().__init__(**values)
        #: refusals since start, by bound (the property key)
        self.refused = {key: 0 for key, *_ in ROUTE_BOUND_KEYS}

    def registration_refusal(self, rim, registration):
        """None when ``registration`` (a :class:`~rocketpy.namesrv.model.Registration`) keeps
        the tables (``rim``, a :class:`~rocketpy.namesrv.routeview.RouteView`) within the
        bounds, else the Reply that refuses it."""
        broker_name, wrapper = registration.broker_name, registration.wrapper
        filter_servers = registration.filter_servers
        if self.max_brokers:
            if (broker_name not in rim.broker_addr_table
                    and len(rim.broker_addr_table) >= self.max_brokers):
                return self._refuse("namesrvMaxBrokers", self.max_brokers, "broker names",
                                    len(rim.broker_addr_table) + 1)
            if (len(rim.broker_live_table) >= self.max_brokers and rim.broker_live_info(
                    registration.cluster_name, registration.broker_addr) is None):
                return self._refuse("namesrvMaxBrokers", self.max_brokers, "live brokers",
                                    len(rim.broker_live_table) + 1)
        if filter_servers and self.max_filter_servers:
            total = sum(map(len, rim.filter_server_table.values())) + len(filter_servers)
            if total > self.max_filter_servers:
                return self._refuse("namesrvMaxFilterServers", self.max_filter_servers,
                                    "filter servers", total)
        table = wrapper.topic_config_table if wrapper is not None else None
        mapping = wrapper.topic_queue_mapping_info_map if wrapper is not None else None
        weight = 0
        for topic, info in (mapping or {}).items():   # a mapping's queues are read anyway
            queues = len(info.curr_id_map or ())
            if self.max_mapping_queues and queues > self.max_mapping_queues:
                return self._refuse("namesrvMaxMappingQueues", self.max_mapping_queues,
                                    f"queues in the static topic mapping of {topic}", queues)
            weight += 1 + queues
        near_topics = table and self._near(rim, len(table), len(table))   # O(1): far from the
        near_mappings = weight and self._near_mappings(rim, weight)         # bounds
        if not (near_topics or near_mappings) or not rim.registration.may_apply_topics(
                rim.broker_addr_table.get(broker_name), registration):
            return None
        return ((self._topics_refusal(rim, broker_name, table) if near_topics else None)
                or (self._mappings_refusal(rim, mapping) if near_mappings else None))

    def topic_refusal(self, rim, topic, queue_datas):
        """The same for REGISTER_TOPIC_IN_NAMESRV's queue data."""
        if not queue_datas:
            return None
        if topic in rim.topic_queue_table:
            held = rim.topic_queue_table[topic]
            new = sum(1 for qd in queue_datas if qd.broker_name not in held)
            return self._totals_refusal(rim, 0, new)
        return self._totals_refusal(rim, 1, len(queue_datas))

    def _topics_refusal(self, rim, broker_name, table):
        """Near a bound: count the topics and topic-broker pairs ``table`` would add."""
        queues = rim.topic_queue_table
        new_topics = new_pairs = 0
        for config in table.values():
            queue_map = queues.get(config.topic_name)
            if queue_map is None:
                new_topics += 1
                new_pairs += 1
            elif broker_name not in queue_map:
                new_pairs += 1
        return self._totals_refusal(rim, new_topics, new_pairs)

    def _near_mappings(self, rim, weight):
        return (self.max_topic_broker_pairs
                and rim.mapping_count + weight > self.max_topic_broker_pairs)

    def _mappings_refusal(self, rim, mapping):
        """Near the bound: count what the static topic mappings of ``mapping`` would add (a
        mapping replaced gives back what it held)."""
        held = rim.topic_queue_mapping_info_table
        new = 0
        for topic, info in mapping.items():
            old = held.get(topic, {}).get(info.bname)
            new += mapping_weight(info) - (0 if old is None else mapping_weight(old))
        if self._near_mappings(rim, new):
            return self._refuse("namesrvMaxTopicBrokerPairs", self.max_topic_broker_pairs,
                                "static topic mappings and their queues", rim.mapping_count + new)
        return None

    def _near(self, rim, topics, pairs):
        """Could ``topics`` more topics and ``pairs`` more pairs pass a bound?"""
        return ((self.max_topics and len(rim.topic_queue_table) + topics > self.max_topics)
                or (self.max_topic_broker_pairs
                    and rim.queue_data_count + pairs > self.max_topic_broker_pairs))

    def _totals_refusal(self, rim, new_topics, new_pairs):
        if self.max_topics and len(rim.topic_queue_table) + new_topics > self.max_topics:
            return self._refuse("namesrvMaxTopics", self.max_topics, "topics",
                                len(rim.topic_queue_table) + new_topics)
        if (self.max_topic_broker_pairs
                and rim.queue_data_count + new_pairs > self.max_topic_broker_pairs):
            return self._refuse("namesrvMaxTopicBrokerPairs", self.max_topic_broker_pairs,
                                "topic-broker pairs", rim.queue_data_count + new_pairs)
        return None

    def _refuse(self, key, bound, what, would):
        self.refused[key] += 1
        remark = (f"[REFUSED] the route table would hold {would} {what}, over {key}={bound}; "
                  "nothing was applied")
        log.warning("registration refused: %s", remark)
        return error(ResponseCode.SYSTEM_ERROR, remark)
