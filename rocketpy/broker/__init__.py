"""rocketpy.broker: the broker's side of the NameServer protocol, for tools and load tests:
:mod:`~rocketpy.broker.outer_api` (what a broker sends its NameServers, byte for byte),
:mod:`~rocketpy.broker.topics` (its topic table) and :mod:`~rocketpy.broker.sim` (many simulated
brokers with a genuine broker's cadence, ``rocketpy-brokersim``)."""
from .outer_api import BrokerConfig, BrokerOuterAPI, BrokerRelease
from .topics import TopicConfigManager, system_topics

__all__ = ["BrokerOuterAPI", "BrokerConfig", "BrokerRelease", "TopicConfigManager", "system_topics"]
