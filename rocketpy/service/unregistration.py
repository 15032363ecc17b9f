"""Service layer: Java ``BatchUnregistrationService`` (RIP-29, RocketMQ 5.0) on the reactor.

Java queues every unregistration in a bounded queue (``unRegisterBrokerQueueCapacity``, 3000) and
one thread applies everything queued with a single ``unRegisterBroker(Set)``. Here ``submit``
appends to a bounded deque and the first submit of a reactor turn schedules one drain for the
next: everything submitted in between is one batch. A full queue makes ``submit`` return False
(answered SYSTEM_ERROR, as Java). Duplicates within a batch (idle then close) are dropped; the
route table ignores stale channel-caused requests (apache/rocketmq#11043).

Java's thread holds the write lock for its whole batch; on the reactor that is a pause: ten
brokers of 100,000 topics each leaving at once held route queries 222 ms at 10 M pairs. So a
batch is cut where its brokers' topics pass :data:`TOPICS_PER_TURN` (a request's ``weight``), and
the rest is applied on the next turns. The brokers in a batch are independent of each other, so
a reader between two slices sees some of them gone, as it would had they left a moment apart."""
from collections import deque

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ..transport import logs

__all__ = ["BatchUnregistrationService", "TOPICS_PER_TURN"]

#: topics a batch's slice may take out on one reactor turn (~20 ms beside 10 M pairs)
TOPICS_PER_TURN = 100_000


class BatchUnregistrationService(Service):
    """Bounded unregistration queue applied once per reactor turn (``clock.callLater(0, ...)``).

    :param apply_batch: called with a list of requests (``RouteInfoManager.unregister_brokers``).
    :param capacity: ``unRegisterBrokerQueueCapacity``.
    :param immediate: apply each request at once instead (Java 4.9 unregisters synchronously).
    :param weight: a request's topics (``RouteInfoManager.topic_count_of_broker`` of its group),
        what a slice is bounded by; every request weighs 1 without it."""

    name = "batch-unregistration"
    log = Logger(observer=logs.observer)

    def __init__(self, apply_batch, clock, capacity=3000, immediate=False, weight=None):
        self._apply = apply_batch
        self._weight = weight if weight is not None else (lambda request: 1)
        self._clock = clock
        self.capacity = capacity
        self.immediate = immediate
        self._queue = deque()
        self._call = None
        self._drained = []          # Deferreds of drained()
        self.batches = 0

    def __len__(self):
        return len(self._queue)

    def drained(self):
        """None when nothing is queued, else a Deferred that fires once everything queued now
        (and whatever joins it) is applied: with worker processes, an answer Java gives after
        its ``offer`` waits so for the replicas (:mod:`rocketpy.transport.forwarding`)."""
        if not self._queue:
            return None
        d = Deferred()
        self._drained.append(d)
        return d

    def _fire_drained(self):
        if not self._queue and self._drained:
            waiting, self._drained = self._drained, []
            for d in waiting:
                d.callback(None)

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
        """Apply what is queued as one batch, up to :data:`TOPICS_PER_TURN` topics (normally
        called by the reactor); the rest on the next turn."""
        self._call = None
        if not self._queue:
            return
        self._run(self._slice())
        if self._queue and self.running and self._call is None:   # (a submit may have)
            self._call = self._clock.callLater(0, self.drain)
        self._fire_drained()

    def _slice(self):
        """The queue's first requests, each once, up to :data:`TOPICS_PER_TURN` topics (at
        least one request)."""
        queue, batch, topics = self._queue, {}, 0
        while queue:
            request = queue[0]
            if request not in batch:
                try:
                    weight = self._weight(request)
                except Exception:   # weighed as one topic: the queue must not stall on it
                    self.log.failure("weighing {request} failed", request=request)
                    weight = 1
                if batch and topics + weight > TOPICS_PER_TURN:
                    break
                batch[request] = None
                topics += weight
            queue.popleft()
        return list(batch)

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
        while self._queue:
            self.drain()
