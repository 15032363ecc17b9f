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


def test_capture_modules_import_only_allowed_packages():
    allowed = {"rocketpy", "construct", "__future__"}
    optional = {"arrow.py": {"pyarrow"}, "engine.py": {"pyarrow"}, "plots.py": {"matplotlib"},
                "source.py": {"pyarrow", "fsspec"}, "summary.py": {"pyarrow", "numpy"},
                "groups.py": {"pyarrow", "numpy"},
                "cli.py": {"pyarrow"}}   # pyarrow: a dependency of the engines and writers
    stdlib = set(sys.stdlib_module_names)
    for path in (ROOT / "rocketpy" / "capture").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                assert top in stdlib or top in allowed or top in optional.get(path.name, ()), \
                    (path.name, top)
