"""Transport: the compiled hit path (the kernel's ``answer_hits`` behind
:meth:`AnswerCache.answer_run`) answers exactly what the Python path answers.

The Python path -- ``RemotingServerProtocol._consume``'s per-frame loop with
:meth:`AnswerCache.lookup` -- is the reference: the same server is driven twice, once with the
kernel's runs and once with ``answer_run`` taken away, and the bytes written, the processor's
calls and the cache's own state (entries in order, their second-chance marks, bytes, hits) must
be identical after every read: for every request of every genuine capture, alone and with a
connection's consecutive requests in one read, and for Hypothesis' interleavings of hits,
misses, other codes, version changes, evictions, odd opaque forms and chunkings.  The cost
tests count: a read of cached answers makes one kernel call and no Python lookup."""
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st
from twisted.internet import task
from twisted.internet.testing import StringTransport
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

if KERNEL is None or not hasattr(KERNEL, "answer_hits"):
    raise ImportError("the header kernel is not built: python3 setup.py build_ext --inplace")


class Versions:
    """A processor whose route answers (105) name their topic's version: an int, a tuple for
    T2 (as a topic with a static mapping has), and T3 answers with a binary header."""

    def __init__(self):
        self.calls = 0
        self.versions = {}

    def version_of(self, topic):
        v = self.versions.get(topic, 0)
        return (v, 7) if topic == "T2" else v

    def process(self, request, channel, now_ms):
        self.calls += 1
        topic = (request.ext_fields or {}).get("topic", "")
        version = self.version_of(topic)
        response = request.create_response(
            0, remark="r", ext_fields={"v": str(version)}, body=f"{topic}@{version}".encode() * 3,
            serialize_type=1 if topic == "T3" else None)
        if request.code != 105:
            return response
        return ReusableResponse(reuse=(topic, version), **{
            name: getattr(response, name) for name in response.__dataclass_fields__})


def _stack(processor, compiled, max_bytes, limits=None):
    cache = AnswerCache(processor.version_of, max_bytes=max_bytes, max_request=600)
    if not compiled:
        cache.answer_run = None
    factory = RemotingServerFactory(processor, None, clock=task.Clock(), tls_mode=TlsMode.DISABLED,
                                    answer_cache=cache, limits=limits)
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport, factory


def cache_state(cache):
    """Everything the cache holds, in order: what both paths must leave the same."""
    return ([(shape, e[0], e[1], e[3], e[4]) for shape, e in cache._entries.items()],
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
    st.tuples(st.just("clear")),
), max_size=30)


def _drive(steps, compiled, max_bytes, limits):
    processor = Versions()
    proto, transport, factory = _stack(processor, compiled, max_bytes, limits)
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
            processor.versions[step[1]] = processor.versions.get(step[1], 0) + 1
        else:
            cache.clear()
        clock.advance(0)      # the turn ends: a throttled connection is served on
        out.append((transport.value(), processor.calls, cache_state(cache), proto.closing))
        transport.clear()
    return out


class HitPathEquivalenceTests(SynchronousTestCase):
    @settings(max_examples=200, deadline=None)
    @given(_steps, st.sampled_from([1 << 20, 900, 2500]), st.sampled_from([None, 3]))
    def test_random_interleavings_answer_the_same(self, steps, max_bytes, budget):
        """Hits, misses, other codes, version changes, evictions (a cache of one to a few
        answers), odd opaques, reads cut anywhere; a turn budget of a few requests when
        ``budget`` is set, so runs also stop at the budget."""
        limits = None if budget is None else ServerLimits(requests_per_turn=budget, turn_millis=0,
                                                          fair_requests_per_turn=1)
        self.assertEqual(_drive(steps, True, max_bytes, limits),
                         _drive(steps, False, max_bytes, limits))

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
        return self.cache.answer_run(data, pos, most, room, limit)

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
        self.processor.versions["T0"] = 1                    # stale
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
                    self.assertEqual(got, (cache.lookup(frame), len(frame), 1))
        self.assertGreater(kernel_hits, 100)
