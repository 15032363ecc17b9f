"""NameServer state layer: the settings (Java ``NamesrvConfig``, ``NettyServerConfig``, and the
``Configuration`` object GET/UPDATE_NAMESRV_CONFIG read and write).

Every key of the Java classes, with the Java name, type and default; attributes are the keys in
snake_case (``scanNotActiveBrokerInterval`` -> ``scan_not_active_broker_interval``).
Which keys a NameServer *reports* depends on its version (4.9.8 has 7 NamesrvConfig keys, 5.0.0
has no ``configBlackList``, 5.3.3 adds four more): :func:`java_keys` gives the list for a
profile. Loading follows ``MixAll.properties2Object`` (known keys only, unparsable numbers
ignored, strings trimmed), and ``mqnamesrv`` sets ``listenPort`` to 9876 before reading ``-c``.

No I/O here: the service layer reads the ``-c`` file (:func:`rocketpy.service.fileio.load_properties`)
and hands :class:`Configuration` a ``store(path, text)`` callable; an update returns the
:class:`~rocketpy.namesrv.pending.FileWrite` that stores the file.
"""
import os
import re

from .javaorder import chm_capacity, ordered
from .javaprops import format_properties, store_properties
from .pending import FileWrite, write_now
from .profile import DEFAULT_PROFILE

__all__ = ["NamesrvConfig", "NettyServerConfig", "Configuration", "java_keys", "attr_name",
           "java_key", "CONFIG_BLACKLIST_FIXED"]

_HOME = os.path.expanduser("~")

#: keys Java's UPDATE_NAMESRV_CONFIG always refuses, whatever ``configBlackList`` says (rocketpy
#: refuses more: :mod:`rocketpy.namesrv.configguard`)
CONFIG_BLACKLIST_FIXED = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")


def attr_name(key):
    """``scanNotActiveBrokerInterval`` -> ``scan_not_active_broker_interval``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def java_key(attr):
    """``scan_not_active_broker_interval`` -> ``scanNotActiveBrokerInterval``."""
    head, *rest = attr.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _fields(*specs):
    return tuple((key, attr_name(key), kind, default) for key, kind, default in specs)


_NAMESRV_FIELDS = _fields(
    ("rocketmqHome", str, None),            # -Drocketmq.home.dir or $ROCKETMQ_HOME
    ("kvConfigPath", str, os.path.join(_HOME, "namesrv", "kvConfig.json")),
    ("configStorePath", str, os.path.join(_HOME, "namesrv", "namesrv.properties")),
    ("productEnvName", str, "center"),
    ("clusterTest", bool, False),
    ("orderMessageEnable", bool, False),
    ("returnOrderTopicConfigToBroker", bool, True),
    ("clientRequestThreadPoolNums", int, 8),
    ("defaultThreadPoolNums", int, 16),
    ("clientRequestThreadPoolQueueCapacity", int, 50000),
    ("defaultThreadPoolQueueCapacity", int, 10000),
    ("scanNotActiveBrokerInterval", int, 5000),
    ("unRegisterBrokerQueueCapacity", int, 3000),
    ("supportActingMaster", bool, False),
    ("enableAllTopicList", bool, True),
    ("enableTopicList", bool, True),
    ("notifyMinBrokerIdChanged", bool, False),
    ("enableControllerInNamesrv", bool, False),
    ("needWaitForService", bool, False),
    ("waitSecondsForService", int, 45),
    ("deleteTopicWithBrokerRegistration", bool, False),
    ("configBlackList", str, "configBlackList;configStorePath;kvConfigPath"),
)

_NETTY_FIELDS = _fields(
    ("bindAddress", str, "0.0.0.0"),
    ("listenPort", int, 9876),              # the class says 0 (8888 in 4.9); mqnamesrv sets 9876
    ("serverWorkerThreads", int, 8),
    ("serverCallbackExecutorThreads", int, 0),
    ("serverSelectorThreads", int, 3),
    ("serverOnewaySemaphoreValue", int, 256),
    ("serverAsyncSemaphoreValue", int, 64),
    ("serverChannelMaxIdleTimeSeconds", int, 120),
    ("serverSocketSndBufSize", int, 0),     # NettySystemConfig defaults
    ("serverSocketRcvBufSize", int, 0),
    ("writeBufferHighWaterMark", int, 0),
    ("writeBufferLowWaterMark", int, 0),
    ("serverSocketBacklog", int, 1024),
    ("serverNettyWorkerGroupEnable", bool, True),
    ("serverPooledByteBufAllocatorEnable", bool, True),
    ("enableShutdownGracefully", bool, False),
    ("shutdownWaitTimeSeconds", int, 30),
    ("useEpollNativeSelector", bool, False),
)

_NAMESRV_KEYS = {
    "4.9": ("rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
            "orderMessageEnable", "configBlackList"),
    "5.0": tuple(f[0] for f in _NAMESRV_FIELDS[:18]),
    "5.3": tuple(f[0] for f in _NAMESRV_FIELDS),
}
_NETTY_KEYS = {
    "4.9": tuple(f[0] for f in _NETTY_FIELDS if f[0] not in (
        "bindAddress", "serverNettyWorkerGroupEnable", "enableShutdownGracefully",
        "shutdownWaitTimeSeconds")),
    "5.0": tuple(f[0] for f in _NETTY_FIELDS if f[0] not in (
        "serverNettyWorkerGroupEnable", "enableShutdownGracefully", "shutdownWaitTimeSeconds")),
    "5.3": tuple(f[0] for f in _NETTY_FIELDS),
}


def _parse(kind, text):
    """``MixAll.properties2Object``'s conversions; None when Java would skip the key."""
    if kind is str:
        return text.strip()
    if kind is bool:
        return text.lower() == "true"        # Boolean.parseBoolean
    try:
        value = int(text, 10)                # Integer/Long.parseInt: no spaces, no '_'
    except ValueError:
        return None
    if "_" in text or text != text.strip():
        return None
    return value


def _show(value):
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _JavaConfig:
    _FIELDS = ()

    def __init__(self, **overrides):
        for key, attr, kind, default in self._FIELDS:
            setattr(self, attr, default)
        for attr, value in overrides.items():
            if not any(f[1] == attr for f in self._FIELDS):
                raise TypeError(f"{type(self).__name__} has no setting {attr!r}")
            setattr(self, attr, value)

    def keys(self, profile=None):
        return _keys_for(self._KEYS, profile)

    def apply_properties(self, props):
        """``properties2Object``: set every known key present in ``props``; return the keys used."""
        used = []
        for key, attr, kind, _ in self._FIELDS:
            if key in props:
                value = _parse(kind, props[key])
                if value is not None:
                    setattr(self, attr, value)
                    used.append(key)
        return used

    def to_properties(self, profile=None):
        """``object2Properties``: key -> text for every non-null value, in field order."""
        out = {}
        for key in self.keys(profile):
            value = _show(getattr(self, attr_name(key)))
            if value is not None:
                out[key] = value
        return out

    def print_lines(self, profile=None):
        """``MixAll.printObjectProperties`` (``-p``): every field, null printed as empty."""
        return [f"{key}={_show(getattr(self, attr_name(key))) or ''}" for key in self.keys(profile)]


def _keys_for(table, profile):
    name = (profile or DEFAULT_PROFILE).name
    return table.get(name, table["5.3"])


class NamesrvConfig(_JavaConfig):
    """Java ``NamesrvConfig`` (5.3.3 field set; older versions report a subset)."""

    _FIELDS = _NAMESRV_FIELDS
    _KEYS = _NAMESRV_KEYS

    def __init__(self, **overrides):
        super().__init__(**overrides)
        if "rocketmq_home" not in overrides:
            self.rocketmq_home = os.environ.get("ROCKETMQ_HOME")


class NettyServerConfig(_JavaConfig):
    """Java ``NettyServerConfig`` (the server-side network settings)."""

    _FIELDS = _NETTY_FIELDS
    _KEYS = _NETTY_KEYS


def java_keys(profile=None):
    """The keys GET_NAMESRV_CONFIG reports for ``profile`` (before file extras)."""
    return _keys_for(_NAMESRV_KEYS, profile) + _keys_for(_NETTY_KEYS, profile)


class Configuration:
    """Java ``Configuration``: the two config objects plus every key of the ``-c`` file.

    ``all_configs`` is Java's ``allConfigs`` Properties: the objects' values merged with the
    file's raw keys (a key the objects do not know, like ``bindAddress`` on 4.9, stays and is
    reported). UPDATE_NAMESRV_CONFIG changes only keys already present, sets matching fields of
    both objects, and stores the result at ``configStorePath``.
    """

    def __init__(self, namesrv_config=None, netty_server_config=None, extra=None, profile=None,
                 store=None):
        self.namesrv_config = namesrv_config or NamesrvConfig()
        self.netty_server_config = netty_server_config or NettyServerConfig()
        self.profile = profile or DEFAULT_PROFILE
        #: ``store(path, text)``: makes the file hold ``text`` (None: updates stay in memory)
        self.store = store
        self.all_configs = {}
        self._merge_objects()
        if extra:
            self.all_configs.update(extra)

    @classmethod
    def from_properties(cls, props, profile=None, config_path=None, store=None):
        """What ``mqnamesrv -c config_path`` builds from the file's properties."""
        namesrv, netty = NamesrvConfig(), NettyServerConfig()
        namesrv.apply_properties(props)
        netty.apply_properties(props)
        if config_path is not None:
            namesrv.config_store_path = config_path
        return cls(namesrv, netty, props, profile, store)

    def _merge_objects(self):
        self.all_configs.update(self.namesrv_config.to_properties(self.profile))
        self.all_configs.update(self.netty_server_config.to_properties(self.profile))

    def items(self):
        """``getAllConfigsInternal``: object values refreshed, then ordered as Java writes them
        (5.x sorts; 4.9 iterates its Properties, a ConcurrentHashMap on Java 9+)."""
        self._merge_objects()
        keys = list(self.all_configs)
        if self.profile.sorted_config_text:
            keys.sort()
        else:
            keys = ordered(keys, chm_capacity(len(keys), 8))
        return [(k, self.all_configs[k]) for k in keys]

    def all_configs_text(self):
        return format_properties(self.items())

    def client_configs_text(self, keys):
        """GET_CLIENT_CONFIG (5.0): the requested keys both objects know."""
        known = {}
        for obj in (self.namesrv_config, self.netty_server_config):
            props = obj.to_properties(self.profile)
            for key in keys:
                if key in props:
                    known[key] = props[key]
        order = ordered(list(known), chm_capacity(len(known), 8))
        return format_properties((k, known[k]) for k in order)

    def update(self, props):
        """``Configuration.update``: merge known keys, set both objects; the write that
        persists them (None when there is nowhere to write)."""
        for key, value in props.items():
            if key in self.all_configs:
                self.all_configs[key] = value
        self.namesrv_config.apply_properties(props)
        self.netty_server_config.apply_properties(props)
        return self.persist_job()

    def file_text(self):
        """The config file as rocketpy stores it (``Properties.store``'s escaping)."""
        return store_properties(self.items())

    def persist_job(self):
        """The :class:`~rocketpy.namesrv.pending.FileWrite` of the config file, or None."""
        path = self.namesrv_config.config_store_path
        if not path or self.store is None:
            return None
        return FileWrite(path, self.file_text, lambda text: self.store(path, text))

    def persist(self):
        """Write it now, here (tests, tools); False when that failed (Java logs it and carries on)."""
        return write_now(self.persist_job())

    def print_lines(self):
        """``mqnamesrv -p``."""
        return (self.namesrv_config.print_lines(self.profile)
                + self.netty_server_config.print_lines(self.profile))
