"""rocketpy.namesrv: the NameServer's route state and request processors (no Twisted).

Layer: between the wire codec (:mod:`rocketpy.remoting`) and the transport
(:mod:`rocketpy.transport`). Mirrors the Java ``org.apache.rocketmq.namesrv`` package:
:class:`RouteInfoManager` (route tables), :class:`KVConfigManager` (KV settings),
:mod:`.config` (NamesrvConfig, NettyServerConfig, Configuration), and
:class:`DefaultRequestProcessor` (one handler per request code). Every call takes the time as
``now_ms`` and channels as :class:`Channel` ids; nothing here reads a clock, opens a socket,
writes a file (the KV store and the configuration are handed a ``store`` callable, and changes
return the :class:`~rocketpy.namesrv.pending.FileWrite` that makes them durable) or imports
``twisted.internet``.
"""
from .channel import Channel
from .config import Configuration, NamesrvConfig, NettyServerConfig
from .kvconfig import KVConfigManager
from .model import RegisterBrokerResult, UnRegisterBrokerRequest
from .processor import DefaultRequestProcessor
from .profile import DEFAULT_PROFILE, PROFILE_49, PROFILE_50, PROFILE_53, BehaviourProfile, profile_for
from .route_cache import RouteCache
from .route_info_manager import RouteInfoManager

__all__ = ["Channel", "Configuration", "NamesrvConfig", "NettyServerConfig", "KVConfigManager",
           "RegisterBrokerResult", "UnRegisterBrokerRequest", "DefaultRequestProcessor",
           "BehaviourProfile", "PROFILE_49", "PROFILE_50", "PROFILE_53", "DEFAULT_PROFILE",
           "profile_for", "RouteCache", "RouteInfoManager"]
