"""The one writer (issue 21 part 2, issue 32 part 3): policies read the tables through a
read-only RouteView and record op records in a RouteDelta; RouteInfoManager.apply applies them
through one type table and says what they touched; nothing else writes the tables.

* a delta that changes nothing touches nothing and moves no version;
* the op types, their appliers and their encoding are one set; an op is an immutable value
  (hashable all the way down), equal only to ops of its own type;
* the tables are read-only views outside the writer, to any depth, and their records frozen;
* the policies read only what RouteView declares;
* no module writes a route table (an AST walk of every module, following names taken from a
  table), and inside the writer only the appliers (and what they call) do.
"""
import ast
import dataclasses
import textwrap
from pathlib import Path

import pytest

from rocketpy.namesrv import NamesrvConfig, RouteInfoManager
from rocketpy.namesrv import brokers, route_bounds, route_info_manager
from rocketpy.namesrv import delta as ops
from rocketpy.namesrv.delta import RouteDelta
from rocketpy.namesrv.model import (BrokerData, DataVersion, MappingInfo, QueueData,
                                    Registration, TopicConfig, TopicConfigWrapper)
from rocketpy.namesrv.opcodec import SCHEMA
from rocketpy.namesrv.profile import PROFILE_53
from rocketpy.namesrv.routeview import TABLES, RouteView
from rocketpy.remoting.bodies import TopicQueueMappingInfo

ROOT = Path(__file__).resolve().parents[1]


def seeded(profile=PROFILE_53):
    rim = RouteInfoManager(NamesrvConfig(), profile)
    table = {t: TopicConfig(t, 4, 4, 6) for t in ("T1", "T2", "T3")}
    mapping = {"T1": TopicQueueMappingInfo(bname="a", curr_id_map={0: 0}, topic="T1")}
    rim.register_broker(Registration("C", "10.0.0.1:10911", "a", 0, "ha",
                                     TopicConfigWrapper(DataVersion(1, 1, 0), table, mapping),
                                     ["fs"], 1, 0))
    return rim


def versions(rim):
    return {t: rim.route_version(t) for t in ("T1", "T2", "T3", "NONE")}


def test_an_empty_delta_touches_nothing():
    rim = seeded()
    before, generation = versions(rim), rim.snapshots.generation
    touched = rim.apply(RouteDelta())
    assert not touched and touched.topics == frozenset() and touched.brokers == frozenset()
    assert versions(rim) == before and rim.snapshots.generation == generation


def test_a_delta_of_equal_values_touches_nothing():
    rim = seeded()
    before, generation = versions(rim), rim.snapshots.generation
    delta = RouteDelta()
    delta.add(ops.SetBroker.of(BrokerData("C", "a", {0: "10.0.0.1:10911"})))   # equal, new
    delta.add(ops.PutTopics("a", (TopicConfig("T1", 4, 4, 6),), False))       # the same data
    delta.add(ops.AddToCluster("C", "a"))
    touched = rim.apply(delta)
    assert len(delta) == 3 and not touched
    assert versions(rim) == before and rim.snapshots.generation == generation


def test_apply_reports_the_topics_layouts_and_brokers_it_changed():
    rim = seeded()
    before = versions(rim)
    delta = RouteDelta()
    delta.add(ops.PutTopics("a", (TopicConfig("T1", 8, 8, 6), TopicConfig("T2", 8, 8, 6)), False))
    delta.add(ops.SetBroker.of(BrokerData("C", "a", {0: "10.0.0.1:10911", 1: "10.0.0.1:10921"})))
    touched = rim.apply(delta)
    assert touched.topics == {"T1", "T2"} and touched.brokers == {"a"}
    assert touched.shapes == (rim.topic_queue_table["T1"],)
    assert rim.topic_queue_table["T1"]["a"] == QueueData("a", 8, 8, 6)
    assert all(versions(rim)[t] != before[t] for t in ("T1", "T2", "T3"))   # T3 names broker a
    assert versions(rim)["NONE"] == before["NONE"]


def test_an_op_the_table_does_not_know_is_refused_and_changes_nothing():
    rim = seeded()
    generation = rim.snapshots.generation
    with pytest.raises(TypeError, match="not a route op"):
        rim.apply(RouteDelta([("drop_topic", ("T1",))]))    # the old tuples: no getattr dispatch
    assert "T1" in rim.topic_queue_table and rim.snapshots.generation == generation


# ------------------------------------------------------------------ the ops are values

#: one op of every type, each field set to something other than its default
SAMPLES = (
    ops.AddToCluster("C", "a"), ops.RemoveFromCluster("C", "a"),
    ops.SetBroker("C", "a", ((0, "h:1"), (1, "h:2")), True, "z"), ops.RemoveBroker("a"),
    ops.PutLive(("C", "h:1"), 5, 30_000, DataVersion(1, 2, 3), 7, "ha", "a", ("fs",), True, "h"),
    ops.RefreshLive((None, "h:1"), 9), ops.RemoveLive(("C", "h:1")),
    ops.RemoveFilterServers(("C", "h:1"), "a"),
    ops.MergeTopics("a", (TopicConfig("T", 1, 2, 6, 1),), True, True, b"d" * 16, True),
    ops.PutTopics("a", (TopicConfig("T"),), True, True), ops.PutQueueData("T", QueueData("a", 1, 2, 6)),
    ops.RemoveQueueData("T", "a"), ops.RemoveBrokerTopics("a"), ops.DropTopic("T"),
    ops.SetMapping("T", MappingInfo("a", ((0, 1),), True, 2, "s", "T", 1), "g"),
    ops.RemoveBrokerMappings("a"), ops.RestoreHighWater(1, 2, 3),
    ops.RestoreCluster("C", ("a", "b"), 4), ops.RestoreAppliedDigest("a", b"d" * 16),
    ops.RestoreTopics((QueueData("a", 1, 2, 6),), 2, ("T", "U")),
    ops.NotifyMinBrokerIdChanged(((1, "h:2"),), "h:1", None), ops.InvalidateRoutes())


def test_every_op_type_has_one_applier_and_one_encoding():
    assert tuple(route_info_manager.APPLIERS) == ops.OPS == tuple(SCHEMA)
    assert {type(op) for op in SAMPLES} == set(ops.OPS)
    assert len({tag for tag, _ in SCHEMA.values()}) == len(ops.OPS)


def test_an_op_is_an_immutable_value_equal_only_to_its_own_type():
    for op in SAMPLES:
        hash(op)   # every value in it is hashable: no dict, list or set anywhere inside
        assert op == type(op)(*op) and op != tuple(op)
        if op._fields:
            with pytest.raises(AttributeError):
                setattr(op, op._fields[0], None)
        assert not any(callable(value) for value in op)
    assert ops.RemoveBroker("a") != ops.DropTopic("a") != ops.RemoveBrokerTopics("a")
    assert ops.AddToCluster("C", "a") != ops.RemoveFromCluster("C", "a")
    with pytest.raises(TypeError):
        hash(ops.PutLive(("C", "h"), 0, 0, DataVersion(), None, None, "a", ["fs"]))   # a list


def test_a_hint_goes_with_its_op_to_the_writer_alone():
    delta = RouteDelta()
    op = ops.DropTopic("T")
    delta.add(op, hint="found")
    assert delta.hint(op) == "found" and delta.hint(ops.DropTopic("T")) is None   # this very op
    assert delta.ops == [op]


# ------------------------------------------------------------------ read-only views

def test_the_tables_are_read_only_views_to_any_depth():
    rim = seeded()
    rim.register_broker(Registration("C", "10.0.0.1:10921", "a", 1, "ha", None, None, 2, 0))
    for name in TABLES:
        table = getattr(rim, name)
        assert type(table) is not dict, name
        with pytest.raises((TypeError, AttributeError)):
            table["x"] = None
        with pytest.raises((TypeError, AttributeError)):
            del table[next(iter(table), "x")]
        for method in ("pop", "clear", "update", "setdefault", "popitem"):
            assert not hasattr(table, method), (name, method)
    with pytest.raises((TypeError, AttributeError)):
        rim.cluster_addr_table["C"]["x"] = None          # a cluster's set of names
    with pytest.raises((TypeError, AttributeError)):
        rim.topic_queue_mapping_info_table["T1"]["x"] = None
    with pytest.raises(TypeError):
        rim.topic_queue_table["T1"]["x"] = None           # a layout
    with pytest.raises(TypeError):
        rim.filter_server_table[("C", "10.0.0.1:10911")][0] = "evil"
    for record in (rim.broker_addr_table["a"], rim.broker_live_table[("C", "10.0.0.1:10911")],
                   rim.topic_queue_mapping_info_table["T1"]["a"], rim.topic_queue_table["T1"]["a"]):
        field = dataclasses.fields(record)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)


def test_rim_implements_route_view():
    members = set(RouteView.__annotations__) | {
        name for name, value in vars(RouteView).items() if callable(value) and not name.startswith("_")}
    rim = seeded()
    assert members and all(hasattr(rim, name) for name in members)
    assert set(TABLES) <= members


def _reads_off(module, name="rim"):
    """The attributes read off ``name`` in ``module``."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == name}


def test_the_policies_read_only_what_route_view_declares():
    """The release's registration rules and the route bounds are typed against RouteView: they
    read nothing else off the tables (no writer, no private state, no step of apply)."""
    members = set(RouteView.__annotations__) | {
        name for name, value in vars(RouteView).items() if callable(value)}
    for module in (brokers, route_bounds):
        reads = _reads_off(module)
        assert reads and reads <= members, (module.__name__, reads - members)


# ------------------------------------------------------------------ no writer but apply

#: mutating methods of dicts, lists and sets
MUTATORS = {"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
            "setdefault", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"}
#: a table part's mutating methods: the topic table's shapes, the expiry index, the snapshots
PART_MUTATORS = {"shapes": {"put", "remove", "drop", "add_fresh", "restore", "remove_broker",
                            "touch_broker", "touch_all"},
                 "expiry": {"set", "remove"},
                 "snapshots": {"changed", "mapping_changed", "invalidate_all"}}
#: the view methods that hand out a table's records
VIEW_METHODS = {"broker_live_info", "route_snapshot", "topics_of_broker"}
#: the route tables and counts a RouteView shows, and those methods
ROOTS = set(TABLES) | {"queue_data_count", "mapping_count"} | VIEW_METHODS
#: the writer itself, and the table internals it owns
WRITER_MODULES = {"rocketpy/namesrv/route_info_manager.py", "rocketpy/namesrv/shapes.py",
                  "rocketpy/namesrv/snapshot.py", "rocketpy/namesrv/expiry.py",
                  # the controller's own live table (BrokerHeartbeatManager), no NameServer's
                  "rocketpy/controller/heartbeat.py"}
#: what a value read from a table can be read further through (the rest copies or computes)
_READS = {"get", "values", "items", "keys", "__getitem__"}


class _Writes(ast.NodeVisitor):
    """Writes to the route tables in one function (or module body): through a table attribute
    (``ROOTS``) or through a local name bound to something read from one."""

    def __init__(self, roots=ROOTS, private=()):
        self.roots = set(roots)
        self.private = set(private)   # the writer's own ``self._table`` attributes
        self.tainted = set()
        self.found = []

    def derived(self, node):
        """Whether ``node`` is (part of) a route table."""
        if isinstance(node, ast.Name):
            return node.id in self.tainted
        if isinstance(node, ast.Attribute):
            if node.attr in self.roots:
                return True
            if (node.attr in self.private and isinstance(node.value, ast.Name)
                    and node.value.id == "self"):
                return True
            return self.derived(node.value)
        if isinstance(node, ast.Subscript):
            return self.derived(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in self.roots:   # a view method handing out a table's records
                return True
            return node.func.attr in _READS and self.derived(node.func.value)
        return False

    def _bind(self, target):
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                self.tainted.add(node.id)

    def _target(self, target, line):
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, line)
        elif isinstance(target, ast.Attribute) and (
                (target.attr in self.roots and target.attr not in VIEW_METHODS)
                or self.derived(target.value)
                or (target.attr in self.private and isinstance(target.value, ast.Name)
                    and target.value.id == "self")):
            self.found.append((line, ast.unparse(target)))
        elif isinstance(target, ast.Subscript) and self.derived(target.value):
            self.found.append((line, ast.unparse(target)))

    def visit_Assign(self, node):
        for target in node.targets:
            self._target(target, node.lineno)
        if self.derived(node.value):
            for target in node.targets:
                self._bind(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._target(node.target, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._target(node.target, node.lineno)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self._target(target, node.lineno)
        self.generic_visit(node)

    def visit_For(self, node):
        if self.derived(node.iter):
            self._bind(node.target)
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in MUTATORS and self.derived(func.value):
                self.found.append((node.lineno, ast.unparse(func)))
            owner = func.value
            if isinstance(owner, ast.Attribute) and func.attr in PART_MUTATORS.get(owner.attr, ()):
                self.found.append((node.lineno, ast.unparse(func)))
        self.generic_visit(node)


def table_writes(source, **kwargs):
    """``(line, what)`` of every write to a route table in ``source``, function by function
    (names taken from a table are followed within the function that took them)."""
    tree = ast.parse(textwrap.dedent(source))
    found = []
    scopes = [node for node in ast.walk(tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for scope in [tree] + scopes:
        writes = _Writes(**kwargs)
        body = scope.body if isinstance(scope.body, list) else [scope.body]
        for statement in body:
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                writes.visit(statement)
            elif isinstance(statement, ast.ClassDef):   # its own statements, not its methods
                for inner in statement.body:
                    if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        writes.visit(inner)
        found.extend(writes.found)
    return sorted(set(found))


@pytest.mark.parametrize("source", [
    "rim.broker_addr_table['a'] = data",
    "self.routes.queue_data_count += 1",
    "rim.topic_queue_table = {}",
    "del routes.broker_live_table[key]",
    "names = rim.cluster_addr_table.get('C')\nnames.pop('a')",
    "for topic, shape in rim.topic_queue_table.items():\n    shape.members.append(topic)",
    "data = rim.broker_addr_table['a']\ndata.broker_addrs[1] = 'h:2'",
    "rim.topic_queue_mapping_info_table.get('T').clear()",
    "rim.shapes.put('T', queue_data)",
    "self.rim.expiry.set(key, 0)",
    "rim.snapshots.invalidate_all()",
    "live = rim.broker_live_info('C', 'h:1')\nlive.last_update_ms = 0",
    "def f(rim):\n    table = rim.filter_server_table\n    table.update({})",
], ids=lambda s: s.splitlines()[-1][:40])
def test_the_write_finder_finds_writes(source):
    assert table_writes(source), source


@pytest.mark.parametrize("source", [
    "addrs = dict(rim.broker_addr_table['a'].broker_addrs)\naddrs[1] = 'h:2'",
    "names = list(rim.cluster_addr_table.get('C', ()))\nnames.append('b')",
    "n = len(rim.broker_live_table) + rim.queue_data_count",
    "image.shapes.append(shape)",
    "copies = {k: v for k, v in rim.broker_addr_table.items()}\ncopies['a'] = None",
    "rim.shapes.rebuilt()",
])
def test_the_write_finder_leaves_reads_and_copies_alone(source):
    assert table_writes(source) == []


def _modules():
    for path in sorted((ROOT / "rocketpy").rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_no_module_writes_a_route_table():
    """Every module of the package, walked: outside the writer (and the table internals it
    owns), nothing assigns, deletes or mutates a route table, a part of one, or a record taken
    from one; the runtime views refuse it too, this finds it before it runs."""
    offenders = {path: writes for path, source in _modules() if path not in WRITER_MODULES
                 for writes in [table_writes(source)] if writes}
    assert offenders == {}


def _methods(cls_name="RouteInfoManager"):
    tree = ast.parse(Path(route_info_manager.__file__).read_text())
    manager = next(node for node in tree.body if isinstance(node, ast.ClassDef)
                   and node.name == cls_name)
    return {node.name: node for node in manager.body if isinstance(node, ast.FunctionDef)}


def _calls_of(method):
    return {node.func.attr for node in ast.walk(method) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"}


#: the writer's own tables (private: only its views are public) and counts
PRIVATE_TABLES = {"_brokers", "_clusters", "_live", "_filters", "_mapped", "_provisional",
                  "_by_channel", "_applied", "_epochs", "_cluster_set_high", "_mappings_of",
                  "_mapping_owner", "queue_data_count", "mapping_count", "_generations"}


def test_inside_the_writer_only_the_appliers_write():
    """In RouteInfoManager the tables change only in the appliers of the type table and what
    they call (and the gate's report); every other method (registration, unregistration, the
    liveness scan, heartbeats, the admin commands) hands ``apply`` a delta, and calls no
    applier itself."""
    methods = _methods()
    appliers = {fn.__name__ for fn in route_info_manager.APPLIERS.values()}
    writers, todo = set(), list(appliers)
    while todo:   # the appliers and every method they reach
        name = todo.pop()
        if name in writers or name not in methods:
            continue
        writers.add(name)
        todo.extend(_calls_of(methods[name]))
    allowed = writers | {"__init__", "_publish"}
    assert len(appliers) == len(ops.OPS) and {"_put_topic", "_bind_live", "_changed"} <= writers
    offenders = {}
    for name, method in methods.items():
        if name in allowed:
            continue
        source = ast.unparse(method)
        writes = table_writes(source, roots=set(), private=PRIVATE_TABLES)
        steps = _calls_of(method) & writers
        if writes or steps:
            offenders[name] = (writes, sorted(steps))
    assert offenders == {}


def test_a_departed_broker_leaves_its_topics_in_one_step_whatever_their_number():
    """The unregistration's delta names the broker once, not each of its topics: one entry per
    topic held ~150 MB of steps when a broker of 1 M topics left, kept by the allocator after."""
    for count in (1_000, 2_000):
        rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
        table = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6) for i in range(count)}
        rim.register_broker(Registration("C", "10.0.0.1:10911", "a", 0, "ha",
                                         TopicConfigWrapper(DataVersion(1, 1, 0), table), None,
                                         1, 0))
        steps, apply = [], rim.apply
        rim.apply = lambda delta: steps.append(len(delta)) or apply(delta)
        rim.unregister_brokers(rim.on_channel_destroy(1))
        assert not rim.topic_queue_table and rim.queue_data_count == 0
        assert max(steps) <= 4, steps


def test_a_registration_is_one_value_through_the_bounds_the_policy_and_the_writer():
    """REGISTER_BROKER's fields travel as one Registration: every signature on the way takes
    it whole (no positional list of 8-14 values)."""
    import inspect
    from rocketpy.namesrv.processor import broker, registration
    takes = {
        "RouteInfoManager.register_broker": inspect.signature(RouteInfoManager.register_broker),
        "RouteInfoManager.repeats_applied": inspect.signature(RouteInfoManager.repeats_applied),
        "RouteInfoManager.walk_view": inspect.signature(RouteInfoManager.walk_view),
        "RouteBounds.registration_refusal": inspect.signature(
            route_bounds.RouteBounds.registration_refusal),
        "Registration5.register_broker": inspect.signature(brokers.Registration5.register_broker),
        "Registration49.register_broker": inspect.signature(brokers.Registration49.register_broker),
    }
    for name, signature in takes.items():
        assert "registration" in signature.parameters and len(signature.parameters) <= 4, name
    assert broker.registration_of is registration.registration_of
