"""Benchmark: the web endpoint's topic filter at a million topics (issue 31 hole 8). A
``twistd rocketnamesrv --web`` holds B brokers of T topics each (registered and kept connected);
a thread asks GET_ROUTEINFO_BY_TOPIC back to back on its own connection while the main thread
asks ``/api/topics?q=...`` and ``/?q=...``: printed are each request's time and the longest
route query answered meanwhile (how long the reactor stalled), beside the longest route query
with no web request at all. ``--old COMMIT`` runs that commit's tree the same way first.

    python3 bench/web_topic_filter.py [--brokers 100] [--topics 10000] [--old 21f3da4]
"""
import argparse
import re
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from benchserver import ROOT, export, start_server  # noqa: E402
from brokerbody import flood_registration  # noqa: E402
from rocketpy.remoting import RemotingCommand  # noqa: E402
from serverproc import RemotingClient  # noqa: E402

WEB = re.compile(r"rocketpy web endpoint on (http://[\d.]+:\d+/)")


class RouteProbe(threading.Thread):
    """Route queries back to back; the longest answer time since the last :meth:`reset`."""

    def __init__(self, port, topic):
        super().__init__(daemon=True)
        self.client = RemotingClient(port, timeout=60)
        self.frame = RemotingCommand.request(105, {"topic": topic}, opaque=1, version=479).encode()
        self.longest = 0.0
        self.running = True

    def run(self):
        while self.running:
            started = time.perf_counter()
            self.client.send_frame(self.frame)
            self.client.read_raw_frame()
            self.longest = max(self.longest, time.perf_counter() - started)

    def reset(self):
        longest, self.longest = self.longest, 0.0
        return longest


def run(tree, brokers, topics, label):
    with tempfile.TemporaryDirectory() as work:
        proc, port, log = start_server(tree, work, [
            "--web", "tcp:0:interface=127.0.0.1", "-D", f"registerBrokerMaxTopics={topics}"])
        try:
            deadline = time.monotonic() + 30
            while not WEB.search(log.read_text()) and time.monotonic() < deadline:
                time.sleep(0.05)
            url = WEB.search(log.read_text()).group(1)
            held = []
            for b in range(brokers):
                ext, body = flood_registration(b, topics)
                client = RemotingClient(port, timeout=120)
                answer = client.call(103, ext, body)
                assert answer.code == 0, answer.remark
                held.append(client)
            probe = RouteProbe(port, "flood7-77")
            probe.start()
            time.sleep(2)
            probe.reset()
            time.sleep(3)
            print(f"{label}: {brokers * topics} topics; longest route query with no web request: "
                  f"{probe.reset() * 1000:.0f} ms", flush=True)
            for path in ("api/topics?q=flood42-99&limit=5", "api/topics?q=flood42-99&limit=5",
                         "?q=flood13-7", "api/topics?q=nothing-matches", "?q=flood13-7"):
                probe.reset()
                started = time.perf_counter()
                with urllib.request.urlopen(url + path, timeout=120) as answer:
                    answer.read()
                took = time.perf_counter() - started
                time.sleep(0.3)
                print(f"{label}: GET /{path}: {took * 1000:.0f} ms; longest route query "
                      f"meanwhile {probe.reset() * 1000:.0f} ms", flush=True)
            probe.running = False
            probe.join(10)
            for client in held:
                client.close()
        finally:
            proc.kill()
            proc.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--old", help="a commit to run first, the same way")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        if args.old:
            tree = export(args.old, work)
            for so in ROOT.glob("rocketpy/*/_*.so"):
                (tree / so.relative_to(ROOT)).write_bytes(so.read_bytes())
            run(tree, args.brokers, args.topics, f"old {args.old}")
    run(ROOT, args.brokers, args.topics, "new")


if __name__ == "__main__":
    main()
