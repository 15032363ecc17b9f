"""Service layer: the Prometheus families of rocketpy's guards against the wire (issue 12):
handler bugs (issue 32); refusals of config updates, KV puts, registrations over a route bound
and broker requests; the route state against its bounds; the writer's jobs, writes (their ratio
is the group commit) and failures; memory releases. ``makeService`` adds them to the web endpoint's registry; nothing here
runs per request (the guards' counters are plain attributes, read at scrape time)."""
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..controller.grouprole import ROLES
from ..remoting.codes import request_code_name

__all__ = ["GuardCollector"]

_P = "rocketpy_"


def _by(name, doc, label, counts):
    family = CounterMetricFamily(_P + name, doc, labels=[label])
    for key, value in sorted(counts.items()):
        family.add_metric([key], value)
    return family


def _handler_failures(processors):
    """Handler bugs (anything a handler raised but the codec's errors), by server and served
    code: 0 while all is well, so an alert can fire on any increase."""
    family = CounterMetricFamily(_P + "handler_failures", "Requests whose handler raised "
                                 "something other than the codec's errors (a bug, logged with "
                                 "its traceback; answered SYSTEM_ERROR), by server and request "
                                 "code.", labels=["server", "request_code"])
    for server, processor in processors:
        failures = getattr(processor, "handler_failures", None)
        if failures is None:
            continue
        for code in sorted(set(processor.handlers) | set(failures)):
            family.add_metric([server, request_code_name(code) or "OTHER"], failures.get(code, 0))
    return family


def _pushes(notifier):
    pushes = CounterMetricFamily(_P + "controller_pushes", "NOTIFY_BROKER_ROLE_CHANGED pushes, by "
                                 "outcome (dropped: the waiting queue was full).",
                                 labels=["outcome"])
    for outcome, value in (("sent", notifier.sent), ("failed", notifier.failed),
                           ("dropped", notifier.dropped)):
        pushes.add_metric([outcome], value)
    yield pushes
    yield GaugeMetricFamily(_P + "controller_pushes_waiting", "Pushes waiting for a place.",
                            value=notifier.queued)
    yield GaugeMetricFamily(_P + "controller_push_connections", "Brokers being connected to or "
                            "written to by a push now (at most 32).", value=notifier.active)


def _group(group):
    role = GaugeMetricFamily(_P + "controller_group_role", "This controller's role in its etcd "
                             "group (1 for the current one).", labels=["role"])
    for name in ROLES:
        role.add_metric([name], 1 if group.role.role == name else 0)
    yield role
    yield GaugeMetricFamily(_P + "controller_group_leaderless", "1 while this controller knows of "
                            "no leader of its group.", value=1 if group.leaderless else 0)
    yield CounterMetricFamily(_P + "controller_group_leaderless_seconds", "Time this controller "
                              "knew of no leader, in all.", value=group.leaderless_seconds())
    for name, doc, value in (
            ("controller_group_leaderless_spells", "Times the group was without a known leader.",
             group.leaderless_spells),
            ("controller_group_step_downs", "Times this controller stopped leading.",
             group.step_downs),
            ("controller_group_refused_entries", "Entries etcd refused for their size (the entry "
             "failed, the leadership stayed).", group.refused_entries),
            ("controller_group_refused_changes", "Changes refused before they were applied: "
             "their entry would be over the size bound.", group.refused_changes)):
        yield CounterMetricFamily(_P + name, doc, value=value)


class GuardCollector:
    """The families above, from the processor's guards, the writer and the memory service."""

    def __init__(self, processor, write_pool=None, memory=None, controller=None, group=None,
                 notifier=None, snapshot=None):
        self.processor = processor
        #: the warm restart's :class:`~rocketpy.service.routesnapshot.RouteSnapshotService`
        self.snapshot = snapshot
        #: the controller's processor (``enableControllerInNamesrv``), or None
        self.controller = controller
        #: its etcd group (``controllerType=etcd``) and its push notifier, or None
        self.group = group
        self.notifier = notifier
        self.write_pool = write_pool
        self.memory = memory

    def describe(self):
        return []  # collected on demand only

    def collect(self):
        proc = self.processor
        yield _handler_failures((("namesrv", proc), ("controller", self.controller)))
        yield _by("config_update_refusals", "UPDATE_NAMESRV_CONFIG requests refused, by reason.",
                  "reason", proc.config_guard.refused)
        kv = proc.kv_config_manager
        yield _by("kv_put_refusals", "PUT_KV_CONFIG requests refused by a KV bound.", "bound",
                  kv.refused)
        yield CounterMetricFamily(_P + "kv_compactions", "KV log compactions into kvConfig.json.",
                                  value=kv.compactions)
        yield CounterMetricFamily(_P + "kv_compaction_failures", "KV log compactions that could "
                                  "not write kvConfig.json (the log keeps every change).",
                                  value=kv.compactions_failed)
        bounds = proc.route_bounds
        yield _by("route_bound_refusals", "Registrations refused by a route-state bound.",
                  "bound", bounds.refused)
        rim = proc.route_info_manager
        state = GaugeMetricFamily(_P + "route_state", "The route state's size.", labels=["kind"])
        limit = GaugeMetricFamily(_P + "route_state_bound", "The route state's bounds (0: none).",
                                  labels=["kind"])
        for kind, now, bound in (
                ("topics", len(rim.topic_queue_table), bounds.max_topics),
                ("topic_broker_pairs", rim.queue_data_count, bounds.max_topic_broker_pairs),
                ("brokers", len(rim.broker_live_table), bounds.max_brokers)):
            state.add_metric([kind], now)
            limit.add_metric([kind], bound)
        yield state
        yield limit
        access = getattr(proc, "broker_access", None)
        if access is not None:
            yield _by("broker_requests_refused", "Broker requests refused by the broker access "
                      "policy (brokerAllowNetworks, brokerIdentityBinding), by reason.", "reason",
                      access.refused)
        elections = getattr(self.controller, "elections", None)
        if elections is not None:
            yield _by("controller_master_elections", "Master elections by the controller "
                      "(enableControllerInNamesrv), by result: elected or failed.", "result",
                      elections)
        access = getattr(self.controller, "broker_access", None)
        if access is not None:
            yield _by("controller_broker_requests_refused", "Broker requests to the controller "
                      "refused by brokerAllowNetworks / brokerIdentityBinding, by reason.",
                      "reason", access.refused)
        if self.notifier is not None:
            yield from _pushes(self.notifier)
        if self.group is not None:
            yield from _group(self.group)
        pool = self.write_pool   # None: no writer thread (a test reactor), nothing counted
        yield CounterMetricFamily(_P + "file_write_jobs", "Writes asked of the writer thread "
                                  "(one per PUT/DELETE/UPDATE).", value=getattr(pool, "jobs", 0))
        yield CounterMetricFamily(_P + "file_writes", "Writes the writer thread did (several "
                                  "jobs queued together are one write).",
                                  value=getattr(pool, "writes", 0))
        yield CounterMetricFamily(_P + "file_write_failures", "Files the writer could not write.",
                                  value=getattr(pool, "failures", 0))
        if self.memory is not None:
            yield CounterMetricFamily(_P + "memory_releases", "Releases of memory after the route "
                                      "state shrank.", value=self.memory.releases)
        if self.snapshot is not None:
            yield from self._snapshot(self.snapshot)

    @staticmethod
    def _snapshot(snapshot):
        yield CounterMetricFamily(_P + "route_snapshot_writes", "Route snapshots written (warm "
                                  "restart, routeSnapshotPath).", value=snapshot.writes)
        yield CounterMetricFamily(_P + "route_snapshot_write_failures", "Route snapshots that "
                                  "could not be written.", value=snapshot.write_failures)
        yield GaugeMetricFamily(_P + "route_snapshot_last_write_seconds", "When the newest "
                                "route snapshot was written, Unix time (0: none yet).",
                                value=(snapshot.last_write_ms or 0) / 1000)
        yield GaugeMetricFamily(_P + "route_snapshot_bytes", "The newest route snapshot's size "
                                "on disk, both parts.", value=snapshot.last_bytes)
        report = snapshot.load_report or {}
        yield GaugeMetricFamily(_P + "route_snapshot_loaded_pairs", "Topic-broker pairs loaded "
                                "from a route snapshot at start (0: none loaded).",
                                value=report.get("pairs", 0))
        yield GaugeMetricFamily(_P + "route_snapshot_load_seconds", "Seconds the start spent "
                                "loading its route snapshot.", value=report.get("seconds", 0))
