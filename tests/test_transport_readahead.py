"""Transport: big frames are read in pieces as large as what is missing, and the transport's
``bufferSize`` (Twisted's read size *and* write high-water mark) is back to normal whenever
something is written."""
from twisted.internet import task
from twisted.internet.defer import Deferred
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport import protocol as protocol_module

BASE = 65536


class SizedTransport(StringTransport):
    """A StringTransport with Twisted's ``bufferSize``; records its value at every write."""

    bufferSize = BASE

    def __init__(self):
        super().__init__()
        self.sizes_at_write = []

    def write(self, data):
        self.sizes_at_write.append(self.bufferSize)
        super().write(data)

    def writeSequence(self, data):
        self.sizes_at_write.append(self.bufferSize)
        super().writeSequence(data)


class Echo:
    def __init__(self):
        self.bodies = []
        self.pending = None

    def process(self, request, channel, now_ms):
        self.bodies.append(request.body)
        if request.code == 2:
            self.pending = Deferred()
            return self.pending
        return request.create_response(0, body=b"%d" % len(request.body or b""))


def connect():
    processor = Echo()
    factory = RemotingServerFactory(processor, None, clock=task.Clock(), tls_mode=TlsMode.DISABLED)
    proto = factory.buildProtocol(None)
    transport = SizedTransport()
    proto.makeConnection(transport)
    return proto, transport, processor


def frame(size, opaque=1, code=1):
    return RemotingCommand.request(code, {"k": "v"}, b"x" * size, opaque=opaque, version=479).encode()


def answers(transport):
    frames, rest = split_frames(transport.value())
    assert rest == b""
    return [decode_frame(f) for f in frames]


class ReadAheadTests(SynchronousTestCase):
    def test_big_frame_reads_what_is_missing_then_the_usual_size(self):
        proto, t, processor = connect()
        big = frame(1_500_000)
        proto.dataReceived(big[:BASE])
        self.assertEqual(t.bufferSize, protocol_module.READ_AHEAD_MAX)
        proto.dataReceived(big[BASE:len(big) - 100_000])
        self.assertEqual(t.bufferSize, 100_000)        # no further than the frame's end
        proto.dataReceived(big[len(big) - 100_000:])
        self.assertEqual(t.bufferSize, BASE)
        self.assertEqual([len(b) for b in processor.bodies], [1_500_000])
        self.assertEqual(t.sizes_at_write, [BASE])

    def test_small_remainders_keep_the_usual_size(self):
        proto, t, _ = connect()
        data = frame(10) + frame(50_000, opaque=2)
        proto.dataReceived(data[:BASE // 2])
        self.assertEqual(t.bufferSize, BASE)
        proto.dataReceived(data[BASE // 2:])
        self.assertEqual([a.opaque for a in answers(t)], [1, 2])

    def test_answers_of_a_read_are_written_with_the_usual_size(self):
        """A read that completes a big frame and starts another: the first answer is written
        at the normal high-water mark, then reading ahead resumes for the second frame."""
        proto, t, processor = connect()
        data = frame(300_000, opaque=1) + frame(300_000, opaque=2)
        proto.dataReceived(data[:BASE])
        proto.dataReceived(data[BASE:400_000])
        self.assertEqual(t.sizes_at_write, [BASE])
        self.assertEqual(t.bufferSize, len(data) - 400_000)
        proto.dataReceived(data[400_000:])
        self.assertEqual(t.sizes_at_write, [BASE, BASE])
        self.assertEqual([a.opaque for a in answers(t)], [1, 2])
        self.assertEqual(processor.bodies, [b"x" * 300_000] * 2)

    def test_a_late_answer_is_written_with_the_usual_size(self):
        proto, t, processor = connect()
        proto.dataReceived(frame(10, code=2))
        big = frame(500_000, opaque=3)
        proto.dataReceived(big[:BASE])
        self.assertNotEqual(t.bufferSize, BASE)
        processor.pending.callback(RemotingCommand(code=0, opaque=0, flag=1, body=b"late"))
        self.assertEqual(t.sizes_at_write, [BASE])
        proto.dataReceived(big[BASE:])
        self.assertEqual([a.body for a in answers(t)], [b"late", b"500000"])

    def test_byte_by_byte_and_random_chunks_give_the_same_answers(self):
        import random
        data = frame(200_000, opaque=1) + frame(3, opaque=2) + frame(150_000, opaque=3)
        rng = random.Random(5)
        for chunking in ("bytes", "random"):
            proto, t, _ = connect()
            pos = 0
            while pos < len(data):
                step = 1 if chunking == "bytes" and pos < 300 else rng.randint(1, 3 * BASE)
                proto.dataReceived(data[pos:pos + step])
                pos += step
            self.assertEqual([a.opaque for a in answers(t)], [1, 2, 3])
            self.assertEqual(t.bufferSize, BASE)

    def test_transport_without_buffer_size_is_left_alone(self):
        processor = Echo()
        factory = RemotingServerFactory(processor, None, clock=task.Clock(),
                                        tls_mode=TlsMode.DISABLED)
        proto = factory.buildProtocol(None)
        t = StringTransport()
        proto.makeConnection(t)
        proto.dataReceived(frame(400_000)[:BASE])
        self.assertFalse(hasattr(t, "bufferSize"))
