"""Service layer: TLS certificate and key reload on change (Java ``NamesrvController`` with
``FileWatchService``, which polls the certificate, key and trust files every 500 ms).

The files are polled with ``os.stat`` on the reactor's clock (injectable; a stat of three small
files is all a tick costs) and read only when one changed: size, modification time, inode or
presence. Reading them and building the context runs through ``run`` (the reactor's thread pool
in the server: a slow disk never stalls the reactor), and only regular files of a bounded size
are read (:func:`~rocketpy.transport.tls.read_tls_file`); one build at a time, polls wait for
it. Any change builds a new context factory and hands it to ``install`` (which puts it
where the transport takes it for each new TLS connection), so new connections use the new files
and established ones keep theirs. A context that does not build (a half-written file, a key that
does not match the certificate) is logged and the old one kept; the next change tries again, so
writing the certificate and then the key reloads once both are in place (Java waits for both to
change, and never reloads a renewed certificate whose key stayed the same). Files that did not
load at start are watched too: TLS starts working when they are fixed."""
import os

from twisted.internet.defer import maybeDeferred

from ..transport.periodic import PeriodicService
from ..transport.tls import TlsUnavailableError, build_context_factory, watched_paths

__all__ = ["TlsFileWatch", "WATCH_INTERVAL"]

#: seconds between two polls (Java ``FileWatchService.WATCH_INTERVAL``, 500 ms)
WATCH_INTERVAL = 0.5


def _signature(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


class TlsFileWatch(PeriodicService):
    """``install(context_factory)`` a new context built from ``settings`` when one of its
    files changes; ``run(function, *args) -> Deferred`` runs the build (default: here)."""

    name = "tls-file-watch"

    def __init__(self, settings, install, clock, interval=WATCH_INTERVAL, run=maybeDeferred):
        super().__init__(interval, clock)
        self.settings = settings
        self.install = install
        self.run = run
        self.paths = watched_paths(settings)
        self._seen = self._signatures()
        self._building = False
        self.reloads = 0
        self.failures = 0

    def _signatures(self):
        return tuple(_signature(p) for p in self.paths)

    def run_once(self):
        if self._building:
            return
        now = self._signatures()
        if now == self._seen:
            return
        changed = ", ".join(p for p, a, b in zip(self.paths, self._seen, now) if a != b)
        self._seen = now
        self._building = True
        d = self.run(build_context_factory, self.settings)
        d.addCallbacks(self._built, self._failed, callbackArgs=(changed,), errbackArgs=(changed,))
        d.addBoth(self._done)

    def _built(self, context_factory, changed):
        self.install(context_factory)
        self.reloads += 1
        self.log.info("The TLS certificate and key changed ({files}): new connections use them",
                      files=changed)

    def _failed(self, failure, changed):
        self.failures += 1
        why = (failure.getErrorMessage() if failure.check(TlsUnavailableError)
               else failure.getTraceback())
        self.log.error("TLS files changed ({files}) but do not load, keeping the previous "
                       "certificate: {why}", files=changed, why=why)

    def _done(self, _):
        self._building = False
