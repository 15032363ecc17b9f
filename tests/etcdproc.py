"""Test helper: an etcd cluster on 127.0.0.1 (Debian's ``etcd-server``, installed by
``tests/install.sh``), each member on free ports with its data dir under the caller's temporary
directory, every process killed when the block ends.

    from etcdproc import etcd_cluster
    with etcd_cluster(tmp) as (endpoints, procs):
        ...   # endpoints: ["http://127.0.0.1:PORT", ...]
"""
import contextlib
import os
import shutil
import socket
import subprocess
import urllib.request

from serverproc import wait_until

__all__ = ["etcd_cluster", "free_ports"]


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@contextlib.contextmanager
def etcd_cluster(tmp, members=3):
    """``members`` etcd processes forming one cluster on 127.0.0.1: their client URLs and
    processes."""
    etcd = shutil.which("etcd")
    assert etcd, "etcd is not installed (tests/install.sh installs Debian's etcd-server)"
    ports = free_ports(2 * members)
    names = [f"e{i}" for i in range(members)]
    clients = [f"http://127.0.0.1:{ports[2 * i]}" for i in range(members)]
    peers = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(members)]
    cluster = ",".join(f"{n}={p}" for n, p in zip(names, peers))
    procs = []
    try:
        for name, client, peer in zip(names, clients, peers):
            log = open(os.path.join(tmp, f"{name}.log"), "wb")
            procs.append(subprocess.Popen(
                [etcd, "--name", name, "--data-dir", os.path.join(tmp, name),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--initial-cluster-token", os.path.basename(tmp)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            log.close()
        for client in clients:
            wait_until(lambda: _etcd_ready(client), f"etcd at {client}", step=0.05)
        yield clients, procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


def _etcd_ready(client):
    try:
        with urllib.request.urlopen(urllib.request.Request(
                client + "/v3/kv/range", data=b'{"key":"AA=="}', method="POST"), timeout=2) as r:
            return r.status == 200
    except OSError:
        return False
