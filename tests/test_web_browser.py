"""The status page in a real browser: Debian's chromium, headless, driven over the DevTools
protocol (a small client on ``websocket-client``), against a real ``twistd rocketnamesrv --web``.

A few hundred topics are registered, and a broker group whose master is gone (acting master on);
the browser loads the page and checks what an operator reads there (each broker's role in words,
its HA address, the request and error rates of the last minute), types into the filter box (real
key input, so the page's own script filters through the server and swaps the table in place),
hides the system topics with the toggle, follows the pager, and a screenshot is kept as a test
artifact (``$ROCKETPY_ARTIFACTS`` or ``tests/artifacts/``). The page must load nothing from
anywhere but the server and must raise no console error (a Content-Security-Policy violation is
one).

A second test drives the page at scale: ``rocketpy-brokersim`` registers 2,000 brokers (1,000
groups in 4 clusters) and 10,000 topics, and the browser checks one screenful of cluster
counts, groups collapsed in natural order and paged, system topics hidden, and opened sections
and the filter kept across refreshes (screenshots ``status-2000-brokers*.png``).

Chromium missing is a failure, not a skip: install it with ``apt-get install chromium``
(tests/install.sh does).
"""
import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from serverproc import PATIENCE, REPO_ROOT, RemotingClient, wait_until
from test_web_server import get_json, populate, register, topic_names, web_server

pytestmark = pytest.mark.network

N_TOPICS = 300
#: Java's system topics and the cluster name the acting-master group registers besides
SYSTEM_TOPICS = ["ClusterC", "RMQ_SYS_TRACE_TOPIC", "SCHEDULE_TOPIC_XXXX", "TBW102",
                 "rmq_sys_wheel_timer"]
ARTIFACTS = Path(os.environ.get("ROCKETPY_ARTIFACTS") or Path(__file__).resolve().parent / "artifacts")
BROWSERS = ("chromium", "chromium-browser")


def _chromium():
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed: apt-get install chromium (see tests/install.sh)")


class DevTools:
    """Just enough of the Chrome DevTools protocol: commands, and the events that came meanwhile."""

    def __init__(self, ws_url):
        import websocket
        self.ws = websocket.create_connection(ws_url, timeout=PATIENCE, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events = []

    def call(self, method, **params):
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method, timeout=PATIENCE):
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for event in self.events[seen:]:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            seen = len(self.events)
            self.ws.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except Exception:
                break
            finally:
                self.ws.settimeout(PATIENCE)
        raise AssertionError(f"no {method} within {timeout} s")

    def js(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_js(self, expression, timeout=PATIENCE):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.js(expression):
                return
            time.sleep(0.05)
        raise AssertionError(f"still false after {timeout} s: {expression}")

    def close(self):
        self.ws.close()


def _start_browser(profile_dir):
    argv = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-extensions", "--disable-dev-shm-usage",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            "--remote-allow-origins=*", f"--user-data-dir={profile_dir}",
            "--window-size=1280,900", "about:blank"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    port_file = Path(profile_dir) / "DevToolsActivePort"
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if port_file.exists():
            lines = port_file.read_text().split()
            if len(lines) >= 2:
                return proc, int(lines[0])
        if proc.poll() is not None:
            raise AssertionError(f"chromium exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("chromium did not open its DevTools port")


def _page_target(port):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=PATIENCE) as r:
        targets = json.load(r)
    return next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")


def test_status_page_in_headless_chromium():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with web_server() as (server, url), tempfile.TemporaryDirectory(
            prefix="rocketpy-chromium-", ignore_cleanup_errors=True) as profile:  # its helpers may still write
        clients, expected = populate(server.port, n_topics=N_TOPICS)
        for broker_id, addr in ((1, "127.0.0.1:10951"), (2, "127.0.0.1:10961")):   # no master
            clients.append(RemotingClient(server.port))
            register(clients[-1], "ClusterC", "broker-d", broker_id, addr,
                     SYSTEM_TOPICS + ["OrdersTopic0000"], acting_master=True)
        asker = RemotingClient(server.port)
        clients.append(asker)
        for i in range(4):                                  # error answers: TOPIC_NOT_EXIST
            assert asker.call(105, {"topic": f"NoSuchTopic{i}"}).code == 17
        total = N_TOPICS + len(SYSTEM_TOPICS)
        proc, port = _start_browser(profile)
        tools = None
        try:
            tools = DevTools(_page_target(port))
            for domain in ("Page", "Runtime", "Network", "Log"):
                tools.call(f"{domain}.enable")
            tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=1000,
                       deviceScaleFactor=1, mobile=False)
            tools.call("Page.navigate", url=url)
            tools.wait_event("Page.loadEventFired")

            # the whole registration is on the page: every broker, the first page of topics
            assert tools.js("document.querySelectorAll('tr.broker').length") == len(expected["brokers"]) + 2
            assert tools.js("+document.getElementById('topic-count').dataset.total") == total
            assert tools.js("+document.getElementById('topic-count').dataset.matched") == N_TOPICS
            assert tools.js("document.querySelectorAll('tr.topic').length") == 100
            assert tools.js("document.getElementById('autobox').hidden") is False   # script ran

            # each broker's role in words and its HA address, as the browser shows them
            rows = tools.js("[...document.querySelectorAll('tr.broker')].map(tr => [tr.dataset.addr, "
                            "tr.querySelector('td.role-cell').textContent, tr.querySelector('td.ha').textContent])")
            roles = {addr: (role, ha) for addr, role, ha in rows}
            for cluster, group, broker_id, addr in expected["brokers"]:
                assert roles[addr] == ("master" if broker_id == 0 else "slave",
                                       addr.rsplit(":", 1)[0] + ":10912"), (addr, roles[addr])
            assert roles["127.0.0.1:10951"][0] == "acting master"
            assert roles["127.0.0.1:10961"][0] == "slave"

            # the rates of the last minute: the registrations, and the four error answers
            assert float(tools.js("document.querySelector('#count-requestRate b').textContent")) > 0
            assert float(tools.js("document.querySelector('#count-errorRate b').textContent")) > 0
            codes = tools.js("[...document.querySelectorAll('#traffic-table tr.code td:first-child')]"
                             ".map(td => td.textContent)")
            assert {"REGISTER_BROKER", "GET_ROUTEINFO_BY_TOPIC"} <= set(codes), codes

            # type into the filter box: the page's script asks the server and swaps the table
            tools.js("document.getElementById('q').focus()")
            tools.call("Input.insertText", text="Payments")
            want = sorted(t for t in expected["topics"] if "payments" in t.lower())
            tools.wait_js(f"+document.getElementById('topic-count').dataset.matched === {len(want)}")
            shown = tools.js("[...document.querySelectorAll('tr.topic td:first-child')].map(td => td.textContent)")
            assert shown == want[:100]
            assert tools.js("location.search") == "?q=Payments"
            assert tools.js("document.activeElement.id") == "q"     # typing was not interrupted
            assert tools.js("document.getElementById('q').value") == "Payments"

            # the pager, without leaving the filter
            tools.call("Input.insertText", text="Topic00")
            want = sorted(t for t in expected["topics"] if "paymentstopic00" in t.lower())
            tools.wait_js(f"+document.getElementById('topic-count').dataset.matched === {len(want)}")
            tools.js("document.getElementById('q').value = ''; "
                     "document.getElementById('filter').requestSubmit()")
            tools.wait_js(f"+document.getElementById('topic-count').dataset.matched === {N_TOPICS}")
            assert tools.js("document.querySelectorAll('tr.topic.system').length") == 0

            # the system topics toggle: a click, and the server adds them
            tools.js("document.getElementById('sys').click()")
            tools.wait_js(f"+document.getElementById('topic-count').dataset.matched === {total}")
            assert tools.js("document.querySelector('tr.topic.system td').textContent") == "ClusterC"
            assert tools.js("location.search") == "?sys=1"
            tools.js("document.getElementById('sys').click()")
            tools.wait_js(f"+document.getElementById('topic-count').dataset.matched === {N_TOPICS}")

            # the topics' pager
            tools.js("document.querySelector('#topics a.pg[rel=next]').click()")
            tools.wait_js("document.getElementById('topic-count').textContent.startsWith('Showing 101')")
            first = tools.js("document.querySelector('tr.topic td').textContent")
            assert first == sorted(topic_names(N_TOPICS))[100]
            assert tools.js("location.search") == "?page=2"

            # back to the filtered view (system topics still hidden) for the screenshot
            tools.js("document.getElementById('q').focus()")
            tools.call("Input.insertText", text="Payments")
            tools.wait_js("document.getElementById('topic-count').textContent.includes('Payments')")
            assert tools.js("location.search") == "?q=Payments"
            assert tools.js("document.getElementById('sys').checked") is False
            shot = tools.call("Page.captureScreenshot", format="png")
            path = ARTIFACTS / "status-page.png"
            path.write_bytes(base64.b64decode(shot["data"]))
            assert path.stat().st_size > 10_000

            # nothing but the server was asked for anything; no console error, no CSP violation
            requested = [e["params"]["request"]["url"] for e in tools.events
                         if e.get("method") == "Network.requestWillBeSent"]
            assert requested and all(u.startswith(url) for u in requested), requested
            errors = [e for e in tools.events
                      if e.get("method") == "Runtime.exceptionThrown"
                      or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
                      or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")]
            assert not errors, errors
        finally:
            if tools is not None:
                tools.close()
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            for client in clients:
                client.close()


@contextlib.contextmanager
def _browser():
    """A headless chromium's DevTools session on a 1280x1000 window; closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="rocketpy-chromium-", ignore_cleanup_errors=True) as profile:
        proc, port = _start_browser(profile)
        tools = None
        try:
            tools = DevTools(_page_target(port))
            for domain in ("Page", "Runtime", "Log"):
                tools.call(f"{domain}.enable")
            tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=1000,
                       deviceScaleFactor=1, mobile=False)
            yield tools
        finally:
            if tools is not None:
                tools.close()
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _screenshot(tools, name):
    path = ARTIFACTS / name
    path.write_bytes(base64.b64decode(tools.call("Page.captureScreenshot", format="png")["data"]))
    assert path.stat().st_size > 10_000


#: 2,000 brokers (1,000 groups of a master and a slave) in 4 clusters, 100 topics per group,
#: each shared by 10 neighbouring groups: 10,000 topics on 10 groups each, plus system topics
#: (first registrations spread over 20 s: at 5 s the decode pool sheds enough of them with
#: SYSTEM_BUSY that a broker may stay out for minutes); the simulator runs for longer than the
#: test can wait for it and then uses the page
SIM = ["--brokers", "2000", "--replicas", "2", "--clusters", "4", "--topics", "100",
       "--topic-spread", "10", "--version", "5.3.3", "--no-refresh-metadata", "--ramp", "20",
       "--duration", "1800", "--progress", "0", "--seed", "3"]
#: seconds to wait for every broker and topic to be registered (151 s on a quiet machine, more
#: than 180 s on a busy one): far above any machine; on giving up the test says what it saw
REGISTERED_WITHIN = 900


def test_status_page_at_2000_brokers_and_10000_topics():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with web_server() as (server, url):
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        sim = subprocess.Popen([sys.executable, "-m", "rocketpy.broker.simcli", "-n", server.addr,
                                *SIM], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            summary = {}

            def registered():
                summary.update(get_json(url + "api/summary"))
                return summary["brokers"] == 2000 and summary["topics"] >= 10_000

            def seen():
                ran = "still running" if sim.poll() is None else f"ended ({sim.returncode})"
                return (f"2,000 brokers and 10,000 topics: {summary.get('brokers')} brokers and "
                        f"{summary.get('topics')} topics registered, the simulator {ran}")

            wait_until(registered, seen, timeout=REGISTERED_WITHIN, step=1)
            assert (summary.get("brokers"), summary.get("brokerGroups")) == (2000, 1000), summary
            admin = RemotingClient(server.port)
            assert admin.call(100, {"namespace": "ORDER_TOPIC_CONFIG", "key": "SimTopic-1",
                                    "value": "broker-0:8;broker-1:8"}).code == 0
            with _browser() as tools:
                tools.call("Page.navigate", url=url + "?refresh=2")
                tools.wait_event("Page.loadEventFired")

                # one screenful of cluster counts; the system topics hidden; groups collapsed
                assert tools.js("document.getElementById('clusters').getBoundingClientRect().bottom") < 1000
                clusters = tools.js("[...document.querySelectorAll('tr.cluster')].map(tr => "
                                    "[...tr.children].slice(1, 4).map(td => +td.textContent))")
                assert len(clusters) == 4
                assert [sum(c[i] for c in clusters) for i in range(3)] == [1000, 2000, 2000]
                assert tools.js("+document.getElementById('group-count').dataset.matched") == 1000
                assert tools.js("document.querySelectorAll('details.group').length") == 50
                assert tools.js("document.querySelectorAll('details.group[open]').length") == 0
                names = tools.js("[...document.querySelectorAll('details.group')].map(d => d.dataset.group)")
                numbers = [int(n.rsplit("-", 1)[1]) for n in names]
                assert numbers == sorted(numbers), names           # natural order
                assert tools.js("document.querySelectorAll('tr.topic.system').length") == 0
                assert tools.js("+document.getElementById('topic-count').dataset.matched") == 10_000
                assert tools.js("document.querySelectorAll('tr.topic').length") == 100
                height = tools.js("document.documentElement.scrollHeight")
                assert height < 20_000, height                     # was ~22,000 px at 200 brokers
                _screenshot(tools, "status-2000-brokers.png")

                # open a group and a topic's groups; both stay open across refreshes
                first_group = names[0]
                tools.js("document.querySelector('details.group summary').click()")
                tools.js("document.querySelector('#topics td details summary').click()")
                tools.js("document.querySelector('#kv details summary').click()")
                loaded = tools.js("+(document.body.dataset.loaded || 0)")
                tools.wait_js(f"+(document.body.dataset.loaded || 0) >= {loaded + 2}")
                assert tools.js("document.querySelector('details.group').open") is True
                assert tools.js("document.querySelector('details.group').dataset.group") == first_group
                assert tools.js("document.querySelector('#topics td details').open") is True
                assert tools.js("document.querySelector('#kv details').open") is True   # was closed by each refresh

                # a filter, kept (with the opened group) across the refresh
                tools.js("document.getElementById('q').focus()")
                tools.call("Input.insertText", text=first_group)
                tools.wait_js(f"document.getElementById('group-count').textContent.includes('{first_group}')")
                loaded = tools.js("+(document.body.dataset.loaded || 0)")
                tools.wait_js(f"+(document.body.dataset.loaded || 0) >= {loaded + 1}")
                assert tools.js("document.getElementById('q').value") == first_group
                assert tools.js("document.querySelector('details.group').open") is True
                _screenshot(tools, "status-2000-brokers-filtered.png")

                # the groups' pager
                tools.js("document.getElementById('q').value = ''; "
                         "document.getElementById('filter').requestSubmit()")
                tools.wait_js("+document.getElementById('group-count').dataset.matched === 1000")
                tools.js("document.querySelector('#groups a.pg[rel=next]').click()")
                tools.wait_js("document.getElementById('group-count').textContent.startsWith('Showing 51')")
                assert tools.js("location.search") == "?gpage=2&refresh=2"
                errors = [e for e in tools.events if e.get("method") == "Runtime.exceptionThrown"
                          or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
                assert not errors, errors
            admin.close()
        finally:
            sim.terminate()
            try:
                sim.wait(30)
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.wait()
