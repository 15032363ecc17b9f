"""rocketpy.namesrv: the NameServer's route state (Java ``org.apache.rocketmq.namesrv``), between
the wire codec and the request processors (:mod:`rocketpy.namesrv.processor`, a layer above,
which this package does not import).

Release differences are the policies of :mod:`.policy`, built once from a profile. Every call
takes the time as ``now_ms`` and channels as :class:`Channel` ids; nothing here reads a clock,
opens a socket, writes a file (changes return the :class:`~rocketpy.namesrv.pending.FileWrite`
that makes them durable) or imports ``twisted.internet``."""
from .channel import Channel
from .config import Configuration, NamesrvConfig, NettyServerConfig
from .kvconfig import KVConfigManager
from .model import RegisterBrokerResult, UnRegisterBrokerRequest
from .policy import Policies, policies_for
from .profile import DEFAULT_PROFILE, PROFILE_49, PROFILE_50, PROFILE_53, BehaviourProfile, profile_for
from .route_info_manager import RouteInfoManager

__all__ = ["Channel", "Configuration", "NamesrvConfig", "NettyServerConfig", "KVConfigManager",
           "RegisterBrokerResult", "UnRegisterBrokerRequest",
           "BehaviourProfile", "PROFILE_49", "PROFILE_50", "PROFILE_53", "DEFAULT_PROFILE",
           "profile_for", "Policies", "policies_for", "RouteInfoManager"]
