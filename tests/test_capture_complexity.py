"""Decoding cost grows linearly with what a stranger writes into a capture, in both engines
(issue 22 part 3): each hostile shape of :mod:`capture_shapes` is decoded at n and 4n, and each
count of the work may grow at most 6x (linear work grows 4x, a heap's n log n 4.6x; the
quadratic scans these shapes used to hit grew 11-16x).  Counted, never timed (issue 30 part 4),
so a busy machine counts what a quiet one does: the compiled core's probes, moves and bytes (its
counting build, :mod:`costcount`), the header kernel's for the pure-Python engine, and the lines
of rocketpy's Python each engine runs (all of the reference's work but what C builtins do).  The
engines' rows on each shape are equal, and each shape is what it says."""
import io

import pyarrow as pa
import pytest

import capture_shapes as shapes
import costcount
from rocketpy.capture import engine
from rocketpy.capture.arrow import ARROW_SCHEMA
from rocketpy.capture.readers import read_capture_info
from rocketpy.remoting import fastjson, frame as codec_frame, layout

#: the smaller size per engine: the compiled core is ~20-50x faster, so it is measured on more
#: (4n stays under the 32,768 waiting segments past which a hole is skipped and the shape changes;
#: n is past the 4,096 extFields entries the header kernel's scratch keeps between headers, so
#: both sizes read each header from the same start)
SIZES = {"python": 5000, "native": 8000}
GROWTH = 6.0


def decode(cls, data: bytes):
    info = read_capture_info(data[:1 << 16])
    f = io.BytesIO(data)
    f.seek(info.data_offset)
    d = cls()
    batches = list(d.decode(f, "shape", info)) + list(d.finish())
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA), dict(d.stats)


def cost(name: str, data: bytes, counting) -> dict:
    """The counts of decoding ``data`` with the engine ``name``: the compiled code's (the
    capture core's, or the header kernel's under the pure-Python engine) and the Python lines."""
    compiled = counting.native if name == "native" else counting.kernel
    compiled.take_cost()
    _, lines = costcount.python_lines(decode, engine.ENGINES[name], data)
    return dict(compiled.take_cost(), lines=lines)


#: what the reference decodes from each shape at n = 500: (rows, gaps, gap bytes)
EXPECTED = {"ext_fields_json": (1, 0, 0), "ext_fields_binary": (1, 0, 0),
            "reversed_segments": (0, 1, 8),              # one hole, all waiting behind it
            "many_holes": (0, 500, 16 + 499 * 8),        # a hole before each segment
            "held_responses": (1000, 0, 0),              # the hole filled: every pair found
            "unanswered_codes": (500, 0, 0),
            "colliding_opaques": (500, 0, 0)}


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
@pytest.mark.parametrize("name", ["python", "native"])
def test_cost_grows_linearly(shape, name, counting, monkeypatch):
    cls = engine.ENGINES[name]
    want, want_stats = decode(engine.PyBatchDecoder, shapes.SHAPES[shape](500))
    got, got_stats = decode(cls, shapes.SHAPES[shape](500))
    assert got.to_pylist() == want.to_pylist() and got_stats == want_stats
    rows = want.to_pylist()
    assert (len(rows), want_stats.get("gaps", 0), want_stats.get("gap_bytes", 0)) == EXPECTED[shape]
    assert all(not r["error"] for r in rows)
    if shape.startswith("ext_fields"):
        assert [len(r["ext_fields"]) for r in rows] == [500]
    if shape == "held_responses":
        assert sum(r["request_code"] == 105 for r in rows) == 500
    if shape == "unanswered_codes":
        assert len(want_stats["unanswered_requests"]) == 500
    if shape == "colliding_opaques":
        assert want_stats["unanswered_requests"] == {105: 500}
        assert len({r["opaque"] & 0xFFFF for r in rows}) == 1
    # the same decoders, reading through the counting builds
    monkeypatch.setattr(engine, "NATIVE", counting.native)
    for module in (codec_frame, fastjson, layout):
        monkeypatch.setattr(module, "KERNEL", counting.kernel)
    n = SIZES[name]
    small, big = (cost(name, shapes.SHAPES[shape](k), counting) for k in (n, 4 * n))
    assert max(small.values()) > n, small       # it counted the work
    growth = costcount.growth(small, big)
    assert max(growth.values()) < GROWTH, (f"{shape} on {name}: 4x the input cost", small, big,
                                           growth)
