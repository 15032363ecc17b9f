"""One source of truth for the frame layout: outside the codec, no module of rocketpy or tools/
reads or writes integers in bytes by hand (``int.from_bytes``, ``.to_bytes``, ``struct``); they
call :mod:`rocketpy.remoting.layout`. The packet layers of the capture reader (pcap records,
link, IP and TCP headers) are not frames and are the only other modules allowed to.  (The
compiled capture core restates the layout in C; tests/test_capture_engines.py proves it equal,
column by column, and checks its constants against the codec's.)"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: modules that may read integers out of bytes: the codec, and the capture's packet layers
ALLOWED = {"rocketpy/remoting", "rocketpy/capture/readers.py", "rocketpy/capture/layers.py",
           "rocketpy/capture/reassembly.py"}


def _allowed(rel):
    return any(rel == a or rel.startswith(a + "/") for a in ALLOWED)


def byte_integer_uses(source):
    """``(line, what)`` for each hand-made integer<->bytes conversion in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in ("from_bytes", "to_bytes"):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Import) and any(a.name == "struct" for a in node.names):
            found.append((node.lineno, "import struct"))
        elif isinstance(node, ast.ImportFrom) and node.module == "struct":
            found.append((node.lineno, "from struct import"))
    return found


#: the layout's byte sizes and offsets: what a module would slice a frame with
LAYOUT_SIZES = {"PREFIX_SIZE", "LENGTH_SIZE", "ROCKETMQ_FIXED", "ROCKETMQ_FIELDS", "ROCKETMQ_OPAQUE",
                "ROCKETMQ_MIN_HEADER", "ROCKETMQ_EXT_LENGTH", "ROCKETMQ_KEY_LENGTH",
                "ROCKETMQ_VALUE_LENGTH"}


def layout_size_uses(source):
    """``(line, name)`` for each use of a layout size or offset."""
    return [(node.lineno, node.id) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Name) and node.id in LAYOUT_SIZES] + [
        (node.lineno, alias.name) for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) for alias in node.names if alias.name in LAYOUT_SIZES]


def test_no_frame_sliced_with_the_layout_outside_the_codec():
    offenders = []
    for path in sorted([*ROOT.glob("rocketpy/**/*.py"), *ROOT.glob("tools/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("rocketpy/remoting/"):
            offenders += [f"{rel}:{line} {name}" for line, name in layout_size_uses(path.read_text())]
    assert offenders == []


def test_no_frame_bytes_sliced_outside_the_codec():
    offenders = []
    for path in sorted([*ROOT.glob("rocketpy/**/*.py"), *ROOT.glob("tools/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if not _allowed(rel):
            offenders += [f"{rel}:{line} {what}" for line, what in byte_integer_uses(path.read_text())]
    assert offenders == []


def test_the_check_catches_a_hand_sliced_prefix():
    assert byte_integer_uses("n = int.from_bytes(frame[:4], 'big')\n") == [(1, "from_bytes")]
    assert byte_integer_uses("import struct\n") == [(1, "import struct")]
    assert byte_integer_uses("from struct import pack\nb = (5).to_bytes(4, 'big')\n") == [
        (1, "from struct import"), (2, "to_bytes")]
    assert sorted(layout_size_uses("from rocketpy.remoting.layout import PREFIX_SIZE\n"
                                   "header = frame[PREFIX_SIZE:]\n")) == [
        (1, "PREFIX_SIZE"), (2, "PREFIX_SIZE")]
