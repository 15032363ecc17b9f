"""Test helper: run ``twistd -n rocketnamesrv`` as a subprocess on a free 127.0.0.1 port.

    from serverproc import running_server
    with running_server("--profile=4.9", "-D", "listenPort=39876") as server:
        sock = socket.create_connection(("127.0.0.1", server.port))

The server listens on ``tcp:0:interface=127.0.0.1`` (the kernel picks the port, so there is no
race for a "free" one) and reports the port in Java's boot line, which this helper waits for.
It gets a temporary HOME (the C++ client and the Java defaults write there) and KV config
path, and ``PYTHONPATH`` = the repository root, so Twisted's plugin discovery finds
``twisted/plugins/rocketnamesrv.py`` however (or whether) the package is installed. Stopping
sends SIGTERM and waits for a clean exit (SIGKILL after ``stop_timeout``).

Every wait here waits for the server's own signal (its boot line, a log line, its close, its
answer, its exit) up to :data:`PATIENCE`, a bound far above any machine: a busy 2-core machine
passes as a quiet one does, and only a server that will never do it reaches the bound (the
failure then shows the log).
"""
import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["running_server", "ServerProcess", "REPO_ROOT", "BOOT_RE", "load_kv_table", "PATIENCE",
           "wait_until"]

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOT_RE = re.compile(r"The Name Server boot success\. serializeType=\w+, address ([\w.:\[\]-]+):(\d+)")
_TWISTD = "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()"
#: seconds any wait for a server's signal may take before the test gives up (no test is timed:
#: this only bounds a test whose server will never answer)
PATIENCE = 300.0


def wait_until(predicate, what, timeout=PATIENCE, step=0.02):
    """``predicate()``'s first true value, polled until ``timeout``; on giving up an
    AssertionError naming ``what`` (a callable is called then, to say what was seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for "
                                 f"{what() if callable(what) else what}")
        time.sleep(step)


class ServerProcess:
    """A running server: ``port``, ``home``, ``kv_path``, ``proc`` and its log ``lines``."""

    def __init__(self, proc, home, kv_path):
        self.proc = proc
        self.home = Path(home)
        self.kv_path = Path(kv_path)
        self.host = "127.0.0.1"
        self.port = None
        self.lines = []
        self._boot = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def addr(self):
        return f"{self.host}:{self.port}"

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = BOOT_RE.search(line)
            if m and self.port is None:
                self.port = int(m.group(2))
                self._boot.set()
        self._boot.set()

    def wait_booted(self, timeout):
        if not self._boot.wait(timeout) or self.port is None:
            self.kill()
            raise RuntimeError("rocketnamesrv did not boot:\n" + self.log_text())

    def free_disk(self):
        """Lift the ``file_size_limit`` the server started with (the disk is back)."""
        hard = resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE)[1]
        resource.prlimit(self.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))

    def kv_table(self):
        """The KV table a restart would load: ``kvConfig.json``, then the log beside it."""
        return load_kv_table(self.kv_path)

    def log_text(self):
        return "\n".join(self.lines)

    def log_lines(self, pattern):
        """The log lines so far that match ``pattern`` (a regex)."""
        rx = re.compile(pattern)
        return [line for line in list(self.lines) if rx.search(line)]

    def wait_for_log(self, pattern, timeout=PATIENCE, count=1):
        """The first log line matching ``pattern`` (a regex), once ``count`` lines match, waiting
        up to ``timeout`` (or until the server exits)."""
        def seen():
            found = self.log_lines(pattern)
            if len(found) >= count:
                return found[0]
            if self.proc.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"the server exited ({self.proc.returncode}) with "
                                     f"{len(found)} of {count} log lines matching {pattern!r}:\n"
                                     + self.log_text()[-3000:])
            return None
        return wait_until(seen, lambda: f"{count} log lines matching {pattern!r} (saw "
                          f"{len(self.log_lines(pattern))}):\n" + self.log_text()[-3000:],
                          timeout)

    def stop(self, timeout=PATIENCE):
        """SIGTERM and wait; the exit code (SIGKILL and -9 if it hangs)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def load_kv_table(path):
    """``{namespace: {key: value}}`` as the server loads it from ``path`` and its log. A running
    server may compact meanwhile (write the file, then remove the log segments it covers): read
    again until the file is the same before and after the log was read."""
    from rocketpy.namesrv.kvconfig import KVConfigManager
    from rocketpy.service.fileio import AppendLog, read_text, write_file_java
    while True:
        kv = KVConfigManager(str(path), store=write_file_java, log=AppendLog(str(path)))
        text = read_text(str(path))
        kv.load_json(text)
        kv.replay_log()
        if read_text(str(path)) == text:
            return kv.config_table


def server_command(*args, listen="tcp:0:interface=127.0.0.1"):
    """The argv that starts ``twistd -n rocketnamesrv`` with this interpreter."""
    listen_args = [f"--listen={listen}"] if listen else []
    return [sys.executable, "-c", _TWISTD, "-n", "--pidfile=", "rocketnamesrv", *listen_args, *args]


@contextlib.contextmanager
def running_server(*args, listen="tcp:0:interface=127.0.0.1", boot_timeout=PATIENCE, env=None,
                   home=None, kv_path=None, file_size_limit=None):
    """Start the server with extra ``args`` (rocketnamesrv options); yield a ServerProcess.
    ``kv_path=False``: no ``--kvConfigPath`` (the config file or the default decides).
    ``file_size_limit``: the server's ``RLIMIT_FSIZE`` (soft; a full disk for each file it
    writes: a write past it fails with EFBIG), raised again with :meth:`ServerProcess.free_disk`."""
    with tempfile.TemporaryDirectory(prefix="rocketnamesrv-") as tmp:
        home = Path(home or os.path.join(tmp, "home"))
        home.mkdir(parents=True, exist_ok=True)
        kv_args = []
        if kv_path is not False:
            kv_path = kv_path or os.path.join(tmp, "kvConfig.json")
            kv_args = [f"--kvConfigPath={kv_path}"]
        full_env = dict(os.environ)
        full_env.update({"HOME": str(home), "PYTHONUNBUFFERED": "1",
                         "PYTHONPATH": os.pathsep.join(
                             [str(REPO_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])})
        full_env.update(env or {})
        limit = None
        if file_size_limit is not None:
            def limit():
                hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
                resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, hard))
        proc = subprocess.Popen(server_command(*kv_args, *args, listen=listen),
                                cwd=tmp, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=limit)
        server = ServerProcess(proc, home, kv_path or os.path.join(tmp, "kvConfig.json"))
        try:
            server.wait_booted(boot_timeout)
            yield server
        finally:
            server.stop()


class RemotingClient:
    """A blocking remoting client over a real socket, for end-to-end tests."""

    def __init__(self, port, host="127.0.0.1", timeout=PATIENCE, source=None):
        """``source``: the local address to connect from (another loopback address, e.g.
        ``127.0.0.2``, to be another host as far as the server can tell)."""
        import socket
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self._buf = b""
        self._opaque = 0

    def send_frame(self, frame):
        self.sock.sendall(frame)

    def read_raw_frame(self):
        """The next whole frame the server sent, as bytes (length prefix included)."""
        while True:
            if len(self._buf) >= 4:
                end = 4 + int.from_bytes(self._buf[:4], "big")
                if len(self._buf) >= end:
                    frame, self._buf = self._buf[:end], self._buf[end:]
                    return frame
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self._buf += chunk

    def read_frame(self):
        from rocketpy.remoting import decode_frame
        return decode_frame(self.read_raw_frame())

    def call(self, code, ext=None, body=None, *, version=479, serialize_type=0):
        """Send a request and return the decoded answer."""
        from rocketpy.remoting import RemotingCommand
        self._opaque += 1
        self.send_frame(RemotingCommand.request(code, ext, body, opaque=self._opaque, version=version,
                                                serialize_type=serialize_type).encode())
        answer = self.read_frame()
        assert answer.opaque == self._opaque, (answer.opaque, self._opaque)
        return answer

    def is_closed_by_server(self, timeout=PATIENCE):
        """True once the server has closed this connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except OSError:
            return False

    def reset(self):
        """Close with RST (SO_LINGER 0), as a killed process's socket."""
        import socket
        import struct
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self):
        self.sock.close()


def accept_pushed_frame(listener, timeout=PATIENCE):
    """The first frame a server pushes to ``listener`` (a broker's listen socket: the
    controller's NOTIFY_BROKER_ROLE_CHANGED), decoded."""
    from rocketpy.remoting import decode_frame
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(timeout)
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = conn.recv(65536)
            assert chunk, "the server closed the push connection"
            data += chunk
    return decode_frame(data[:4 + int.from_bytes(data[:4], "big")])
