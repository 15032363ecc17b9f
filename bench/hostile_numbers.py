"""Issue 31, hole 1: how long one number freezes the server as a user runs it
(``twistd -n rocketnamesrv`` on 127.0.0.1, the controller in it), and what the capture decoder and
``rocketpy-admin`` take for the same numbers. For each reproducer a connection sends it while
another asks a route every few milliseconds; the freeze is the longest a route answer waited
(the reactor was busy with the reproducer). ``--tree`` runs another source tree (an older
commit: ``--commit``) for a before/after figure. Prints one line per reproducer; numbers on a
shared machine vary, the order of magnitude is the figure.

    python bench/hostile_numbers.py                 # this tree
    python bench/hostile_numbers.py --commit 21f3da4
"""
import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchserver import ROOT, export, start_server  # noqa: E402


def frame(header, body=b""):
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def request(code, ext, body=b"", opaque=1):
    header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA",
                         "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
                         "version": 479}).encode()
    return frame(header, body)


def _stream(*parts):
    out = b""
    for part in parts:
        out += struct.pack(">i", part) if isinstance(part, int) else struct.pack(">i", len(part)) + part
    return zlib.compress(out)


def reproducers(number):
    """``(name, port kind, frame)`` for the server."""
    header = b'{"code":' + number + b',"opaque":1}'
    mapping = b"{topic:'T',bname:'broker-a',epoch:" + number + b",totalQueues:1}"
    body = _stream(b'{"counter":1,"timestamp":1}', 0, b"[]", 1, mapping)
    register = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "C",
                "haServerAddr": "127.0.0.1:10912", "brokerId": "0", "compressed": "true",
                "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    query = b"{counter:" + number + b",timestamp:1}"
    alter = b"{syncStateSet:[" + number + b"],syncStateSetEpoch:1}"
    return [("JSON header, 29 bytes", "namesrv", frame(header)),
            (f"compressed REGISTER_BROKER mapping, {len(body)} bytes", "namesrv",
             request(103, register, body)),
            ("QUERY_DATA_VERSION lenient body", "namesrv",
             request(322, {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c",
                           "brokerId": "0"}, query)),
            (f"ALTER_SYNC_STATE_SET body, {len(alter)} bytes (controller port)", "controller",
             request(1001, {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"}, alter))]


def _recv_frame(sock):
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    need, data = struct.unpack(">I", head)[0], b""
    while len(data) < need:
        chunk = sock.recv(need - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def freeze(port, target_port, data, seconds):
    """The longest wait of a route query asked every 5 ms while ``data`` goes to
    ``target_port``; and how the reproducer's connection ended."""
    probe = socket.create_connection(("127.0.0.1", port))
    route = request(105, {"topic": "TBW102"}, opaque=7)
    waits, stop = [], threading.Event()

    def ask():
        while not stop.is_set():
            started = time.monotonic()
            probe.sendall(route)
            answered = _recv_frame(probe) is not None
            waits.append(time.monotonic() - started)
            if not answered:       # closed: after a long freeze the server's idle check may
                return             # close the very connection that waited
            time.sleep(0.005)
    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    time.sleep(0.2)
    hostile = socket.create_connection(("127.0.0.1", target_port))
    hostile.settimeout(seconds)
    sent = time.monotonic()
    hostile.sendall(data)
    try:
        answer = _recv_frame(hostile)
        outcome = "closed" if answer is None else f"answered ({len(answer)} bytes)"
    except socket.timeout:
        outcome = "no answer yet"
    done = time.monotonic() - sent
    time.sleep(0.3)
    stop.set()
    asker.join(seconds + 5)
    hostile.close()
    probe.close()
    return max(waits), done, outcome


def capture_time(tree, number, work):
    header = b'{"code":' + number + b',"opaque":1}'
    sys.path.insert(0, str(ROOT / "tests"))
    import capture_synth as cs
    seg = cs.Seg(1_700_000_000_000_000_000, "10.0.0.1", 40000, "10.0.0.2", 9876, 1, 1,
                 cs.PSH | cs.ACK, frame(header))
    path = Path(work) / "hole1.pcap"
    path.write_bytes(cs.write_pcap(cs.packets([seg]), cs.LINKTYPES["ether"]))
    out = {}
    for engine in ("python", "native"):
        env = dict(os.environ, PYTHONPATH=str(tree))
        code = ("import time\nfrom rocketpy.capture import engine\n"
                "from rocketpy.capture.source import open_capture\nt = time.monotonic()\n"
                f"d = engine.ENGINES[{engine!r}]()\n"
                f"with open_capture({str(path)!r}) as (f, info):\n"
                "    list(d.decode(f, 'x', info))\n"
                "list(d.finish())\nprint(time.monotonic() - t)\n")
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, cwd=work)     # not this tree's cwd, which -c would import
        out[engine] = float(run.stdout.strip() or "nan")
    return out, len(path.read_bytes())


class HostileNamesrv(threading.Thread):
    """Answers every request with a header whose version is the number."""

    def __init__(self, number):
        super().__init__(daemon=True)
        self.number = number
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]

    def run(self):
        while True:
            conn, _ = self.server.accept()
            data = _recv_frame(conn)
            if data is None:
                continue
            (hlen,) = struct.unpack(">I", data[:4])
            opaque = json.loads(data[4:4 + (hlen & 0xFFFFFF)])["opaque"]
            conn.sendall(frame(b'{"code":0,"flag":1,"opaque":%d,"version":%s}'
                               % (opaque, self.number)))


def admin_time(tree, number, work):
    peer = HostileNamesrv(number)
    peer.start()
    env = dict(os.environ, PYTHONPATH=str(tree))
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", "import sys; from rocketpy.admin.cli import main; "
                          "sys.exit(main())", "topicRoute", "-t", "T", "-n",
                          f"127.0.0.1:{peer.port}"], env=env, capture_output=True, text=True,
                         timeout=600, cwd=work)
    return time.monotonic() - started, run.returncode, (run.stderr.strip().splitlines() or [""])[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", help="a source tree to run (default: this one)")
    p.add_argument("--commit", help="run this commit's tree (git archive, built in place)")
    p.add_argument("--number", default="1e999999",
                   help="the number (the issue's: 1e999999 in bodies, 1e1000000 in the header)")
    p.add_argument("--seconds", type=float, default=120, help="longest wait for one reproducer")
    p.add_argument("--parts", default="server,capture,admin",
                   help="which to measure (comma-separated: server, capture, admin)")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rocketpy-hostile-"))
    tree = Path(a.tree) if a.tree else ROOT
    if a.commit:
        tree = export(a.commit, work)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                       check=True, capture_output=True)
    number = a.number.encode()
    parts = set(a.parts.split(","))
    print(f"tree {tree}, number {a.number}; shared machine: figures vary", flush=True)
    if "server" in parts:
        server(tree, work, number, a.seconds)
    if "capture" in parts:
        times, size = capture_time(tree, b"1e1000000", work)
        print(f"capture decoder, {size}-byte pcap: pure Python {times['python']:.3f} s, "
              f"compiled {times['native']:.3f} s", flush=True)
    if "admin" in parts:
        plain, _, _ = admin_time(tree, b"1", work)
        took, status, last = admin_time(tree, b"1e1000000", work)
        print(f"rocketpy-admin topicRoute against a NameServer answering version 1e1000000: "
              f"{took:.3f} s (version 1: {plain:.3f} s, start-up included), exit {status} "
              f"({last[:100]})")


def server(tree, work, number, seconds):
    controller_port = socket.create_server(("127.0.0.1", 0))
    cport = controller_port.getsockname()[1]
    controller_port.close()
    proc, port, log = start_server(tree, work, [
        "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
        "-D", f"controllerDLegerPeers=n0-127.0.0.1:{cport}", "-D", "controllerDLegerSelfId=n0",
        "-D", f"controllerStorePath={work}/ctl"])
    try:
        for name, kind, data in reproducers(number):
            if name.startswith("JSON header"):
                data = frame(b'{"code":1e1000000,"opaque":1}')     # the 29 bytes
            wait, done, outcome = freeze(port, cport if kind == "controller" else port, data,
                                         seconds)
            print(f"{name:62s} route answers waited up to {wait:8.3f} s; the request {outcome} "
                  f"after {done:.3f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
