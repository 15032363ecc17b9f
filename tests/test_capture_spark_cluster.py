"""The Spark job off the shared ``local[2]`` session: in local mode it listens on 127.0.0.1 only
(Spark's default is the host's external address, and its UI every interface), and on a real
standalone cluster -- a master and a worker started here on 127.0.0.1, the executor in the
worker's own working directory -- it ships the compiled core, uses it, and writes the rows of
the in-process decoder."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketpy.capture import decode_paths

from extras import require
from test_capture_spark import FIXTURES, ROOT, _same_rows

require("spark", "pyspark", "pandas")   # else these fail, never skip
pytestmark = pytest.mark.spark

sys.path.insert(0, str(ROOT / "tools"))
import capture_job  # noqa: E402
sys.path.remove(str(ROOT / "tools"))

FIXTURE = FIXTURES / "rmq49-broker-register.pcap"


def test_loopback_defaults_only_in_local_mode_and_only_unless_chosen():
    none = lambda key: False                                  # noqa: E731
    env, conf = capture_job.loopback_defaults("local[*]", none, {}, submitted=False)
    assert env == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert conf == {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
    env, conf = capture_job.loopback_defaults("local[2]", none, {}, submitted=True)
    assert env == {} and conf["spark.ui.enabled"] == "false"   # the JVM already runs
    ui_chosen = lambda key: key == "spark.ui.enabled"         # noqa: E731
    assert "spark.ui.enabled" not in capture_job.loopback_defaults("local", ui_chosen, {}, True)[1]
    for master, is_set, environ in (
            ("spark://10.0.0.1:7077", none, {}), ("yarn", none, {}),
            ("local[*]", none, {"SPARK_LOCAL_IP": "10.0.0.5"}),
            ("local[*]", lambda key: key == "spark.driver.host", {})):
        assert capture_job.loopback_defaults(master, is_set, environ, False) == ({}, {})


def _descendants(pid):
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def _listening(pids):
    """``{"host:port"}`` of the TCP sockets listening in these processes (from /proc)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:   # 0A: LISTEN
                    continue
                addr, port = fields[1].split(":")
                raw = bytes.fromhex(addr)
                if v6:   # four little-endian words; IPv4-mapped ::ffff:a.b.c.d is shown as a.b.c.d
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    host = (".".join(str(b) for b in raw[12:]) if raw[:12] == bytes(10) + b"\xff\xff"
                            else raw.hex())
                else:
                    host = ".".join(str(b) for b in raw[::-1])
                out.add(f"{host}:{int(port, 16)}")
    return out


def test_local_mode_listens_on_loopback_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    env.update(PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "capture_job.py"), str(FIXTURE),
                             "--output", str(tmp_path / "o"), "--master", "local[1]", "--quiet"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = set()
    try:
        while proc.poll() is None:            # sample the sockets of the job's JVM while it runs
            seen |= _listening(_descendants(proc.pid))
            time.sleep(0.2)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert seen, "no listening socket seen"
    assert {a.rsplit(":", 1)[0] for a in seen} == {"127.0.0.1"}, seen


def _daemon(args, env, log_path, pattern, timeout=120):
    """Start a Spark daemon with ``spark-class``; wait for ``pattern`` in its log."""
    from pyspark.find_spark_home import _find_spark_home
    log = open(log_path, "w+")
    proc = subprocess.Popen([os.path.join(_find_spark_home(), "bin", "spark-class"), *args],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        found = re.search(pattern, log.read())
        if found:
            return proc, found
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    log.seek(0)
    raise AssertionError(f"{args[0]} did not start: {log.read()[-3000:]}")


def _stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_standalone_cluster_ships_and_uses_the_compiled_core(tmp_path):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
               PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(ROOT),
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_CONF_DIR=str(tmp_path / "conf"))
    (tmp_path / "conf").mkdir()
    work = tmp_path / "work"
    master = worker = None
    try:
        master, found = _daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", "0", "--webui-port", "0"], env,
                                tmp_path / "master.log", r"Starting Spark master at (spark://\S+)")
        url = found.group(1)
        worker, _ = _daemon(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                             "--cores", "1", "--memory", "1g", "--work-dir", str(work),
                             "--webui-port", "0", url], env, tmp_path / "worker.log",
                            r"Successfully registered with master")
        out = tmp_path / "out"
        job_env = dict(env, PYSPARK_SUBMIT_ARGS="--conf spark.executor.memory=512m "
                       "--conf spark.executor.cores=1 --conf spark.cores.max=1 pyspark-shell")
        run = subprocess.run([sys.executable, str(ROOT / "tools" / "capture_job.py"),
                              str(FIXTURES), "--output", str(out), "--master", url, "--quiet"],
                             env=job_env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
    finally:
        for proc in (worker, master):
            if proc is not None:
                _stop(proc)
    import pyarrow.parquet as pq
    got = pq.read_table(str(out / "frames")).to_pylist()
    _same_rows(got, list(decode_paths([str(FIXTURES)])))
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["engines"]) == ["native"], summary["engines"]     # shipped and loaded
    # the executor ran in its own directory under the worker's, where the code was shipped
    shipped = list(work.glob(f"app-*/*/{capture_job.SHIPPED_NAME}/rocketpy/capture/_native*.so"))
    assert len(shipped) == 1, sorted(str(p) for p in work.rglob("*"))[:50]
