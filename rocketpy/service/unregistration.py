"""Service layer: Java ``BatchUnregistrationService`` (RIP-29, RocketMQ 5.0) on the reactor.

Java queues every unregistration in a bounded queue (``unRegisterBrokerQueueCapacity``, 3000) and
one thread applies everything queued with a single ``unRegisterBroker(Set)``. Here ``submit``
appends to a bounded deque and the first submit of a reactor turn schedules one drain for the
next: everything submitted in between is one batch. A full queue makes ``submit`` return False
(answered SYSTEM_ERROR, as Java). Duplicates within a batch (idle then close) are dropped; the
route table ignores stale channel-caused requests (apache/rocketmq#11043)."""
from collections import deque

from twisted.application.service import Service
from twisted.logger import Logger

from ..transport import logs

__all__ = ["BatchUnregistrationService"]


class BatchUnregistrationService(Service):
    """Bounded unregistration queue applied once per reactor turn (``clock.callLater(0, ...)``).

    :param apply_batch: called with a list of requests (``RouteInfoManager.unregister_brokers``).
    :param capacity: ``unRegisterBrokerQueueCapacity``.
    :param immediate: apply each request at once instead (Java 4.9 unregisters synchronously)."""

    name = "batch-unregistration"
    log = Logger(observer=logs.observer)

    def __init__(self, apply_batch, clock, capacity=3000, immediate=False):
        self._apply = apply_batch
        self._clock = clock
        self.capacity = capacity
        self.immediate = immediate
        self._queue = deque()
        self._call = None
        self.batches = 0

    def __len__(self):
        return len(self._queue)

    def submit(self, request):
        """Queue ``request``; False when the queue is full (Java ``offer``)."""
        if self.immediate:
            self._run([request])
            return True
        if len(self._queue) >= self.capacity:
            self.log.warn("unregistration queue full ({capacity}), refusing {request}",
                          capacity=self.capacity, request=request, rocketpy_event="queue.full",
                          peer=getattr(request, "broker_addr", ""),
                          reason="unregistration queue full")
            return False
        self._queue.append(request)
        if self._call is None and self.running:
            self._call = self._clock.callLater(0, self.drain)
        return True

    def drain(self):
        """Apply everything queued as one batch (normally called by the reactor)."""
        self._call = None
        if not self._queue:
            return
        batch = list(dict.fromkeys(self._queue))
        self._queue.clear()
        self._run(batch)

    def _run(self, batch):
        self.batches += 1
        try:
            self._apply(batch)
        except Exception:
            self.log.failure("Handle unregister broker request failed: {batch}", batch=batch)

    def startService(self):
        super().startService()
        if self._queue and self._call is None:
            self._call = self._clock.callLater(0, self.drain)

    def stopService(self):
        super().stopService()
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        self.drain()
