"""Service layer: the warm restart (a rocketpy addition; off unless ``routeSnapshotPath`` or
``--warm-from`` is given, as Java behaves): the route tables survive a restart, so clients are
not told TOPIC_NOT_EXIST until each broker's next registration (apache/rocketmq#9411).

While the server runs, :class:`RouteSnapshotService` writes the tables to ``routeSnapshotPath``
every :data:`INTERVAL_SECONDS` and at shutdown (before the server closes its connections, whose
close events would unregister every broker): it takes the image on the reactor
(:mod:`rocketpy.namesrv.routeimage`; the big routes part in steps, and only when the routes
changed) and encodes and writes it on its own writer thread
(:class:`~rocketpy.transport.offload.WritePool`, ``rocketpy-route-snapshot``; a KV put never
waits behind it), each file replaced atomically (:func:`~rocketpy.service.fileio.write_atomic`):
the routes part first under a name of its own, then the main part naming it, then the routes
parts no main part names. A crash at any point leaves a main part and the routes part it names.

At start, a snapshot taken within ``brokerChannelExpiredTime`` (120 s) is loaded before the
remoting port takes its first connection (it is bound, its backlog holds the connections, the
reactor turns: ``/healthz`` answers, ``/readyz`` says not ready): read on a thread, parsed a
record per reactor step (:mod:`rocketpy.namesrv.routefile`) and applied in steps of
:data:`~rocketpy.namesrv.routeimage.RESTORE_SLICE_PAIRS` topic-broker pairs, after it has all
been read and checked. Its live brokers are *provisional* until they register again and expire
as they would have. A snapshot that is torn, from another release profile, too old or over the
bounds is ignored with one log line and the server starts empty; nothing of it is used. Without
a usable local snapshot, ``--warm-from URL`` asks a peer rocketpy's web endpoint for its tables
(:mod:`rocketpy.service.warmfrom`) and loads them the same way."""
import os
import time

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from ..namesrv.model import DEFAULT_BROKER_TIMEOUT_MS
from ..namesrv.pending import FileWrite
from ..namesrv.routefile import (MAIN, ROUTES, MainReader, RoutesReader, RoutesRef,
                                 SnapshotRefused, encode_main, encode_routes, part_length,
                                 routes_file_name)
from ..namesrv.routeimage import (RoutesCapture, TablesChanged, capture_main, capture_routes,
                                  delta_work, is_empty, restore_deltas, routes_mark)
from ..transport import logs
from .fileio import write_atomic

__all__ = ["RouteSnapshotService", "RouteSnapshotter", "ROUTE_SNAPSHOT_KEYS",
           "ROUTE_SNAPSHOT_PATH_KEY", "INTERVAL_SECONDS", "WRITER_THREAD_NAME", "read_bounded"]

ROUTE_SNAPSHOT_PATH_KEY = "routeSnapshotPath"
#: ``(property key, attribute, default, meaning)`` (the configuration page's table)
ROUTE_SNAPSHOT_KEYS = (
    (ROUTE_SNAPSHOT_PATH_KEY, "route_snapshot_path", "",
     "warm restart: where the route tables are written every few seconds and at shutdown, "
     "and loaded from at start (empty: off, as Java); also --routeSnapshotPath"),
)
#: seconds between two snapshots (the main part; the routes part only when the routes changed)
INTERVAL_SECONDS = 5.0
WRITER_THREAD_NAME = "rocketpy-route-snapshot"
#: a snapshot older than this is ignored: Java's ``brokerChannelExpiredTime``, after which every
#: broker in it has expired
MAX_AGE_MS = DEFAULT_BROKER_TIMEOUT_MS
#: whole-table captures after this many abandoned stepped ones (the tables kept changing)
_RETRIES = 3

log = Logger(observer=logs.observer)


def read_bounded(path, max_bytes):
    """The file's bytes, None when there is none; :exc:`SnapshotRefused` when it is larger than
    ``max_bytes`` (None: no bound), before anything is read. Blocking: a thread's."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return None
    if max_bytes is not None and size > max_bytes:
        raise SnapshotRefused(f"over the bounds: {os.path.basename(path)} has {size} bytes, over "
                              f"{max_bytes} (what the route bounds allow)")
    with open(path, "rb") as f:
        data = f.read(size + 1)   # (a file still growing is read as far as its size then)
    if max_bytes is not None and len(data) > max_bytes:
        raise SnapshotRefused(f"over the bounds: {os.path.basename(path)} grew past {max_bytes} "
                              "bytes while read")
    return data


def _in_thread(reactor, work, *args):
    if IReactorThreads.providedBy(reactor):
        return deferToThreadPool(reactor, reactor.getThreadPool(), work, *args)
    return defer.maybeDeferred(work, *args)


def _later(clock):
    """A Deferred that fires on a later reactor turn (so other work gets in between)."""
    d = defer.Deferred()
    clock.callLater(0, d.callback, None)
    return d


class RouteSnapshotter:
    """Takes images of ``rim`` on the reactor: the main part whole, the routes part in steps of
    :data:`~rocketpy.namesrv.routeimage.CAPTURE_STEP` topics on successive reactor turns
    (:meth:`capture`), and encodes them (any thread). ``host_of_channel(channel_id)``: the host a
    broker's connection comes from."""

    def __init__(self, rim, profile, clock, host_of_channel):
        self.rim = rim
        self.profile = profile
        self.clock = clock
        self.host_of_channel = host_of_channel
        #: capture steps done, and the most topics one copied (the work a step holds the reactor)
        self.capture_steps = 0
        self.largest_capture_step = 0

    def now_ms(self):
        return int(self.clock.seconds() * 1000)

    def main(self):
        return capture_main(self.rim, self.profile, self.now_ms(), self.host_of_channel)

    @defer.inlineCallbacks
    def capture(self):
        """A Deferred of ``(MainImage, RoutesImage)`` of one moment, the routes part taken in
        steps (again while the tables change under it; after :data:`_RETRIES` tries, whole)."""
        for _ in range(_RETRIES):
            capture = RoutesCapture(self.rim, self.profile)
            try:
                routes = None
                while routes is None:
                    routes = capture.step()
                    self.capture_steps += 1
                    self.largest_capture_step = max(self.largest_capture_step,
                                                    capture.largest_step)
                    if routes is None:
                        yield _later(self.clock)
                if routes_mark(self.rim) == capture.mark:
                    return self.main(), routes
            except TablesChanged:
                yield _later(self.clock)
        return self.main(), capture_routes(self.rim, self.profile)

    @staticmethod
    def encode(main, routes):
        """The two parts as one stream (main part first): what a peer is sent."""
        data, digest = encode_routes(routes)
        ref = RoutesRef(routes_file_name("peer", digest), len(data), digest)
        return encode_main(main, ref) + data

    def stream(self, reactor):
        """A Deferred of :meth:`encode` of a fresh capture, encoded on a thread."""
        return self.capture().addCallback(lambda parts: _in_thread(reactor, self.encode, *parts))


class RouteSnapshotService(Service):
    """Loads a snapshot at start (``path`` and/or ``fetch_peer``), then writes one to ``path``
    every ``interval`` seconds and when it stops.

    :param snapshotter: the :class:`RouteSnapshotter` of the tables.
    :param path: ``routeSnapshotPath`` (None: nothing written or read here).
    :param limits: the :class:`~rocketpy.namesrv.routefile.ReadLimits` (the route bounds).
    :param v5_keys: live brokers are keyed by (cluster, address), as 5.x keys them.
    :param reactor: the reactor (time, steps, and the thread a file is read on).
    :param writer: the :class:`~rocketpy.transport.offload.WritePool` (None: write inline).
    :param fetch_peer: ``fetch_peer()`` -> Deferred of a peer's snapshot stream, or None.
    :param on_loaded: called once the tables are as loaded (before the port opens).
    """

    name = "route-snapshot"
    log = log

    def __init__(self, snapshotter, *, path, limits, v5_keys, reactor, writer=None,
                 fetch_peer=None, on_loaded=None, interval=INTERVAL_SECONDS,
                 max_age_ms=MAX_AGE_MS):
        self.snapshotter = snapshotter
        self.rim = snapshotter.rim
        self.profile = snapshotter.profile
        self.path = None if not path else os.path.abspath(path)
        self.limits = limits
        self.v5_keys = v5_keys
        self.reactor = reactor
        self.writer = writer
        self.fetch_peer = fetch_peer
        self.on_loaded = on_loaded
        self.interval = interval
        self.max_age_ms = max_age_ms
        #: fires once the load is over (loaded, nothing to load, or ignored): the port opens
        self.ready = defer.Deferred()
        #: what was loaded: ``{"source", "topics", "pairs", "brokers", "seconds", ...}``
        self.load_report = None
        #: load steps and the most work one did: payload bytes parsed, pairs applied
        self.load_steps = 0
        self.largest_parse_step = 0
        self.largest_apply_step = 0
        self.writes = 0
        self.write_failures = 0
        self.last_write_ms = None
        self.last_bytes = 0           # the newest snapshot's size on disk, both parts
        self._written = None          # (routes mark, RoutesRef, routes bytes) on disk now
        self._writing = False
        self._failing = False
        self._loop = None
        self._loading = None
        self._stopped = False

    # ------------------------------------------------------------------ start: load

    def startService(self):
        super().startService()
        if self.writer is not None:
            self.writer.start()
        self._loading = self._load()
        self._loading.addErrback(lambda f: self.log.failure("route snapshot load failed", f))
        self._loading.addBoth(self._load_over)

    @defer.inlineCallbacks
    def _load(self):
        if self.path is not None:
            report = yield self._try("file", self._from_file)
            if report is not None:
                return report
        if self.fetch_peer is not None:
            return (yield self._try("peer", self._from_peer))
        return None

    @defer.inlineCallbacks
    def _try(self, source, read):
        started = time.monotonic()
        try:
            parts = yield read()
            if parts is None:
                return None
            main, routes, shift, ref = yield self._parse(*parts)
            if self._stopped:
                return None
            if not is_empty(self.rim):
                raise SnapshotRefused("the route tables are not empty")
        except (SnapshotRefused, OSError) as exc:
            if self._stopped:
                return None
            self.log.warn("route snapshot {what} ignored: {why}",
                          what=self.path if source == "file" else "from the peer", why=exc)
            return None
        yield self._apply(main, routes, shift)
        if self._stopped:
            return None
        if source == "file":   # the routes part on disk is these tables' until they change
            self._written = (routes_mark(self.rim), ref, ref.size)
        return {"source": source, "topics": len(routes.topics), "pairs": routes.pairs,
                "brokers": len(main.live), "groups": len(main.groups),
                "ageSeconds": max(0.0, (self.snapshotter.now_ms() - main.taken_ms) / 1000),
                "seconds": round(time.monotonic() - started, 3)}

    @defer.inlineCallbacks
    def _from_file(self):
        main = yield _in_thread(self.reactor, read_bounded, self.path, self.limits.max_bytes(MAIN))
        if main is None:
            self.log.info("no route snapshot at {path}: starting with empty route tables",
                          path=self.path)
            return None
        reader = yield self._read_part(MainReader(main, self.limits, self.profile,
                                                  self.snapshotter.now_ms(), self.max_age_ms,
                                                  self.v5_keys))
        ref = reader.routes
        directory, name = os.path.split(self.path)
        if ref.file != routes_file_name(name, ref.digest):   # no other file is read
            raise SnapshotRefused(f"torn: it names {ref.file!r} as its routes part")
        routes_path = os.path.join(directory, ref.file)
        routes = yield _in_thread(self.reactor, read_bounded, routes_path,
                                  self.limits.max_bytes(ROUTES))
        if routes is None:
            raise SnapshotRefused(f"torn: its routes part {ref.file} is missing")
        return reader, routes

    @defer.inlineCallbacks
    def _from_peer(self):
        stream = yield self.fetch_peer()
        cut = part_length(stream)
        reader = yield self._read_part(MainReader(stream[:cut], self.limits, self.profile, None,
                                                  self.max_age_ms, self.v5_keys))
        return reader, stream[cut:]

    @defer.inlineCallbacks
    def _read_part(self, reader):
        """Parse ``reader``'s part a record per reactor turn; the reader once done."""
        while not reader.step():
            self._count_step(parsed=reader.work)
            yield _later(self.reactor)
            if self._stopped:
                raise SnapshotRefused("the server stopped")
        self._count_step(parsed=reader.work)
        return reader

    @defer.inlineCallbacks
    def _parse(self, main_reader, routes_data):
        routes_reader = yield self._read_part(RoutesReader(routes_data, self.limits, self.profile,
                                                           main_reader.routes))
        main, routes = main_reader.image, routes_reader.image
        # the entries' times, from the snapshot's clock onto this server's: unchanged for a
        # file of this host (the time since it was taken counts), the peer's skew taken out
        # for a peer's (it was taken just now)
        now = self.snapshotter.now_ms()
        shift = 0 if main_reader.now_ms is not None and now >= main.taken_ms else now - main.taken_ms
        return main, routes, shift, main_reader.routes

    @defer.inlineCallbacks
    def _apply(self, main, routes, shift):
        for delta in restore_deltas(main, routes, shift):
            if self._stopped:
                return
            self.rim.apply(delta)
            self._count_step(applied=delta_work(delta))
            yield _later(self.reactor)
        if self.on_loaded is not None:
            self.on_loaded()

    def _count_step(self, parsed=0, applied=0):
        self.load_steps += 1
        self.largest_parse_step = max(self.largest_parse_step, parsed)
        self.largest_apply_step = max(self.largest_apply_step, applied)

    def _load_over(self, report):
        self._loading = None
        if self._stopped:
            return
        if isinstance(report, dict):
            self.load_report = report
            self.log.info(
                "route snapshot loaded from the {source}: {topics} topics, {pairs} topic-broker "
                "pairs, {brokers} live brokers (provisional until they register), taken "
                "{age:.1f} s ago, in {seconds} s ({steps} steps)", source=report["source"],
                topics=report["topics"], pairs=report["pairs"], brokers=report["brokers"],
                age=report["ageSeconds"], seconds=report["seconds"], steps=self.load_steps)
        if self.path is not None:
            self._loop = self.reactor.callLater(self.interval, self._tick)
        self.ready.callback(self.load_report)

    # ------------------------------------------------------------------ running: write

    def _tick(self):
        self._loop = self.reactor.callLater(self.interval, self._tick)
        if not self._writing:
            self._writing = True
            self._snapshot().addErrback(
                lambda f: self.log.failure("route snapshot failed", f)).addBoth(self._done_writing)

    def _done_writing(self, result):
        self._writing = False
        return result

    @defer.inlineCallbacks
    def _snapshot(self):
        """Take the tables' image and write it (the routes part only when it changed)."""
        written = self._written
        if written is not None and routes_mark(self.rim) == written[0]:
            main, routes, mark = self.snapshotter.main(), None, written[0]
        else:
            main, routes = yield self.snapshotter.capture()
            mark = routes.mark
        if not self._stopped:   # (stopping wrote the last one itself)
            yield self._write(main, routes, mark)

    def _write(self, main, routes, mark):
        box = []
        ref = None if routes is not None else self._written[1]
        job = FileWrite(self.path, lambda: (main, routes, ref),
                        lambda parts: box.append(self._write_files(*parts)))
        if self.writer is None:
            d = defer.maybeDeferred(job)
        else:
            d = self.writer.submit(job)

        def written(_):
            if not box:   # a later write of the file was written for this one
                return
            ref, size = box[0]
            self._written = (mark, ref, ref.size)
            self.writes += 1
            self.last_write_ms = self.snapshotter.now_ms()
            self.last_bytes = size + ref.size
            if self._failing:
                self._failing = False
                self.log.info("route snapshot written to {path} again", path=self.path)

        def failed(failure):
            self.write_failures += 1
            if not self._failing:   # one line until a write succeeds again, not one every 5 s
                self._failing = True
                self.log.warn("route snapshot not written to {path}: {why}", path=self.path,
                              why=failure.getErrorMessage())
        return d.addCallbacks(written, failed)

    def _write_files(self, main, routes, ref):
        """On the writer thread: the routes part (when new), then the main part, then the routes
        parts no main part names any more; ``(RoutesRef, main part size)``."""
        directory, name = os.path.split(self.path)
        if routes is not None:
            data, digest = encode_routes(routes)
            ref = RoutesRef(routes_file_name(name, digest), len(data), digest)
            write_atomic(os.path.join(directory, ref.file), data)
        data = encode_main(main, ref)
        write_atomic(self.path, data)
        stale = name + ".routes-"
        for other in os.listdir(directory or "."):
            if other != ref.file and (other.startswith(stale) or other.startswith("." + stale)):
                try:
                    os.unlink(os.path.join(directory, other))
                except OSError:
                    pass
        return ref, len(data)

    # ------------------------------------------------------------------ stop

    def stopService(self):
        super().stopService()
        loading = self._loading is not None
        self._stopped = True
        if self._loop is not None and self._loop.active():
            self._loop.cancel()
        self._loop = None
        done = None
        if loading:   # tables half loaded: the snapshot on disk stays as it is
            self.log.info("route snapshot load stopped: the server is stopping")
        elif self.path is not None:   # taken now, before the connections close
            written = self._written
            if written is not None and routes_mark(self.rim) == written[0]:
                routes, mark = None, written[0]
            else:
                routes = capture_routes(self.rim, self.profile)
                mark = routes.mark
            done = self._write(self.snapshotter.main(), routes, mark).addCallback(
                lambda _: self.log.info("route snapshot written to {path}", path=self.path))
        if self.writer is None:
            return done
        stopping = self.writer.stop()
        return stopping if done is None else defer.gatherResults([done, stopping])
