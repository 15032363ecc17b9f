"""The controller group's etcd client: the watch's line buffer costs what passes through it,
not its square."""
import json
import time

from rocketpy.service import etcd as etcd_module


class _Transport:
    def __init__(self):
        self.stopped = False

    def stopProducing(self):
        self.stopped = True


def _feed(size, chunk=1024):
    messages = []
    lines = etcd_module._Lines(messages.append, None)
    lines.transport = _Transport()
    line = json.dumps({"result": {"events": [], "pad": "x" * (size - 40)}}).encode() + b"\n"
    started = time.process_time()
    for offset in range(0, len(line), chunk):
        lines.dataReceived(line[offset:offset + chunk])
    spent = time.process_time() - started
    assert len(messages) == 1 and len(messages[0]["result"]["pad"]) == size - 40
    return spent


def test_watch_lines_cost_their_length_not_length_times_chunks():
    messages = []
    lines = etcd_module._Lines(messages.append, None)
    lines.transport = _Transport()
    for piece in (b'{"a": 1}\n{"b"', b': 2}\n\n{"c": 3', b'}\n{"d": '):
        lines.dataReceived(piece)
    assert messages == [{"a": 1}, {"b": 2}, {"c": 3}] and not lines.transport.stopped
    # one 1 MiB and one 4 MiB line in 1 KiB chunks: rebuilding the buffer per chunk makes the
    # second cost 16 times the first; kept linear it costs about 4 times (best of 3 each)
    small = min(_feed(1 << 20) for _ in range(3))
    large = min(_feed(4 << 20) for _ in range(3))
    assert large < 8 * small, (small, large)
