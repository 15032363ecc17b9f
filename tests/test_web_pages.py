"""The status page and the JSON API in process (makeService on a fake reactor; requests through
the ``twisted.web`` resource tree with DummyRequest): they list exactly what brokers registered
over the remoting protocol, filter and paginate thousands of topics, escape whatever a peer put in
a name, work without JavaScript, and the site honours the allow-list.
"""
import base64
import hashlib
import json
import re
import sys
import zlib

from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.test.requesthelper import DummyRequest

from rocketpy.remoting import RemotingCommand, decode_frame, split_frames
from rocketpy.service.tap import Options, makeService
from rocketpy.web.page import CONTENT_SECURITY_POLICY
from rocketpy.web.resource import WebSite, client_allowed

from test_web_server import page_rows
from brokerbody import register_body


class Server:
    def __init__(self, case, *args):
        self.reactor = MemoryReactorClock()
        self.reactor.advance(1_700_000_000)
        tmp = case.mktemp()
        options = Options()
        options.parseOptions(["--kvConfigPath", f"{tmp}-kv.json", "--listen", "tcp:9876",
                              "--web", "tcp:8080", "-D", f"configStorePath={tmp}-ns.properties",
                              *args])
        self.top = makeService(options, reactor=self.reactor)
        self.top.startService()
        self.site = self.top.web.site
        self.opaque = 0

    def connect(self, port):
        proto = self.top.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", port))
        proto.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", port)))
        return proto

    def call(self, proto, code, ext=None, body=None, version=479):
        self.opaque += 1
        proto.transport.clear()
        proto.dataReceived(RemotingCommand.request(code, ext, body, opaque=self.opaque,
                                                   version=version).encode())
        frames, _ = split_frames(proto.transport.value())
        return decode_frame(frames[0]) if frames else None

    def register(self, proto, cluster, group, broker_id, addr, topics, version=479):
        body = register_body(topics, counter=3, queues=8)
        answer = self.call(proto, 103, {
            "brokerName": group, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr,
            "brokerId": str(broker_id), "compressed": "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body, version)
        assert answer.code == 0, answer

    def get(self, path, client=None, method=b"GET"):
        """``(status, headers, body)`` of ``path`` (``/api/x?a=b``) through the site."""
        path, _, query = path.partition("?")
        request = DummyRequest([p.encode() for p in path.lstrip("/").split("/")])
        request.method = method
        request.uri = path.encode()
        request.client = client or IPv4Address("TCP", "127.0.0.1", 55555)
        for pair in filter(None, query.split("&")):
            key, _, value = pair.partition("=")
            request.addArg(key.encode(), value.encode())
        request.postpath = [p.encode() for p in path.lstrip("/").split("/")]
        resource = self.site.getResourceFor(request)
        body = resource.render(request)
        if not isinstance(body, bytes):        # NOT_DONE_YET: a topic search runs a step a turn
            for _ in range(10_000):
                if request.finished:
                    break
                self.reactor.advance(0)
            body = b"".join(request.written)
        return request.responseCode or 200, request.responseHeaders, body

    def api(self, path):
        status, _, body = self.get("/api/" + path)
        return status, json.loads(body)


class StatusPageTests(SynchronousTestCase):
    def setUp(self):
        self.server = Server(self)
        self.a = self.server.connect(41000)
        self.server.register(self.a, "C1", "broker-a", 0, "10.0.0.1:10911",
                             [f"Topic{i:04d}" for i in range(250)])
        self.b = self.server.connect(41001)
        self.server.register(self.b, "C1", "broker-a", 1, "10.0.0.2:10911", [], version=409)
        self.c = self.server.connect(41002)
        self.server.register(self.c, "C2", "broker-z", 0, "10.0.0.3:10911", ["Topic0001", "Lonely"])

    def test_lists_exactly_the_registered_brokers_and_topics(self):
        status, headers, html = self.server.get("/?per=1000")
        self.assertEqual(status, 200)
        rows = page_rows(html)
        self.assertEqual(sorted(rows.broker_addrs), ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"])
        self.assertEqual(sorted(rows.topics), sorted([f"Topic{i:04d}" for i in range(250)] + ["Lonely"]))
        _, brokers = self.server.api("brokers")
        by_addr = {b["address"]: b for b in brokers["brokers"]}
        self.assertEqual(by_addr["10.0.0.2:10911"]["version"], "V4_9_8")
        self.assertEqual(by_addr["10.0.0.2:10911"]["role"], "slave")
        self.assertEqual(by_addr["10.0.0.1:10911"]["topicCount"], 250)
        self.assertEqual(by_addr["10.0.0.3:10911"]["cluster"], "C2")
        _, topic = self.server.api("topics/Topic0001")
        self.assertEqual([q["brokerName"] for q in topic["queueDatas"]], ["broker-a", "broker-z"])
        self.assertEqual(topic["brokerDatas"][0]["brokerAddrs"], {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"})

    def test_pagination_and_filter(self):
        html = self.server.get("/")[2]
        self.assertEqual(len(page_rows(html).topics), 100)
        self.assertIn(b"page 1 of 3", html)
        last = page_rows(self.server.get("/?page=3")[2]).topics
        self.assertEqual(len(last), 51)
        self.assertEqual(page_rows(self.server.get("/?page=99")[2]).topics, last)   # clamped
        self.assertEqual(page_rows(self.server.get("/?q=topic024")[2]).topics,
                         [f"Topic024{i}" for i in range(10)])
        self.assertEqual(page_rows(self.server.get("/?q=BROKER-Z")[2]).topics, ["Lonely", "Topic0001"])
        html = self.server.get("/?q=nothing-like-this")[2]
        self.assertEqual(page_rows(html).topics, [])
        self.assertIn(b"No topic matches", html)
        _, data = self.server.api("topics?q=topic02&offset=10&limit=5")
        self.assertEqual((data["matched"], data["total"]), (50, 251))
        self.assertEqual([t["topic"] for t in data["topics"]], [f"Topic02{i}" for i in range(10, 15)])
        status, _ = self.server.api("topics?offset=x")
        self.assertEqual(status, 400)

    def test_connection_state_and_heartbeat_age(self):
        self.server.reactor.advance(70)   # past half of the 120 s timeout: late
        html = self.server.get("/")[2]
        self.assertIn(b"st-late", html)
        self.server.call(self.c, 904, {"clusterName": "C2", "brokerAddr": "10.0.0.3:10911",
                                       "brokerName": "broker-z"})
        _, brokers = self.server.api("brokers")
        ages = {b["address"]: b["secondsSinceHeartbeat"] for b in brokers["brokers"]}
        self.assertEqual(ages["10.0.0.3:10911"], 0.0)
        self.assertEqual(ages["10.0.0.1:10911"], 70.0)
        self.b.transport.producer.pauseProducing()   # a peer that stopped reading
        _, brokers = self.server.api("brokers")
        self.assertEqual({b["address"]: b["connection"] for b in brokers["brokers"]}["10.0.0.2:10911"],
                         "paused")
        self.c.connectionLost(Failure(ConnectionDone()))
        self.server.reactor.advance(0)
        _, brokers = self.server.api("brokers")
        self.assertNotIn("10.0.0.3:10911", {b["address"] for b in brokers["brokers"]})
        self.assertEqual(page_rows(self.server.get("/?q=Lonely")[2]).topics, [])

    def test_kv_namespaces(self):
        self.server.call(self.a, 100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Topic0001",
                                       "value": "broker-a:8"})
        self.server.call(self.a, 100, {"namespace": "ns<2>", "key": "k", "value": "<b>v</b>"})
        _, kv = self.server.api("kv")
        self.assertEqual(kv["namespaces"], {"ORDER_TOPIC_CONFIG": {"Topic0001": "broker-a:8"},
                                            "ns<2>": {"k": "<b>v</b>"}})
        _, one = self.server.api("kv/ns%3C2%3E")
        self.assertEqual(one["entries"], {"k": "<b>v</b>"})
        html = self.server.get("/")[2]
        self.assertIn(b"&lt;b&gt;v&lt;/b&gt;", html)
        self.assertNotIn(b"<b>v</b>", html)
        _, topic = self.server.api("topics/Topic0001")
        self.assertEqual(topic["orderTopicConf"], "broker-a:8")

    def test_names_from_peers_are_escaped(self):
        evil = '<img src=x onerror="alert(1)">'
        self.server.register(self.server.connect(41003), "C3", "b'\"<", 0, "10.0.0.9:1", [evil, "plain"])
        html = self.server.get("/?per=1000")[2]
        self.assertNotIn(evil.encode(), html)
        self.assertNotIn(b"<img", html)
        self.assertIn(b'&lt;img src=x onerror="alert(1)"&gt;', html)     # text: < and > escaped
        self.assertIn(b'data-addr="10.0.0.9:1"', html)
        self.assertIn(b"<b>b'\"&lt;</b>", html)
        self.assertIn(evil, page_rows(html).topics)
        addr = '10.0.0.7:1"><script>alert(2)</script>'        # into a data- attribute and a cell
        self.server.register(self.server.connect(41005), "C4", "g", 0, addr, ["t1", "t2"])
        html = self.server.get("/?per=1000")[2]
        self.assertNotIn(b"<script>alert", html)
        self.assertIn(b'data-addr="10.0.0.7:1&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"', html)
        self.assertIn(addr, page_rows(html).broker_addrs)

    def test_works_without_javascript_and_csp_matches_the_page(self):
        status, headers, html = self.server.get("/?q=Topic0&refresh=30")
        text = html.decode()
        self.assertIn('<noscript><meta http-equiv="refresh" content="30" /></noscript>', text)
        self.assertRegex(text, r'<form id="filter" method="get" action="/"')
        self.assertIn('name="q" type="search" value="Topic0"', text)
        self.assertIn('<input type="hidden" name="refresh" value="30" />', text)
        self.assertIn('href="/?q=Topic0&amp;page=2&amp;refresh=30"', text)   # pager keeps the filter
        self.assertNotIn("<noscript>", self.server.get("/?refresh=0")[2].decode())
        csp = headers.getRawHeaders("content-security-policy")[0]
        self.assertEqual(csp, CONTENT_SECURITY_POLICY)
        for tag in ("script", "style"):
            inline = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.S).group(1)
            digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
            self.assertIn(f"'sha256-{digest}'", csp)
        self.assertEqual(len(re.findall(r"<script", text)), 1)
        self.assertNotRegex(text, r'(src|href)="(https?:)?//')

    def test_read_only(self):
        for method in (b"POST", b"PUT", b"DELETE", b"PATCH"):
            status, headers, _ = self.server.get("/api/kv", method=method)
            self.assertEqual(status, 405)
            self.assertEqual(headers.getRawHeaders("allow"), ["GET, HEAD"])

    def test_thousands_of_topics_stay_one_page(self):
        self.server.register(self.server.connect(41004), "C9", "big", 0, "10.0.0.8:1",
                             [f"Bulk{i:05d}" for i in range(6000)])
        html = self.server.get("/?q=bulk01")[2]
        self.assertEqual(len(page_rows(html).topics), 100)
        self.assertIn(b'data-matched="1000"', html)
        self.assertLess(len(html), 200_000)


class AllowListTests(SynchronousTestCase):
    def test_client_allowed(self):
        from rocketpy.namesrv.acl import parse_networks
        nets = parse_networks("10.0.0.0/8, ::1")
        self.assertTrue(client_allowed(IPv4Address("TCP", "10.1.2.3", 1), nets))
        self.assertFalse(client_allowed(IPv4Address("TCP", "192.168.1.1", 1), nets))
        self.assertTrue(client_allowed(IPv6Address("TCP", "::ffff:10.1.2.3", 1), nets))
        self.assertTrue(client_allowed(IPv6Address("TCP", "::1", 1), nets))
        self.assertFalse(client_allowed(IPv6Address("TCP", "fe80::1%eth0", 1), nets))
        self.assertTrue(client_allowed(UNIXAddress(b"/run/x.sock"), nets))
        self.assertTrue(client_allowed(IPv4Address("TCP", "192.168.1.1", 1), ()))

    def test_site_refuses_outside_clients(self):
        server = Server(self, "-D", "adminAllowNetworks=10.0.0.0/8")
        self.assertIsInstance(server.site, WebSite)
        for path in ("/", "/api/summary", "/metrics"):
            status, _, _ = server.get(path, client=IPv4Address("TCP", "127.0.0.1", 1))
            self.assertEqual(status, 403)
        status, _, body = server.get("/api/summary", client=IPv4Address("TCP", "10.9.9.9", 1))
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["brokers"], 0)
        self.assertEqual(server.site.refused, 3)
        self.assertEqual(server.site.refused, 3)
        server.site.getResourceFor(_request("10.0.0.1"))
        self.assertEqual(server.site.refused, 3)


class ContentLengthTests(SynchronousTestCase):
    def test_a_content_length_of_thousands_of_digits_gets_400_not_a_traceback(self):
        """Issue 31 point 9: twisted.web ran ``int()`` on a 5,000-digit Content-Length, which
        raised out of the channel (an unhandled traceback in the log, no answer)."""
        server = Server(self)
        peer = IPv4Address("TCP", "127.0.0.1", 50000)
        for length in (b"9" * 5000, b"0" * 40 + b"2"):
            proto = server.site.buildProtocol(peer)
            transport = StringTransport(peerAddress=peer)
            proto.makeConnection(transport)
            proto.dataReceived(b"GET /api/summary HTTP/1.1\r\nHost: x\r\nContent-Length: "
                               + length + b"\r\n\r\n{}")
            answer = transport.value()
            if length.startswith(b"9"):
                self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:80])
                self.assertIn(b"at most 18 digits", answer)
            else:   # leading zeros are not digits of the number
                self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer[:80])
            proto.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(self.flushLoggedErrors(), [])


def _request(host):
    request = DummyRequest([b""])
    request.client = IPv4Address("TCP", host, 1)
    return request


class OperatorViewTests(SynchronousTestCase):
    """What an operator used to rocketmq-dashboard looks for: roles in words, HA addresses, the
    request and error rates of the last minute, and the system topics out of the way."""

    def setUp(self):
        self.server = Server(self, "-D", "supportActingMaster=true")
        self.conns = []

    def register(self, group, broker_id, addr, topics, ha, acting=False, cluster="C1"):
        proto = self.server.connect(42000 + len(self.conns))
        self.conns.append(proto)
        body = register_body(topics, counter=1)
        answer = self.server.call(proto, 103, {
            "brokerName": group, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": ha,
            "brokerId": str(broker_id), "compressed": "false",
            "enableActingMaster": "true" if acting else "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}, body)
        self.assertEqual(answer.code, 0, answer)
        return proto

    def test_roles_in_words_and_ha_addresses(self):
        self.register("broker-a", 0, "10.0.1.1:10911", ["T1", "T2"], "10.0.1.1:10912")
        self.register("broker-a", 1, "10.0.1.2:10911", ["T1", "T2"], "10.0.1.2:10912")
        # a group whose master is gone, with acting master on: its smallest id acts as master
        self.register("broker-b", 1, "10.0.2.1:10911", ["T1", "T3"], "10.0.2.1:10912", acting=True)
        self.register("broker-b", 2, "10.0.2.2:10911", ["T1", "T3"], "10.0.2.2:10912", acting=True)
        _, brokers = self.server.api("brokers")
        roles = {b["address"]: (b["role"], b["haServerAddr"]) for b in brokers["brokers"]}
        self.assertEqual(roles, {"10.0.1.1:10911": ("master", "10.0.1.1:10912"),
                                 "10.0.1.2:10911": ("slave", "10.0.1.2:10912"),
                                 "10.0.2.1:10911": ("acting master", "10.0.2.1:10912"),
                                 "10.0.2.2:10911": ("slave", "10.0.2.2:10912")})
        html = self.server.get("/")[2].decode()
        rows = re.findall(r'<tr class="broker" data-addr="([^"]+)" data-role="([^"]+)">(.*?)</tr>', html)
        self.assertEqual([(a, r) for a, r, _ in rows], [
            ("10.0.1.1:10911", "master"), ("10.0.1.2:10911", "slave"),
            ("10.0.2.1:10911", "acting master"), ("10.0.2.2:10911", "slave")])
        for addr, role, cells in rows:
            self.assertIn(f">{role}</span></td>", cells)
            self.assertIn(f'<td class="mono ha">{addr[:-1]}2</td>', cells)
        # the route clients get agrees: the acting master is served as id 0
        _, topic = self.server.api("topics/T3")
        self.assertEqual(topic["brokerDatas"][0]["brokerAddrs"], {"0": "10.0.2.1:10911",
                                                                  "2": "10.0.2.2:10911"})

    def test_request_and_error_rates_of_the_last_minute(self):
        broker = self.register("broker-a", 0, "10.0.1.1:10911", ["T1", "T2"], "10.0.1.1:10912")
        client = self.server.connect(43000)
        for _ in range(10):
            self.assertEqual(self.server.call(client, 105, {"topic": "T1"}).code, 0)
        for i in range(5):
            self.assertEqual(self.server.call(client, 105, {"topic": f"Missing{i}"}).code, 17)
        self.server.call(broker, 322, {"brokerName": "broker-a", "brokerAddr": "10.0.1.1:10911",
                                       "clusterName": "C1", "brokerId": "0"})
        self.server.reactor.advance(10)          # two samples later
        _, summary = self.server.api("summary")
        traffic = summary["traffic"]
        self.assertEqual(traffic["seconds"], 10.0)
        by_code = {row["name"]: (row["requests"], row["errors"]) for row in traffic["byCode"]}
        self.assertEqual(by_code, {"GET_ROUTEINFO_BY_TOPIC": (1.5, 0.5), "REGISTER_BROKER": (0.1, 0.0),
                                   "QUERY_DATA_VERSION": (0.1, 0.0)})
        self.assertEqual((traffic["requests"], traffic["errors"]), (1.7, 0.5))
        html = self.server.get("/")[2].decode()
        self.assertIn('<div class="card" id="count-requestRate"><b>1.7</b><span>requests/s</span>', html)
        self.assertIn('<div class="card bad" id="count-errorRate"><b>0.5</b>', html)
        self.assertRegex(html, r'<tr class="code" data-code="105"><td class="mono">'
                               r'GET_ROUTEINFO_BY_TOPIC</td><td class="num">1.5</td>'
                               r'<td class="num bad">0.5</td></tr>')
        self.server.reactor.advance(5)
        for _ in range(13):                       # a minute later, only the last minute counts
            self.server.reactor.advance(5)
        _, summary = self.server.api("summary")
        self.assertEqual((summary["traffic"]["requests"], summary["traffic"]["byCode"]), (0.0, []))
        self.assertIn("No request.", self.server.get("/")[2].decode())

    def test_system_topics_can_be_hidden(self):
        system = ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "rmq_sys_wheel_timer",
                  "C1", "broker-a"]                # the last two: cluster and broker name
        normal = ["Orders", "Payments"]
        self.register("broker-a", 0, "10.0.1.1:10911", system + normal, "10.0.1.1:10912")
        html = self.server.get("/?sys=1")[2]
        self.assertEqual(sorted(page_rows(html).topics), sorted(system + normal))
        self.assertIn(b'<tr class="topic system"><td class="mono">TBW102</td>', html)
        self.assertIn(b'<input type="checkbox" id="sys" name="sys" value="1" checked="checked" />',
                      html)
        html = self.server.get("/")[2]              # hidden by default
        self.assertEqual(page_rows(html).topics, normal)
        text = html.decode()
        self.assertIn("Showing 1–2 of 2 topics without system topics (8 in all).", text)
        self.assertIn('<input type="checkbox" id="sys" name="sys" value="1" />', text)
        self.assertEqual(page_rows(self.server.get("/?q=broker-a")[2]).topics, normal)
        many = [f"Topic{i:03d}" for i in range(150)]
        self.register("broker-a", 0, "10.0.1.1:10911", system + many, "10.0.1.1:10912")
        self.assertIn('href="/?page=2"', self.server.get("/")[2].decode())
        self.assertIn('href="/?sys=1&amp;page=2"', self.server.get("/?sys=1")[2].decode())
        _, data = self.server.api("topics/TBW102")
        self.assertTrue(data["system"])


class AddressServerOptionTests(SynchronousTestCase):
    def test_nsaddr_values(self):
        from rocketpy.web.nsaddr import parse_nsaddr
        self.assertEqual(parse_nsaddr("a:9876; b:9877;"), ("nsaddr", "a:9876;b:9877"))
        self.assertEqual(parse_nsaddr("nsaddr-unit1=[::1]:9876"), ("nsaddr-unit1", "[::1]:9876"))
        for bad in ("", "a", "a:x", "a:0", "a b:9876", "u/1=a:9876", "=a:9876", "a:9876;c"):
            with self.assertRaises(ValueError):
                parse_nsaddr(bad)

    def test_served_without_the_allow_list_other_paths_guarded(self):
        server = Server(self, "--nsaddr", "10.0.0.1:9876;10.0.0.2:9876",
                        "-D", "adminAllowNetworks=10.0.0.0/8")
        status, headers, body = server.get("/rocketmq/nsaddr")
        self.assertEqual((status, body), (200, b"10.0.0.1:9876;10.0.0.2:9876\n"))
        self.assertEqual(server.get("/rocketmq/other")[0], 404)
        self.assertEqual(server.get("/api/summary")[0], 403)


class ScaleTests(SynchronousTestCase):
    """Thousands of brokers: natural order, one row of counts per cluster, broker groups
    collapsed and paged, wide topics collapsed, and a page whose size and work do not grow
    with the state."""

    def populate(self, n_groups, port=43000):
        server = Server(self)
        conns = []
        for g in range(n_groups):
            cluster = f"Cluster-{g % 2}"
            for broker_id in (0, 1):
                proto = server.connect(port + len(conns))
                conns.append(proto)
                topics = [f"Own-{g}-{k}" for k in range(3)] + ["Wide"]
                server.register(proto, cluster, f"broker-{g}", broker_id,
                                f"10.{g // 250}.{g % 250}.{broker_id + 1}:10911", topics)
        return server, conns

    def test_natural_order_clusters_collapsed_groups_paged(self):
        server, _ = self.populate(120)
        html = server.get("/")[2].decode()
        groups = re.findall(r'<details class="group" id="[^"]*" data-group="([^"]+)"', html)
        self.assertEqual(groups[:7], [f"broker-{g}" for g in range(0, 14, 2)])   # cluster by cluster,
        # and not broker-0, broker-10, broker-100, ... as text sorts them
        self.assertEqual(len(groups), 50)
        self.assertIn("Showing 1–50 of 120 broker groups.", html)
        self.assertIn("2 brokers: master, slave", html)
        self.assertNotIn("<details class=\"group\" open", html)              # collapsed
        rows = re.findall(r'<tr class="cluster" data-cluster="([^"]+)"><td>[^<]*</td>'
                          r'((?:<td class="num">\d+</td>)+)', html)
        self.assertEqual([(c, re.findall(r">(\d+)<", cells)) for c, cells in rows],
                         [("Cluster-0", ["60", "120", "120", "0", "0", "0"]),
                          ("Cluster-1", ["60", "120", "120", "0", "0", "0"])])
        last = server.get("/?gpage=3")[2].decode()
        self.assertEqual(re.findall(r'data-group="([^"]+)"', last)[:2], ["broker-81", "broker-83"])
        self.assertIn("Showing 101–120 of 120 broker groups.", last)
        only = server.get("/?q=10.0.7.2")[2].decode()                        # by address
        self.assertEqual(re.findall(r'data-group="([^"]+)"', only), ["broker-7"])
        _, page = server.api("groups?q=Cluster-1&offset=2&limit=3")
        self.assertEqual((page["matched"], page["total"]), (60, 120))
        self.assertEqual([g["brokerName"] for g in page["groups"]], ["broker-5", "broker-7", "broker-9"])
        self.assertEqual([b["role"] for b in page["groups"][0]["brokers"]], ["master", "slave"])
        self.assertIn("2 brokers: master, slave", server.get("/?gpage=99")[2].decode())   # clamped
        _, clusters = server.api("clusters")
        self.assertEqual([g["brokerName"] for g in clusters["clusters"][0]["brokerGroups"]][:3],
                         ["broker-0", "broker-2", "broker-4"])
        _, wide = server.api("topics/Wide")
        self.assertEqual([q["brokerName"] for q in wide["queueDatas"]][:3],
                         ["broker-0", "broker-1", "broker-2"])

    def test_a_topic_on_many_groups_is_collapsed_with_a_count(self):
        server, _ = self.populate(25)
        html = server.get("/?q=Wide")[2].decode()
        self.assertIn('<details id="tq-Wide"><summary>25 broker groups</summary>', html)
        queue_datas = re.search(r'<details id="tq-Wide">(.*?)</details>', html).group(1)
        self.assertEqual(queue_datas.count('class="qd"'), 20)          # bounded, and says so
        self.assertIn('… 5 more in </span><a href="/api/topics/Wide">', queue_datas)
        html = server.get("/?q=Own-1-")[2].decode()
        self.assertNotIn("<details id=\"tq-Own-1-0\"", html)                   # one group: inline

    def test_page_size_and_work_do_not_grow_with_the_state(self):
        measured = []
        for n in (60, 120):
            server, _ = self.populate(n, port=44000 + n * 4)
            view = server.top.web.view
            calls = {"broker": 0, "topic": 0}
            for name in calls:
                original = getattr(view, name)

                def counting(*args, _name=name, _original=original, **kwargs):
                    calls[_name] += 1
                    return _original(*args, **kwargs)
                setattr(view, name, counting)
            html = server.get("/")[2]
            measured.append((len(html), dict(calls)))
        (small, small_calls), (big, big_calls) = measured
        self.assertEqual(small_calls, big_calls)          # one page of groups and topics
        self.assertLess(big / small, 1.05)

    def test_group_pages_do_not_walk_the_topics(self):
        """/api/groups and /api/clusters count a group's topics per shared queue layout: the
        Python lines run per request are the same at 1,500 and 3,000 topics (each request
        walked every topic's queue map on the reactor: a long stall at 1 M topics)."""
        measured = []
        for n in (1500, 3000):
            server = Server(self)
            for g in range(2):
                topics = [f"T{g}-{k}" for k in range(n)] + ["Shared"]
                server.register(server.connect(45000 + g), "C", f"broker-{g}", 0,
                                f"10.0.0.{g + 1}:10911", topics)
            lines = {"groups": 0, "clusters": 0}
            for path in lines:
                def count(frame, event, arg, _path=path):
                    if event == "line" and "rocketpy" in frame.f_code.co_filename:
                        lines[_path] += 1
                    return count
                sys.settrace(lambda frame, event, arg: count)
                try:
                    _, answer = server.api(path)
                finally:
                    sys.settrace(None)
                counts = ([g["topicCount"] for g in answer["groups"]] if path == "groups" else
                          [g["topicCount"] for g in answer["clusters"][0]["brokerGroups"]])
                self.assertEqual(counts, [n + 1, n + 1])
            measured.append(lines)
        self.assertEqual(measured[0], measured[1])


class CountingName(str):
    """A topic name that counts the comparisons and case folds done on it (sorting and
    filtering work, counted, not timed)."""

    comparisons = 0
    folds = 0

    def __lt__(self, other):
        CountingName.comparisons += 1
        return str.__lt__(self, other)

    def __gt__(self, other):
        CountingName.comparisons += 1
        return str.__gt__(self, other)

    def lower(self):
        CountingName.folds += 1
        return str.lower(self)


class TopicSearchCostTests(SynchronousTestCase):
    """Issue 31 hole 8: ``/api/topics?q=`` and ``/?q=`` sorted and filtered every topic on the
    reactor, in the request's one call (1.1-1.4 s at 1 M topics, route queries stalled as long).
    Now the names are sorted once, kept sorted by merging what arrives, and filtered a bounded
    step per reactor turn."""

    N = 45_000

    def setUp(self):
        from rocketpy.namesrv.model import QueueData
        self.server = Server(self)
        shapes = self.server.top.route_info_manager.shapes
        layout = QueueData("broker-a", 8, 8, 6)
        for i in range(self.N):
            shapes.put(CountingName(f"Topic{(i * 7919) % self.N:06d}"), layout)
        self.shapes, self.layout = shapes, layout
        self.calls = []
        reactor = self.server.reactor
        original = reactor.callLater

        def counted(delay, f, *args, **kwargs):   # the work done by each reactor call
            def run(*a, **k):
                folds, comparisons = CountingName.folds, CountingName.comparisons
                try:
                    return f(*a, **k)
                finally:
                    self.calls.append((CountingName.folds - folds,
                                       CountingName.comparisons - comparisons))
            return original(delay, run, *args, **kwargs)
        reactor.callLater = counted

    def get(self, path):
        """``(status, body, comparisons, the most case folds in one reactor call)``."""
        CountingName.comparisons = 0
        before = CountingName.folds
        self.calls = []
        status, _, body = self.server.get(path)
        first_call = CountingName.folds - before - sum(f for f, _ in self.calls)
        return status, body, CountingName.comparisons, max([first_call] + [f for f, _ in self.calls])

    def test_no_sort_per_request_and_a_bounded_filter_step_per_turn(self):
        from rocketpy.web.topicsearch import SEARCH_STEP
        status, body, comparisons, _ = self.get("/api/topics?limit=3")   # the index is built
        self.assertEqual(json.loads(body)["topics"][0]["topic"], "Topic000000")
        # in steps: runs of SEARCH_STEP sorted, then merged; no call sorts every name
        most = max(c for _, c in self.calls)       # a sort of one run, or a merge
        self.assertLess(most, 15 * SEARCH_STEP + 2 * self.N)   # a sort of all: ~690,000
        self.assertGreater(comparisons, self.N)    # (and the names were sorted)
        status, body, comparisons, most = self.get("/api/topics?q=c01230&limit=5")
        answer = json.loads(body)
        self.assertEqual((status, answer["matched"]), (200, 10))
        self.assertEqual([t["topic"] for t in answer["topics"]][:2], ["Topic012300", "Topic012301"])
        self.assertEqual(comparisons, 0)              # N log N (~700,000) per request before
        self.assertLessEqual(most, SEARCH_STEP)       # N (45,000) in the request's call before
        status, html, comparisons, most = self.get("/?q=topic04499")
        self.assertEqual(page_rows(html).topics, [f"Topic04499{i}" for i in range(10)])
        self.assertEqual(comparisons, 0)
        self.assertLessEqual(most, SEARCH_STEP)
        for i in range(100):                         # new topics are merged in: linear, no sort
            self.shapes.put(CountingName(f"New{i:03d}"), self.layout)
        status, body, comparisons, _ = self.get("/api/topics?q=new&limit=1")
        self.assertEqual(json.loads(body)["matched"], 100)
        self.assertLess(comparisons, 2 * self.N)

    def test_searches_beyond_the_bound_are_refused_with_503(self):
        from rocketpy.web.topicsearch import MAX_SEARCHES
        search = self.server.top.web.view.search
        waiting = [search.search(f"q{i}", False) for i in range(MAX_SEARCHES)]
        status, headers, body = self.server.get("/api/topics?q=one-more")
        self.assertEqual((status, headers.getRawHeaders("retry-after")), (503, ["1"]))
        for _ in range(1000):
            self.server.reactor.advance(0)
        self.assertTrue(all(d.called for d in waiting))
        self.assertEqual(self.server.get("/api/topics?q=one-more")[0], 200)


class PeerComparisonTests(SynchronousTestCase):
    """--peers: the page's comparison is compareNamesrv's (one comparison, one source), built
    off the reactor from copies of this server's tables."""

    @staticmethod
    def _tables(rim, brokers, topics):
        from types import SimpleNamespace
        for (cluster, group, broker_id), addr in brokers.items():
            rim.cluster_addr_table.setdefault(cluster, set()).add(group)
            rim.broker_addr_table.setdefault(
                group, SimpleNamespace(cluster=cluster, broker_addrs={})).broker_addrs[broker_id] = addr
        for topic in topics:
            rim.topic_queue_table[topic] = {}

    @staticmethod
    def _answers(brokers, topics):
        from rocketpy.remoting.bodies import BrokerData, ClusterInfo, TopicList
        table, clusters = {}, {}
        for (cluster, group, broker_id), addr in brokers.items():
            clusters.setdefault(cluster, []).append(group)
            table.setdefault(group, BrokerData(broker_name=group, cluster=cluster,
                                               broker_addrs={})).broker_addrs[broker_id] = addr
        return {106: ClusterInfo(broker_addr_table=table, cluster_addr_table=clusters).to_json(),
                206: TopicList(topic_list=list(topics)).to_json()}

    def _watch(self, peers, offload=None):
        from types import SimpleNamespace
        from twisted.internet import defer
        from twisted.internet.task import Clock
        from rocketpy.web.peers import PeerWatch

        class Client:
            def invoke(self, addr, request, timeout):
                body = peers[addr].get(request.code) if addr in peers else None
                if body is None:
                    return defer.fail(ConnectionRefusedError("refused"))
                return defer.succeed(SimpleNamespace(code=0, remark=None, body=body))

            def shutdown(self):
                pass
        rim = SimpleNamespace(broker_addr_table={}, cluster_addr_table={}, topic_queue_table={})
        return PeerWatch(list(peers) + ["127.0.0.1:1"], rim, Client(), Clock(), offload=offload), rim

    def test_the_report_is_compare_namesrvs_comparison(self):
        from rocketpy.namesrv.consistency import compare_views, view_of
        brokers = {("C", "broker-a", 0): "10.0.0.1:10911"}
        moved = {("C", "broker-a", 0): "10.0.0.9:10911", ("C", "broker-b", 0): "10.0.0.2:10911"}
        watch, rim = self._watch({"a:9876": self._answers(brokers, ["T1", "T2"]),
                                  "b:9876": self._answers(moved, ["T1"])})
        self._tables(rim, brokers, ["T2", "T1"])
        watch.run_once()
        report = watch.report
        self.assertFalse(report["agree"])
        self.assertEqual(report["brokers"], [
            {"broker": "broker-a", "values": {"this NameServer": "cluster C 0=10.0.0.1:10911",
                                              "a:9876": "cluster C 0=10.0.0.1:10911",
                                              "b:9876": "cluster C 0=10.0.0.9:10911"}},
            {"broker": "broker-b", "values": {"this NameServer": None, "a:9876": None,
                                              "b:9876": "cluster C 0=10.0.0.2:10911"}}])
        self.assertEqual(report["clusters"], [{"cluster": "C", "values": {
            "this NameServer": "broker-a", "a:9876": "broker-a", "b:9876": "broker-a broker-b"}}])
        self.assertEqual(report["topics"], [{"topic": "T2", "missingOn": ["b:9876"]}])
        self.assertEqual((report["clusterDifferences"], report["brokerDifferences"],
                          report["topicDifferences"]), (1, 2, 1))
        errors = {r["nameserver"]: r["error"] for r in report["nameservers"]}
        self.assertIn("refused", errors["127.0.0.1:1"])
        self.assertIsNone(errors["a:9876"])
        # the same differences compareNamesrv finds in the same views
        from rocketpy.remoting.bodies import ClusterInfo, TopicList
        views = [view_of(ns, ClusterInfo.from_json(a[106]),
                         dict.fromkeys(TopicList.from_json(a[206]).topic_list))
                 for ns, a in (("a:9876", self._answers(brokers, ["T1", "T2"])),
                               ("b:9876", self._answers(moved, ["T1"])))]
        self.assertEqual(sum(1 for d in compare_views(views).differences if d.kind == "broker"), 2)

    def test_agreeing_nameservers_agree_but_one_unreachable_does_not(self):
        brokers = {("C", "broker-a", 0): "10.0.0.1:10911"}
        watch, rim = self._watch({"a:9876": self._answers(brokers, ["T1", "T2"])})
        self._tables(rim, brokers, ["T1", "T2"])
        watch.run_once()
        self.assertEqual(watch.report["brokerDifferences"] + watch.report["topicDifferences"], 0)
        self.assertFalse(watch.report["agree"])        # 127.0.0.1:1 could not be asked
        watch.peers = ["a:9876"]
        watch.run_once()
        self.assertTrue(watch.report["agree"], watch.report)

    def test_a_round_that_fails_before_comparing_does_not_stop_the_next(self):
        brokers = {("C", "broker-a", 0): "10.0.0.1:10911"}
        calls = []

        def offload(work):
            calls.append(work)
            if len(calls) == 1:
                raise RuntimeError("the pool broke")
            return None                         # then: full, the next round compares
        watch, rim = self._watch({"a:9876": self._answers(brokers, ["T1"])}, offload=offload)
        watch.peers = ["a:9876"]
        self._tables(rim, brokers, ["T1"])
        watch.run_once()
        self.flushLoggedErrors(RuntimeError)
        watch.run_once()
        self.assertEqual(len(calls), 2)

    def test_the_comparison_runs_off_the_reactor_from_copies(self):
        brokers = {("C", "broker-a", 0): "10.0.0.1:10911"}
        from twisted.internet.defer import Deferred
        queued = []
        watch, rim = self._watch({"a:9876": self._answers(brokers, ["T1"])},
                                 offload=lambda work: queued.append(work) or Deferred())
        watch.peers = ["a:9876"]
        self._tables(rim, brokers, ["T1"])
        watch.run_once()
        self.assertEqual(len(queued), 1)
        self.assertIsNone(watch.report)                # nothing compared on the reactor
        rim.topic_queue_table["Later"] = {}            # the tables move on meanwhile
        report = queued[0]()                           # the pool's thread
        self.assertTrue(report["agree"])               # compared from the copy
        watch._reported(report)
        self.assertTrue(watch.report["agree"])

    def test_a_full_pool_skips_a_round(self):
        watch, rim = self._watch({}, offload=lambda work: None)
        watch.peers = []
        watch.run_once()
        self.assertIsNone(watch.report)
        self.assertIsNone(watch._running)              # the next round runs again

    def test_differences_listed_are_bounded_and_all_counted(self):
        from rocketpy.namesrv.consistency import NamesrvView, compare_views
        from rocketpy.web.peers import report_of
        many = NamesrvView("a", topics=dict.fromkeys(f"T{i}" for i in range(1000)))
        report = report_of(compare_views([many, NamesrvView("b")]), shown=50)
        self.assertEqual((len(report["topics"]), report["topicDifferences"]), (50, 1000))
