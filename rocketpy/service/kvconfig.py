"""Service layer: the KV config's life around the server (Java ``NamesrvController.loadConfig``,
``KVConfigManager.printAllPeriodically`` every 10 minutes, the last persist at shutdown).

The table is loaded when the service starts and logged on Java's schedule with Java's lines.
Its log is compacted into ``kvConfig.json`` on the compactor thread (``rocketpy-kv-compactor``)
while the writer thread goes on appending puts, so no put waits for a whole-table rewrite; when
the service stops, the compactor finishes, then the writer thread appends what waits and
compacts once more, so a SIGTERM leaves the file complete -- what a Java NameServer reads -- even
if an earlier write failed."""
import os
from itertools import islice

from twisted.internet import defer

from ..transport.periodic import PeriodicService
from .fileio import read_text

__all__ = ["MAX_LOGGED_ENTRIES", "KVConfigService", "kv_config_log_lines", "COMPACTOR_THREAD_NAME"]

COMPACTOR_THREAD_NAME = "rocketpy-kv-compactor"


#: entries ``printAllPeriodically`` logs at most: the table may hold a million tiny entries
#: within its byte bound, and logging runs on the reactor
MAX_LOGGED_ENTRIES = 100


def kv_config_log_lines(config_table, total_bytes=None, limit=MAX_LOGGED_ENTRIES):
    """The lines Java's ``printAllPeriodically`` logs for ``{namespace: {key: value}}``, at
    most ``limit`` entries of them, then one line counting the entries (and bytes) left out."""
    lines = ["--------------------------------------------------------",
             f"configTable SIZE: {len(config_table)}"]
    entries = sum(map(len, config_table.values()))
    every = ((namespace, item) for namespace, table in config_table.items() for item in table.items())
    lines.extend(f"configTable NS: {namespace} Key: {key} Value: {value}"
                 for namespace, (key, value) in islice(every, limit))
    logged = len(lines) - 2
    if logged < entries:
        size = "" if total_bytes is None else f", {total_bytes} bytes in all"
        lines.append(f"configTable: {entries} entries{size}; {entries - logged} more not logged")
    return lines


class KVConfigService(PeriodicService):
    """Load on start, log every ``interval`` seconds (600), persist on stop.

    :param load: load the file when the service starts (False when the caller already did).
    :param write: ``write(job)`` -> Deferred, the writer's ``submit``; None: write here.
    :param compactor: the :class:`~rocketpy.transport.offload.WritePool` compactions run on
        (started and stopped here); None: each runs with the append that makes it due."""

    name = "kv-config"

    def __init__(self, kv_config_manager, clock, interval=600.0, first_delay=60.0, load=True,
                 write=None, compactor=None):
        super().__init__(interval, clock)
        self.kv = kv_config_manager
        self._write = write
        self._compactor = compactor
        self.first_delay = first_delay
        self._load = load
        self._first = None

    def startService(self):
        if self._load:
            self.kv.load_json(read_text(self.kv.path))
            self.kv.replay_log()
        if self._compactor is not None:
            self._compactor.start()
            self.kv.compact = self._compact
        # Java: scheduleAtFixedRate(printAllPeriodically, 1, 10, MINUTES)
        self.running = 1
        self._first = self.clock.callLater(self.first_delay, self._begin)

    def _begin(self):
        self._first = None
        self._tick()
        super().startService()

    def run_once(self):
        for line in kv_config_log_lines(self.kv.config_table, self.kv.total_bytes):
            self.log.info("{line}", line=line)

    def stopService(self):
        if self._first is not None and self._first.active():
            self._first.cancel()
        self._first = None
        if self._loop is not None:
            super().stopService()
        self.running = 0
        self.kv.compact = None   # from now on the last write compacts, on the writer thread
        if self._compactor is None:
            return self._flush()
        return self._compactor.stop().addCallback(lambda _: self._flush())

    def _compact(self, job):
        """Run a compaction on the compactor thread; tell the table how it went."""
        done = self._compactor.submit(job)
        done.addErrback(lambda failure: self.log.warn(
            "kv config compaction failed (the log keeps every change): {path}: {why}",
            path=self.kv.path, why=failure.getErrorMessage()))
        done.addBoth(lambda _: job.settle())

    def _flush(self):
        job = self.kv.persist_job()
        if job is None or (not self.kv.config_table and not self.kv.waiting
                           and not os.path.exists(self.kv.path) and not self.kv.log.segments()):
            return None  # nothing was ever stored: leave no empty file behind
        written = defer.maybeDeferred(self._write, job) if self._write else defer.maybeDeferred(job)
        return written.addBoth(lambda result: (job.settle(), result)[1]).addCallbacks(
            self._flushed, self._not_flushed)

    def _flushed(self, _):
        self.log.info("kv config flushed to {path}", path=self.kv.path)

    def _not_flushed(self, failure):
        self.log.error("persist kvconfig failed (the log keeps every change): {path}: {why}",
                       path=self.kv.path, why=failure.getErrorMessage())
