"""End to end: the genuine self-contained captures replayed over real sockets against
``twistd -n rocketnamesrv``; every answer must be the one the Java NameServer wrote.

Each ``*-sc-*`` capture starts before a fresh Java NameServer, so a fresh server replays it whole:
4.9.8 captures with ``--profile=4.9``, 5.0.0 captures with ``--profile=5.0``, 5.3.3 captures with
``--profile=5.3`` (of ``rmq53-controller-sc-elect``, the NameServer port's connections), and the capture's
``bindAddress`` so GET_NAMESRV_CONFIG reports what Java reported (the NameServer's own file
paths are left out of the comparison, and its ``listenPort`` is the port this run listens on). Every connection of the capture is
a real connection here, opened when its first request is due and closed where the capture's
closed, so channel events (a broker's close unregistering it) happen as they did under Java.
Requests go in the order Java answered them (see ``tests/replay.py``). Nothing waits a moment:
a close is applied once the server logs that channel's ``channelInactive``; a request Java
never answered (oneway, or 4.9's unknown code) is followed on its connection by a read-only
probe, whose answer must be the next frame (the server reads a connection's requests in order:
the silent one was read, and nothing was written for it).
"""
import pytest

import replay
from rocketpy.remoting import RemotingCommand, decode_frame
from serverproc import RemotingClient, running_server, wait_until
from workersutil import WEB, settled

pytestmark = pytest.mark.network

#: the server as one process, and as a route writer and a worker (issue 33 part 2): the same
#: answers; with two, a close is applied once the server says every worker has applied it
PROCESSES = {1: (), 2: ("--workers=2", WEB)}

SC = replay.sc_captures()
#: the probe: GET_ALL_TOPIC_LIST_FROM_NAMESERVER (read-only, answered at once in every profile),
#: with an opaque no capture uses
PROBE_CODE, PROBE_OPAQUE = 206, 0x7FFFFF00


def _probe(client):
    """Nothing is answered before the probe on ``client``: the next frame is the probe's."""
    client.send_frame(RemotingCommand.request(PROBE_CODE, opaque=PROBE_OPAQUE, version=0).encode())
    frame = client.read_raw_frame()
    answer = decode_frame(frame)
    assert answer.opaque == PROBE_OPAQUE, f"an answer Java never wrote: {frame[:120]!r}"


def _closed(server, client, processes):
    """Close ``client`` and wait for the server to say it saw the close (and, with workers,
    that every worker applied what it caused)."""
    host, port = client.sock.getsockname()[:2]
    client.close()
    server.wait_for_log(rf"channelInactive, the channel\[{host}:{port}\]")
    if processes > 1:
        settled(server, closed=[f"{host}:{port}"])


def _replay_over_sockets(path, server, processes=1):
    clients = {}
    mismatches = []
    answered = exact = silent = 0
    for event in replay.replay_events(path):
        convo = event.conversation
        if event.kind == "close":
            client = clients.pop(convo.index, None)
            if client is not None:
                _closed(server, client, processes)
            continue
        client = clients.get(convo.index)
        if client is None:
            client = clients[convo.index] = RemotingClient(server.port)
        client.send_frame(event.request_frame)
        if event.expected is None:
            silent += 1
            _probe(client)
            continue
        actual_frame = client.read_raw_frame()
        actual = decode_frame(actual_frame)
        answered += 1
        exact += actual_frame == event.expected_frame
        diffs = replay.compare(event.request, event.expected, actual, listen_port=server.port)
        if diffs:
            mismatches.append((event, diffs))
    # nothing may be answered that Java left unanswered
    for client in clients.values():
        _probe(client)
        assert not client._buf, f"unexpected answer bytes {client._buf[:80]!r}"
        client.close()
    return answered, exact, silent, mismatches


def test_all_thirteen_self_contained_captures_are_here():
    assert len(SC) == 13


@pytest.mark.parametrize("processes", sorted(PROCESSES), ids=lambda n: f"{n}-process")
@pytest.mark.parametrize("path", SC, ids=[p.name for p in SC])
def test_capture_replays_over_real_sockets(path, processes):
    profile = replay.capture_profile(path)
    port = replay.namesrv_port(path)
    with running_server(f"--profile={profile}", "-D", f"listenPort={port}",
                        "-D", "bindAddress=127.0.0.1", "--logLevel=debug",
                        *PROCESSES[processes]) as server:
        answered, exact, silent, mismatches = _replay_over_sockets(path, server, processes)
    report = "\n".join(f"code {e.request.code} opaque {e.request.opaque}: {d}"
                       for e, d in mismatches[:10])
    assert answered > 10
    assert not mismatches, report
    config_answers = sum(1 for e in replay.replay_events(path)
                         if e.expected is not None and e.request.code == 319)
    assert exact >= answered - config_answers


#: Broker-side captures that also start from an empty NameServer and need no real waiting
#: (the expiry captures wait 120 s; the long runs span minutes), with the settings the Java
#: NameServer of the capture ran with.
BROKER_CAPTURES = {
    "rmq49-broker-kill9.pcap": (), "rmq49-broker-unregister.pcap": (),
    "rmq49-broker-register.pcap": (), "rmq49-broker-register-compressed.pcap": (),
    "rmq49-broker-register-master-slave.pcap": (), "rmq49-broker-register-noforce.pcap": (),
    "rmq49-broker-register-rocketmq-serialize.pcap": (),
    "rmq50-broker-kill9.pcap": (), "rmq50-broker-unregister.pcap": (),
    "rmq50-broker-register.pcap": (), "rmq50-broker-register-compressed.pcap": (),
    "rmq50-broker-register-master-slave.pcap": (), "rmq50-broker-register-noforce.pcap": (),
    "rmq50-broker-register-rocketmq-serialize.pcap": (),
    "rmq50-broker-register-actingmaster.pcap": ("-D", "supportActingMaster=true"),
    "rmq50-broker-register-actingmaster-newproto.pcap": ("-D", "supportActingMaster=true"),
    "rmq53-broker-register.pcap": (), "rmq53-broker-register-compressed.pcap": (),
    "rmq53-broker-register-master-slave.pcap": (), "rmq53-broker-register-noforce.pcap": (),
    "rmq53-broker-register-rocketmq-serialize.pcap": (),
}


@pytest.mark.parametrize("processes", sorted(PROCESSES), ids=lambda n: f"{n}-process")
@pytest.mark.parametrize("name", sorted(BROKER_CAPTURES))
def test_broker_capture_replays_over_real_sockets(name, processes):
    path = replay.PCAP_DIR / name
    profile = replay.capture_profile(path)
    port = replay.namesrv_port(path)
    with running_server(f"--profile={profile}", "-D", f"listenPort={port}",
                        "-D", "bindAddress=127.0.0.1", "--logLevel=debug",
                        *BROKER_CAPTURES[name], *PROCESSES[processes]) as server:
        answered, exact, silent, mismatches = _replay_over_sockets(path, server, processes)
    assert answered >= 2
    assert not mismatches, "\n".join(f"code {e.request.code}: {d}" for e, d in mismatches[:10])
    assert exact == answered


@pytest.mark.parametrize("name", ["rmq49-sc-clients.pcap", "rmq50-sc-clients.pcap",
                                  "rmq53-sc-clients.pcap"])
def test_killing_the_genuine_brokers_socket_drops_its_routes_at_once(name):
    """The genuine broker's REGISTER_BROKER, then its socket reset (kill -9): the routes are gone
    on the close event (one reactor turn), not after the 120 s expiry."""
    path = replay.PCAP_DIR / name
    registration = next(e for e in replay.replay_events(path)
                        if e.kind == "request" and e.request.code == 103)
    with running_server(f"--profile={replay.capture_profile(path)}") as server:
        broker = RemotingClient(server.port)
        broker.send_frame(registration.request_frame)
        assert broker.read_frame().code == 0
        watcher = RemotingClient(server.port)
        assert watcher.call(105, {"topic": "SELF_TEST_TOPIC"}).code == 0
        broker.reset()
        wait_until(lambda: watcher.call(105, {"topic": "SELF_TEST_TOPIC"}).code == 17,
                   "the killed broker's routes to go")
        # through the close event, submitted at once, not the expiry (the log says which)
        server.wait_for_log(r"the broker's channel destroyed.*broker_name='broker-a'.*"
                            r"submit result: True")
        assert not server.log_lines(r"The broker channel expired"), server.log_text()[-3000:]
        assert watcher.call(106).code == 0  # the cluster info no longer lists broker-a
        assert b"broker-a" not in (watcher.call(106).body or b"")
