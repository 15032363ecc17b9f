"""One source of truth for the frame layout: outside the codec, no module of rocketpy or tools/
reads or writes integers in bytes by hand (``int.from_bytes``, ``.to_bytes``, ``struct``); they
call :mod:`rocketpy.remoting.layout`. The packet layers of the capture reader (pcap records,
link, IP and TCP headers) and the warm restart's snapshot file (rocketpy's own records, never on
the wire) are not frames and are the only other modules allowed to.  The
compiled capture core restates the layout in C, once: the frame-layout block of its core.h,
which this test holds to layout.py, and which its frame code (framing, header reading, rows)
must use instead of literal offsets (tests/test_capture_engines.py proves its rows equal,
column by column)."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: modules that may read integers out of bytes: the codec, the capture's packet layers, and
#: rocketpy's own records that never reach the wire (the route snapshot file, the op stream)
ALLOWED = {"rocketpy/remoting", "rocketpy/capture/readers.py", "rocketpy/capture/layers.py",
           "rocketpy/capture/reassembly.py", "rocketpy/namesrv/routefile.py",
           "rocketpy/namesrv/opcodec.py"}


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


NATIVE = ROOT / "rocketpy" / "capture" / "_native"
KERNEL = ROOT / "rocketpy" / "remoting" / "_kernel"
#: the C code that reads a frame's bytes: the header kernel and the capture core's frame code
FRAME_CODE = (KERNEL / "kernel.c", KERNEL / "kernel.h", KERNEL / "module.c", KERNEL / "hits.c",
              NATIVE / "stream.c", NATIVE / "header.c", NATIVE / "decoder.c")


def c_defines(text):
    """``{name: value text}`` of a C file's ``#define NAME value`` lines."""
    return {m[1]: m[2].strip() for m in re.finditer(r"^#define (\w+) ([^/\n]+)", text, re.M)}


def _json_opaque_key():
    """What the JSON encoder writes before an opaque (the last member before the hole)."""
    from rocketpy.remoting import RemotingCommand
    from rocketpy.remoting.frame import encode_template
    pre = encode_template(RemotingCommand.request(105, {"topic": "T"}, opaque=1)).pre
    return pre[pre.rindex(b",") + 1:].decode()


def layout_in_c():
    """What the C names must be, from the codec's schema (stated apart from layout_c.py)."""
    from rocketpy.remoting import layout
    fields = layout.ROCKETMQ_FIELDS
    return {
        "LENGTH_SIZE": layout.LENGTH_SIZE, "PREFIX_SIZE": layout.PREFIX_SIZE,
        "TYPE_AT": layout._TYPE_AT, "HEADER_LENGTH_MASK": layout._HEADER_LENGTH_MASK,
        "JSON_HEADER_START": ord("{"),           # plausible_prefix's check of a JSON header
        "MAX_FRAME_LENGTH": layout.DEFAULT_MAX_FRAME_LENGTH,
        "SER_JSON": layout.JSON, "SER_ROCKETMQ": layout.ROCKETMQ,
        "RMQ_FIXED_SIZE": layout.ROCKETMQ_FIXED.size, "RMQ_MIN_HEADER": layout.ROCKETMQ_MIN_HEADER,
        "RMQ_CODE_AT": fields["code"][0], "RMQ_LANGUAGE_AT": fields["language"][0],
        "RMQ_VERSION_AT": fields["version"][0], "RMQ_OPAQUE_AT": fields["opaque"][0],
        "RMQ_OPAQUE_SIZE": layout.ROCKETMQ_OPAQUE[1] - layout.ROCKETMQ_OPAQUE[0],
        "RMQ_FLAG_AT": fields["flag"][0], "RMQ_REMARK_LENGTH_AT": layout.ROCKETMQ_FIXED.size - 4,
        "RMQ_EXT_LENGTH_SIZE": layout.ROCKETMQ_EXT_LENGTH.size,
        "RMQ_KEY_LENGTH_SIZE": layout.ROCKETMQ_KEY_LENGTH.size,
        "RMQ_VALUE_LENGTH_SIZE": layout.ROCKETMQ_VALUE_LENGTH.size,
        "RMQ_MAX_LANGUAGE": layout.MAX_LANGUAGE,
        "HUNT_BINARY_HEADER_LIMIT": 1 << 16,      # FRAME_START_CANDIDATE's binary header bound
        # where Java's JSON header writes the opaque (the answer cache's key, cut in C too)
        "JSON_OPAQUE_KEY": _json_opaque_key(),
    }


def test_the_c_layout_is_generated_from_the_codecs():
    from rocketpy.remoting import layout_c
    assert {k: eval(v, {}) for k, v in c_defines(layout_c.c_header()).items()} == layout_in_c()
    # the header the modules were compiled with is the one setup.py writes now
    assert (ROOT / layout_c.GENERATED_HEADER).read_text() == layout_c.c_header()
    # and the capture's own bound is still the Python reader's
    from rocketpy.capture import framing
    assert eval(c_defines((NATIVE / "core.h").read_text())["MAX_HUNT_HEADER"], {}) == framing._MAX_HUNT_HEADER


def test_no_c_source_restates_the_layout():
    names = layout_in_c()
    for path in (*FRAME_CODE, NATIVE / "core.h"):
        assert not set(c_defines(path.read_text())) & set(names), path.name


#: a frame read at a literal offset, or its literal bytes: ``b[4]``, ``rd32be(data + 4)``,
#: ``d[pos + 8]``, ``0x7B``, ``& 0xFFFFFF`` (not a declaration's ``char a[80], b[80]``)
LITERAL_READ = re.compile(r"(?<!, )\b(b|d|data)\[(\w+ \+ )*\d+\]|rd(16|32)be\((b|d|p|data)( \+ \w+)* \+ \d+\)"
                          r"|0x7B|0xFFFFFF\b")


def literal_reads(text):
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1)
            if LITERAL_READ.search(line.split("/*")[0])]


def test_the_compiled_core_reads_no_frame_at_a_literal_offset():
    assert {path.name: literal_reads(path.read_text()) for path in FRAME_CODE} == {
        path.name: [] for path in FRAME_CODE}
    # (and the check sees one)
    assert [n for n, _ in literal_reads("int t = b[4];\nint x = b[TYPE_AT];\n"
                                        "h = rd32be(data + 4) & 0xFFFFFF;\n"
                                        "v = rd16be(p + RMQ_VERSION_AT);\nif (d[pos + 8] == 0x7B)\n")] == [1, 3, 5]


#: the names rocketpy gives a frame's bytes (a frame, a buffer, a header, a prefix...)
FRAME_NAMES = {"frame", "data", "buf", "buffer", "raw", "payload", "chunk", "prefix", "header",
               "wire", "packet", "segment", "mark"}
#: Python modules that may read bytes at literal offsets: the layout itself and the code it
#: generates, and the capture's packet layers (pcap records, link, IP and TCP: not frames)
LITERAL_ALLOWED = {"rocketpy/remoting/layout.py", "rocketpy/remoting/layout_c.py",
                   "rocketpy/capture/readers.py", "rocketpy/capture/layers.py",
                   "rocketpy/capture/reassembly.py"}


def _literal_offset(node):
    """A literal offset into bytes: a positive int, or ``something + int``."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int and node.value > 0
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (
        _literal_offset(node.right) or _literal_offset(node.left))


def _named(node):
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name is not None and name.lstrip("_").lower() in FRAME_NAMES


def _at_literal(node):
    """``x[4]``, ``x[4:8]``, ``x[:4]``, ``x[pos + 8]``."""
    s = node.slice
    if isinstance(s, ast.Slice):
        return any(b is not None and _literal_offset(b) for b in (s.lower, s.upper))
    return _literal_offset(s)


def literal_frame_reads(source):
    """``(line, text)`` of each read of bytes at a literal offset: a frame-named value
    subscripted at one, ``unpack_from(fmt, x, 4)``, or an integer made of a literal slice
    (``int.from_bytes(x[0:4], ...)``, ``struct.unpack(">i", x[4:8])``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _named(node.value) and _at_literal(node):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = node.args
            if node.func.attr == "unpack_from" and (
                    (len(args) > 2 and _literal_offset(args[2]))
                    or any(k.arg == "offset" and _literal_offset(k.value) for k in node.keywords)):
                found.append((node.lineno, ast.unparse(node)))
            elif node.func.attr in ("from_bytes", "unpack", "unpack_from") and any(
                    isinstance(a, ast.Subscript) and (_at_literal(a) or isinstance(a.slice, ast.Slice)
                                                      and isinstance(a.slice.upper, ast.Constant))
                    for a in args):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_no_python_module_reads_a_frame_at_a_literal_offset():
    offenders = []
    for path in sorted([*ROOT.glob("rocketpy/**/*.py"), *ROOT.glob("tools/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in LITERAL_ALLOWED:
            offenders += [f"{rel}:{line} {text}" for line, text in literal_frame_reads(path.read_text())]
    assert offenders == []


def test_the_check_catches_literal_slices():
    source = ("n = int.from_bytes(frame[0:4], 'big')\n"     # 1
              "t = data[4]\n"                               # 2
              "h = buf[4:8]\n"                              # 3
              "x = struct.unpack_from('>i', blob, 4)\n"     # 4
              "y = struct.unpack('>i', blob[:4])\n"         # 5
              "z = header[:1] == b'{'\n"                    # 6
              "c = self.buf[pos + 8]\n"                     # 7
              "first = data[0]\nrest = line[4:]\nkey = prefix[:-1]\n"
              "ok = _PREFIX.unpack_from(buf, pos)\nv = layout.frame_total(data, 4)\n")
    assert [line for line, _ in literal_frame_reads(source)] == [1, 1, 2, 3, 4, 5, 6, 7]
