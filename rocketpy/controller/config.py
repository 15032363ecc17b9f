"""Controller state layer: the controller's settings (Java ``ControllerConfig``, 5.3.3) and the
configuration GET/UPDATE_CONTROLLER_CONFIG read and write.

``mqnamesrv -c file`` with ``enableControllerInNamesrv=true`` reads the same file into a
``ControllerConfig``; the controller's ``Configuration`` holds that object, a copy of the
NameServer's ``NettyServerConfig`` whose ``listenPort`` is the controller's own (the
``controllerDLegerPeers`` address of ``controllerDLegerSelfId``), and every key of the file.
No I/O here: the service layer stores the file through the writer thread.
"""
from rocketpy.namesrv.config import NettyServerConfig, attr_name
from rocketpy.namesrv.home import Home
from rocketpy.namesrv.javaprops import format_properties, store_properties
from rocketpy.namesrv.pending import FileWrite
from rocketpy.remoting.numbers import NumberError, parse_java_integer

__all__ = ["ControllerConfig", "ControllerConfiguration", "CONTROLLER_SPECS", "parse_peers",
           "CONFIG_BLACKLIST_FIXED"]

#: ``(key, type, default, meaning)`` of every ``ControllerConfig`` field GET_CONTROLLER_CONFIG
#: reports (``jraftConfig`` is an object Java prints by identity: left out)
CONTROLLER_SPECS = (
    ("rocketmqHome", str, None, "as the NameServer's ($ROCKETMQ_HOME)"),
    ("configStorePath", str, None, "where UPDATE_CONTROLLER_CONFIG stores the settings "
                                   "(~/controller/controller.properties)"),
    ("controllerType", str, "DLedger", "DLedger or jRaft in Java: rocketpy runs one "
                                       "single-node controller for either; etcd: a "
                                       "controller group sharing its state through etcd"),
    ("scanNotActiveBrokerInterval", int, 5000, "ms between scans for brokers whose heartbeat "
                                               "timed out"),
    ("controllerThreadPoolNums", int, 16, "accepted, no effect (no thread pools)"),
    ("controllerRequestThreadPoolQueueCapacity", int, 50000, "accepted, no effect"),
    ("controllerDLegerGroup", str, None, "the controller group's name (GET_METADATA_INFO)"),
    ("controllerDLegerPeers", str, None, "id-host:port;... : the controller listens on the "
                                         "address of its own id"),
    ("controllerDLegerSelfId", str, None, "this controller's id among the peers"),
    ("mappedFileSize", int, 1024 * 1024 * 1024, "accepted, no effect"),
    ("controllerStorePath", str, "", "directory of the controller's event log "
                                     "(empty: ~/<controllerType>Controller)"),
    ("electMasterMaxRetryCount", int, 3, "elections tried for a group whose master died"),
    ("enableElectUncleanMaster", bool, False, "may elect a replica outside the sync state set "
                                              "(can lose acknowledged messages)"),
    ("isProcessReadEvent", bool, False, "accepted, no effect"),
    ("notifyBrokerRoleChanged", bool, True, "push NOTIFY_BROKER_ROLE_CHANGED after an "
                                            "election"),
    ("scanInactiveMasterInterval", int, 5000, "ms between scans for groups whose master is "
                                              "not alive"),
    ("metricsExporterType", str, "DISABLE", "accepted, no effect"),
    ("metricsGrpcExporterTarget", str, "", "accepted, no effect"),
    ("metricsGrpcExporterHeader", str, "", "accepted, no effect"),
    ("metricGrpcExporterTimeOutInMills", int, 3000, "accepted, no effect"),
    ("metricGrpcExporterIntervalInMills", int, 60000, "accepted, no effect"),
    ("metricLoggingExporterIntervalInMills", int, 10000, "accepted, no effect"),
    ("metricsPromExporterPort", int, 5557, "accepted, no effect"),
    ("metricsPromExporterHost", str, "", "accepted, no effect"),
    ("metricsLabel", str, "", "accepted, no effect"),
    ("metricsInDelta", bool, False, "accepted, no effect"),
    ("configBlackList", str, "configBlackList;configStorePath",
     "keys UPDATE_CONTROLLER_CONFIG may not change"),
)

#: keys UPDATE_CONTROLLER_CONFIG always refuses, whatever ``configBlackList`` says
CONFIG_BLACKLIST_FIXED = ("configBlackList", "configStorePath", "rocketmqHome")


def _parse(kind, text):
    """``MixAll.properties2Object``: None when Java would skip the key."""
    if kind is str:
        return text.strip()
    if kind is bool:
        return text.lower() == "true"
    try:
        return parse_java_integer(text)      # Integer/Long.parseInt: no spaces, no '_'
    except NumberError:
        return None


def _show(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None else str(value)


def parse_peers(peers):
    """``controllerDLegerPeers`` (``n0-host:port;n1-host:port``) as ``{id: "host:port"}``;
    ValueError names a malformed entry."""
    out = {}
    for part in (peers or "").split(";"):
        if not part.strip():
            continue
        peer_id, sep, address = part.strip().partition("-")
        host, colon, port = address.rpartition(":")
        if not sep or not peer_id or not colon or not host or not port.isdigit():
            raise ValueError(f"controllerDLegerPeers entry {part!r} is not id-host:port")
        out[peer_id] = address
    return out


class ControllerConfig:
    """Java ``ControllerConfig``: one attribute per key of :data:`CONTROLLER_SPECS`."""

    def __init__(self, home=None, **overrides):
        """``home``: the :class:`~rocketpy.namesrv.home.Home` of the defaults (the process's)."""
        self._home = home or Home()
        for key, _, default, _ in CONTROLLER_SPECS:
            setattr(self, attr_name(key), default)
        for key, value in self._home.controller_defaults().items():
            setattr(self, attr_name(key), value)
        for attr, value in overrides.items():
            if not hasattr(self, attr):
                raise TypeError(f"ControllerConfig has no setting {attr!r}")
            setattr(self, attr, value)

    def apply_properties(self, props):
        """``properties2Object``: the known keys of ``props``."""
        for key, kind, _, _ in CONTROLLER_SPECS:
            if key in props:
                value = _parse(kind, props[key])
                if value is not None:
                    setattr(self, attr_name(key), value)

    def print_items(self):
        """``MixAll.printObjectProperties`` (``-p``): every key, null printed as empty."""
        return [(key, _show(getattr(self, attr_name(key))) or "")
                for key, _, _, _ in CONTROLLER_SPECS]

    def to_properties(self):
        out = {}
        for key, _, _, _ in CONTROLLER_SPECS:
            value = _show(getattr(self, attr_name(key)))
            if value is not None:
                out[key] = value
        return out

    @property
    def store_path(self):
        """``getControllerStorePath``: empty means ``~/<controllerType>Controller``."""
        return self.controller_store_path or self._home.controller_store_path(self.controller_type)

    def peers(self):
        return parse_peers(self.controller_d_leger_peers)

    def self_address(self):
        """``host:port`` this controller listens on; ValueError when the settings lack it."""
        if not self.controller_d_leger_peers:
            raise ValueError("controllerDLegerPeers is null or empty")
        if not self.controller_d_leger_self_id:
            raise ValueError("controllerDLegerSelfId is null or empty")
        peers = self.peers()
        if self.controller_d_leger_self_id not in peers:
            raise ValueError(f"controllerDLegerSelfId {self.controller_d_leger_self_id!r} is not "
                             "one of controllerDLegerPeers")
        return peers[self.controller_d_leger_self_id]


class ControllerConfiguration:
    """Java's controller ``Configuration``: the ControllerConfig, the controller's
    NettyServerConfig and every key of the ``-c`` file, reported sorted (5.x)."""

    def __init__(self, controller_config, netty_server_config, extra=None, store=None):
        self.controller_config = controller_config
        self.netty_server_config = netty_server_config
        self.store = store
        self.all_configs = dict(extra or {})
        self._merge()

    @classmethod
    def from_properties(cls, props, store=None, home=None):
        """What ``mqnamesrv -c`` builds for the controller from the file's properties (defaults
        from ``home``, the process's when None)."""
        config = ControllerConfig(home)
        config.apply_properties(props)
        netty = NettyServerConfig()
        netty.apply_properties(props, None)
        host_port = config.self_address()
        netty.listen_port = int(host_port.rpartition(":")[2])
        return cls(config, netty, props, store)

    def _merge(self):
        self.all_configs.update(self.controller_config.to_properties())
        self.all_configs.update(self.netty_server_config.to_properties(None))

    def items(self):
        self._merge()
        return [(k, self.all_configs[k]) for k in sorted(self.all_configs)]

    def all_configs_text(self):
        return format_properties(self.items())

    def black_list(self):
        """The keys UPDATE_CONTROLLER_CONFIG refuses (read once, when the processor starts):
        Java's, and rocketpy's access-control keys (read once at start, as the NameServer's)."""
        from rocketpy.namesrv.acl import ACL_CONFIG_KEYS
        configured = (self.controller_config.config_black_list or "").split(";")
        return frozenset(CONFIG_BLACKLIST_FIXED).union(configured, ACL_CONFIG_KEYS)

    def update(self, props):
        """``Configuration.update``: merge known keys, set the objects; the FileWrite of the
        file (None when there is nowhere to write)."""
        for key, value in props.items():
            if key in self.all_configs:
                self.all_configs[key] = value
        self.controller_config.apply_properties(props)
        self.netty_server_config.apply_properties(props, None)
        path = self.controller_config.config_store_path
        if not path or self.store is None:
            return None
        return FileWrite(path, lambda: store_properties(self.items()),
                         lambda text: self.store(path, text))
