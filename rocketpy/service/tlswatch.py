"""Service layer: TLS certificate and key reload on change (Java ``NamesrvController`` with
``FileWatchService``, which polls the certificate, key and trust files every 500 ms).

The files are polled with ``os.stat`` on the reactor's clock (injectable; a stat of three small
files is all a tick costs) and read only when one changed: size, modification time, inode or
presence. Any change rebuilds the context (:meth:`~rocketpy.transport.tls.ServerContextFactory.
reload`), so new connections use the new files and established ones keep theirs. A context that
does not build (a half-written file, a key that does not match the certificate) is logged and
the old one kept; the next change tries again, so writing the certificate and then the key
reloads once both are in place (Java waits for both to change, and never reloads a renewed
certificate whose key stayed the same)."""
import os

from ..transport.tls import TlsUnavailableError
from .periodic import PeriodicService

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
    """Reload ``context_factory`` when one of its files changes."""

    name = "tls-file-watch"

    def __init__(self, context_factory, clock, interval=WATCH_INTERVAL):
        super().__init__(interval, clock)
        self.context_factory = context_factory
        self.paths = context_factory.watched_paths()
        self._seen = self._signatures()
        self.reloads = 0
        self.failures = 0

    def _signatures(self):
        return tuple(_signature(p) for p in self.paths)

    def run_once(self):
        now = self._signatures()
        if now == self._seen:
            return
        changed = [p for p, a, b in zip(self.paths, self._seen, now) if a != b]
        self._seen = now
        try:
            self.context_factory.reload()
        except TlsUnavailableError as exc:
            self.failures += 1
            self.log.error("TLS files changed ({files}) but do not load, keeping the previous "
                           "certificate: {why}", files=", ".join(changed), why=exc)
            return
        self.reloads += 1
        self.log.info("The TLS certificate and key changed ({files}): new connections use them",
                      files=", ".join(changed))
