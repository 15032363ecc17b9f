"""Service layer: ``twistd rocketnamesrv`` options and service tree (Java ``NamesrvStartup`` and
``NamesrvController.initialize``/``start``/``shutdown``).

Options mirror ``mqnamesrv`` (``-c`` applies a properties file exactly as ``mqnamesrv -c`` does:
listenPort from 9876, unknown keys kept for GET_NAMESRV_CONFIG, ``configStorePath`` becomes the
file); rocketpy's own are listed in :class:`Options`. The profile becomes its policies
(:func:`rocketpy.namesrv.policy.policies_for`) once, when the options are parsed. Only
:func:`makeService` knows every component; each gets the narrow callable or policy it needs."""
import dataclasses
import gc
import os
import sys
from functools import partial

from twisted.application.service import Service
from twisted.internet.defer import maybeDeferred
from twisted.internet.interfaces import IReactorFromThreads, IReactorThreads
from twisted.logger import Logger, LogLevel
from twisted.python import usage

from ..namesrv.config import Configuration
from ..namesrv.acl import AclConfigError
from ..namesrv.kvconfig import KVConfigError, KVConfigManager, KVLimits
from ..namesrv.policy import policies_for
from ..namesrv.processor.configguard import ConfigUpdateGuard
from ..namesrv.profile import DEFAULT_PROFILE, PROFILES, profile_for
from ..remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from ..transport.answercache import AnswerCache
from ..transport.dispatch import lean_dispatch
from ..transport.client import OnewayNotifier
from ..transport.factory import RemotingServerFactory
from ..transport.limits import LIMIT_KEYS, ServerLimits, connection_cap
from ..transport.metrics import ServerMetrics
from ..transport.offload import DecodePool, WritePool
from ..transport.tls import (TLS_KEYS, TlsMode, TlsSettings, TlsUnavailableError,
                             build_context_factory, watched_paths)
from .allocator import heap_trimmer, one_arena, tune_allocator
from .fileio import AppendLog, load_properties, read_text, write_file_java
from .housekeeping import BrokerHousekeepingService
from .kvconfig import COMPACTOR_THREAD_NAME, KVConfigService
from .liveness import ScanNotActiveBrokerService
from .loglevel import LogLevelService, log_level
from .memory import RouteMemoryService, compact_dicts
from .propcheck import value_problem
from .routesnapshot import ROUTE_SNAPSHOT_PATH_KEY
from .startup import DaemonLaunch, GracefulExit, ReportingService, StartError
from .server import RemotingServerService
from .unregistration import BatchUnregistrationService
from ..transport import logs

__all__ = ["Options", "makeService", "FRAME_MAX_LENGTH_KEY"]

log = Logger(observer=logs.observer)

#: Java's ``-Dcom.rocketmq.remoting.frameMaxLength`` (NettyDecoder's limit, length field included).
FRAME_MAX_LENGTH_KEY = "com.rocketmq.remoting.frameMaxLength"


class Options(usage.Options):
    synopsis = ("[-c FILE] [-p] [--listen ENDPOINT] [--web ENDPOINT] [--routeSnapshotPath FILE] "
                "[-D key=value ...]")
    longdesc = ("Apache RocketMQ NameServer (rocketpy), configured like mqnamesrv: defaults, then "
                "the -c file, then -D. Unknown keys are warned about by name; a bad value stops "
                "the start before anything listens, with one line saying which.")

    optFlags = [
        ["printConfigItem", "p", "Print every config item with its value (defaults, the file and "
                                 "-D applied) and exit, like mqnamesrv -p."],
        ["no-answer-cache", None, "Encode every route answer afresh instead of reusing the encoded "
                                  "answer of an identical earlier query (for benchmarks and "
                                  "debugging; the answers are the same)."],
        ["no-malloc-trim", None, "Do not call glibc malloc_trim(0) after the route state has "
                                 "shrunk (brokers left), nor keep every thread on glibc's main "
                                 "arena for it (M_ARENA_MAX 1); the freed memory then stays in "
                                 "the process instead of going back to the system."],
        ["tune-allocator", None, "When the server starts, keep frame-sized buffers on the C "
                                 "heap (glibc mallopt; process-wide): large registrations then "
                                 "reuse memory instead of mapping fresh pages."],
    ]
    optParameters = [
        ["configFile", "c", None, "Java properties file with NamesrvConfig / NettyServerConfig "
                                  "keys (listenPort=9876, bindAddress, kvConfigPath, ...), as "
                                  "mqnamesrv -c. Unknown keys are warned about; bad values stop "
                                  "the start."],
        ["namesrvAddr", "n", None, "Accepted for mqnamesrv compatibility and ignored (a NameServer "
                                   "does not talk to other NameServers)."],
        ["listen", "l", None, "Where brokers and clients connect: any Twisted server endpoint, "
                              "e.g. tcp:9876, tcp:9876:interface=127.0.0.1, unix:/run/ns.sock. "
                              "Default: tcp:<listenPort>:interface=<bindAddress>."],
        ["web", None, None, "Also serve a read-only status page (/), Prometheus metrics "
                            "(/metrics) and JSON (/api/) on this Twisted endpoint, e.g. "
                            "tcp:8080:interface=127.0.0.1. Off unless given; honours "
                            "adminAllowNetworks."],
        ["kvConfigPath", None, None, "The KV config file (overrides the kvConfigPath key; default "
                                     "~/namesrv/kvConfig.json)."],
        ["routeSnapshotPath", None, None, "Warm restart: write the route tables to this file "
                                          "every few seconds and at shutdown, and load them at "
                                          "start when taken within 120 s (overrides the "
                                          "routeSnapshotPath key; off unless given, as Java)."],
        ["warm-from", None, None, "Warm restart from a peer: at start, without a usable route "
                                  "snapshot of its own, load the route tables of the rocketpy "
                                  "NameServer whose --web endpoint this is (http://host:port)."],
        ["profile", None, DEFAULT_PROFILE.name,
         "Which Java NameServer to answer like, byte for byte: "
         + ", ".join(f"{p.name} ({p.release.value})" for p in PROFILES) + "."],
        ["logLevel", None, "info", "The least severe log lines written: debug (adds a line per "
                                   "connection opened and closed), info, warn, error or "
                                   "critical."],
        ["workers", None, None, "Processes accepting on the listening port (overrides the "
                                "serverWorkerProcesses key; default 1): this one writes the "
                                "route tables, the others answer from replicas of them."],
    ]

    #: a worker process parses the writer's options again: the warnings are the writer's
    quiet = False

    def __init__(self):
        super().__init__()
        self["define"] = {}

    def opt_version(self):
        """Print rocketpy's version (and Twisted's, Python's) and exit."""
        import platform

        import twisted

        from .. import __version__
        sys.stdout.write(f"rocketpy {__version__} (Twisted {twisted.__version__}, "
                         f"Python {platform.python_version()})\n")
        sys.exit(0)

    def opt_define(self, value):
        key, sep, val = value.partition("=")
        if not sep or not key.strip():   # one line, not the whole usage before it
            raise StartError(f"-D wants key=value, got {value!r}")
        self["define"][key.strip()] = val

    opt_define.__doc__ = ("Set one property after the config file, e.g. -D listenPort=9877 "
                          "(repeatable): any config key, tls.*, adminAllowNetworks, aclEnable, "
                          "com.rocketmq.remoting.frameMaxLength.")
    opt_D = opt_define

    def opt_nsaddr(self, value):
        from ..web.nsaddr import parse_nsaddr
        try:
            name, addresses = parse_nsaddr(value)
        except ValueError as exc:
            raise usage.UsageError(f"--nsaddr={value!r}: {exc}") from None
        self.setdefault("nsaddr", {})[name] = addresses

    def opt_peers(self, value):
        from ..transport.client import namesrv_addr_list
        try:
            self["peers"] = namesrv_addr_list(value)
        except ValueError as exc:
            raise usage.UsageError(f"--peers={value!r}: {exc}") from None

    opt_peers.__doc__ = ("With --web, compare this NameServer's brokers and topics with these "
                         "others' every 30 s and show where they diverge: 'a:9876;b:9876'.")

    opt_nsaddr.__doc__ = ("With --web, serve this NameServer list to Java brokers and clients "
                          "at /rocketmq/nsaddr (an address server): --nsaddr 'a:9876;b:9876'; "
                          "NAME=LIST serves /rocketmq/NAME (e.g. nsaddr-unit1). Repeatable.")

    def parseOptions(self, options=None):
        """A bad option (unknown, without its value, or a bad --peers / --nsaddr list) is one
        line and exit status 1 (:class:`StartError`): twistd answers a ``UsageError`` with its
        whole usage on stdout, 82 lines, under the name ``rocketnamesrv --nodaemon``."""
        self["argv"] = list(sys.argv[1:] if options is None else options)
        try:
            super().parseOptions(options)
        except usage.UsageError as exc:
            raise StartError.of_usage(exc) from None

    def getUsage(self, width=None):
        from .propcheck import help_epilog
        return super().getUsage(width) + help_epilog()

    def postOptions(self):
        self["answerCache"] = not self["no-answer-cache"]
        for name in ("nsaddr", "peers"):
            if self.get(name) and not self["web"]:
                raise StartError(f"--{name} is shown on the web endpoint: give --web too")
        try:
            self["log_level"] = log_level(self["logLevel"])
        except ValueError as exc:
            raise StartError(str(exc)) from None
        try:
            self["profile_obj"] = profile_for(self["profile"])
        except ValueError as exc:
            raise StartError(str(exc)) from None
        self["policies"] = policies_for(self["profile_obj"])
        props = {}
        path = self["configFile"]
        if path:
            try:
                props = load_properties(path)
            except (OSError, ValueError) as exc:
                raise StartError(f"cannot read config file {path}: {exc}") from None
            log.info("load config properties file OK, {path}", path=path)
        _check_properties(props, path, self["define"], self)   # warn / refuse (propcheck)
        props.update(self["define"])
        configuration = Configuration.from_properties(props, self["policies"].config, path or None,
                                                      store=write_file_java)
        if self["kvConfigPath"]:
            configuration.namesrv_config.kv_config_path = self["kvConfigPath"]
        self["route_snapshot_path"] = (self["routeSnapshotPath"]
                                       or str(props.get(ROUTE_SNAPSHOT_PATH_KEY, "")).strip()
                                       or None)
        self["warm_from"] = None
        if self["warm-from"]:
            from .warmfrom import snapshot_url
            try:
                self["warm_from"] = snapshot_url(self["warm-from"])
            except ValueError as exc:
                raise StartError(f"--warm-from: {exc}") from None
        self["configuration"] = configuration
        self["controller_configuration"] = None
        if configuration.namesrv_config.enable_controller_in_namesrv:
            from .controller import controller_configuration
            try:
                self["controller_configuration"] = controller_configuration(props)
            except ValueError as exc:
                raise StartError(f"enableControllerInNamesrv=true: {exc}") from None
        self["tls"] = _tls_settings(props)
        self["explicit_max_connections"] = "serverMaxConnections" in props
        from .workers import worker_processes
        try:
            self["worker_processes"] = worker_processes(props, self["workers"])
        except ValueError as exc:
            raise StartError(str(exc)) from None
        try:
            self["limits"] = ServerLimits.from_properties(props)
            self["kv_limits"] = KVLimits.from_properties(props)
        except ValueError as exc:
            raise StartError(str(exc)) from None
        frame_max = props.get(FRAME_MAX_LENGTH_KEY, str(DEFAULT_MAX_FRAME_LENGTH))
        try:
            self["frame_max_length"] = int(frame_max)
        except ValueError:
            raise StartError(f"{FRAME_MAX_LENGTH_KEY} is not a number: {frame_max!r}") from None
        if self["printConfigItem"]:
            lines = configuration.print_lines()
            if self["controller_configuration"] is not None:   # Java prints its ControllerConfig
                lines += [f"{k}={v}" for k, v in
                          self["controller_configuration"].controller_config.print_items()]
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
            raise SystemExit(0)
        self["explicit_listen"] = bool(self["listen"])
        if not self["listen"]:
            netty = configuration.netty_server_config
            self["listen"] = default_listen(netty.listen_port, netty.bind_address,
                                            netty.server_socket_backlog)


def _check_properties(file_props, path, defines, options):
    """Unknown keys warned about by name, bad values refused, endpoints parsed: all before
    anything listens (:mod:`rocketpy.service.propcheck`)."""
    from twisted.internet.endpoints import serverFromString

    from .propcheck import PropertyError, check_properties
    try:
        warnings = check_properties(file_props, path)
        warnings += check_properties(defines, "-D", system_properties=True)
    except PropertyError as exc:
        raise StartError(str(exc)) from None
    for warning in () if options.quiet else warnings:
        sys.stderr.write(f"rocketnamesrv: warning: {warning}\n")
        log.warn("{warning}", warning=warning)
    for name in ("listen", "web"):
        if options[name]:
            try:
                serverFromString(None, options[name])   # parsed only: nothing listens
            except (ValueError, TypeError, KeyError) as exc:
                raise StartError(f"--{name}={options[name]!r}: not a Twisted server endpoint "
                                       f"(expected e.g. tcp:8080:interface=127.0.0.1): {exc}") from None


def default_listen(port, bind_address="0.0.0.0", backlog=1024):
    """The endpoint string for Java's ``bindAddress:listenPort`` (SO_BACKLOG included)."""
    bind = (bind_address or "0.0.0.0").replace(":", r"\:")
    return f"tcp:{port}:interface={bind}:backlog={backlog}"


def _in_thread(reactor):
    """``run(function, *args) -> Deferred`` on the reactor's thread pool (the TLS files are read
    there, off the reactor), or here for a reactor without threads (a test's fake one)."""
    if not IReactorThreads.providedBy(reactor):
        return maybeDeferred
    from twisted.internet.threads import deferToThreadPool
    return partial(deferToThreadPool, reactor, reactor.getThreadPool())


def _listening_at(netty, address, explicit):
    """Where the server listens, into the configuration GET_NAMESRV_CONFIG reports: Java sets
    ``listenPort`` to the bound port when it was 0 (``NettyRemotingServer.start``); ``--listen``
    (rocketpy's) overrides ``listenPort`` and ``bindAddress``, so both are the bound ones then.
    A UNIX socket has no port: nothing changes."""
    host, port = getattr(address, "host", None), getattr(address, "port", None)
    if port is None:
        return
    if explicit:
        netty.listen_port, netty.bind_address = port, host
    elif netty.listen_port == 0:
        netty.listen_port = port


def _tls_settings(props):
    """``tls.*`` from the config file and -D, then the ``tls.config.file`` (Java ``TlsHelper``
    lets that file override)."""
    merged = {k: v for k, v in props.items() if k in TLS_KEYS}
    tls_file = merged.get("tls.config.file", "/etc/rocketmq/tls.properties")
    if os.path.isfile(tls_file):
        try:
            from_file = load_properties(tls_file)
        except (OSError, ValueError):
            from_file = {}
        merged.update({k: v for k, v in from_file.items() if k in TLS_KEYS and k != "tls.server.mode"})
    return TlsSettings.from_properties(merged)


class _Hooks(Service):
    """Runs ``start()`` and ``stop()`` with the service tree (the decode pool's thread, the
    oneway notifier's connections)."""

    def __init__(self, name, start=None, stop=None):
        self.name = name
        self._start = start
        self._stop = stop

    def startService(self):
        super().startService()
        if self._start is not None:
            self._start()

    def stopService(self):
        super().stopService()
        if self._stop is not None:
            return self._stop()  # a Deferred, when stopping takes time (the writer's last writes)
        return None


def _route_size(route):
    """The route state's size for the memory service: topics, pairs, live brokers."""
    return lambda: len(route.topic_queue_table) + route.queue_data_count + len(route.broker_live_table)


#: A release collects fully (on the reactor) only below this route size: a full collection
#: walks what the tables still hold (~40 ms at 1 M entries, ~0.5 s at 10 M); above it the
#: release freezes the collector again after a young pass.
FULL_COLLECTION_BELOW = 50_000


def _route_release(processor, answer_cache, trim):
    """What the memory service does once the route state has shrunk (rocketpy.service.memory);
    ``trim`` is :func:`~rocketpy.service.allocator.heap_trimmer`'s call, or None."""
    route = processor.route_info_manager
    route_size = _route_size(route)
    # the holders' attribute dicts, asked for now: CPython 3.11 keeps an object's attributes
    # inline until something asks for its __dict__, and a dict made at the first release, at
    # the route state's peak, would stay on the peak's pages (issue 21)
    tables = [vars(holder) for holder in (route, route.shapes, route.snapshots, route.expiry)]

    def release():
        processor.reader.forget_departed_brokers()
        if answer_cache is not None:
            answer_cache.clear()
        if sum(compact_dicts(namespace) for namespace in tables):
            route.shapes.rebuilt()   # a decode may have read the topic table while it was empty
        # What kept CPython's 1 MiB arenas of a flood, a few objects each, once its brokers
        # had gone: the names made at run time (datetime's C code's, ours) that the type
        # attribute cache keeps in its 4,096 slots, and the free lists (up to 2,000 tuples of
        # each size, dicts, lists, frames) that the full collection empties; it also frees
        # what the departed brokers left in cycles, before the heap is trimmed
        sys._clear_type_cache()
        if route_size() < FULL_COLLECTION_BELOW:
            gc.collect()
        else:   # a young pass, and what survives frozen again: the tables left in the oldest
            gc.collect(1)   # generation would be walked by its next automatic pass
            gc.freeze()
        if trim is not None:
            trim()
    return release


def _route_snapshot(options, route, processor, factory, reactor, threads):
    """The :class:`~rocketpy.service.routesnapshot.RouteSnapshotter` (``/api/route-snapshot``
    serves what it takes) and, with ``routeSnapshotPath`` or ``--warm-from``, the warm restart's
    :class:`~rocketpy.service.routesnapshot.RouteSnapshotService`, else None."""
    from ..namesrv.broker_access import host_of
    from ..namesrv.routefile import MAIN, ROUTES, ReadLimits
    from .routesnapshot import WRITER_THREAD_NAME, RouteSnapshotService, RouteSnapshotter

    def host_of_channel(channel_id):
        proto = factory.channel(channel_id)   # a worker's connection too
        return None if proto is None else host_of(proto)
    policies = processor.policies
    snapshotter = RouteSnapshotter(route, policies.name, reactor, host_of_channel)
    path, peer = options.get("route_snapshot_path"), options.get("warm_from")
    if not (path or peer):
        return snapshotter, None
    limits = ReadLimits.from_bounds(processor.route_bounds)
    fetch = None
    if peer:
        from .warmfrom import fetch_snapshot
        main, routes = limits.max_bytes(MAIN), limits.max_bytes(ROUTES)
        fetch = partial(fetch_snapshot, reactor, peer,
                        None if main is None or routes is None else main + routes)
    return snapshotter, RouteSnapshotService(
        snapshotter, path=path, limits=limits, reactor=reactor,
        v5_keys=policies.routes.live_key("", "")[0] is not None,
        writer=WritePool(reactor, name=WRITER_THREAD_NAME) if threads and path else None,
        fetch_peer=fetch, on_loaded=processor.broker_access.bind_provisional)


@dataclasses.dataclass
class _Core:
    """What the builders below share: the tables, the KV store, the processor and its queue,
    the counters, the pools (None without threads: a test's fake reactor)."""

    route: object
    kv: object
    processor: object
    notifier: object
    memory: object
    batch: object
    submit: object
    metrics: object
    decode_pool: object
    write_pool: object
    startup_ms: int


def _kv_store(namesrv_config, limits):
    """The KV store, loaded with the changes logged since its file: a broken file stops the
    start, as in Java."""
    kv = KVConfigManager(namesrv_config.kv_config_path, store=write_file_java, limits=limits,
                         log=AppendLog(namesrv_config.kv_config_path))
    try:
        kv.load_json(read_text(kv.path))
        skipped = kv.replay_log()
    except (OSError, KVConfigError) as exc:
        backup = kv.path + ".bak"   # Java's copy of the previous content, when there is one
        hint = f" (the previous content is in {backup})" if os.path.isfile(backup) else ""
        raise StartError(f"cannot load the KV config: {exc}{hint}") from None
    if skipped:
        log.warn("KV config log: {n} incomplete or unreadable lines skipped (a write cut "
                 "short by a crash is never acknowledged)", n=skipped)
    return kv


def _core(options, reactor):
    """The state and the processor: route tables, KV store, unregistration queue, counters,
    the config guard and the processor (its guards read here: a guard it cannot apply stops
    the start), the pools."""
    from ..namesrv.processor import DefaultRequestProcessor
    from ..namesrv.processor.broker import MinBrokerIdNotifier
    from ..namesrv.route_info_manager import RouteInfoManager

    policies = options["policies"]
    configuration = options["configuration"]
    namesrv_config = configuration.namesrv_config
    kv = _kv_store(namesrv_config, options.get("kv_limits"))
    # Always there (it connects only when used): RouteInfoManager reads notifyMinBrokerIdChanged
    # on every registration and unregistration, as Java does, so UPDATE_NAMESRV_CONFIG can turn
    # it on at run time.
    notifier = OnewayNotifier(reactor)
    route = RouteInfoManager(namesrv_config, policies, MinBrokerIdNotifier(notifier, policies.wire))
    memory = RouteMemoryService(_route_size(route), None, reactor)   # release set later
    batch = BatchUnregistrationService(
        memory.watching(route.unregister_brokers), reactor,
        capacity=namesrv_config.un_register_broker_queue_capacity,
        immediate=not policies.routes.queues_unregistrations,
        weight=lambda request: route.topic_count_of_broker(request.broker_name))
    metrics = ServerMetrics()   # counters for /metrics; the wrappers below count service events
    submit = metrics.counting_submit(batch.submit)
    guard = ConfigUpdateGuard.from_configuration(   # the transport's limits guard it too
        configuration, protected=[key for key, *_ in LIMIT_KEYS], value_check=value_problem)
    startup_ms = int(reactor.seconds() * 1000)
    try:   # reads the access-control accounts file: a guard it cannot apply stops the start
        processor = DefaultRequestProcessor(
            route, kv, submit_unregistration=submit, profile=policies,
            configuration=configuration, startup_ms=startup_ms, config_guard=guard)
    except AclConfigError as exc:
        raise StartError(str(exc)) from None
    # big registration bodies are decoded on one thread, files written on another; a fake
    # reactor that takes no calls from threads (in-process tests) gets everything done on the spot
    threads = IReactorFromThreads.providedBy(reactor)
    return _Core(route, kv, processor, notifier, memory, batch, submit, metrics,
                 DecodePool(reactor) if threads else None, WritePool(reactor) if threads else None,
                 startup_ms)


def _tls(settings):
    """The server's TLS context (None when disabled, or when it cannot be made: logged as
    Java's ``Failed to create SSLContext``, and plain connections are still served)."""
    if settings.mode is TlsMode.DISABLED:
        return None
    try:
        return build_context_factory(settings)
    except TlsUnavailableError as exc:
        log.error("Failed to create SSLContext for server: {why}", why=exc)
        return None


def _limits(options):
    limits = options.get("limits") or ServerLimits()
    if limits.max_connections:   # one descriptor per connection: what the open files allow
        limits = dataclasses.replace(limits, max_connections=connection_cap(
            limits.max_connections, configured=options.get("explicit_max_connections", True)))
    return limits


def _factory(options, reactor, core, context, limits):
    """The remoting server's factory: framing, TLS, idle close, buffers, the answer cache,
    the limits, the pools; channel events to the broker housekeeping."""
    route = core.route
    housekeeping = BrokerHousekeepingService(
        core.metrics.counting_channel_destroy(route.on_channel_destroy), core.submit)
    cache = (AnswerCache(route.route_version, versions=route.snapshots) if options["answerCache"]
             else None)
    return server_factory(options, reactor, core.processor, housekeeping, context=context,
                          limits=limits, metrics=core.metrics, answer_cache=cache,
                          decode_pool=core.decode_pool, write_pool=core.write_pool)


def server_factory(options, reactor, processor, listener, *, context, limits, metrics,
                   answer_cache, decode_pool, write_pool, first_channel_id=1):
    """A :class:`~rocketpy.transport.factory.RemotingServerFactory` of ``options`` (netty
    settings, TLS), the route writer's or a worker process's; with worker processes each gets
    its share of ``limits`` (:func:`~rocketpy.service.workers.shared_limits`)."""
    from .workers import shared_limits
    netty = options["configuration"].netty_server_config
    return RemotingServerFactory(
        processor, listener, clock=reactor, max_frame_length=options["frame_max_length"],
        idle_seconds=netty.server_channel_max_idle_time_seconds, tls_mode=options["tls"].mode,
        tls_context_factory=context, send_buffer=netty.server_socket_snd_buf_size,
        receive_buffer=netty.server_socket_rcv_buf_size,
        write_high_water_mark=netty.write_buffer_high_water_mark, answer_cache=answer_cache,
        limits=shared_limits(limits, options.get("worker_processes", 1)), metrics=metrics,
        decode_pool=decode_pool, write_pool=write_pool, first_channel_id=first_channel_id)


def _process_services(options, reactor, top, factory):
    """What the process itself needs, first: the log level, the reactor's lean dispatch
    (:mod:`rocketpy.transport.dispatch`), the TLS files' watch (Java reloads the certificates
    when they change), SIGTERM as a clean stop."""
    LogLevelService(options.get("log_level", LogLevel.info), reactor).setServiceParent(top)
    _Hooks("lean-dispatch", partial(lean_dispatch, reactor)).setServiceParent(top)
    settings = options["tls"]
    if settings.mode is not TlsMode.DISABLED and watched_paths(settings):
        from .tlswatch import TlsFileWatch
        install = partial(setattr, factory, "tls_context_factory")   # read per connection
        top.tls_watch = TlsFileWatch(settings, install, reactor, run=_in_thread(reactor))
        top.tls_watch.setServiceParent(top)
    GracefulExit(reactor).setServiceParent(top)   # SIGTERM: a clean stop, exit status 0


def _state_services(options, reactor, top, core, factory):
    """The services over the state, in start order (stopped in reverse: the decode pool
    finishes what it holds, the KV file is flushed, the writer writes what it holds, the batch
    queue applies what is left): the unregistration queue, the writer, the KV store's load and
    periodic log, the allocator, the notifier, the decode pool, the liveness scan, the memory
    given back."""
    threads = IReactorFromThreads.providedBy(reactor)
    write_pool, decode_pool = core.write_pool, core.decode_pool
    trim = not options.get("no-malloc-trim")
    if trim:   # before any of the server's threads allocates (rocketpy.service.allocator)
        _Hooks("allocator-arena", one_arena).setServiceParent(top)
    core.batch.setServiceParent(top)
    if write_pool is not None:
        _Hooks("writer", write_pool.start, write_pool.stop).setServiceParent(top)
    KVConfigService(core.kv, reactor, load=False,
                    write=write_pool.submit if write_pool is not None else None,
                    compactor=WritePool(reactor, name=COMPACTOR_THREAD_NAME) if threads else None
                    ).setServiceParent(top)
    if options.get("tune-allocator"):   # process-wide: only when asked, when the server starts
        _Hooks("allocator", partial(tune_allocator, options["frame_max_length"])
               ).setServiceParent(top)
    _Hooks("oneway-notifier", stop=core.notifier.close).setServiceParent(top)
    if decode_pool is not None:
        _Hooks("decode-pool", decode_pool.start, decode_pool.stop).setServiceParent(top)
    namesrv_config = options["configuration"].namesrv_config
    ScanNotActiveBrokerService(
        core.metrics.counting_scan(core.route.scan_not_active_broker), factory.close_channel,
        core.submit, reactor,
        interval_ms=options["policies"].liveness.scan_interval_ms(namesrv_config)
    ).setServiceParent(top)
    core.memory.release = _route_release(core.processor, factory.answer_cache,
                                         trim=heap_trimmer() if trim else None)
    core.memory.setServiceParent(top)


def _controller(options, reactor, core, context, limits):
    """``enableControllerInNamesrv``: the controller's service tree on its own port, or None."""
    if options.get("controller_configuration") is None:
        return None
    from .controller import make_controller_service
    try:
        return make_controller_service(
            options["controller_configuration"], reactor, write_pool=core.write_pool,
            decode_pool=core.decode_pool, max_frame_length=options["frame_max_length"],
            tls_mode=options["tls"].mode, tls_context_factory=context, limits=limits)
    except ValueError as exc:
        raise StartError(str(exc)) from None


def _web(options, reactor, core, factory, server, snapshot, snapshotter, controller, workers):
    """``--web``: the status page, /metrics (with the guards' families), /api/, the probes;
    with worker processes, every process's (``workers``)."""
    from ..web.health import Readiness
    from ..web.service import make_web_service
    from .guardmetrics import GuardCollector

    policies = options["policies"]
    namesrv_config = options["configuration"].namesrv_config
    startup_ms = int(reactor.seconds() * 1000)
    readiness = Readiness([
        ("listening", lambda: server.accepting),
        ("waitSecondsForService", lambda: not policies.handlers.not_ready(
            namesrv_config, int(reactor.seconds() * 1000) - startup_ms)),
        ("routeSnapshotLoaded", lambda: snapshot is None or snapshot.ready.called)]
        + ([] if workers is None else [("workersServing", lambda: workers.ready.called)]))
    web = make_web_service(
        options["web"], route_info_manager=core.route, kv_config_manager=core.kv,
        factory=factory, unregistration=core.batch, processor=core.processor, policies=policies,
        reactor=reactor, listen=options["listen"], nsaddr=options.get("nsaddr"),
        peers=options.get("peers"), decode_pool=core.decode_pool, readiness=readiness,
        snapshot_stream=partial(snapshotter.stream, reactor), workers=workers)
    web.registry.register(GuardCollector(
        core.processor, core.write_pool, core.memory,
        controller=None if controller is None else controller.processor,
        group=None if controller is None else controller.group,
        notifier=None if controller is None else controller.notifier,
        snapshot=snapshot))
    return web


def makeService(options, reactor=None):
    """The NameServer service tree (Java ``NamesrvController``), from parsed :class:`Options`:
    the state and the processor, the transport, then the services in the order they start."""
    if reactor is None:
        from twisted.internet import reactor
    threads = IReactorFromThreads.providedBy(reactor)
    core = _core(options, reactor)
    context, limits = _tls(options["tls"]), _limits(options)
    factory = _factory(options, reactor, core, context, limits)

    top = ReportingService(DaemonLaunch.of(options))   # before twistd forks a daemon
    _process_services(options, reactor, top, factory)
    # Started in this order, stopped in reverse: the server stops listening and closes its
    # connections first, then the state's services stop (_state_services).
    _state_services(options, reactor, top, core, factory)
    snapshotter, snapshot = _route_snapshot(options, core.route, core.processor, factory,
                                            reactor, threads)
    netty = options["configuration"].netty_server_config
    server = RemotingServerService(
        options["listen"], factory, reactor, hold=None if snapshot is None else snapshot.ready,
        bound=partial(_listening_at, netty, explicit=options.get("explicit_listen", False)))
    server.setServiceParent(top)
    top.workers = None
    if options.get("worker_processes", 1) > 1:   # serverWorkerProcesses (rocketpy.service.workers)
        from .workers import attach_workers
        top.workers = attach_workers(
            top, options, route=core.route, kv=core.kv, configuration=options["configuration"],
            processor=core.processor, factory=factory, listener=factory.listener,
            server=server, snapshotter=snapshotter,
            hold=None if snapshot is None else snapshot.ready, reactor=reactor,
            startup_ms=core.startup_ms, unregistration=core.batch)
    top.controller = _controller(options, reactor, core, context, limits)
    if top.controller is not None:
        top.controller.setServiceParent(top)
    if options.get("web"):
        top.web = _web(options, reactor, core, factory, server, snapshot, snapshotter,
                       top.controller, top.workers)
        top.web.setServiceParent(top)
    if snapshot is not None:   # stopped before the server closes its connections (whose
        snapshot.setServiceParent(top)   # close events would unregister every broker)
    announce = server.announce if top.workers is None else (   # and every worker serves
        lambda: top.workers.ready.addCallback(lambda _: server.announce()))
    _Hooks("boot-line", announce).setServiceParent(top)   # once every listener is bound
    top.route_info_manager = core.route
    top.route_snapshot = snapshot
    top.processor = core.processor
    top.memory = core.memory
    top.factory = factory
    top.server = server
    return top
