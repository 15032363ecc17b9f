"""The operator's kit (issue 34): ``ops/prometheus/rules.yml`` and ``ops/grafana/rocketpy.json``
against real servers and Debian's Prometheus (``tests/install.sh`` installs it).

Two real NameServers (one with a broker, a warm-restart snapshot, a hosted controller that
elected a master and a SYSTEM_ERROR answered; one empty) are scraped; then

* ``promtool check rules`` passes, and ``promtool test rules`` runs each alert against those
  scrapes' series (their names, labels and values; time evolves them: a counter that moves, a
  gauge that stays), each alert firing where it should and nowhere else;
* every expression of the rules and of the dashboard names at least one metric, and every metric
  it names is in the scrapes;
* a real ``prometheus`` on loopback scrapes the first server, loads the rules, and answers every
  dashboard expression (valid PromQL, and data where the server has it).
"""
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from brokerbody import register_body
from serverproc import REPO_ROOT, RemotingClient, running_server

pytestmark = pytest.mark.network

RULES = REPO_ROOT / "ops" / "prometheus" / "rules.yml"
DASHBOARD = REPO_ROOT / "ops" / "grafana" / "rocketpy.json"
WEB = r"rocketpy web endpoint on http://([\d.]+):(\d+)/"
JOB = "rocketmq-namesrv"
#: PromQL's binary operators and keywords (functions are told by the parenthesis after them)
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset"}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: tests/install.sh installs Debian's prometheus package")
    return path


def _register(client, topics=("TopicA", "TopicB"), crc=None):
    body = register_body(topics, 1)
    return client.call(103, {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                             "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:10912",
                             "brokerId": "0", "compressed": "false",
                             "bodyCrc32": str(crc if crc is not None else
                                              zlib.crc32(body) & 0x7FFFFFFF)}, body)


def _scrape(host, port):
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def _wait_metric(host, port, name, minimum, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(rf"^{name} (\S+)", _scrape(host, port), re.M)
        if found and float(found.group(1)) >= minimum:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} never reached {minimum}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """``{"ns1": (host, port, scrape text), "ns2": ...}`` of two real servers; ns1 stays up for
    the Prometheus test (``live``)."""
    tmp = tmp_path_factory.mktemp("ops")
    controller_port = _free_port()
    args = ("--web=tcp:0:interface=127.0.0.1", f"--routeSnapshotPath={tmp}/routes.snap",
            "-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
            "-D", f"controllerDLegerPeers=n0-127.0.0.1:{controller_port}",
            "-D", "controllerDLegerSelfId=n0", "-D", f"controllerStorePath={tmp}/controller",
            "-D", "bindAddress=127.0.0.1")
    with running_server(*args) as ns1, running_server("--web=tcp:0:interface=127.0.0.1") as ns2:
        ns1.wait_for_log(r"The ControllerManager boot success\.", timeout=10)
        broker = RemotingClient(ns1.port)
        assert _register(broker).code == 0
        assert _register(broker, crc=12345).code == 1          # SYSTEM_ERROR "crc32 not match"
        _elect(controller_port)
        found = {}
        for name, server in (("ns1", ns1), ("ns2", ns2)):
            host, port = re.search(WEB, server.wait_for_log(WEB, timeout=10)).groups()
            found[name] = (host, int(port))
        _wait_metric(*found["ns1"], "rocketpy_route_snapshot_writes_total", 1)
        scrapes = {name: (*where, _scrape(*where)) for name, where in found.items()}
        yield scrapes
        broker.close()


def _elect(port):
    """A controller-mode broker joins and asks for an election (one master elected)."""
    from rocketpy.remoting import RemotingCommand, headers as H
    group = dict(cluster_name="c", broker_name="b")
    client = RemotingClient(port)
    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        answer = client.call(1013, H.ApplyBrokerIdRequestHeader(
            applied_broker_id=1, register_check_code=f"{addr};1", **group).to_ext_fields())
        assert answer.code == 0, answer
        client.send_frame(RemotingCommand.request(904, H.BrokerHeartbeatRequestHeader(
            broker_addr=addr, broker_id=1, epoch=0, max_offset=1, heartbeat_timeout_mills=60000,
            **group).to_ext_fields(), oneway=True).encode())
        answer = client.call(1002, H.ElectMasterRequestHeader(broker_id=1, designate_elect=False,
                                                              **group).to_ext_fields())
        assert answer.code == 0, answer
    finally:
        client.close()
        listener.close()


def _samples(text):
    """``[(name, labels, value, family type)]`` of a scrape."""
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.append((sample.name, dict(sample.labels), sample.value, family.type))
    return out


def _names(text):
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
    return names


def _expressions():
    """``[(where, expression)]`` of the rules and the dashboard, the dashboard's variables
    given values as Grafana would."""
    out = [(f"rule {rule['alert']}", rule["expr"])
           for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", ()):
            expr = (target["expr"].replace("$__rate_interval", "1m").replace("$job", ".+")
                    .replace("$instance", ".+"))
            out.append((f"panel {panel['title']!r}", expr))
    return out


def _metric_names(expression):
    """The metric names in a PromQL expression: what remains once label matchers, range
    selectors, grouping clauses, functions (a name before ``(``) and keywords are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    words = re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", text)
    return {w for w in words if w not in PROMQL_KEYWORDS}


def test_every_expression_names_a_metric_the_servers_export(servers):
    exported = set()
    for _, _, text in servers.values():
        exported |= _names(text)
    exported.add("up")           # Prometheus's own, per target
    expressions = _expressions()
    assert len(expressions) > 30
    for where, expression in expressions:
        names = _metric_names(expression)
        assert names, f"{where} names no metric: {expression}"
        assert names <= exported, f"{where}: {sorted(names - exported)} not exported"
    dashboard = DASHBOARD.read_text()
    for topic in ("brokers", "topics", "GET_ROUTEINFO_BY_TOPIC", "registrations", "SYSTEM_ERROR",
                  "overloaded_requests", "resident_memory", "master_elections"):
        assert topic in dashboard, topic


def test_promtool_checks_the_rules():
    done = subprocess.run([_tool("promtool"), "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 14 rules found" in done.stdout


# ------------------------------------------------------------------ promtool test rules

def _selector(name, labels):
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _series(servers, override=()):
    """promtool input series: every sample of both scrapes as it was scraped, constant over
    time, under ``instance`` and ``job``; ``override`` ``{(instance, name, label items): values}``
    replaces a series' values or adds a series the scrapes lack."""
    series = {}
    for instance, (_, _, text) in servers.items():
        for name, labels, value, _ in _samples(text):
            if not re.match(r"(rocketpy|process|python)_", name):
                continue
            key = (instance, name, tuple(sorted(labels.items())))
            series[key] = f"{value:g}+0x40"
        series[(instance, "up", ())] = "1+0x40"
    series.update(dict(override))
    return [{"series": _selector(name, dict(labels, instance=instance, job=JOB)), "values": values}
            for (instance, name, labels), values in series.items()]


def _value(servers, instance, name, **labels):
    for sample, found, value, _ in _samples(servers[instance][2]):
        if sample == name and all(found.get(k) == v for k, v in labels.items()):
            return value
    raise AssertionError(f"{name} {labels} not in the {instance} scrape")


RULE_OF = {rule["alert"]: rule for group in yaml.safe_load(RULES.read_text())["groups"]
           for rule in group["rules"]}
ALERTS = list(RULE_OF)


def _annotations(alert, labels):
    """The rule's annotations as Prometheus renders them for an alert with ``labels``."""
    return {key: re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels[m.group(1)], text)
            for key, text in RULE_OF[alert].get("annotations", {}).items()}


def _cases(servers):
    """``[(what, series overrides, {alert: [expected label sets]}, eval time)]``; an alert left
    out is expected not to fire."""
    v = lambda name, **labels: _value(servers, "ns1", name, **labels)   # noqa: E731
    key = lambda name, **labels: ("ns1", name, tuple(sorted(labels.items())))  # noqa: E731
    rising = lambda start, step=1: f"{start:g}+{step}x40"             # noqa: E731
    register_buckets = [(labels, value) for name, labels, value, _ in _samples(servers["ns1"][2])
                        if name == "rocketpy_request_duration_seconds_bucket"
                        and labels.get("request_code") == "REGISTER_BROKER"]
    assert register_buckets, "the scrape has REGISTER_BROKER's latency buckets"
    slow = {key("rocketpy_request_duration_seconds_bucket", **labels):
            (f"{value:g}+0x40" if labels["le"] != "+Inf" and float(labels["le"]) <= 0.25
             else rising(value, 10))
            for labels, value in register_buckets}
    ns1 = {"instance": "ns1"}
    return [
        ("the scrapes as they are", {}, {
            # the empty server (ns2) has no broker, so it differs from ns1
            "NameServerHasNoBrokers": [{"instance": "ns2", "severity": "critical"}],
            "NameServersDisagree": [{"severity": "warning"}]}, "20m"),
        ("ns1 not answering its scrapes", {("ns1", "up", ()): "0+0x40"}, {
            "NameServerDown": [{"instance": "ns1", "job": JOB, "severity": "critical"}],
            "NameServerHasNoBrokers": [{"instance": "ns2", "severity": "critical"}],
            "NameServersDisagree": [{"severity": "warning"}]}, "20m"),
        ("counters that move", {
            key("rocketpy_broker_expiries_total"): rising(v("rocketpy_broker_expiries_total")),
            key("rocketpy_unregistration_rejections_total"):
                rising(v("rocketpy_unregistration_rejections_total")),
            key("rocketpy_admin_requests_refused_total", reason="network"):
                rising(v("rocketpy_admin_requests_refused_total", reason="network")),
            key("rocketpy_route_snapshot_write_failures_total"):
                rising(v("rocketpy_route_snapshot_write_failures_total")),
            key("rocketpy_bad_frames_total", reason="decode"):
                rising(v("rocketpy_bad_frames_total", reason="decode"), 30),
            key("rocketpy_requests_total", request_code="REGISTER_BROKER",
                response_code="SYSTEM_ERROR"):
                rising(v("rocketpy_requests_total", request_code="REGISTER_BROKER",
                         response_code="SYSTEM_ERROR")),
            # the family exists in the scrape; its samples appear once a request is shed
            key("rocketpy_overloaded_requests_total", request_code="GET_ROUTEINFO_BY_TOPIC"):
                rising(0, 5),
            **slow,
        }, {name: [dict(ns1, severity="warning")] for name in (
            "BrokerExpired", "UnregistrationsRefused", "AdminRequestsRefused",
            "RouteSnapshotNotWritten", "BadFrames", "NameServerErrors", "RequestsShed",
            "SlowRegistrations")} | {
            "NameServerHasNoBrokers": [{"instance": "ns2", "severity": "critical"}],
            "NameServersDisagree": [{"severity": "warning"}]}, "15m"),
        ("gauges past their thresholds", {
            key("rocketpy_unregistration_queue_depth"):
                f"{0.9 * v('rocketpy_unregistration_queue_capacity'):g}+0x40",
            key("rocketpy_route_snapshot_last_write_seconds"): "10+0x40",
            key("rocketpy_provisional_brokers"): "1+0x40",
        }, {"UnregistrationQueueFilling": [dict(ns1, severity="warning")],
            "RouteSnapshotStale": [dict(ns1, severity="warning")],
            "ProvisionalBrokersLinger": [dict(ns1, severity="info")],
            "NameServerHasNoBrokers": [{"instance": "ns2", "severity": "critical"}],
            "NameServersDisagree": [{"severity": "warning"}]}, "20m"),
    ]


def test_promtool_unit_tests_every_alert_with_series_of_a_real_scrape(servers, tmp_path):
    cases = _cases(servers)
    fired = {alert for _, _, expected, _ in cases for alert in expected}
    assert fired == set(ALERTS), set(ALERTS) ^ fired     # each alert fires in some case
    tests = []
    for what, override, expected, at in cases:
        tests.append({
            "name": what, "interval": "1m", "input_series": _series(servers, override),
            "alert_rule_test": [{"eval_time": at, "alertname": alert,
                                 "exp_alerts": [{"exp_labels": labels,
                                                 "exp_annotations": _annotations(alert, labels)}
                                                for labels in expected.get(alert, [])]}
                                for alert in ALERTS]})
    spec = tmp_path / "rules_test.yml"
    spec.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1m",
                                "tests": tests}, indent=1))
    done = subprocess.run([_tool("promtool"), "test", "rules", str(spec)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "SUCCESS" in done.stdout


def test_promtool_test_rules_fails_a_wrong_expectation(servers, tmp_path):
    """The harness can fail: the healthy case expecting NameServerDown is refused."""
    labels = {"instance": "ns1", "job": JOB, "severity": "critical"}
    spec = tmp_path / "wrong.yml"
    spec.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": _series(servers),
        "alert_rule_test": [{"eval_time": "10m", "alertname": "NameServerDown",
                             "exp_alerts": [{"exp_labels": labels,
                                             "exp_annotations": _annotations("NameServerDown",
                                                                             labels)}]}]}]}))
    done = subprocess.run([_tool("promtool"), "test", "rules", str(spec)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0


# ------------------------------------------------------------------ a real prometheus

def _query(base, expression):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def test_a_real_prometheus_scrapes_the_server_and_answers_the_dashboard(servers, tmp_path):
    host, port, _ = servers["ns1"]
    web = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [f"{host}:{port}"]}]}]}))
    proc = subprocess.Popen([_tool("prometheus"), f"--config.file={config}",
                             f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{web}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{web}"
    try:
        deadline = time.monotonic() + 60
        up = None
        while time.monotonic() < deadline:
            try:
                up = _query(base, f'up{{job="{JOB}"}}')["data"]["result"]
                brokers = _query(base, "rocketpy_brokers")["data"]["result"]
                if up and up[0]["value"][1] == "1" and brokers and len(_query(
                        base, "rocketpy_cached_answers_total[10s]")["data"]["result"][0]["values"]) >= 3:
                    break
            except (OSError, IndexError, KeyError):
                pass
            time.sleep(0.5)
        else:
            raise AssertionError(f"prometheus never scraped the server: {up}")
        assert brokers[0]["value"][1] == "1"
        assert brokers[0]["metric"]["instance"] == f"{host}:{port}"
        with_data = 0
        for where, expression in _expressions():
            answer = _query(base, expression)
            assert answer["status"] == "success", (where, expression, answer)
            with_data += bool(answer["data"]["result"])
        assert with_data >= 25, with_data        # the rest: families still without samples
        rules = json.loads(urllib.request.urlopen(f"{base}/api/v1/rules", timeout=10).read())
        loaded = [rule for group in rules["data"]["groups"] for rule in group["rules"]]
        assert len(loaded) == 14 and all(rule["health"] in ("ok", "unknown") for rule in loaded)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
