"""The twistd plugin: discoverable by Twisted's plugin system, no __init__.py in twisted/ or
twisted/plugins/ (that would shadow the real Twisted), and pointing at tap.Options/makeService."""
import os
import subprocess
import sys

from serverproc import REPO_ROOT

_LIST = ("from twisted.plugin import getPlugins\n"
         "from twisted.application.service import IServiceMaker\n"
         "for p in getPlugins(IServiceMaker):\n"
         "    if p.tapname == 'rocketnamesrv':\n"
         "        print(p.module, p.options.__module__, p.makeService.__module__)\n")


def test_no_init_files_in_the_plugin_tree():
    assert not (REPO_ROOT / "twisted" / "__init__.py").exists()
    assert not (REPO_ROOT / "twisted" / "plugins" / "__init__.py").exists()


def test_plugin_is_discovered_from_another_directory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run([sys.executable, "-c", _LIST], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["rocketpy.service.tap"] * 3


def test_console_script_needs_no_discovery():
    from rocketpy.service import cli, tap
    assert cli.SERVICE_MAKER.tapname == "rocketnamesrv"
    assert cli.SERVICE_MAKER.options is tap.Options
    assert cli._ServerOptions()._getPlugins(None) == [cli.SERVICE_MAKER]
