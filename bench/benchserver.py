"""Bench helper: start ``twistd -n rocketnamesrv`` from a source tree on a free 127.0.0.1 port,
and export an older commit's tree, so a benchmark can run old and new back to back.

    proc, port, log = start_server(ROOT, workdir, ["-D", "key=value"])
    old_tree = export("82db837", workdir, built=True)
"""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ROOT", "BOOT", "start_server", "target", "export", "rss_mib"]

ROOT = Path(__file__).resolve().parents[1]
BOOT = re.compile(r"The Name Server boot success\. serializeType=\w+, address [\w.:]+:(\d+)")


def start_server(tree, workdir, extra=(), kv_path=None, cpus=None):
    """Start the server of ``tree`` (logging to a file in ``workdir``), on the CPUs ``cpus``
    when given; ``(process, port, log path)`` once it has booted."""
    log = Path(tempfile.mkstemp(prefix="server-", suffix=".log", dir=workdir)[1])
    env = dict(os.environ, HOME=str(workdir), PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-c",
           "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()",
           "-n", "--pidfile=", "--logfile", str(log), "rocketnamesrv",
           "--listen=tcp:0:interface=127.0.0.1",
           f"--kvConfigPath={kv_path or Path(workdir) / 'kv.json'}", *extra]
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT,
                            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = BOOT.search(log.read_text(errors="replace"))
        if m:
            return proc, int(m.group(1)), log
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("rocketnamesrv did not boot:\n" + log.read_text())


def target(workdir, addr, server_args=()):
    """``(process or None, host, port)``: the server at ``addr`` ("host:port"), or else a fresh
    rocketnamesrv of this tree."""
    if addr:
        host, port = addr.rsplit(":", 1)
        return None, host, int(port)
    proc, port, _ = start_server(ROOT, workdir, server_args)
    return proc, "127.0.0.1", port


def export(commit, workdir, built=False):
    """``git archive`` of ``commit`` unpacked in ``workdir``/old: a tree to start_server; with
    ``built``, its compiled modules built in place (as the current tree's are)."""
    tree = Path(workdir) / "old"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    if built:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                       check=True, capture_output=True)
    return tree


def rss_mib(pid):
    """Resident memory of ``pid`` (MiB)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
