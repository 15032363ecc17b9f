"""Test helper: a server of several processes (``--workers N``) seen through its web endpoint.

Which process holds a connection is the server's own answer (``/api/workers?peer=host:port``):
:func:`client_on` opens connections until one lands on the process wanted. :func:`settled`
waits until the server says every worker has applied its whole stream and nothing waits in the
unregistration queue: after a connection closed, its brokers' routes are then gone from every
replica. Every wait ends on the server's answer, up to ``serverproc.PATIENCE``."""
import json
import os
import re
import urllib.request
import zlib
from pathlib import Path

import brokerbody
from serverproc import PATIENCE, RemotingClient, wait_until

__all__ = ["web_url", "api", "worker_of", "client_on", "settled", "worker_pids", "gone",
           "register_frame", "listening_ports", "open_paths", "WEB"]

#: the web endpoint option the helpers read the server through
WEB = "--web=tcp:0:interface=127.0.0.1"


def web_url(server):
    line = server.wait_for_log(r"rocketpy web endpoint on http://")
    return re.search(r"rocketpy web endpoint on (http://\S+?)/?(?: |$)", line).group(1)


def api(server, path):
    with urllib.request.urlopen(f"{web_url(server)}{path}", timeout=PATIENCE) as answer:
        return json.load(answer)


def worker_of(server, client):
    """The process holding ``client``'s connection (0: the route writer)."""
    host, port = client.sock.getsockname()[:2]
    return wait_until(lambda: (lambda w: None if w is None else (w,))(
        api(server, f"/api/workers?peer={host}:{port}")["worker"]),
        f"the server to know the connection from {host}:{port}")[0]


def client_on(server, worker, attempts=500, **kwargs):
    """A connection that landed on process ``worker``; the others opened on the way closed."""
    for _ in range(attempts):
        client = RemotingClient(server.port, **kwargs)
        client.call(206)   # answered: accepted and reported
        if worker_of(server, client) == worker:
            return client
        client.close()
    raise AssertionError(f"no connection landed on worker {worker} in {attempts}")


def settled(server, closed=()):
    """Wait until every worker applied the whole stream and no unregistration waits; and,
    first, until the writer knows no connection from the peers ``closed`` (``host:port``): a
    worker's close reaches the writer over its link, apart from its log lines."""
    for peer in closed:
        wait_until(lambda: api(server, f"/api/workers?peer={peer}")["worker"] is None,
                   f"the writer to see the close of {peer}")

    def done():
        state = api(server, "/api/workers")
        return (state["unregistrationQueueDepth"] == 0
                and all(w["applied"] == state["sequence"] for w in state["workers"])
                and all(w["state"] == "serving" for w in state["workers"]))
    wait_until(done, lambda: f"the workers to apply the stream: {api(server, '/api/workers')}")


def worker_pids(server):
    return [w["pid"] for w in api(server, "/api/workers")["workers"] if w["role"] == "replica"]


def gone(pid):
    """Whether process ``pid`` has ended (a zombie nobody reaps counts as ended)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def register_frame(name, addr, topics, *, cluster="C", broker_id=0, opaque=1, version=479,
                   **ext):
    """A REGISTER_BROKER frame (JSON body) for ``topics``."""
    from rocketpy.remoting import RemotingCommand
    body = brokerbody.register_body(topics)
    fields = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
              "haServerAddr": addr, "brokerId": str(broker_id), "compressed": "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF), **ext}
    return RemotingCommand.request(103, fields, body, opaque=opaque, version=version).encode()


def _fd_targets(pid):
    """What each open descriptor of process ``pid`` points at (``/proc/PID/fd``)."""
    targets = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            targets.add(os.readlink(fd))
        except OSError:
            continue
    return targets


def listening_ports(pid):
    """The TCP ports process ``pid`` holds a listening socket of (``/proc``)."""
    inodes = {t[8:-1] for t in _fd_targets(pid) if t.startswith("socket:[")}
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:   # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def open_paths(pid):
    """The files process ``pid`` has open (their paths)."""
    return {t for t in _fd_targets(pid) if t.startswith("/")}
