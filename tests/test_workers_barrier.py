"""The route writer's barrier (issue 33 part 2, :mod:`rocketpy.transport.forwarding`): a
state-changing request's answer is handed over only once every worker has acknowledged the
op stream that far -- including an unregistration Java 5.x answers once queued and applies on
the next turn. Driven by hand: a counting stand-in for the processor, ``task.Clock``."""
from twisted.internet import task

from rocketpy.namesrv.pending import Pending
from rocketpy.remoting import RemotingCommand
from rocketpy.service.unregistration import BatchUnregistrationService
from rocketpy.transport.forwarding import REPLICAS, BarrierProcessor, ReplicaBarrier

WRITE, READ = 103, 105


class _Stream:
    """The writer: every write publishes one record (the sequence number goes up)."""

    writes = frozenset({WRITE})
    header_dialect = None
    overload_response = None

    def __init__(self):
        self.seq = 0

    def sequence(self):
        return self.seq

    def process(self, request, channel, now_ms, offload=False):
        if request.code in self.writes:
            self.seq += 1
        return f"answer {request.code} at {self.seq}"


def _request(code):
    return RemotingCommand.request(code, {}, opaque=1)


def _answered(barrier, result):
    """Run ``result`` as the transport runs a Pending of lane REPLICAS: the answers got."""
    got = []
    if result.__class__ is not Pending:
        got.append(result)
        return got
    assert result.lane == REPLICAS
    barrier.submit(result.work).addCallback(lambda value: got.append(result.finish(value)))
    return got


def _writer(queued=lambda: None):
    stream, barrier = _Stream(), ReplicaBarrier()
    return stream, barrier, BarrierProcessor(stream, barrier, stream.sequence, queued=queued)


def test_a_writes_answer_waits_until_every_worker_acknowledged_it():
    stream, barrier, processor = _writer()
    barrier.join("w1", 0)
    barrier.join("w2", 0)
    got = _answered(barrier, processor.process(_request(WRITE), None, 0))
    assert got == [] and len(barrier) == 1
    barrier.acked("w1", 1)
    assert got == []                     # w2 has not applied it
    barrier.acked("w2", 1)
    assert got == ["answer 103 at 1"] and len(barrier) == 0


def test_a_read_and_a_write_nobody_lags_behind_are_answered_at_once():
    stream, barrier, processor = _writer()
    assert _answered(barrier, processor.process(_request(READ), None, 0)) == ["answer 105 at 0"]
    assert _answered(barrier, processor.process(_request(WRITE), None, 0)) == ["answer 103 at 1"]
    barrier.join("w1", 1)
    assert _answered(barrier, processor.process(_request(READ), None, 0)) == ["answer 105 at 1"]


def test_answers_are_released_in_stream_order_and_a_worker_leaving_releases_them():
    stream, barrier, processor = _writer()
    barrier.join("w1", 0)
    barrier.join("w2", 0)
    first = _answered(barrier, processor.process(_request(WRITE), None, 0))
    second = _answered(barrier, processor.process(_request(WRITE), None, 0))
    barrier.acked("w1", 2)
    barrier.acked("w2", 1)
    assert (first, second) == (["answer 103 at 1"], [])
    barrier.leave("w2")                  # (gone: its connections closed with it)
    assert second == ["answer 103 at 2"]


def test_an_answer_given_before_a_queued_unregistration_is_applied_waits_for_it():
    """Java 5.x answers UNREGISTER_BROKER once it is queued; on one process the queue is
    applied before the next request is read. With workers the answer waits for the drain and
    then for the workers to apply what it published: the broker's next query on any process
    does not see it."""
    clock = task.Clock()
    stream = _Stream()

    def apply(batch):                    # the route writer's unregister_brokers: one record
        stream.seq += 1
    batch = BatchUnregistrationService(apply, clock)
    batch.startService()
    barrier = ReplicaBarrier()
    processor = BarrierProcessor(stream, barrier, stream.sequence, queued=batch.drained)
    barrier.join("w1", 0)
    assert batch.drained() is None
    batch.submit("broker-b")             # (queued by the handler of this very request)
    got = _answered(barrier, processor.process(_request(WRITE), None, 0))
    barrier.acked("w1", 1)               # the write's own record, not the unregistration's
    assert got == [] and stream.seq == 1
    clock.advance(0)                     # the drain: record 2
    assert got == [] and stream.seq == 2
    barrier.acked("w1", 2)
    assert got == ["answer 103 at 1"]


def test_with_no_worker_a_queued_unregistration_still_comes_first():
    clock = task.Clock()
    stream = _Stream()
    batch = BatchUnregistrationService(lambda requests: None, clock)
    batch.startService()
    barrier = ReplicaBarrier()
    processor = BarrierProcessor(stream, barrier, stream.sequence, queued=batch.drained)
    batch.submit("broker-b")
    got = _answered(barrier, processor.process(_request(WRITE), None, 0))
    assert got == []
    clock.advance(0)
    assert got == ["answer 103 at 1"]


def test_drained_fires_once_every_slice_of_a_long_queue_is_applied():
    clock = task.Clock()
    applied = []
    batch = BatchUnregistrationService(applied.append, clock, weight=lambda request: 60_000)
    batch.startService()
    for name in ("a", "b", "c"):
        batch.submit(name)
    fired = []
    batch.drained().addCallback(fired.append)
    assert fired == []
    clock.advance(0)                     # (a Clock runs the slices' calls in one advance)
    assert applied == [["a"], ["b"], ["c"]] and fired == [None]
    assert batch.drained() is None


def test_an_answer_waits_for_the_last_visible_record_not_for_later_timestamps():
    """The writer's stream (``Replicator``): a record no request reads back (a heartbeat's
    timestamps) still goes to every worker, but an answer given after it waits only for the
    last visible one; a visible record after it is waited for again."""
    from rocketpy.service.workers import Replicator
    barrier = ReplicaBarrier()
    replicator = Replicator(barrier)
    processor = BarrierProcessor(_Stream(), barrier, replicator.sequence)
    barrier.join("w1", 0)
    replicator.publish("routes", b"a registration", True)
    replicator.publish("routes", b"a heartbeat", False)
    assert (replicator.seq, replicator.sequence()) == (2, 1)
    barrier.acked("w1", 1)
    assert _answered(barrier, processor.process(_request(WRITE), None, 0)) == ["answer 103 at 1"]
    replicator.publish("routes", b"a departure", True)
    got = _answered(barrier, processor.process(_request(WRITE), None, 0))
    assert got == [] and len(barrier) == 1
    barrier.acked("w1", 3)
    assert got == ["answer 103 at 2"]
