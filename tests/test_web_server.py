"""The web endpoint of a real ``twistd rocketnamesrv --web`` subprocess, over real sockets on
127.0.0.1: brokers register over the remoting port, and the status page, the JSON API and
``/metrics`` (prometheus_client's Twisted resource, through the reactor's thread pool) list
exactly what was registered. Read-only, and the ``adminAllowNetworks`` allow-list applies.

The helpers here (:func:`web_server`, :func:`register`, :func:`populate`) are reused by the
browser test.
"""
import contextlib
import json
import os
import re
import socket
import urllib.error
import urllib.request
import zlib
from html.parser import HTMLParser

import pytest
from prometheus_client.parser import text_string_to_metric_families

from serverproc import PATIENCE, RemotingClient, running_server, wait_until
from brokerbody import register_body

pytestmark = pytest.mark.network

WEB_LINE = r"rocketpy web endpoint on (http://\S+/)"


@contextlib.contextmanager
def web_server(*args, web="tcp:0:interface=127.0.0.1", env=None):
    """A running server with ``--web``; yields ``(server, base_url)``."""
    with running_server("--web", web, *args, env=env) as server:
        line = server.wait_for_log(WEB_LINE)
        yield server, re.search(WEB_LINE, line).group(1)


def register(client, cluster, broker, broker_id, addr, topics, *, counter=1, version=479,
             queues=4, perm=6, acting_master=False):
    """REGISTER_BROKER as a 5.x broker sends it (JSON body, CRC); the answer must be SUCCESS."""
    body = register_body(topics, counter, perm, queues, timestamp=1700000000000 + counter)
    fields = {"brokerName": broker, "brokerAddr": addr, "clusterName": cluster,
              "haServerAddr": addr.rsplit(":", 1)[0] + ":10912", "brokerId": str(broker_id),
              "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
              "heartbeatTimeoutMillis": "30000",
              "enableActingMaster": "true" if acting_master else "false"}
    answer = client.call(103, fields, body, version=version)
    assert answer.code == 0, answer
    return answer


#: clusters -> broker groups -> [(id, address)]; topics are spread over the groups
LAYOUT = {
    "ClusterA": {"broker-a": [(0, "127.0.0.1:10911"), (1, "127.0.0.1:10921")],
                 "broker-b": [(0, "127.0.0.1:10931")]},
    "ClusterB": {"broker-c": [(0, "127.0.0.1:10941")]},
}


def topic_names(n):
    kinds = ("Orders", "Payments", "Inventory", "Shipping", "Audit")
    return [f"{kinds[i % len(kinds)]}Topic{i:04d}" for i in range(n)]


def populate(port, n_topics=12):
    """Register :data:`LAYOUT` with ``n_topics`` topics (each group serves every other topic
    plus its own); returns ``(clients, expected)`` -- keep the clients open: a closed broker
    connection unregisters its broker."""
    names = topic_names(n_topics)
    clients = []
    expected = {"brokers": set(), "topics": {}}
    groups = [(c, g, members) for c, gs in LAYOUT.items() for g, members in gs.items()]
    for gi, (cluster, group, members) in enumerate(groups):
        served = [t for i, t in enumerate(names) if i % len(groups) == gi or i % 2 == 0]
        for broker_id, addr in members:
            client = RemotingClient(port)
            clients.append(client)
            register(client, cluster, group, broker_id, addr, served)
            expected["brokers"].add((cluster, group, broker_id, addr))
        for t in served:
            expected["topics"].setdefault(t, set()).add(group)
    return clients, expected


def get(url, accept=None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=PATIENCE) as response:
        return response.status, dict(response.headers), response.read()


def get_json(url):
    status, _, body = get(url)
    assert status == 200
    return json.loads(body)


class _Rows(HTMLParser):
    """Broker rows (data-addr) and topic names (first cell of a topic row) of the page."""

    def __init__(self):
        super().__init__()
        self.broker_addrs = []
        self.topics = []
        self._in_topic_row = False
        self._cell = 0
        self._text = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "broker" in (attrs.get("class") or "").split():
            self.broker_addrs.append(attrs.get("data-addr"))
        if tag == "tr":
            self._in_topic_row = "topic" in (attrs.get("class") or "").split()
            self._cell = 0
        if tag == "td" and self._in_topic_row:
            self._cell += 1
            if self._cell == 1:
                self._text = []

    def handle_endtag(self, tag):
        if tag == "td" and self._text is not None:
            self.topics.append("".join(self._text).strip())
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def page_rows(html):
    parser = _Rows()
    parser.feed(html.decode("utf-8"))
    return parser


def test_status_page_and_api_list_exactly_what_registered():
    with web_server() as (server, url):
        clients, expected = populate(server.port, n_topics=12)
        try:
            brokers = get_json(url + "api/brokers")["brokers"]
            assert {(b["cluster"], b["brokerName"], b["brokerId"], b["address"]) for b in brokers} \
                == expected["brokers"]
            for b in brokers:
                assert b["live"] and b["connection"] == "open"
                assert b["version"] == "V5_3_3" and b["language"] == "JAVA"
                assert b["heartbeatTimeoutSeconds"] == 30.0
                assert 0 <= b["secondsSinceHeartbeat"] < 30
                assert b["dataVersion"]["counter"] == 1
            clusters = get_json(url + "api/clusters")["clusters"]
            assert [c["cluster"] for c in clusters] == ["ClusterA", "ClusterB"]
            assert [g["brokerName"] for g in clusters[0]["brokerGroups"]] == ["broker-a", "broker-b"]
            counts = {g["brokerName"]: g["topicCount"] for c in clusters for g in c["brokerGroups"]}
            for group in counts:
                assert counts[group] == sum(group in gs for gs in expected["topics"].values())

            topics = get_json(url + "api/topics?limit=5000")
            assert topics["total"] == topics["matched"] == len(expected["topics"])
            assert {t["topic"]: {q["brokerName"] for q in t["queueDatas"]} for t in topics["topics"]} \
                == expected["topics"]
            one = get_json(url + "api/topics/" + topic_names(12)[1])
            assert {bd["brokerName"] for bd in one["brokerDatas"]} == expected["topics"][topic_names(12)[1]]
            assert one["queueDatas"][0]["permText"] == "RW-"
            with pytest.raises(urllib.error.HTTPError) as missing:
                get(url + "api/topics/NoSuchTopic")
            assert missing.value.code == 404

            status, headers, html = get(url)
            assert status == 200 and headers["Content-Type"].startswith("text/html")
            assert "script-src 'sha256-" in headers["Content-Security-Policy"]
            rows = page_rows(html)
            assert sorted(rows.broker_addrs) == sorted(b[3] for b in expected["brokers"])
            assert sorted(rows.topics) == sorted(expected["topics"])
            assert b"http://" not in html and b"https://" not in html   # nothing fetched from outside

            # the filter, server side: by topic name and by broker name
            rows = page_rows(get(url + "?q=payments")[2])
            assert rows.topics == sorted(t for t in expected["topics"] if "payments" in t.lower())
            rows = page_rows(get(url + "?q=broker-c")[2])
            assert rows.topics == sorted(t for t, gs in expected["topics"].items() if "broker-c" in gs)
        finally:
            for client in clients:
                client.close()


def test_metrics_over_http_follow_the_registrations():
    with web_server() as (server, url):
        def scrape():
            status, headers, body = get(url + "metrics")
            assert status == 200 and headers["Content-Type"].startswith("text/plain")
            return {(s.name, tuple(sorted(s.labels.items()))): s.value
                    for f in text_string_to_metric_families(body.decode()) for s in f.samples}

        before = scrape()
        assert before[("rocketpy_brokers", ())] == 0
        assert before[("rocketpy_broker_registrations_total", ())] == 0
        clients, expected = populate(server.port, n_topics=12)
        try:
            after = scrape()
            assert after[("rocketpy_brokers", ())] == len(expected["brokers"])
            assert after[("rocketpy_broker_groups", ())] == 3
            assert after[("rocketpy_clusters", ())] == 2
            assert after[("rocketpy_topics", ())] == len(expected["topics"])
            assert after[("rocketpy_open_connections", ())] == len(clients)
            assert after[("rocketpy_broker_registrations_total", ())] == len(expected["brokers"])
            key = ("rocketpy_requests_total",
                   (("request_code", "REGISTER_BROKER"), ("response_code", "SUCCESS")))
            assert after[key] == len(expected["brokers"])
            assert after[("rocketpy_request_duration_seconds_count",
                          (("request_code", "REGISTER_BROKER"),))] == len(expected["brokers"])
            assert after[("rocketpy_received_bytes_total", ())] > before[("rocketpy_received_bytes_total", ())]
            assert ("process_resident_memory_bytes", ()) in after

            # OpenMetrics on request, gzip too: the library's resource negotiates
            status, headers, body = get(url + "metrics", accept="application/openmetrics-text")
            assert headers["Content-Type"].startswith("application/openmetrics-text")
            assert body.rstrip().endswith(b"# EOF")

            # a broker's connection closes: a channel-caused unregistration, the gauges follow
            clients.pop().close()
            server.wait_for_log(r"the broker's channel destroyed")
            final = scrape()
            assert final[("rocketpy_channel_unregistrations_total", ())] == 1
            assert final[("rocketpy_brokers", ())] == len(expected["brokers"]) - 1
        finally:
            for client in clients:
                client.close()


def test_read_only_and_unknown_paths():
    with web_server() as (server, url):
        for method in ("POST", "PUT", "DELETE"):
            request = urllib.request.Request(url + "api/kv", data=b"{}", method=method)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=PATIENCE)
            assert refused.value.code == 405
            assert refused.value.headers["Allow"] == "GET, HEAD"
        with pytest.raises(urllib.error.HTTPError) as missing:
            get(url + "no/such/page")
        assert missing.value.code == 404
        index = get_json(url + "api/")
        assert "/api/topics" in index["endpoints"]


def test_allow_list_applies_to_the_web_endpoint():
    # 127.0.0.1 is not in the list: the page, the API and the metrics are all refused
    with web_server("-D", "adminAllowNetworks=10.0.0.0/8") as (server, url):
        for path in ("", "api/summary", "metrics"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                get(url + path)
            assert refused.value.code == 403
        server.wait_for_log(r"web: refusing 127\.0\.0\.1: not in adminAllowNetworks")
    with web_server("-D", "adminAllowNetworks=10.0.0.0/8,127.0.0.0/8") as (server, url):
        assert get(url + "api/summary")[0] == 200


def _raw_answer(url, head, body=b""):
    """The status line answering ``head`` (+ ``body``) sent on a raw socket, read before
    anything more is sent (the body of a refused request is never awaited)."""
    host, port = re.match(r"http://([\d.]+):(\d+)/", url).groups()
    with socket.create_connection((host, int(port)), timeout=PATIENCE) as sock:
        sock.sendall(head + body)
        reply = b""
        while b"\r\n" not in reply:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply.split(b"\r\n", 1)[0]


def _spooled_files(pid, tmpdir):
    """Files the server has open in ``tmpdir`` (twisted.web's ``TemporaryFile`` is unlinked at
    once, so only /proc shows it) plus those listed there."""
    opened = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith(str(tmpdir)):
                opened.append(target)
    return opened + os.listdir(tmpdir)


def _posted(url, size):
    """The status urllib gets for a POST of ``size`` bytes (it sends the body, then reads)."""
    request = urllib.request.Request(url + "api/kv", data=b"x" * size, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=PATIENCE)
    return refused.value.code


def test_bodies_are_refused_before_anything_is_spooled(tmp_path):
    # twisted.web spools a body over 100 KB to a temporary file once the headers are in; a peer
    # outside adminAllowNetworks (and anyone, above MAX_BODY) is answered before that
    spool = tmp_path / "tmp"
    spool.mkdir()
    huge = b"POST /api/kv HTTP/1.1\r\nHost: x\r\nContent-Length: 536870912\r\n\r\n"
    chunked = b"POST /api/kv HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunks = b"".join(b"4000\r\n" + b"z" * 0x4000 + b"\r\n" for _ in range(5))
    with web_server("-D", "adminAllowNetworks=10.0.0.0/8", env={"TMPDIR": str(spool)}) as (server, url):
        assert _raw_answer(url, huge) == b"HTTP/1.1 403 Forbidden"
        assert _raw_answer(url, chunked, chunks) == b"HTTP/1.1 403 Forbidden"
        assert _spooled_files(server.proc.pid, spool) == []
        server.wait_for_log(r"web: refusing 127\.0\.0\.1: not in adminAllowNetworks")
        assert _posted(url, 4 << 20) == 403      # a client that sends its body first still reads it
    with web_server("-D", "adminAllowNetworks=127.0.0.0/8", env={"TMPDIR": str(spool)}) as (server, url):
        assert _raw_answer(url, huge) == b"HTTP/1.1 413 Content Too Large"
        assert _raw_answer(url, chunked, chunks) == b"HTTP/1.1 413 Content Too Large"
        small = b"POST /api/kv HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        assert _raw_answer(url, small) == b"HTTP/1.1 405 Method Not Allowed"
        assert _posted(url, 4 << 20) == 413
        digits = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n"
        assert _raw_answer(url, digits) == b"HTTP/1.1 400 Bad Request"
        assert "Traceback" not in server.log_text()
        assert _spooled_files(server.proc.pid, spool) == []
        assert get(url + "api/summary")[0] == 200


def fetch_ns_addr(ws_addr, unit_name=None):
    """``(status, list)`` as Java's ``DefaultTopAddressing.fetchNSAddr`` gets it: the URL of
    ``MixAll.getWSAddr`` plus ``-unit?nofix=1``, a plain GET with the headers
    ``HttpTinyClient`` and ``HttpURLConnection`` send, the body cut at its first line break."""
    url = ws_addr + (f"-{unit_name}?nofix=1" if unit_name else "")
    host, port, path = re.match(r"http://([^/:]+):(\d+)(/.*)", url).groups()
    head = (f"GET {path} HTTP/1.1\r\nClient-Version: V5_3_3\r\n"
            "Content-Type: application/x-www-form-urlencoded;charset=UTF-8\r\n"
            "Metaq-Client-RequestTS: 1700000000000\r\nUser-Agent: Java/17.0.9\r\n"
            f"Host: {host}:{port}\r\nAccept: text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"
            "\r\nConnection: keep-alive\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=PATIENCE) as sock:
        sock.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(4096)
        header, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length: *(\d+)", header).group(1))
        while len(body) < length:
            body += sock.recv(4096)
    status = int(header.split(b" ")[1])
    text = body.decode("utf-8").strip()
    for brk in ("\r", "\n"):          # DefaultTopAddressing.clearNewLine
        text = text.split(brk, 1)[0]
    return status, text


def test_address_server_answers_as_java_clients_fetch_it():
    # rocketmq.namesrv.domain=127.0.0.1:PORT: MixAll.getWSAddr() is http://127.0.0.1:PORT/rocketmq/nsaddr
    with web_server("--nsaddr", "10.0.0.1:9876; 10.0.0.2:9876", "--nsaddr",
                    "nsaddr-unit1=10.1.0.1:9876", "-D", "adminAllowNetworks=10.0.0.0/8") as (server, url):
        ws_addr = url + "rocketmq/nsaddr"
        assert fetch_ns_addr(ws_addr) == (200, "10.0.0.1:9876;10.0.0.2:9876")
        assert fetch_ns_addr(ws_addr, "unit1") == (200, "10.1.0.1:9876")
        assert fetch_ns_addr(ws_addr, "unit2")[0] == 404
        # brokers and clients are rarely admins: the list is open, the rest stays guarded
        assert _raw_answer(url, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == b"HTTP/1.1 403 Forbidden"


def test_status_page_shows_divergence_with_its_peers():
    # the peer has brokers and topics; this NameServer has just started and knows nothing yet
    with running_server() as peer:
        client = RemotingClient(peer.port)
        register(client, "ClusterA", "broker-a", 0, "127.0.0.1:10911", ["Orders", "Payments"])
        # 127.0.0.1:1 refuses connections: a peer that cannot be asked is an error, not agreement
        with web_server("--peers", f"{peer.addr};127.0.0.1:1") as (server, url):
            def compared():
                report = get_json(url + "api/peers")
                return report if report["checkedMs"] is not None else None
            report = wait_until(compared, "the first comparison with the peers", step=0.2)
            assert report["agree"] is False
            assert report["brokers"] == [{"broker": "broker-a", "values": {
                "this NameServer": None, peer.addr: "cluster ClusterA 0=127.0.0.1:10911"}}]
            assert report["clusters"] == [{"cluster": "ClusterA", "values": {
                "this NameServer": None, peer.addr: "broker-a"}}]
            assert {t["topic"] for t in report["topics"]} >= {"Orders", "Payments"}
            assert all(t["missingOn"] == ["this NameServer"] for t in report["topics"])
            errors = {r["nameserver"]: r["error"] for r in report["nameservers"]}
            assert errors[peer.addr] is None and errors["this NameServer"] is None
            assert "127.0.0.1:1" in errors and errors["127.0.0.1:1"]
            html = get(url)[2].decode()
            assert 'id="peers-verdict" data-agree="false"' in html
            assert "The NameServers diverge: 1 cluster(s), 1 broker group(s)" in html
        client.close()
