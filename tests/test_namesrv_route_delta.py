"""The one writer (issue 21, part 2): policies record a RouteDelta, RouteInfoManager.apply makes
it and says what it touched; a delta that changes nothing touches nothing and moves no version."""
import ast
from pathlib import Path

from rocketpy.namesrv import Channel, NamesrvConfig, RouteInfoManager
from rocketpy.namesrv import brokers
from rocketpy.namesrv.delta import RouteDelta
from rocketpy.namesrv.model import BrokerData, DataVersion, QueueData, TopicConfig, TopicConfigWrapper
from rocketpy.namesrv.profile import PROFILE_53


def seeded(profile=PROFILE_53):
    rim = RouteInfoManager(NamesrvConfig(), profile)
    table = {t: TopicConfig(t, 4, 4, 6) for t in ("T1", "T2", "T3")}
    rim.register_broker("C", "10.0.0.1:10911", "a", 0, "ha", TopicConfigWrapper(DataVersion(1, 1, 0), table),
                        None, Channel(1, ""), 0)
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
    delta.set_broker(BrokerData("C", "a", {0: "10.0.0.1:10911"}))        # equal, a new object
    delta.put_topics("a", {"T1": TopicConfig("T1", 4, 4, 6)}, False)      # the same QueueData
    delta.add_to_cluster("C", "a")
    touched = rim.apply(delta)
    assert len(delta) == 3 and not touched
    assert versions(rim) == before and rim.snapshots.generation == generation


def test_apply_reports_the_topics_layouts_and_brokers_it_changed():
    rim = seeded()
    before = versions(rim)
    delta = RouteDelta()
    delta.put_topics("a", {"T1": TopicConfig("T1", 8, 8, 6), "T2": TopicConfig("T2", 8, 8, 6)}, False)
    delta.set_broker(BrokerData("C", "a", {0: "10.0.0.1:10911", 1: "10.0.0.1:10921"}))
    touched = rim.apply(delta)
    assert touched.topics == {"T1", "T2"} and touched.brokers == {"a"}
    assert touched.shapes == (rim.topic_queue_table["T1"],)
    assert rim.topic_queue_table["T1"]["a"] == QueueData("a", 8, 8, 6)
    assert all(versions(rim)[t] != before[t] for t in ("T1", "T2", "T3"))   # T3 names broker a
    assert versions(rim)["NONE"] == before["NONE"]


def test_the_registration_policies_use_no_writer_of_the_tables():
    """They read the tables' public methods and record changes in the delta: no attribute
    starting with an underscore is read from the tables."""
    tree = ast.parse(Path(brokers.__file__).read_text())
    private = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Name) and node.value.id == "rim"
               and node.attr.startswith("_")]
    assert private == []


def test_every_public_change_of_the_tables_goes_through_apply():
    """No public method of RouteInfoManager calls a step of apply (a ``_`` writer named like a
    RouteDelta method) itself: registration, unregistration, the liveness scan, heartbeats and
    the admin commands all hand apply a delta."""
    from rocketpy.namesrv import route_info_manager
    steps = {"_" + name for name in vars(RouteDelta) if not name.startswith("_")}
    tree = ast.parse(Path(route_info_manager.__file__).read_text())
    manager = next(node for node in tree.body if isinstance(node, ast.ClassDef)
                   and node.name == "RouteInfoManager")
    offenders = [(method.name, node.func.attr) for method in manager.body
                 if isinstance(method, ast.FunctionDef) and not method.name.startswith("_")
                 and method.name != "apply"
                 for node in ast.walk(method) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Attribute) and node.func.attr in steps]
    assert len(steps) > 10 and offenders == []


def test_a_departed_broker_leaves_its_topics_in_one_step_whatever_their_number():
    """The unregistration's delta names the broker once, not each of its topics: one entry per
    topic held ~150 MB of steps when a broker of 1 M topics left, kept by the allocator after."""
    for count in (1_000, 2_000):
        rim = RouteInfoManager(NamesrvConfig(), PROFILE_53)
        table = {f"T{i}": TopicConfig(f"T{i}", 4, 4, 6) for i in range(count)}
        rim.register_broker("C", "10.0.0.1:10911", "a", 0, "ha",
                            TopicConfigWrapper(DataVersion(1, 1, 0), table), None, Channel(1, ""), 0)
        steps, apply = [], rim.apply
        rim.apply = lambda delta: steps.append(len(delta)) or apply(delta)
        rim.unregister_brokers(rim.on_channel_destroy(1))
        assert not rim.topic_queue_table and rim.queue_data_count == 0
        assert max(steps) <= 4, steps
