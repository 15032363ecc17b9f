"""Transport: the decode pool is fair between peers and stops at once (issue 20 items 3 and 4).

The pool serves per-peer queues in turn, one job at a time, and accepts at most
``max_per_peer`` jobs of one peer host; ``stop()`` abandons what waits and cancels what runs.
A registration that waits for the pool (or is refused SYSTEM_BUSY) still keeps its broker
alive, but only the broker its own channel registered. Against the real server: a peer's bombs
neither starve another peer's registration nor expire a live broker, and SIGTERM stops a server
whose pool is full.
"""
import re
import threading
import time
from pathlib import Path

import pytest
from twisted.trial.unittest import SynchronousTestCase

from brokerbody import register_body
from fuzzharness import odd_line_bomb, topic_line_bomb
from rocketpy.remoting import RemotingCommand, bodies
from rocketpy.remoting.budget import DecodeBudget
from rocketpy.remoting.codes import OVERLOAD_REMARK, ResponseCode
from rocketpy.remoting.errors import DecodeCancelled
from rocketpy.transport.offload import DecodePool
from serverproc import PATIENCE, wait_until
from test_transport_offload import ThreadReactor


class PoolTests(SynchronousTestCase):
    def _pool(self, **kwargs):
        reactor = ThreadReactor()
        pool = DecodePool(reactor, **kwargs)
        pool.start()
        self.addCleanup(pool.stop)
        return reactor, pool

    def test_one_peer_holds_at_most_its_share(self):
        reactor, pool = self._pool(max_pending=16, max_per_peer=4)
        gate = threading.Event()
        accepted = [pool.submit(lambda: gate.wait(PATIENCE), "10.0.0.2") for _ in range(6)]
        self.assertEqual([d is not None for d in accepted], [True] * 4 + [False] * 2)
        self.assertIsNotNone(pool.submit(lambda: "other", "10.0.0.3"))
        self.assertEqual((pool.pending, pool.refused, pool.pending_by_peer),
                         (5, 2, {"10.0.0.2": 4, "10.0.0.3": 1}))
        gate.set()
        for _ in range(5):
            reactor.run_one()
        self.assertEqual((pool.pending, pool.done, pool.pending_by_peer), (0, 5, {}))

    def test_peers_are_served_in_turn(self):
        reactor, pool = self._pool()
        gate = threading.Event()
        order = []

        def job(name):
            def work():
                gate.wait(PATIENCE)
                return name
            return work

        for name in ("a1", "a2", "a3"):
            pool.submit(job(name), "10.0.0.2").addCallback(order.append)
        pool.submit(job("b1"), "10.0.0.3").addCallback(order.append)
        pool.submit(job("c1"), "10.0.0.4").addCallback(order.append)
        gate.set()
        for _ in range(5):
            reactor.run_one()
        # a1 was running when b1 and c1 came: each other peer goes before a's second job
        self.assertEqual(order, ["a1", "b1", "c1", "a2", "a3"])

    def test_stop_abandons_the_queue_and_cancels_the_running_decode(self):
        reactor, pool = self._pool(stop_wait=30)
        budget = DecodeBudget(0)
        started = threading.Event()
        ran = []

        def endless():
            started.set()
            while True:       # a decode: a budget check per chunk
                budget.spend(1 << 16, "chunk")

        results = []
        pool.submit(endless, "10.0.0.2", budget.cancel).addErrback(results.append)
        for peer in ("10.0.0.2", "10.0.0.3"):
            pool.submit(lambda: ran.append(1), peer)
        self.assertTrue(started.wait(PATIENCE))
        pool.stop()
        self.assertEqual((pool.abandoned, ran), (2, []))
        reactor.run_one()     # the cancelled decode's end, handed back
        self.assertTrue(results[0].check(DecodeCancelled))


# ------------------------------------------------------------------ the real server

def _frame(body, opaque, broker, addr, compressed=True, timeout_ms=None):
    fields = {"brokerName": broker, "brokerAddr": addr, "clusterName": "C", "brokerId": "0",
              "haServerAddr": addr, "compressed": str(compressed).lower(),
              "bodyCrc32": str(bodies.body_crc32(body))}
    if timeout_ms is not None:
        fields["heartbeatTimeoutMillis"] = str(timeout_ms)
    return RemotingCommand.request(103, fields, body, opaque=opaque, version=479).encode()


#: compressed, past the 128 bytes decoded on the spot: these go to the pool
TOPICS_A = [f"TopicA{i}" for i in range(100)]
TOPICS_V = [f"TopicV{i}" for i in range(100)]


def _compressed(topics, counter):
    return bodies.RegisterBrokerBody.from_json(register_body(topics, counter)).encode(compress=True)


#: without the decode budget and the topic bound, 3 million topic lines (160 KB) keep the decode
#: thread busy a few seconds each: the slow, accepted work of a hostile peer
_UNBOUNDED = ("-D", "registerBrokerDecodeBudget=0", "-D", "registerBrokerMaxTopics=0")


def _bombers(port, hosts, per_host, body=None):
    from serverproc import RemotingClient
    bomb = _frame(body or topic_line_bomb(3_000_000), 9, "bomb", "10.9.9.9:1")
    clients = []
    for host in hosts:
        for _ in range(per_host):
            client = RemotingClient(port, source=host)
            client.send_frame(bomb)
            clients.append(client)
    return clients


def _answered(clients):
    """The answers the clients have received so far (read without waiting)."""
    got = []
    for client in clients:
        client.sock.settimeout(0.05)
        try:
            got.append(client.read_frame())
        except (TimeoutError, BlockingIOError):
            pass
        finally:
            client.sock.settimeout(PATIENCE)
    return got


@pytest.mark.network
def test_one_peers_bombs_do_not_starve_another_peers_registration():
    """8 slow bodies from 127.0.0.2 were all accepted and another host's registration waited
    behind all 8; now 4 are accepted, 4 refused SYSTEM_BUSY, and the registration is served
    after at most the one running."""
    from serverproc import RemotingClient, running_server
    with running_server(*_UNBOUNDED) as server:
        bombers = _bombers(server.port, ["127.0.0.2"], 8)
        # the server has read all 8 frames once it refused 4 (no sleep: a busy machine reads late)
        busy = []

        def refused_four():
            busy.extend(a for a in _answered(bombers) if a.code == ResponseCode.SYSTEM_BUSY)
            return len(busy) >= 4
        wait_until(refused_four, lambda: f"4 bombs refused ({len(busy)} so far)", step=0)
        victim = RemotingClient(server.port)
        victim.send_frame(_frame(_compressed(TOPICS_V, 1), 1, "broker-v", "127.0.0.1:10911"))
        answer = victim.read_frame()
        assert answer.code == ResponseCode.SUCCESS, answer
        busy += [a for a in _answered(bombers) if a.code == ResponseCode.SYSTEM_BUSY]
        assert len(busy) == 4 and all(a.remark == OVERLOAD_REMARK for a in busy)
        decoded = [a for a in _answered(bombers) if a.code != ResponseCode.SYSTEM_BUSY]
        assert len(decoded) < 3, f"{len(decoded)} bombs were decoded before the registration"
        for client in bombers + [victim]:
            client.close()


@pytest.mark.network
def test_a_live_brokers_registration_keeps_it_alive_while_the_pool_is_full():
    """16 bombs from 4 hosts (4 s of decoding each) kept the pool full: a 5.x broker's periodic
    registrations were answered SYSTEM_BUSY or queued behind them, and it expired (its topics
    gone, its connection closed). Now each bomb stops at its budget, a refused or waiting
    registration refreshes its own broker from the header, and a waiting one is served after at
    most one decode of each other peer."""
    from serverproc import RemotingClient, running_server
    bomb = odd_line_bomb(1_000_000)
    with running_server("-D", "registerBrokerMaxTopics=0",
                        "-D", "scanNotActiveBrokerInterval=200") as server:
        broker = RemotingClient(server.port)
        broker.send_frame(_frame(register_body(TOPICS_A, 1), 1, "broker-a", "127.0.0.1:10911",
                                 False, 12000))
        assert broker.read_frame().code == ResponseCode.SUCCESS
        bombers = _bombers(server.port, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], 4,
                           bomb)
        time.sleep(0.2)
        codes = []
        for counter in range(2, 30):     # every 0.5 s for 14 s, past the 12 s timeout
            broker.send_frame(_frame(_compressed(TOPICS_A, counter), counter, "broker-a",
                                     "127.0.0.1:10911", True, 12000))
            codes.append(broker.read_frame().code)
            time.sleep(0.5)
        assert set(codes) <= {ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY}, codes
        route = RemotingClient(server.port)
        assert route.call(105, {"topic": "TopicA7"}).code == ResponseCode.SUCCESS
        for client in bombers + [broker, route]:
            client.close()


class OwnedRefreshTests(SynchronousTestCase):
    """Only the channel that registered a broker keeps it alive before its body is decoded."""

    def test_the_owning_channel_refreshes_and_another_does_not(self):
        from rocketpy.namesrv import Channel
        from rocketpy.namesrv.pending import Pending
        from test_fuzz_processor import _processor
        tmp = Path(self.mktemp())
        tmp.mkdir()
        processor = _processor(tmp)
        own, other = Channel(1, "127.0.0.1:40001"), Channel(2, "127.0.0.2:40002")
        rim = processor.route_info_manager

        def register(channel, counter, now_ms, compressed):
            body = (_compressed(TOPICS_A, counter) if compressed
                    else register_body(TOPICS_A, counter))
            request = RemotingCommand.request(
                103, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                      "clusterName": "C", "brokerId": "0", "haServerAddr": "127.0.0.1:10912",
                      "compressed": str(compressed).lower(),
                      "bodyCrc32": str(bodies.body_crc32(body))}, body, opaque=counter,
                version=479)
            return processor.process(request, channel, now_ms, offload=True)

        register(own, 1, 1_000, False).run()
        live = lambda: rim.broker_live_info("C", "127.0.0.1:10911")  # noqa: E731
        self.assertEqual(live().last_update_ms, 1_000)
        self.assertIsInstance(register(other, 2, 50_000, True), Pending)   # not decoded yet
        self.assertEqual(live().last_update_ms, 1_000)
        self.assertIsInstance(register(own, 3, 90_000, True), Pending)
        self.assertEqual(live().last_update_ms, 90_000)


@pytest.mark.network
def test_sigterm_stops_a_server_whose_decode_pool_is_full():
    """16 slow bodies queued kept a SIGTERMed server running for minutes; now the queue is
    abandoned and the running decode cancelled."""
    from serverproc import running_server
    with running_server(*_UNBOUNDED) as server:
        bombers = _bombers(server.port, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"], 4)
        # one more from a host whose share is full: its refusal says the server has read that
        # host's frames and holds their decodes (no sleep: a busy machine reads late)
        bombers += _bombers(server.port, ["127.0.0.2"], 1)
        same_host = bombers[:4] + bombers[-1:]
        wait_until(lambda: any(a.code == ResponseCode.SYSTEM_BUSY for a in _answered(same_host)),
                   "one of 127.0.0.2's five bombs refused", step=0)
        assert server.stop() == 0, server.log_text()[-2000:]
        stopped = [re.search(r"decode pool stopped: (\d+) queued decodes abandoned, (\d+) "
                             r"cancelled", line) for line in server.lines]
        stopped = [m for m in stopped if m]
        assert stopped and int(stopped[0][1]) + int(stopped[0][2]) >= 1, \
            server.log_text()[-2000:]
        for client in bombers:
            client.close()
