"""The link between the route writer and a worker (rocketpy.transport.workerlink, issue 33
part 2): messages as the project's remoting frames, a body past CHUNK in several frames put
back together, in any cut of the bytes; anything that is not a message of the link ends it."""
from twisted.internet.testing import StringTransport

from rocketpy.remoting import RemotingCommand
from rocketpy.transport import workerlink
from rocketpy.transport.workerlink import CHUNK, Link


class _Receiver:
    def __init__(self):
        self.messages = []
        self.reads = 0
        self.lost = []

    def message(self, kind, number, fields, body):
        self.messages.append((kind, number, {k: v for k, v in fields.items() if k != "n"},
                              bytes(body)))

    def read_done(self):
        self.reads += 1

    def link_lost(self, reason):
        self.lost.append(reason)


def _pair():
    receiver = _Receiver()
    sender, reader = Link(_Receiver()), Link(receiver)
    for link in (sender, reader):
        link.makeConnection(StringTransport())
    return sender, reader, receiver


def test_messages_arrive_whole_and_in_order_however_the_bytes_are_cut():
    sender, reader, receiver = _pair()
    big = bytes(range(256)) * (CHUNK // 256 * 2 + 3)   # three frames
    assert sender.send("record", 2 ** 40, big, kind="routes")
    assert sender.send("ack", 7)
    assert sender.send("event", 0, event="close", channel=12, addr="127.0.0.1:1")
    data = sender.transport.value()
    assert data.count(b"more") == 2
    for at in range(0, len(data), 1 << 20):   # a megabyte a read
        reader.dataReceived(data[at:at + (1 << 20)])
    assert receiver.messages == [
        ("record", 2 ** 40, {"kind": "routes"}, big), ("ack", 7, {}, b""),
        ("event", 0, {"event": "close", "channel": "12", "addr": "127.0.0.1:1"}, b"")]
    assert receiver.reads == len(range(0, len(data), 1 << 20)) and not receiver.lost


def test_a_frame_of_another_kind_ends_the_link():
    sender, reader, receiver = _pair()
    reader.dataReceived(RemotingCommand(105, ext_fields={"topic": "T"}).encode())
    assert receiver.messages == [] and reader.transport.disconnecting
    assert reader.send("ack", 1) is False


def test_a_message_past_the_bound_ends_the_link(monkeypatch):
    monkeypatch.setattr(workerlink, "MAX_MESSAGE", 2 * CHUNK)
    sender, reader, receiver = _pair()
    sender.send("image", 1, b"x" * (2 * CHUNK + 1))
    reader.dataReceived(sender.transport.value())
    assert receiver.messages == [] and reader.transport.disconnecting


def test_a_frame_that_does_not_decode_ends_the_link():
    sender, reader, receiver = _pair()
    header = b"{not json"
    reader.dataReceived((4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big")
                        + header)
    assert receiver.messages == [] and reader.transport.disconnecting
