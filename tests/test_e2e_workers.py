"""End to end: ``twistd -n rocketnamesrv --workers 2`` (issue 33 part 2), real processes on
127.0.0.1: a route writer and a worker accepting on one port.

What Java's read/write lock guarantees holds across processes: a route query on any process
after a broker's REGISTER_BROKER was answered sees the broker, every time. A worker killed with
SIGKILL under load takes only its connections (their brokers unregister) and comes back; no
answer on the writer's connections is lost or wrong meanwhile. The writer's death stops the
workers; SIGTERM stops every process, status 0. Which process holds a connection, and when the
workers have applied the writer's stream, is the server's own answer (``workersutil``)."""
import os
import signal
import threading
import zlib

import pytest

from rocketpy.remoting import RemotingCommand, decode_frame
from serverproc import PATIENCE, RemotingClient, running_server, wait_until
from workersutil import (WEB, api, client_on, gone, listening_ports, open_paths,
                         register_frame, settled, web_url, worker_of, worker_pids)

pytestmark = pytest.mark.network

TWO = ("--workers=2", WEB)
ROUNDS = 40


def _route_code(client, topic):
    return client.call(105, {"topic": topic}).code


@pytest.mark.parametrize("broker_on, client_on_", [(1, 0), (0, 1)],
                         ids=["registered on the worker, read on the writer",
                              "registered on the writer, read on the worker"])
def test_a_registration_is_seen_by_a_query_on_the_other_process_every_time(broker_on,
                                                                          client_on_):
    """Each round registers a topic no round used and, as soon as the answer is in, asks for
    it on a connection of the other process: an answer sent before that process applied the
    registration would be TOPIC_NOT_EXIST."""
    with running_server("--profile=5.3", *TWO) as server:
        broker = client_on(server, broker_on)
        reader = client_on(server, client_on_)
        topics = ["Base"]   # (5.x refuses a broker's first registration of a single topic)
        for round_ in range(ROUNDS):
            topics.append(f"Fresh-{round_}")
            broker.send_frame(register_frame("broker-a", "127.0.0.1:10911", topics,
                                             opaque=round_ + 1))
            answer = broker.read_frame()
            assert (answer.code, answer.opaque) == (0, round_ + 1), answer
            assert _route_code(reader, topics[-1]) == 0, f"round {round_}"
        assert worker_of(server, broker) == broker_on and worker_of(server, reader) == client_on_


@pytest.mark.parametrize("broker_on, client_on_", [(1, 0), (0, 1)],
                         ids=["unregistered on the worker, read on the writer",
                              "unregistered on the writer, read on the worker"])
def test_an_unregistration_is_seen_by_a_query_on_the_other_process_every_time(broker_on,
                                                                            client_on_):
    """5.x answers UNREGISTER_BROKER once it is queued (Java's BatchUnregistrationService)
    and applies it on the next turn: with workers the answer also waits for that turn and for
    the replicas, so the broker's topic is gone from the other process's answer, every round."""
    with running_server("--profile=5.3", *TWO) as server:
        broker = client_on(server, broker_on)
        reader = client_on(server, client_on_)
        for round_ in range(ROUNDS):
            topic = f"Leaving-{round_}"
            broker.send_frame(register_frame("broker-a", "127.0.0.1:10911", ["Base", topic],
                                             opaque=2 * round_ + 1))
            assert broker.read_frame().code == 0
            assert _route_code(reader, topic) == 0, f"round {round_}"
            answer = broker.call(104, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                       "clusterName": "C", "brokerId": "0"})
            assert answer.code == 0, answer
            assert _route_code(reader, topic) == 17, f"round {round_}"


def test_kv_and_config_written_on_one_process_are_read_on_the_other():
    with running_server("--profile=5.3", *TWO) as server:
        writer_side = client_on(server, 0)
        worker_side = client_on(server, 1)
        for round_ in range(ROUNDS // 2):   # each answered only once the other applied it
            assert worker_side.call(100, {"namespace": "NS", "key": "k",
                                          "value": f"w{round_}"}).code == 0
            answer = writer_side.call(101, {"namespace": "NS", "key": "k"})
            assert (answer.code, answer.ext_fields.get("value")) == (0, f"w{round_}")
            assert writer_side.call(100, {"namespace": "NS", "key": "k",
                                          "value": f"v{round_}"}).code == 0
            answer = worker_side.call(101, {"namespace": "NS", "key": "k"})
            assert (answer.code, answer.ext_fields.get("value")) == (0, f"v{round_}")
        assert worker_side.call(102, {"namespace": "NS", "key": "k"}).code == 0
        assert writer_side.call(101, {"namespace": "NS", "key": "k"}).code == 22
        assert server.kv_table() == {"NS": {}}   # the writer's file
        update = worker_side.call(318, body=b"orderMessageEnable=true\n")
        assert update.code == 0, update.remark
        assert b"orderMessageEnable=true" in writer_side.call(319).body
        assert b"orderMessageEnable=true" in worker_side.call(319).body


def test_a_closed_connection_on_a_worker_unregisters_its_broker_everywhere():
    with running_server("--profile=5.3", *TWO) as server:
        broker = client_on(server, 1)
        reader = client_on(server, 0)
        broker.send_frame(register_frame("broker-a", "127.0.0.1:10911", ["TA", "TA2"]))
        assert broker.read_frame().code == 0
        assert _route_code(reader, "TA") == 0
        broker.reset()
        server.wait_for_log(r"the broker's channel destroyed.*broker_name='broker-a'.*"
                            r"submit result: True")
        settled(server)
        assert _route_code(reader, "TA") == 17
        assert _route_code(client_on(server, 1), "TA") == 17


def test_an_idle_connection_on_a_worker_is_closed_there_and_its_broker_unregistered():
    """The worker's idle close (its own transport's) is a channel event of the writer's: the
    broker's routes are gone from every process."""
    with running_server("--profile=5.3", "-D", "serverChannelMaxIdleTimeSeconds=1",
                        *TWO) as server:
        broker = client_on(server, 1)
        broker.send_frame(register_frame("broker-a", "127.0.0.1:10911", ["TA", "TA2"]))
        assert broker.read_frame().code == 0
        assert broker.is_closed_by_server(timeout=PATIENCE)
        server.wait_for_log(r"worker 1: .*IDLE exception")
        server.wait_for_log(r"the broker's channel destroyed.*broker_name='broker-a'.*"
                            r"submit result: True")
        settled(server)
        assert _route_code(client_on(server, 0), "TA") == 17
        assert _route_code(client_on(server, 1), "TA") == 17


def test_the_controller_the_web_endpoint_and_the_files_stay_with_the_writer(tmp_path):
    """Only the route writer listens on the controller's and the web endpoint's ports and
    holds the server's files; a worker holds the one remoting port it was handed. A KV write on
    the worker's connection is in the writer's file."""
    import socket as socket_
    with socket_.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        controller_port = probe.getsockname()[1]
    store = tmp_path / "controller"
    with running_server("--profile=5.3", "-D", "enableControllerInNamesrv=true",
                        "-D", "controllerDLegerGroup=group1",
                        "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
                        "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={store}",
                        "-D", "bindAddress=127.0.0.1", *TWO) as server:
        server.wait_for_log(r"The ControllerManager boot success\.")
        web_port = int(web_url(server).rsplit(":", 1)[1])
        (pid,) = worker_pids(server)
        assert listening_ports(pid) == {server.port}
        assert {server.port, controller_port, web_port} <= listening_ports(server.proc.pid)
        worker_side = client_on(server, 1)
        assert worker_side.call(100, {"namespace": "NS", "key": "k", "value": "v"}).code == 0
        assert server.kv_table() == {"NS": {"k": "v"}}
        assert not [path for path in open_paths(pid)
                    if path.startswith((str(server.home), str(store)))]
        assert RemotingClient(controller_port).call(1012, {
            "clusterName": "C", "brokerName": "broker-a"}).code == 0   # GET_NEXT_BROKER_ID


def test_an_expired_broker_on_a_worker_has_its_connection_closed_there():
    """The writer's liveness scan closes an expired broker's channel on the worker holding it."""
    with running_server("--profile=5.3", "-D", "scanNotActiveBrokerInterval=200", *TWO) as server:
        broker = client_on(server, 1)
        broker.send_frame(register_frame("broker-a", "127.0.0.1:10911", ["TA", "TA2"],
                                         heartbeatTimeoutMillis="1000"))
        assert broker.read_frame().code == 0
        assert broker.is_closed_by_server()
        server.wait_for_log(r"The broker channel expired")
        settled(server)
        assert _route_code(client_on(server, 0), "TA") == 17


def test_broker_identity_binding_holds_across_processes():
    with running_server("--profile=5.3", "-D", "brokerIdentityBinding=true", *TWO) as server:
        genuine = client_on(server, 1)
        genuine.send_frame(register_frame("broker-a", "127.0.0.1:10911", ["TA", "TA2"]))
        assert genuine.read_frame().code == 0
        impostor = client_on(server, 0, source="127.0.0.2")
        impostor.send_frame(register_frame("broker-a", "127.0.0.2:10911", ["TA", "TA2"]))
        refused = impostor.read_frame()
        assert refused.code == 16 and "is held by 127.0.0.1" in (refused.remark or ""), refused
        assert b"127.0.0.2" not in client_on(server, 1).call(105, {"topic": "TA"}).body


def test_metrics_and_the_status_page_show_every_worker():
    with running_server("--profile=5.3", *TWO) as server:
        on_worker = client_on(server, 1)
        for n in range(3):   # (three topics: an answer the cache repeats is counted apart)
            assert _route_code(on_worker, f"Nope-{n}") == 17

        def reported():
            text = _metrics(server)
            return ('rocketpy_requests_total{request_code="GET_ROUTEINFO_BY_TOPIC",'
                    'response_code="TOPIC_NOT_EXIST",worker="1"} 3.0' in text) and text
        text = wait_until(reported, lambda: "worker 1's three lookups on /metrics:\n"
                          + _metrics(server)[-3000:])
        assert 'rocketpy_worker_info{pid=' in text and 'worker="0"' in text
        page = _get(server, "/").decode()
        assert 'id="workers"' in page and 'data-worker="1"' in page
        pids = worker_pids(server)
        assert len(pids) == 1 and str(pids[0]) in page


def _get(server, path):
    import urllib.request
    from workersutil import web_url
    with urllib.request.urlopen(f"{web_url(server)}{path}", timeout=PATIENCE) as answer:
        return answer.read()


def _metrics(server):
    return _get(server, "/metrics").decode()


class _Load(threading.Thread):
    """Route queries back to back on one connection, each answer checked (its opaque, its
    code); stops at the first error (the connection dropped) or when told."""

    def __init__(self, client, topic):
        super().__init__(daemon=True)
        self.client, self.topic = client, topic
        self.answered = 0
        self.wrong = []
        self.error = None
        self.halt = threading.Event()

    def run(self):
        opaque = 0
        try:
            while not self.halt.is_set():
                opaque += 1
                self.client.send_frame(RemotingCommand.request(
                    105, {"topic": self.topic}, opaque=opaque, version=479).encode())
                answer = decode_frame(self.client.read_raw_frame())
                if (answer.opaque, answer.code) != (opaque, 0):
                    self.wrong.append((opaque, answer.opaque, answer.code))
                self.answered += 1
        except (OSError, ConnectionError) as exc:
            self.error = exc


def test_sigkill_of_a_worker_under_load_drops_only_its_connections_and_it_comes_back():
    with running_server("--profile=5.3", *TWO) as server:
        steady = client_on(server, 0)
        steady.send_frame(register_frame("broker-a", "127.0.0.1:10911", ["TA", "TA2"]))
        assert steady.read_frame().code == 0
        doomed_broker = client_on(server, 1)
        doomed_broker.send_frame(register_frame("broker-b", "127.0.0.1:10912", ["TB", "TB2"]))
        assert doomed_broker.read_frame().code == 0
        loads = {0: [_Load(client_on(server, 0), "TA") for _ in range(3)],
                 1: [_Load(client_on(server, 1), "TA") for _ in range(3)]}
        for load in loads[0] + loads[1]:
            load.start()
        wait_until(lambda: all(load.answered >= 20 for load in loads[0] + loads[1]),
                   "every connection answered under load")
        (pid,) = worker_pids(server)
        os.kill(pid, signal.SIGKILL)
        for load in loads[1]:   # its connections drop...
            load.join(PATIENCE)
            assert load.error is not None and not load.wrong
        assert doomed_broker.is_closed_by_server()
        server.wait_for_log(r"worker 1 \(pid %d\) is gone" % pid)

        def back():
            state = api(server, "/api/workers")["workers"][1]
            return state["state"] == "serving" and state["pid"] != pid
        wait_until(back, lambda: f"worker 1 started again: {api(server, '/api/workers')}")
        settled(server)
        after = {id(load): load.answered for load in loads[0]}
        fresh = client_on(server, 1)   # ...it serves again, without broker-b's routes
        assert (_route_code(fresh, "TA"), _route_code(fresh, "TB")) == (0, 17)
        wait_until(lambda: all(load.answered > after[id(load)] for load in loads[0]),
                   "the writer's connections answering after the restart")
        for load in loads[0]:   # ...and the writer's connections never missed an answer
            load.halt.set()
            load.join(PATIENCE)
            assert load.error is None and not load.wrong and load.answered > 20


def test_the_writers_death_stops_the_workers():
    with running_server("--profile=5.3", *TWO) as server:
        pids = worker_pids(server)
        assert pids and not any(gone(pid) for pid in pids)
        server.proc.kill()
        server.proc.wait(PATIENCE)
        wait_until(lambda: all(gone(pid) for pid in pids), f"workers {pids} to exit")


def test_sigterm_stops_every_process_gracefully():
    with running_server("--profile=5.3", "--workers=3", WEB) as server:
        pids = worker_pids(server)
        assert len(pids) == 2
        assert server.stop() == 0
        wait_until(lambda: all(gone(pid) for pid in pids), f"workers {pids} to exit")
        assert server.log_lines(r"worker \d: Received SIGTERM, shutting down")


def test_a_worker_count_that_cannot_be_is_one_line_and_status_1():
    import subprocess
    import sys
    from serverproc import server_command
    cases = [((f"--workers={value}",), f"--workers={value!r}: ") for value in ("0", "65", "two")]
    cases += [(("-D", f"serverWorkerProcesses={value}"), f"serverWorkerProcesses={value!r} in -D: ")
              for value in ("0", "x")]
    for args, what in cases:
        proc = subprocess.run(server_command(*args), capture_output=True,
                              text=True, timeout=PATIENCE, stdin=subprocess.DEVNULL,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines()[-1] == (
            f"rocketnamesrv: {what}expected a number of processes 1..64"), proc.stderr


def test_the_key_is_known_and_the_option_overrides_it():
    from rocketpy.service.propcheck import check_properties
    from rocketpy.service.tap import Options
    assert check_properties({"serverWorkerProcesses": "3"}) == []
    options = Options()
    options.parseOptions(["--listen=tcp:0", "-D", "serverWorkerProcesses=3", "--workers=2"])
    assert options["worker_processes"] == 2
    options = Options()
    options.parseOptions(["--listen=tcp:0", "-D", "serverWorkerProcesses=3"])
    assert options["worker_processes"] == 3
