"""Transport layer: a call repeated at a fixed rate (Java
``ScheduledExecutorService.scheduleAtFixedRate``), for the services and the web endpoint's peer
watch (both above, so it lives here).

Twisted's ``TimerService`` fires at once on start; Java's NameServer schedules its periodic jobs
after an initial delay, so this small base class starts its ``LoopingCall`` with ``now=False``
on an injectable clock. A failing call is logged and the loop goes on, as a Java scheduled task
that catches its own exceptions.
"""
from twisted.application.service import Service
from twisted.internet import task
from twisted.logger import Logger

from . import logs

__all__ = ["PeriodicService"]


class PeriodicService(Service):
    """Call ``self.run_once()`` every ``interval`` seconds on ``clock`` while running."""

    log = Logger(observer=logs.observer)

    def __init__(self, interval, clock):
        self.interval = interval
        self.clock = clock
        self._loop = None

    def run_once(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def _tick(self):
        try:
            self.run_once()
        except Exception:
            self.log.failure("{name} failed", name=self.name)

    def startService(self):
        super().startService()
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=False)

    def stopService(self):
        super().stopService()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
