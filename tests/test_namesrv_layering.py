"""Layering: the codec and the NameServer core import with ``twisted.internet`` blocked.

STYLE.md: route state and processors take time and channels as arguments; only the transport
knows Twisted's reactor. A fresh interpreter installs an import hook that refuses
``twisted.internet`` (and anything below it), then imports every module of
``rocketpy.remoting``, ``rocketpy.namesrv`` and ``rocketpy.controller``.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import importlib, pkgutil, sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "twisted.internet" or name.startswith("twisted.internet."):
                raise ImportError("blocked by the layering test: " + name)
            return None

    sys.meta_path.insert(0, Block())
    imported = []
    for package in ("rocketpy.remoting", "rocketpy.namesrv", "rocketpy.controller"):
        module = importlib.import_module(package)
        imported.append(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            importlib.import_module(info.name)
            imported.append(info.name)
    assert not any(m.startswith("twisted.internet") for m in sys.modules), "twisted.internet loaded"
    print("\\n".join(imported))
""")


def test_core_imports_without_twisted_internet():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = set(done.stdout.split())
    for name in ("rocketpy.namesrv.route_info_manager", "rocketpy.namesrv.processor",
                 "rocketpy.namesrv.kvconfig", "rocketpy.namesrv.config",
                 "rocketpy.namesrv.snapshot", "rocketpy.remoting.frame",
                 "rocketpy.controller.replicas", "rocketpy.controller.processor"):
        assert name in modules
