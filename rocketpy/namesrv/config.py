"""NameServer state layer: the settings (Java ``NamesrvConfig``, ``NettyServerConfig``, and the
``Configuration`` object GET/UPDATE_NAMESRV_CONFIG read and write).

Every key of the Java classes with its type, default and the releases that have it; attributes
are the keys in snake_case. Which keys a NameServer *reports* depends on its release (a
:class:`ConfigShape`, the policies' config part; :func:`java_keys`). Loading follows
``MixAll.properties2Object`` (known keys only, unparsable numbers ignored, strings trimmed), after
``mqnamesrv`` sets ``listenPort`` to 9876. No I/O: the service layer reads the ``-c`` file and
hands :class:`Configuration` a ``store(path, text)`` callable; an update returns the
:class:`~rocketpy.namesrv.pending.FileWrite` that stores the file."""
import re

from rocketpy.remoting.catalogue import ALWAYS, Release, only, since
from rocketpy.remoting.numbers import NumberError, parse_java_integer

from .home import Home
from .javaorder import chm_capacity, ordered
from .javaprops import format_properties, store_properties
from .pending import FileWrite, write_now
from .profile import DEFAULT_PROFILE

R = Release

__all__ = ["NamesrvConfig", "NettyServerConfig", "Configuration", "ConfigShape", "java_keys",
           "attr_name", "java_key", "CONFIG_BLACKLIST_FIXED", "JAVA_RELEASES"]

#: keys Java's UPDATE_NAMESRV_CONFIG always refuses, whatever ``configBlackList`` says (rocketpy
#: refuses more: :mod:`rocketpy.namesrv.processor.configguard`)
CONFIG_BLACKLIST_FIXED = ("configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome")

#: keys that decide what the server exposes or refuses: read from ``-c`` in every profile,
#: though not every release's class has them (security is never a version trait)
PROTECTION_KEYS = frozenset(("bindAddress", "configBlackList"))


def attr_name(key):
    """``scanNotActiveBrokerInterval`` -> ``scan_not_active_broker_interval``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def java_key(attr):
    """``scan_not_active_broker_interval`` -> ``scanNotActiveBrokerInterval``."""
    head, *rest = attr.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _fields(*specs):
    return tuple((key, attr_name(key), kind, default) for key, kind, default, _ in specs)


# the releases whose Java class has a key (NamesrvConfig.java, NettyServerConfig.java of the
# tags 4.9.8-5.3.3; Java 5.5.0 has the same 22 + 18 keys as 5.3.3, rocketmq-rust's inventory)
_ALL, _5X = ALWAYS, since(R.V5_0_0)

_NAMESRV_SPECS = (
    # rocketmqHome ($ROCKETMQ_HOME) and the paths under ~: Home.namesrv_defaults
    ("rocketmqHome", str, None, _ALL),
    ("kvConfigPath", str, None, _ALL),
    ("configStorePath", str, None, _ALL),
    ("productEnvName", str, "center", _ALL),
    ("clusterTest", bool, False, _ALL),
    ("orderMessageEnable", bool, False, _ALL),
    ("returnOrderTopicConfigToBroker", bool, True, _5X),
    ("clientRequestThreadPoolNums", int, 8, _5X),
    ("defaultThreadPoolNums", int, 16, _5X),
    ("clientRequestThreadPoolQueueCapacity", int, 50000, _5X),
    ("defaultThreadPoolQueueCapacity", int, 10000, _5X),
    ("scanNotActiveBrokerInterval", int, 5000, _5X),
    ("unRegisterBrokerQueueCapacity", int, 3000, _5X),
    ("supportActingMaster", bool, False, _5X),
    ("enableAllTopicList", bool, True, _5X),
    ("enableTopicList", bool, True, _5X),
    ("notifyMinBrokerIdChanged", bool, False, _5X),
    ("enableControllerInNamesrv", bool, False, _5X),
    ("needWaitForService", bool, False, since(R.V5_1_0)),
    ("waitSecondsForService", int, 45, since(R.V5_1_0)),
    ("deleteTopicWithBrokerRegistration", bool, False, since(R.V5_1_4)),
    ("configBlackList", str, "configBlackList;configStorePath;kvConfigPath",
     only(R.V4_9_8, R.V4_9_8) | since(R.V5_2_0)),
)

_NETTY_SPECS = (
    ("bindAddress", str, "0.0.0.0", _5X),
    ("listenPort", int, 9876, _ALL),          # the class says 0 (8888 in 4.9); mqnamesrv sets 9876
    ("serverWorkerThreads", int, 8, _ALL),
    ("serverCallbackExecutorThreads", int, 0, _ALL),
    ("serverSelectorThreads", int, 3, _ALL),
    ("serverOnewaySemaphoreValue", int, 256, _ALL),
    ("serverAsyncSemaphoreValue", int, 64, _ALL),
    ("serverChannelMaxIdleTimeSeconds", int, 120, _ALL),
    ("serverSocketSndBufSize", int, 0, _ALL),     # NettySystemConfig defaults
    ("serverSocketRcvBufSize", int, 0, _ALL),
    ("writeBufferHighWaterMark", int, 0, _ALL),
    ("writeBufferLowWaterMark", int, 0, _ALL),
    ("serverSocketBacklog", int, 1024, _ALL),
    ("serverNettyWorkerGroupEnable", bool, True, since(R.V5_3_1)),
    ("serverPooledByteBufAllocatorEnable", bool, True, _ALL),
    ("enableShutdownGracefully", bool, False, since(R.V5_2_0)),
    ("shutdownWaitTimeSeconds", int, 30, since(R.V5_2_0)),
    ("useEpollNativeSelector", bool, False, _ALL),
)
#: key -> the releases whose Java class has it (the configuration page's "Java" column)
JAVA_RELEASES = {spec[0]: spec[3] for spec in _NAMESRV_SPECS + _NETTY_SPECS}
_NAMESRV_FIELDS = _fields(*_NAMESRV_SPECS)
_NETTY_FIELDS = _fields(*_NETTY_SPECS)


class ConfigShape:
    """The config keys one release reports (GET_NAMESRV_CONFIG, ``-p``) and their order."""

    def __init__(self, namesrv_keys, netty_keys, sorted_text=True):
        self.namesrv_keys = namesrv_keys
        self.netty_keys = netty_keys
        #: GET_NAMESRV_CONFIG sorts keys in 5.x; 4.9 writes its Properties' order
        self.sorted_text = sorted_text

    @classmethod
    def of_release(cls, release, sorted_text=True):
        """The keys of ``release`` (a :class:`~rocketpy.remoting.catalogue.Release`): those whose
        releases hold it, so a later release has every key not known to be gone."""
        if not isinstance(release, Release):
            raise TypeError(f"a config shape is of a Release, not {release!r}")
        return cls(tuple(spec[0] for spec in _NAMESRV_SPECS if release in spec[3]),
                   tuple(spec[0] for spec in _NETTY_SPECS if release in spec[3]), sorted_text)

    def order(self, keys):
        """5.x sorts; 4.9 iterates its Properties, a ConcurrentHashMap on Java 9+."""
        return sorted(keys) if self.sorted_text else ordered(list(keys), chm_capacity(len(keys), 8))


def config_shape(value=None):
    """``value`` as a :class:`ConfigShape`: a shape as it is, None as the default profile's, a
    release's policies by their ``config_shape`` (this module does not import the policies)."""
    if isinstance(value, ConfigShape):
        return value
    if value is None:
        return _DEFAULT_SHAPE
    return value.config_shape


_DEFAULT_SHAPE = ConfigShape.of_release(DEFAULT_PROFILE.release)


def _parse(kind, text):
    """``MixAll.properties2Object``'s conversions; None when Java would skip the key."""
    if kind is str:
        return text.strip()
    if kind is bool:
        return text.lower() == "true"        # Boolean.parseBoolean
    try:
        return parse_java_integer(text)      # Integer/Long.parseInt: no spaces, no '_'
    except NumberError:
        return None


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

    def keys(self, shape=None):
        shape = config_shape(shape)
        return shape.namesrv_keys if self._FIELDS is _NAMESRV_FIELDS else shape.netty_keys

    def apply_properties(self, props, shape=None):
        """``properties2Object``: set every key of the release's class (``shape``, as
        :meth:`keys`) present in ``props``; return the keys used. Keys only another release
        has are ignored, as Java ignores any key its class lacks; :data:`PROTECTION_KEYS` never
        are."""
        known = PROTECTION_KEYS.union(self.keys(shape))
        used = []
        for key, attr, kind, _ in self._FIELDS:
            if key in props and key in known:
                value = _parse(kind, props[key])
                if value is not None:
                    setattr(self, attr, value)
                    used.append(key)
        return used

    def to_properties(self, shape=None):
        """``object2Properties``: key -> text for every non-null value, in field order."""
        out = {}
        for key in self.keys(shape):
            value = _show(getattr(self, attr_name(key)))
            if value is not None:
                out[key] = value
        return out

    def print_lines(self, shape=None):
        """``MixAll.printObjectProperties`` (``-p``): every field, null printed as empty."""
        return [f"{key}={_show(getattr(self, attr_name(key))) or ''}" for key in self.keys(shape)]


class NamesrvConfig(_JavaConfig):
    """Java ``NamesrvConfig`` (5.3.3 field set; older versions report a subset)."""

    _FIELDS = _NAMESRV_FIELDS

    def __init__(self, home=None, **overrides):
        """``home``: the :class:`~rocketpy.namesrv.home.Home` of the defaults (the process's)."""
        defaults = {attr_name(k): v for k, v in (home or Home()).namesrv_defaults().items()}
        super().__init__(**{**defaults, **overrides})


class NettyServerConfig(_JavaConfig):
    """Java ``NettyServerConfig`` (the server-side network settings)."""

    _FIELDS = _NETTY_FIELDS


def java_keys(shape=None):
    """The keys GET_NAMESRV_CONFIG reports for a release (a :class:`ConfigShape`, or what
    :func:`config_shape` takes), before file extras."""
    shape = config_shape(shape)
    return shape.namesrv_keys + shape.netty_keys


class Configuration:
    """Java ``Configuration``: the two config objects plus every key of the ``-c`` file.

    ``all_configs`` is Java's ``allConfigs``: the objects' values merged with the file's raw keys (an
    unknown key, like ``bindAddress`` on 4.9, stays and is reported). UPDATE_NAMESRV_CONFIG changes
    only keys already present, in both objects, and stores the result at ``configStorePath``."""

    def __init__(self, namesrv_config=None, netty_server_config=None, extra=None, profile=None,
                 store=None):
        self.namesrv_config = namesrv_config or NamesrvConfig()
        self.netty_server_config = netty_server_config or NettyServerConfig()
        #: the :class:`ConfigShape` (``profile`` may also be what :func:`config_shape` takes)
        self.shape = config_shape(profile)
        #: ``store(path, text)``: makes the file hold ``text`` (None: updates stay in memory)
        self.store = store
        #: ``journal(props)``: told each update's properties (a replica's feed); None: nobody
        self.journal = None
        self.all_configs = {}
        self._merge_objects()
        if extra:
            self.all_configs.update(extra)

    @classmethod
    def from_properties(cls, props, profile=None, config_path=None, store=None, home=None):
        """What ``mqnamesrv -c config_path`` builds from the file's properties (defaults from
        ``home``, the process's when None)."""
        namesrv, netty = NamesrvConfig(home), NettyServerConfig()
        namesrv.apply_properties(props, profile)
        netty.apply_properties(props, profile)
        if config_path is not None:
            namesrv.config_store_path = config_path
        return cls(namesrv, netty, props, profile, store)

    def _merge_objects(self):
        self.all_configs.update(self.namesrv_config.to_properties(self.shape))
        self.all_configs.update(self.netty_server_config.to_properties(self.shape))

    def items(self):
        """``getAllConfigsInternal``: object values refreshed, then ordered as Java writes them
        (5.x sorts; 4.9 iterates its Properties, a ConcurrentHashMap on Java 9+)."""
        self._merge_objects()
        return [(k, self.all_configs[k]) for k in self.shape.order(self.all_configs)]

    def all_configs_text(self):
        return format_properties(self.items())

    def client_configs_text(self, keys):
        """GET_CLIENT_CONFIG (5.0): the requested keys both objects know."""
        known = {}
        for obj in (self.namesrv_config, self.netty_server_config):
            props = obj.to_properties(self.shape)
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
        self.namesrv_config.apply_properties(props, self.shape)
        self.netty_server_config.apply_properties(props, self.shape)
        if self.journal is not None:
            self.journal(dict(props))
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
        return (self.namesrv_config.print_lines(self.shape)
                + self.netty_server_config.print_lines(self.shape))
