"""rocketpy.broker: the broker's side of the NameServer protocol, for tools and load tests.

:class:`~rocketpy.broker.outer_api.BrokerOuterAPI` (Java ``BrokerOuterAPI``) sends what a broker
sends its NameServers, byte for byte, over the transport's
:class:`~rocketpy.transport.client.RemotingClient`; :mod:`rocketpy.broker.topics` keeps a broker's
topic table; :mod:`rocketpy.broker.sim` runs many simulated brokers with a genuine broker's
cadence (``rocketpy-brokersim``).
"""
from .outer_api import BrokerConfig, BrokerOuterAPI, BrokerRelease
from .topics import TopicConfigManager, system_topics

__all__ = ["BrokerOuterAPI", "BrokerConfig", "BrokerRelease", "TopicConfigManager", "system_topics"]
