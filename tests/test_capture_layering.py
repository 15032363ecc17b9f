"""rocketpy.capture stays pure: the reference decoder, the byte-range planner and the CLI's
module import with Twisted, pyspark and pyarrow unavailable (pyarrow is needed only once
batches are made: the engines, the writers), and it only reaches the codec through
rocketpy.remoting."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("twisted", "pyspark", "pyarrow", "matplotlib", "pandas"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import rocketpy.capture, rocketpy.capture.cli, rocketpy.capture.split, rocketpy.capture.plan
from rocketpy.capture import decode_paths
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("twisted", "pyspark", "pyarrow"))
assert not mods, mods
print("ok")
"""


def test_capture_imports_without_twisted_or_spark():
    out = subprocess.run([sys.executable, "-c", BLOCKER], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def _imports(path):
    """Absolute module names ``path`` imports (relative imports stay inside its package)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module


def _allowed(name, extra=()):
    top = name.split(".")[0]
    if top == "rocketpy":      # the codec, the capture package (and the root's lazy names) only
        return name == "rocketpy" or name.split(".")[1] in ("remoting", "capture", "_lazy")
    return top in sys.stdlib_module_names or top in ("construct", "__future__") or top in extra


def test_capture_modules_import_only_allowed_packages():
    optional = {"arrow.py": {"pyarrow"}, "engine.py": {"pyarrow"}, "plots.py": {"matplotlib"},
                "source.py": {"pyarrow", "fsspec"}, "summary.py": {"pyarrow", "numpy"},
                "groups.py": {"pyarrow", "numpy"}, "formats.py": {"pyarrow"},
                "cli.py": {"pyarrow"}}   # pyarrow: a dependency of the engines and writers
    for path in (ROOT / "rocketpy" / "capture").glob("*.py"):
        for name in _imports(path):
            assert _allowed(name, optional.get(path.name, ())), (path.name, name)


def test_the_spark_job_reaches_rocketpy_through_capture_and_the_codec_only():
    for name in _imports(ROOT / "tools" / "capture_job.py"):
        assert _allowed(name, {"pyspark", "pyarrow"}), name


def test_the_layering_check_catches_a_state_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from rocketpy.namesrv import route_info_manager\nimport rocketpy.transport\n")
    assert [n for n in _imports(bad) if not _allowed(n)] == ["rocketpy.namesrv", "rocketpy.transport"]
