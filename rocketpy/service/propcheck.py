"""Service layer: the check of ``-c`` / ``-D`` properties before anything starts (a rocketpy
addition: Java's ``MixAll.properties2Object`` silently skips unknown keys and unparsable numbers,
so ``listenPort=98766`` starts a NameServer not configured the way its operator thinks).

An unknown key is warned about by name (with the nearest known key) and kept, as Java keeps it
for GET_NAMESRV_CONFIG; a bad value stops the start before any port opens, naming the key, the
value and what was expected. Known keys: ``NamesrvConfig`` / ``NettyServerConfig`` (typed from
their field definitions), ``tls.*``, the frame limit, the access-control keys and whatever a
component declares with :func:`register_key`, and the controller's ``ControllerConfig``. Dotted ``-D`` keys are Java system properties:
checked when known, never warned about."""
import difflib

from ..namesrv.config import NamesrvConfig, NettyServerConfig
from ..remoting.numbers import NumberError, parse_java_integer
from ..namesrv.processor.registration import DECODE_BUDGET_KEY, MAX_TOPICS_KEY

__all__ = ["PropertyError", "check_properties", "register_key", "known_keys", "Spec",
           "value_problem"]


class PropertyError(ValueError):
    """A property whose value cannot be used; ``str()`` says key, value, source and expectation."""

    def __init__(self, key, value, expected, source=None):
        self.key, self.value, self.expected, self.source = key, value, expected, source
        where = f" in {source}" if source else ""
        super().__init__(f"{key}={value!r}{where}: expected {expected}")


class Spec:
    """How to check one key: ``check(text)`` returns True when the text is acceptable."""

    __slots__ = ("check", "expected")

    def __init__(self, check, expected):
        self.check = check
        self.expected = expected


def _is_int(text, low=None, high=None):
    """Java ``Integer.parseInt``: digits only (a stray space makes Java skip the key)."""
    try:
        value = parse_java_integer(text)
    except NumberError:
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def _int_spec(low=None, high=None, what="an integer"):
    if low is not None and low > -2 ** 31 and high is not None and high < 2 ** 31 - 1:
        expected = f"{what} {low}..{high}"
    elif low is not None and low > -2 ** 31:
        expected = f"{what} >= {low}"
    else:
        expected = what
    return Spec(lambda t: _is_int(t, low, high), expected)


BOOL = Spec(lambda t: t.lower() in ("true", "false"), "true or false")
TEXT = Spec(lambda t: True, "text")
_INT_MAX = 2 ** 31 - 1

#: Narrower ranges than "an integer" where a value outside would break the server.
_RANGES = {
    "listenPort": _int_spec(0, 65535, "a port number"),
    "scanNotActiveBrokerInterval": _int_spec(1, _INT_MAX, "milliseconds"),
    "unRegisterBrokerQueueCapacity": _int_spec(1, _INT_MAX),
    "serverChannelMaxIdleTimeSeconds": _int_spec(0, _INT_MAX, "seconds"),
    "serverSocketBacklog": _int_spec(1, _INT_MAX),
    "serverSocketSndBufSize": _int_spec(0, _INT_MAX, "bytes"),
    "serverSocketRcvBufSize": _int_spec(0, _INT_MAX, "bytes"),
    "writeBufferHighWaterMark": _int_spec(0, _INT_MAX, "bytes"),
    "writeBufferLowWaterMark": _int_spec(0, _INT_MAX, "bytes"),
    "waitSecondsForService": _int_spec(0, _INT_MAX, "seconds"),
    "shutdownWaitTimeSeconds": _int_spec(0, _INT_MAX, "seconds"),
}


def _choice(*names, lower=False):
    def check(text):
        text = text.strip()
        return (text.lower() if lower else text) in names
    return Spec(check, " or ".join(names))


def _networks(text):
    from ..namesrv.acl import AclConfigError, parse_networks
    try:
        parse_networks(text)
    except AclConfigError:
        return False
    return True


_REGISTRY = {}


def register_key(key, spec=TEXT):
    """Declare a key another component reads (so it is not warned about), with its check."""
    _REGISTRY[key] = spec


def _config_specs():
    specs = {}
    for cls in (NamesrvConfig, NettyServerConfig):
        for key, _attr, kind, _default in cls._FIELDS:
            if kind is bool:
                specs[key] = BOOL
            elif kind is int:
                specs[key] = _RANGES.get(key, _int_spec(-2 ** 63, 2 ** 63 - 1))
            else:
                specs[key] = TEXT
    return specs


def _peers(text):
    from ..controller.config import parse_peers
    try:
        parse_peers(text)
    except ValueError:
        return False
    return True


def _controller_specs():
    """``ControllerConfig``'s keys (read when ``enableControllerInNamesrv=true``)."""
    from ..controller.config import CONTROLLER_SPECS
    specs = {}
    for key, kind, _, _ in CONTROLLER_SPECS:
        if kind is bool:
            specs[key] = BOOL
        elif kind is int:
            specs[key] = _int_spec(1, 2 ** 63 - 1, "a positive integer")
        else:
            specs[key] = TEXT
    specs["controllerDLegerPeers"] = Spec(_peers, "id-host:port entries separated by ';' "
                                                  "(n0-127.0.0.1:9878;n1-...)")
    from ..controller.replicated import ETCD_ENDPOINTS_KEY, ETCD_INT_KEYS
    specs[ETCD_ENDPOINTS_KEY] = TEXT
    for key, _default in ETCD_INT_KEYS:
        specs[key] = _int_spec(1, 2 ** 63 - 1, "a positive integer")
    return specs


def _builtin_specs():
    from .routesnapshot import ROUTE_SNAPSHOT_PATH_KEY
    specs = _controller_specs()
    specs.update(_config_specs())
    specs.update({
        "tls.server.mode": _choice("disabled", "permissive", "enforcing"),
        "tls.config.file": TEXT,
        "tls.test.mode.enable": BOOL,
        "tls.server.need.client.auth": _choice("none", "optional", "require", lower=True),
        "tls.server.keyPath": TEXT, "tls.server.keyPassword": TEXT, "tls.server.certPath": TEXT,
        "tls.server.authClient": BOOL, "tls.server.trustCertPath": TEXT,
        "com.rocketmq.remoting.frameMaxLength": _int_spec(1024, _INT_MAX, "bytes"),
        "adminAllowNetworks": Spec(_networks, "IP addresses or networks (10.0.0.0/8, ::1) "
                                              "separated by commas"),
        "brokerAllowNetworks": Spec(_networks, "IP addresses or networks (10.0.0.0/8, ::1) "
                                               "separated by commas"),
        "brokerIdentityBinding": BOOL,
        "aclEnable": BOOL,
        "aclConfigPath": TEXT,
        "aclReplayWindowSeconds": _int_spec(0, 86400, "seconds"),
        ROUTE_SNAPSHOT_PATH_KEY: TEXT,
        MAX_TOPICS_KEY: _int_spec(0, _INT_MAX, "a number of topics"),
        DECODE_BUDGET_KEY: _int_spec(0, _INT_MAX, "work units (an inflated byte, a JSON value)"),
        # Java system properties mqnamesrv reads
        "rocketmq.home.dir": TEXT, "user.home": TEXT,
    })
    return specs


def _limit_specs():
    """rocketpy's own integer settings: the transport's limits and the state's bounds."""
    from ..namesrv.kvconfig import KV_LIMIT_KEYS
    from ..namesrv.route_bounds import ROUTE_BOUND_KEYS
    from ..transport.limits import LIMIT_KEYS
    spec = Spec(lambda t: _is_int(t, 0), "an integer >= 0 (0 = no limit)")
    return {entry[0]: spec for table in (LIMIT_KEYS, KV_LIMIT_KEYS, ROUTE_BOUND_KEYS)
            for entry in table}


def _worker_specs():
    """``serverWorkerProcesses`` (:mod:`rocketpy.service.workers`)."""
    from .workers import MAX_WORKERS, WORKER_KEYS
    return {entry[0]: _int_spec(1, MAX_WORKERS, "a number of processes")
            for entry in WORKER_KEYS}


def known_keys():
    """Every key that is not warned about, with its :class:`Spec`."""
    specs = _builtin_specs()
    specs.update(_limit_specs())
    specs.update(_worker_specs())
    specs.update(_REGISTRY)
    return specs


def check_properties(props, source=None, *, system_properties=False):
    """Check ``props`` (``{key: text}``); return the warnings (one per unknown key), raise
    :class:`PropertyError` for the first bad value.

    ``system_properties``: the keys came from ``-D``; keys with a dot are then Java system
    properties, not warned about when unknown.
    """
    specs = known_keys()
    warnings = []
    for key, value in props.items():
        spec = specs.get(key)
        if spec is None:
            if system_properties and "." in key:
                continue
            close = difflib.get_close_matches(key, list(specs), n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            where = f" in {source}" if source else ""
            warnings.append(f"unknown key {key!r}{where}{hint}: not used by the server "
                            "(kept, and reported by GET_NAMESRV_CONFIG, as Java does)")
            continue
        if not spec.check(str(value)):
            raise PropertyError(key, value, spec.expected, source)
    return warnings


def value_problem(key, value):
    """What the start-up check expects of ``key`` when ``value`` fails it, else None (unknown
    keys pass): UPDATE_NAMESRV_CONFIG refuses a value the next start would refuse."""
    spec = known_keys().get(key)
    if spec is None or spec.check(str(value)):
        return None
    return spec.expected


def help_epilog():
    """The part of ``--help`` after the options: examples and the keys people set most."""
    return """
Examples:
  twistd -n rocketnamesrv                      # port 9876 on every interface
  twistd -n rocketnamesrv -c namesrv.properties --web tcp:8080:interface=127.0.0.1
  twistd -n rocketnamesrv -D listenPort=9877 -D tls.server.mode=enforcing \\
      -D tls.server.certPath=server.pem -D tls.server.keyPath=server.key
  rocketnamesrv -p                             # print every config item and exit

Keys people set most (all of them: -p; their meaning: docs/configuration):
  listenPort, bindAddress        where to listen (9876, 0.0.0.0); --listen overrides
  kvConfigPath                   the KV store file (~/namesrv/kvConfig.json)
  routeSnapshotPath              warm restart: the route tables kept across restarts (off)
  scanNotActiveBrokerInterval    ms between broker liveness scans (5000)
  serverChannelMaxIdleTimeSeconds  idle connections are closed after this (120)
  unRegisterBrokerQueueCapacity  unregistrations queued at most (3000)
  tls.server.mode                disabled | permissive | enforcing
  adminAllowNetworks             networks allowed to send admin requests and to use --web
  aclEnable, aclConfigPath       require signed admin requests (mqadmin's AccessKey)
  aclReplayWindowSeconds         refuse a signed admin request seen again within it
  brokerAllowNetworks            networks allowed to register, unregister and heartbeat brokers
  brokerIdentityBinding          a live broker's name, id and address belong to its host

Several NameServers for availability: run one per host; give brokers and clients all of them
(namesrvAddr=a:9876;b:9876). Each broker registers with every NameServer; NameServers do not
talk to each other.
"""
