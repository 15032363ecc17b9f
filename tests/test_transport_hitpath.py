"""Transport: the compiled hit path (the kernel's ``HitPath`` behind
:meth:`AnswerCache.answer_run`) answers exactly what the Python path answers.

The Python path -- ``RemotingServerProtocol._consume``'s per-frame loop with
:meth:`AnswerCache.lookup` -- is the reference: the same server is driven twice, once with the
kernel's runs and once with ``answer_run`` taken away, and the bytes written, the processor's
calls and the cache's own state (entries in order, their second-chance marks, bytes, hits) must
be identical after every read: for every request of every genuine capture, alone and with a
connection's consecutive requests in one read, and for Hypothesis' interleavings of hits,
misses, other codes, version changes, evictions, odd opaque forms and chunkings.  The cost
tests count: a read of cached answers makes one kernel call and no Python lookup."""
import socket
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st
from twisted.internet import task, tcp
from twisted.internet.testing import MemoryReactor, StringTransport
from twisted.trial.unittest import SynchronousTestCase

import replay
from rocketpy.namesrv.replies import ReusableResponse
from rocketpy.remoting import RemotingCommand, decode_frame
from rocketpy.remoting.kernel import KERNEL
from rocketpy.remoting.layout import DEFAULT_MAX_FRAME_LENGTH, build_frame, split_frames
from rocketpy.transport import RemotingServerFactory, TlsMode
from rocketpy.transport.answercache import AnswerCache
from rocketpy.transport.limits import ServerLimits
from test_transport_answercache import _mask, _run_capture
from test_transport_connstate import received

if KERNEL is None or not hasattr(KERNEL, "HitPath"):
    raise ImportError("the header kernel is not built: python3 setup.py build_ext --inplace")


class Versions:
    """A processor whose route answers (105) name their topic's version: an int, a tuple for
    T2 (as a topic with a static mapping has), and T3 answers with a binary header; its
    ``generation`` moves whenever a version does (as ``RouteSnapshots.generation``), and
    ``asked`` counts the cache's ``version_of`` calls."""

    def __init__(self, body_repeat=3):
        self.calls = 0
        self.asked = 0
        self.versions = {}
        self.generation = 1
        self.body_repeat = body_repeat

    def bump(self, topic):
        self.versions[topic] = self.versions.get(topic, 0) + 1
        self.generation += 1

    def _version(self, topic):
        v = self.versions.get(topic, 0)
        return (v, 7) if topic == "T2" else v

    def version_of(self, topic):
        self.asked += 1
        return self._version(topic)

    def process(self, request, channel, now_ms):
        self.calls += 1
        topic = (request.ext_fields or {}).get("topic", "")
        version = self._version(topic)
        response = request.create_response(
            0, remark="r", ext_fields={"v": str(version)},
            body=f"{topic}@{version}".encode() * self.body_repeat,
            serialize_type=1 if topic == "T3" else None)
        if request.code != 105:
            return response
        return ReusableResponse(reuse=(topic, version), **{
            name: getattr(response, name) for name in response.__dataclass_fields__})


def _stack(processor, compiled, max_bytes, limits=None, generation=True, transport=None):
    """A server connection over ``transport`` (a StringTransport when None); the cache reads
    the processor's generation unless ``generation`` is False."""
    cache = AnswerCache(processor.version_of, max_bytes=max_bytes, max_request=600,
                        versions=processor if generation else None)
    if not compiled:
        cache.answer_run = None
    factory = RemotingServerFactory(processor, None, clock=task.Clock(), tls_mode=TlsMode.DISABLED,
                                    answer_cache=cache, limits=limits)
    proto = factory.buildProtocol(None)
    transport = StringTransport() if transport is None else transport(proto)
    proto.makeConnection(transport)
    return proto, transport, factory


def cache_state(cache):
    """Everything the cache holds, in order: what both paths must leave the same."""
    return ([(shape, e[0], e[1], e[3], e[4], e[5]) for shape, e in cache._entries.items()],
            cache.bytes, cache.hits)


def _json_frame(topic, opaque, form, code=105, flag=0, pad=0):
    """A JSON request written by hand, its opaque in ``form``: Java's (``"opaque":N,``), last
    in the header, with a space, with leading zeros, at the int32 edge or far past it."""
    ext = f'{{"topic":"{topic}"' + (f',"pad":"{"x" * pad}"' if pad else "") + "}"
    members = [f'"code":{code}', f'"extFields":{ext}', f'"flag":{flag}', '"language":"JAVA"',
               None, '"serializeTypeCurrentRPC":"JSON"', '"version":401']
    digits = {"zeros": f"00{opaque}", "huge": f"{opaque}000000000000",
              "edge": str(2 ** 31 - 2 + opaque % 3)}.get(form, str(opaque))
    opaque_member = ('"opaque": ' if form == "space" else '"opaque":') + digits
    if form == "last":
        members.remove(None)
        members.append(opaque_member)
    else:
        members[members.index(None)] = opaque_member
    return build_frame(0, ("{" + ",".join(members) + "}").encode())


_TOPICS = st.sampled_from(["T0", "T2", "T3"])
_request = st.tuples(
    st.sampled_from([105, 105, 105, 105, 106]),
    _TOPICS,
    st.sampled_from(["java", "java", "java", "binary", "binary", "last", "space", "zeros", "huge",
                     "edge", "negative", "oneway", "long"]),
    st.integers(0, 2 ** 31 - 1),
)


def _encode(request):
    code, topic, form, opaque = request
    if form in ("binary", "negative"):
        return RemotingCommand.request(code, {"topic": topic}, opaque=-opaque if form == "negative"
                                       else opaque, version=401, serialize_type=1).encode()
    if form == "oneway":
        return _json_frame(topic, opaque, "java", code, flag=2)
    if form == "long":                                # past max_request: never looked up
        return _json_frame(topic, opaque, "java", code, pad=700)
    return _json_frame(topic, opaque, form, code)


_steps = st.lists(st.one_of(
    st.tuples(st.just("read"), st.lists(_request, min_size=1, max_size=12),
              st.lists(st.integers(1, 400), max_size=4)),
    st.tuples(st.just("bump"), _TOPICS),
    st.tuples(st.just("touch")),      # the generation moves, no version does
    st.tuples(st.just("clear")),
), max_size=30)


def _drive(steps, compiled, max_bytes, limits, generation=True):
    processor = Versions()
    proto, transport, factory = _stack(processor, compiled, max_bytes, limits, generation)
    clock, cache = factory.clock, factory.answer_cache
    out = []
    for step in steps:
        if proto.closing:     # (a frame the decoder refused): the next reads on a new connection
            proto = factory.buildProtocol(None)
            transport = StringTransport()
            proto.makeConnection(transport)
        if step[0] == "read":
            data = b"".join(map(_encode, step[1]))
            cuts = sorted({c % len(data) for c in step[2]} - {0})
            for a, b in zip([0, *cuts], [*cuts, len(data)]):
                proto.dataReceived(data[a:b])
        elif step[0] == "bump":
            processor.bump(step[1])
        elif step[0] == "touch":
            processor.generation += 1
        else:
            cache.clear()
        clock.advance(0)      # the turn ends: a throttled connection is served on
        out.append((transport.value(), processor.calls, cache_state(cache), proto.closing))
        transport.clear()
    return out


class HitPathEquivalenceTests(SynchronousTestCase):
    @settings(max_examples=200, deadline=None)
    @given(_steps, st.sampled_from([1 << 20, 900, 2500]), st.sampled_from([None, 3]),
           st.booleans())
    def test_random_interleavings_answer_the_same(self, steps, max_bytes, budget, generation):
        """Hits, misses, other codes, version changes, generation moves, evictions (a cache of
        one to a few answers), odd opaques, reads cut anywhere; a turn budget of a few requests
        when ``budget`` is set, so runs also stop at the budget; with and without a route
        generation."""
        limits = None if budget is None else ServerLimits(requests_per_turn=budget, turn_millis=0,
                                                          fair_requests_per_turn=1)
        self.assertEqual(_drive(steps, True, max_bytes, limits, generation),
                         _drive(steps, False, max_bytes, limits, generation))

    def test_the_kernel_answers_runs_and_hands_the_rest_back_in_order(self):
        """A read of hits, a miss, another code, a hit and a miss: answered in arrival order,
        the hits by the kernel, in runs that stop at each frame Python processes."""
        processor = Versions()
        proto, transport, factory = _stack(processor, True, 1 << 20)
        proto.dataReceived(_encode((105, "T0", "java", 1)) + _encode((105, "T3", "binary", 2)))
        transport.clear()
        cache, calls = factory.answer_cache, []
        run = cache.answer_run
        cache.answer_run = lambda *a: calls.append(a[1]) or run(*a)
        frames = [_encode((105, "T0", "java", 10)), _encode((105, "T3", "binary", 11)),
                  _encode((105, "T1", "java", 12)), _encode((106, "T0", "java", 13)),
                  _encode((105, "T0", "java", 14)), _encode((105, "T3", "java", 15))]
        proto.dataReceived(b"".join(frames))
        answers, rest = split_frames(transport.value())
        self.assertEqual(rest, b"")
        self.assertEqual([decode_frame(a).opaque for a in answers], [10, 11, 12, 13, 14, 15])
        self.assertEqual(processor.calls, 2 + 3)         # T1, 106 and T3 asked in JSON
        starts = [sum(map(len, frames[:i])) for i in range(len(frames))]
        self.assertEqual(calls, [starts[0], starts[3], starts[4]])
        self.assertEqual(cache.hits, 3)


class HitPathCostTests(SynchronousTestCase):
    """Cost by counting: a read of cached answers is one call into the kernel."""

    def test_a_read_of_hits_is_one_kernel_call_and_no_python_lookup(self):
        processor = Versions()
        proto, transport, factory = _stack(processor, True, 1 << 20)
        cache = factory.answer_cache
        proto.dataReceived(_encode((105, "T0", "java", 1)))
        transport.clear()
        counted = {"lookup": 0, "run": 0}
        lookup, run = cache.lookup, cache.answer_run

        def counting(name, f):
            def call(*args):
                counted[name] += 1
                return f(*args)
            return call
        cache.lookup = counting("lookup", lookup)
        cache.answer_run = counting("run", run)
        for n in (8, 64):
            counted.update(lookup=0, run=0)
            proto.dataReceived(b"".join(_encode((105, "T0", "java", i)) for i in range(n)))
            self.assertEqual(counted, {"lookup": 0, "run": 1})
            self.assertEqual(len(split_frames(transport.value())[0]), n)
            transport.clear()
        self.assertEqual(processor.calls, 1)


class VersionCheckTests(SynchronousTestCase):
    """Cost by counting: a hit asks for its topic's version only when the route generation has
    moved since its entry's was confirmed, on both paths alike."""

    def test_a_hit_asks_for_the_version_once_per_generation(self):
        for compiled in (True, False):
            processor = Versions()
            proto, transport, factory = _stack(processor, compiled, 1 << 20)
            proto.dataReceived(_encode((105, "T0", "java", 1)))          # processed, kept
            asked = []
            for move in (None, None, "touch", None, "touch", "touch", None):
                if move == "touch":
                    processor.generation += 1
                before = processor.asked
                proto.dataReceived(b"".join(_encode((105, "T0", "java", i)) for i in range(8)))
                factory.clock.advance(0)
                asked.append(processor.asked - before)
            # the first read confirms the new entry; a read after the generation moved asks once
            self.assertEqual(asked, [1, 0, 1, 0, 1, 1, 0], compiled)
            self.assertEqual(processor.calls, 1)
            self.assertEqual(len(split_frames(transport.value())[0]), 1 + 7 * 8)

    def test_without_a_generation_every_hit_asks(self):
        for compiled in (True, False):
            processor = Versions()
            proto, _, factory = _stack(processor, compiled, 1 << 20, generation=False)
            proto.dataReceived(_encode((105, "T0", "java", 1)))
            before = processor.asked
            proto.dataReceived(b"".join(_encode((105, "T0", "java", i)) for i in range(8)))
            self.assertEqual(processor.asked - before, 8, compiled)


class MemoTests(SynchronousTestCase):
    """Cost by counting: a hit whose entry the kernel found before makes no key (no dict lookup)
    while the dict is unchanged; any change drops the memo, so it holds no entry the dict
    dropped."""

    def test_a_hit_makes_no_key_while_the_entries_are_unchanged(self):
        processor = Versions()
        proto, transport, factory = _stack(processor, True, 1 << 20)
        cache = factory.answer_cache
        hitpath = cache._compiled
        for topic in ("T0", "T3"):
            proto.dataReceived(_encode((105, topic, "java", 1)))
        read = b"".join(_encode((105, t, "java", i)) for i in range(8) for t in ("T0", "T3"))
        looked_up = []
        for step in ("read", "read", "miss", "read", "clear", "first", "read"):
            if step == "miss":                    # another entry goes in: the memo is dropped
                proto.dataReceived(_encode((105, "T1", "java", 1)))
                self.assertEqual(hitpath.memo_size, 0)
            elif step == "clear":
                cache.clear()
                self.assertEqual(hitpath.memo_size, 0)
            before = hitpath.looked_up
            if step == "first":                   # processed again, kept again
                proto.dataReceived(_encode((105, "T0", "java", 1)) + _encode((105, "T3", "java", 2)))
            elif step != "miss" and step != "clear":
                proto.dataReceived(read)
            factory.clock.advance(0)
            looked_up.append(hitpath.looked_up - before)
        # the first read finds each entry in the dict once, the next ones in the memo; after a
        # change, once again (and a miss is a lookup too)
        self.assertEqual(looked_up, [2, 0, 0, 2, 0, 2, 2])
        self.assertEqual(hitpath.memo_size, 2)
        self.assertEqual(len(split_frames(transport.value())[0]), 2 + 3 * 16 + 1 + 2 + 16)

    def test_an_evicted_or_replaced_entry_is_not_answered_from_the_memo(self):
        processor = Versions()
        proto, transport, factory = _stack(processor, True, 1 << 20)
        cache = factory.answer_cache
        proto.dataReceived(_encode((105, "T0", "java", 1)))
        proto.dataReceived(_encode((105, "T0", "java", 2)))              # in the memo now
        old = next(iter(cache._entries.values()))
        processor.bump("T0")                                            # stale: processed,
        proto.dataReceived(_encode((105, "T0", "java", 3)))              # a new entry
        self.assertIsNot(next(iter(cache._entries.values())), old)
        old[4] = False
        transport.clear()
        proto.dataReceived(_encode((105, "T0", "java", 4)))
        [answer] = split_frames(transport.value())[0]
        self.assertEqual(decode_frame(answer).body, b"T0@1" * 3)
        self.assertFalse(old[4])                        # the old one was not even looked at


class AnswerHitsTests(SynchronousTestCase):
    """The kernel's stops, each against the frame lookup would give."""

    def setUp(self):
        self.processor = Versions()
        self.proto, self.transport, factory = _stack(self.processor, False, 1 << 20)
        self.cache = AnswerCache(self.processor.version_of, max_request=600)
        factory.answer_cache = self.cache
        self.proto._cache = self.cache
        for topic in ("T0", "T3"):
            for form in ("java", "binary"):
                self.proto.dataReceived(_encode((105, topic, form, 1)))
        self.hit = _encode((105, "T0", "java", 5))

    def run_of(self, data, pos=0, most=100, room=1 << 20, limit=DEFAULT_MAX_FRAME_LENGTH):
        """``(answers, pos after them, count)``, or None (no descriptor: nothing is sent)."""
        run = self.cache.answer_run(data, pos, most, room, limit)
        if run is None:
            return None
        self.assertEqual(run[3], 0)
        return run[:3]

    def test_a_hit_is_lookups_answer(self):
        for form in ("java", "binary", "negative"):
            for topic in ("T0", "T3"):
                frame = _encode((105, topic, form, 99))
                want = self.cache.lookup(frame)
                self.assertIsInstance(want, bytes)
                self.assertEqual(self.run_of(frame), (want, len(frame), 1))

    def test_what_it_leaves_to_python(self):
        for frame in (_encode((105, "T1", "java", 5)),       # no entry
                      _encode((106, "T0", "java", 5)),       # another code: no entry
                      _encode((105, "T0", "last", 5)),       # not Java's form: lookup's business
                      _encode((105, "T0", "space", 5)),
                      _encode((105, "T0", "zeros", 5)),
                      _encode((105, "T3", "huge", 5)),       # past a binary answer's int32
                      _encode((105, "T0", "long", 5)),       # over max_request
                      self.hit[:-1],                         # not all there
                      self.hit[:3]):
            self.assertIsNone(self.run_of(frame), frame)
        self.processor.bump("T0")                            # stale
        self.assertIsNone(self.run_of(self.hit))

    def test_runs_stop_at_the_first_frame_that_is_not_a_hit(self):
        miss = _encode((105, "T1", "java", 6))
        data = self.hit * 3 + miss + self.hit
        answers, pos, n = self.run_of(data)
        self.assertEqual((pos, n), (3 * len(self.hit), 3))
        self.assertEqual(self.run_of(data, pos), None)
        self.assertEqual(self.run_of(data, pos + len(miss))[1:], (len(data), 1))

    def test_runs_stop_at_most_and_room(self):
        data = self.hit * 5
        self.assertEqual(self.run_of(data, most=2)[1:], (2 * len(self.hit), 2))
        one = len(self.run_of(self.hit)[0])
        self.assertEqual(self.run_of(data, room=one + 1)[1:], (2 * len(self.hit), 2))
        self.assertEqual(self.run_of(data, room=one)[1:], (len(self.hit), 1))
        self.assertIsNone(self.run_of(data, most=0))

    def test_a_length_java_refuses_is_left_to_python(self):
        self.assertIsNone(self.run_of(self.hit, limit=len(self.hit) - 1))
        self.assertIsNone(self.run_of(b"\x00\x00\x00\x01" + self.hit))        # shorter than a prefix
        self.assertEqual(self.run_of(self.hit + b"\x7f\xff\xff\xff")[1:], (len(self.hit), 1))

    def test_a_binary_prefix_claiming_more_header_than_the_frame_holds(self):
        """(The Python path's own cut read past such a frame: it is left to the decoder.)"""
        frame = (4).to_bytes(4, "big") + (1 << 24 | 100).to_bytes(4, "big")
        self.assertIsNone(self.run_of(frame))
        self.assertIsNone(self.cache.lookup(frame))
        self.proto.dataReceived(frame)                      # a decode error: logged, closed
        self.assertTrue(self.proto.closing)
        self.flushLoggedErrors()

    def test_a_hit_marks_its_entry_and_counts(self):
        entries = self.cache._entries
        for entry in entries.values():
            entry[4] = False
        before = self.cache.hits
        self.run_of(self.hit * 2)
        self.assertEqual(self.cache.hits, before + 2)
        self.assertEqual([e[4] for e in entries.values()], [True, False, False, False])


class CountingSocket:
    """A connection's socket with its Python-level sends counted (the kernel's go to its
    descriptor)."""

    def __init__(self, sock):
        self._sock = sock
        self.sends = 0

    def fileno(self):
        return self._sock.fileno()

    def send(self, data):
        self.sends += 1
        return self._sock.send(data)


class DirectSendTests(SynchronousTestCase):
    """On a real TCP connection a read of cached answers is sent by the kernel, once, when
    nothing waits before it; what the socket does not take is queued behind, in order; the peer
    gets exactly the bytes the Python path writes."""

    def tcp(self, buffers=0):
        """A transport maker for ``_stack`` (Twisted's TCP server transport on a connected
        socket, with a MemoryReactor) and the peer's socket."""
        listener = socket.create_server(("127.0.0.1", 0))
        theirs = socket.socket()
        if buffers:                    # small buffers: a big write fills them
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffers)
        theirs.connect(listener.getsockname())
        ours, addr = listener.accept()
        if buffers:
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffers)
        listener.close()
        for s in (ours, theirs):
            s.setblocking(False)
            self.addCleanup(s.close)
        return (lambda proto: tcp.Server(ours, proto, addr, None, 1, MemoryReactor())), theirs

    def python_path(self, reads, processor):
        """What the Python path writes for ``reads``."""
        proto, transport, factory = _stack(processor, False, 1 << 20)
        for data in reads:
            proto.dataReceived(data)
            factory.clock.advance(0)
        return transport.value()

    def test_a_read_of_hits_is_one_send_from_the_kernel(self):
        make, theirs = self.tcp()
        proto, transport, factory = _stack(Versions(), True, 1 << 20, transport=make)
        counting = proto._tuning._socket = CountingSocket(proto._tuning._socket)
        forms = (("T0", "java"), ("T3", "binary"), ("T3", "java"))   # (T3: binary answers)
        reads = [b"".join(_encode((105, t, f, 1)) for t, f in forms),
                 b"".join(_encode((105, t, f, i)) for i in range(8) for t, f in forms)]
        proto.dataReceived(reads[0])                   # processed: written by the protocol
        self.assertEqual(counting.sends, 1)
        proto.dataReceived(reads[1])
        self.assertEqual(counting.sends, 1)            # the hits: the kernel's one send
        got = received(theirs)
        self.assertEqual(got, self.python_path(reads, Versions()))
        self.assertEqual(factory.metrics.bytes_sent, len(got))
        self.assertEqual(factory.answer_cache.hits, 24)

    def test_what_the_socket_does_not_take_is_queued_in_order(self):
        make, theirs = self.tcp(buffers=8192)
        proto, transport, factory = _stack(Versions(body_repeat=200), True, 1 << 20,
                                           transport=make)
        reads = [_encode((105, "T0", "java", 1))] + [
            b"".join(_encode((105, "T0", "java", 1000 * r + i)) for i in range(200))
            for r in range(3)]                         # 200 answers of ~1 KB a read
        got = b""
        for data in reads:
            proto.dataReceived(data)                   # (paused: held, served once drained)
            factory.clock.advance(0)
            got += received(theirs)
        self.assertTrue(transport.dataBuffer or transport._tempDataLen)   # the socket was full
        for _ in range(10_000):                        # bounded: the socket drains, Twisted writes
            if transport.dataBuffer or transport._tempDataLen:
                transport.doWrite()
            factory.clock.advance(0)
            got += received(theirs)
            if not (transport.dataBuffer or transport._tempDataLen or proto.paused):
                break
        self.assertEqual(got, self.python_path(reads, Versions(body_repeat=200)))
        self.assertEqual(factory.metrics.bytes_sent, len(got))


# ---------------------------------------------------------------- every genuine capture

def _replay(path, compiled, grouped):
    """Every request of the capture through the whole server (a connection's consecutive
    requests in one read with ``grouped``), with the kernel's runs or without: the bytes written
    per read, the cache's bytes and hits at the end, the hits the kernel answered, and the
    cache."""
    counted = [0]

    def set_up(cache):
        run = cache.answer_run
        cache.answer_run = (lambda *a: _count(counted, run(*a))) if compiled else None
    with tempfile.TemporaryDirectory() as tmp:
        out, cache = _run_capture(path, Path(tmp), True, grouped, set_up)
    return [_mask(x) for x in out], cache_state(cache)[1:], counted[0], cache


def _count(counted, got):
    if got is not None:
        counted[0] += got[2]
    return got


class CaptureHitPathTests(SynchronousTestCase):
    def test_every_capture_answers_the_same_with_the_compiled_hit_path(self):
        kernel_hits = 0
        for path in sorted(replay.PCAP_DIR.glob("*.pcap")):
            for grouped in (False, True):
                compiled, state, hits, cache = _replay(path, True, grouped)
                python, python_state, _, _ = _replay(path, False, grouped)
                self.assertEqual(compiled, python, (path.name, grouped))
                self.assertEqual(state, python_state, (path.name, grouped))
                kernel_hits += hits
            # and every request frame of it, once the capture has filled the cache: where the
            # kernel answers, lookup answers the same bytes
            requests = [e.request_frame for e in replay.replay_events(path) if e.kind == "request"]
            for frame in requests:
                got = cache.answer_run(frame, 0, 1, 1 << 20, DEFAULT_MAX_FRAME_LENGTH)
                if got is not None:
                    self.assertEqual(got, (cache.lookup(frame), len(frame), 1, 0))
        self.assertGreater(kernel_hits, 100)
