"""Test and bench helper: thousands of remoting connections flooding a NameServer (127.0.0.1).

    python tests/floodclient.py --port 9876 --connections 2000 --seconds 10 [--never-read 50]

Opens the connections (raising this process's RLIMIT_NOFILE as needed), then for ``--seconds``
pushes pipelined requests on every socket as fast as the kernel takes them (one select loop, no
window: the rudest client there is) and reads whatever comes back, counting answers by code
(``0`` success, ``2`` SYSTEM_BUSY, others). ``--never-read`` of the sockets only send, never
read. Prints one JSON line: connections held at the end, requests sent, answers by code,
answers/s, connections the server closed (``--report N``: running totals every N s before it).
``--until-stdin-closes``: flood until stdin reaches its end (``--seconds`` is then only a cap),
so a test ends the flood after what it measured, however slow the machine.

Used by ``tests/test_e2e_overload.py`` (in a subprocess, so the flood does not share the GIL
with the well-behaved client under test) and ``bench/overload_soak.py``.
"""
import argparse
import json
import os
import re
import resource
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocketpy.remoting import RemotingCommand  # noqa: E402

_CODE = re.compile(rb'\{"code":(\d+),')

#: (request code, ext fields): the flood's mix -- route queries (answer cache hits), unknown
#: topics (code 17), cluster info, and the all-topic list.
MIX = [(105, {"topic": "TopicA"}), (105, {"topic": "TopicB"}), (105, {"topic": "NoSuchTopic"}),
       (106, None), (206, None)]


def burst(n, base_opaque):
    """``n`` pipelined requests of the mix, as one bytes object."""
    return b"".join(RemotingCommand.request(MIX[i % len(MIX)][0], MIX[i % len(MIX)][1],
                                            opaque=base_opaque + i, version=479).encode()
                    for i in range(n))


def raise_nofile(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def connect_all(host, port, count, timeout=300.0):
    socks = []
    deadline = time.monotonic() + timeout
    while len(socks) < count and time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((host, port))
        except OSError:
            s.close()
            time.sleep(0.01)
            continue
        s.setblocking(False)
        socks.append(s)
    return socks


def flood(host, port, connections, seconds, never_read=0, burst_size=200, report=0.0, out=None,
          until_stdin_closes=False):
    raise_nofile(connections + 256)
    started = time.monotonic()
    socks = connect_all(host, port, connections)
    connect_seconds = time.monotonic() - started
    payload = burst(burst_size, 1000)
    sel = selectors.DefaultSelector()
    state = {}
    for i, s in enumerate(socks):
        reader = i >= never_read
        state[s] = {"reader": reader, "pending": payload, "tail": b""}
        sel.register(s, selectors.EVENT_WRITE | (selectors.EVENT_READ if reader else 0))
    if until_stdin_closes:
        sel.register(sys.stdin, selectors.EVENT_READ)
    codes = {}
    sent_requests = 0
    closed = 0
    start = time.monotonic()
    end = start + seconds
    next_report = start + report if report else float("inf")
    frame_size = len(payload) / burst_size
    stopped = False
    while time.monotonic() < end and state and not stopped:
        if time.monotonic() >= next_report:
            next_report += report
            print(json.dumps({"t": round(time.monotonic() - start, 1),
                              "connections_held": len(state),
                              "requests_sent": sent_requests, "ok": codes.get(b"0", 0),
                              "system_busy": codes.get(b"2", 0),
                              "answers": sum(codes.values())}), file=out or sys.stdout, flush=True)
        for key, events in sel.select(0.05):
            s = key.fileobj
            if s is sys.stdin:
                stopped = not os.read(s.fileno(), 4096)
                continue
            st = state.get(s)
            if st is None:
                continue
            try:
                if events & selectors.EVENT_READ:
                    data = s.recv(1 << 18)
                    if not data:
                        raise ConnectionResetError
                    data = st["tail"][-16:] + data
                    for code in _CODE.findall(data):
                        codes[code] = codes.get(code, 0) + 1
                    st["tail"] = data
                if events & selectors.EVENT_WRITE:
                    n = s.send(st["pending"])
                    sent_requests += int(n / frame_size)
                    st["pending"] = st["pending"][n:] or payload
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                closed += 1
                sel.unregister(s)
                s.close()
                del state[s]
    held = len(state)
    for s in list(state):
        s.close()
    elapsed = min(seconds, time.monotonic() - start)
    answers = sum(codes.values())
    return {"connections_opened": len(socks), "connect_seconds": round(connect_seconds, 2),
            "connections_held": held, "closed_by_server": closed,
            "requests_sent": sent_requests, "answers": answers,
            "answers_per_s": round(answers / elapsed), "ok": codes.get(b"0", 0),
            "system_busy": codes.get(b"2", 0), "topic_not_exist": codes.get(b"17", 0),
            "stopped_by_stdin": stopped,
            "other": {k.decode(): v for k, v in codes.items() if k not in (b"0", b"2", b"17")}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--never-read", type=int, default=0)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--report", type=float, default=0.0,
                        help="also print running totals every this many seconds")
    parser.add_argument("--until-stdin-closes", action="store_true",
                        help="flood until stdin ends; --seconds is then a cap")
    args = parser.parse_args(argv)
    result = flood(args.host, args.port, args.connections, args.seconds, args.never_read,
                   args.burst, args.report, until_stdin_closes=args.until_stdin_closes)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
