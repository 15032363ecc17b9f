"""rocketpy.controller: the RocketMQ 5 controller (RIP-44) a NameServer hosts with
``enableControllerInNamesrv=true``: broker ids, master election, sync state sets and failover
for brokers in controller mode.

Pure like :mod:`rocketpy.namesrv` (no ``twisted.internet``, time passed as ``now_ms``): the
replica state (:mod:`.replicas`, Java ``ReplicasInfoManager``) changed only through events
(:mod:`.events`), the heartbeat table (:mod:`.heartbeat`), the election policy (:mod:`.elect`),
the settings (:mod:`.config`), the request processor (:mod:`.processor`) and the durable
snapshot (:mod:`.store`). The service layer (:mod:`rocketpy.service.controller`) listens on the
controller port, pushes to brokers and runs the scans.
"""
from .config import ControllerConfig, ControllerConfiguration
from .elect import DefaultElectPolicy
from .heartbeat import BrokerHeartbeatManager
from .processor import ControllerRequestProcessor
from .replicas import ControllerResult, ReplicasInfoManager

__all__ = ["ControllerConfig", "ControllerConfiguration", "DefaultElectPolicy",
           "BrokerHeartbeatManager", "ControllerRequestProcessor", "ControllerResult",
           "ReplicasInfoManager"]
