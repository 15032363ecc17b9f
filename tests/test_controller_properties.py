"""Property tests of the controller's replica state machine (rocketpy.controller.replicas with
the default election policy): random broker lives, elections, sync state set changes and cleans,
with the invariants RIP-44 promises:

* never two masters in one master epoch of a group;
* the master is always in its sync state set;
* master and sync state set epochs only grow (while the group exists);
* a master from outside the sync state set only with ``enableElectUncleanMaster``.
"""
from hypothesis import HealthCheck, given, settings, strategies as st

from rocketpy.controller.elect import DefaultElectPolicy
from rocketpy.controller.replicas import ReplicasInfoManager
from rocketpy.remoting import bodies as B, headers as H
from rocketpy.remoting.codes import ResponseCode as RC

GROUPS = ("g0",)
IDS = st.integers(min_value=1, max_value=3)
OPS = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(GROUPS)),
    st.tuples(st.just("up"), st.sampled_from(GROUPS), IDS),
    st.tuples(st.just("down"), st.sampled_from(GROUPS), IDS),
    st.tuples(st.just("elect"), st.sampled_from(GROUPS), st.integers(-1, 3), st.booleans()),
    st.tuples(st.just("alter"), st.sampled_from(GROUPS), st.sets(IDS, max_size=3),
              st.integers(0, 3), st.integers(0, 4), st.integers(0, 4)),
    st.tuples(st.just("clean"), st.sampled_from(GROUPS), st.sets(IDS, max_size=3),
              st.booleans()),
)


class Model:
    def __init__(self, unclean):
        self.manager = ReplicasInfoManager(lambda: unclean)
        self.unclean = unclean
        self.alive = set()           # (group, id)
        self.masters = {}            # (group, master epoch) -> master id
        self.epochs = {}             # group -> (master epoch, sync state set epoch)

    def is_alive(self, cluster, group, broker_id):
        return (group, broker_id) in self.alive

    def run(self, op):
        kind, group = op[0], op[1]
        m = self.manager
        before = m.sync_state_info_table.get(group)
        old_set = set(before.sync_state_set) if before else set()
        if kind == "join":
            next_id = m.get_next_broker_id(H.GetNextBrokerIdRequestHeader(
                cluster_name="c", broker_name=group)).header.next_broker_id
            result = m.apply_broker_id(H.ApplyBrokerIdRequestHeader(
                cluster_name="c", broker_name=group, applied_broker_id=next_id,
                register_check_code=f"h:{next_id};1"))
            assert result.code == RC.SUCCESS
            self.alive.add((group, next_id))
        elif kind == "up":
            self.alive.add((group, op[2]))
            return
        elif kind == "down":
            self.alive.discard((group, op[2]))
            return
        elif kind == "elect":
            result = m.elect_master(H.ElectMasterRequestHeader(
                cluster_name="c", broker_name=group, broker_id=op[2], designate_elect=op[3]),
                DefaultElectPolicy(self.is_alive))
        elif kind == "alter":
            _, _, ids, master, master_epoch, set_epoch = op
            result = m.alter_sync_state_set(
                H.AlterSyncStateSetRequestHeader(broker_name=group, master_broker_id=master,
                                                 master_epoch=master_epoch),
                B.SyncStateSet(sync_state_set=sorted(ids), sync_state_set_epoch=set_epoch),
                self.is_alive)
        else:
            _, _, ids, living = op
            result = m.clean_broker_data(H.CleanControllerBrokerDataRequestHeader(
                cluster_name="c", broker_name=group,
                broker_controller_ids_to_clean=";".join(map(str, sorted(ids))) or None,
                is_clean_living_broker=living), self.is_alive)
        first_time = before is None or before.master_epoch == 0
        for event in result.events:
            m.apply_event(event)
        self.check(group, kind, old_set, first_time, result)

    def check(self, group, kind, old_set, first_time, result):
        state = self.manager.sync_state_info_table.get(group)
        if state is None:
            self.epochs.pop(group, None)
            self.masters = {k: v for k, v in self.masters.items() if k[0] != group}
            return
        master = state.master_broker_id
        if master is not None:
            assert master in state.sync_state_set
            assert self.masters.setdefault((group, state.master_epoch), master) == master
        epochs = (state.master_epoch, state.sync_state_set_epoch)
        previous = self.epochs.get(group, (0, 0))
        assert epochs[0] >= previous[0] and epochs[1] >= previous[1]
        self.epochs[group] = epochs
        if kind == "elect" and result.code == RC.SUCCESS and not first_time:
            assert self.unclean or master in old_set


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unclean=st.booleans(), ops=st.lists(OPS, max_size=60))
def test_replica_invariants(unclean, ops):
    model = Model(unclean)
    for op in ops:
        model.run(op)
    state = model.manager.sync_state_info_table.get("g0")
    if state is not None:   # then the whole sync state set dies and the controller elects
        for broker_id in state.sync_state_set:
            model.run(("down", "g0", broker_id))
        model.run(("elect", "g0", -1, False))


def test_unclean_master_elected_only_when_enabled():
    for unclean, expected in ((False, RC.CONTROLLER_MASTER_NOT_AVAILABLE), (True, RC.SUCCESS)):
        model = Model(unclean)
        for op in [("join", "g0"), ("join", "g0"), ("elect", "g0", 1, False),
                   ("down", "g0", 1)]:
            model.run(op)
        result = model.manager.elect_master(
            H.ElectMasterRequestHeader(broker_name="g0", broker_id=-1),
            DefaultElectPolicy(model.is_alive))
        assert result.code == expected
        if unclean:
            assert result.header.master_broker_id == 2


def test_no_live_candidate_keeps_no_master_and_bumps_the_epoch():
    """Java's ElectMasterEvent(false): the dead master is dropped, its epoch still grows."""
    model = Model(False)
    for op in [("join", "g0"), ("elect", "g0", 1, False), ("down", "g0", 1)]:
        model.run(op)
    model.run(("elect", "g0", -1, False))
    state = model.manager.sync_state_info_table["g0"]
    assert (state.master_broker_id, state.master_epoch, sorted(state.sync_state_set)) == (None, 2, [1])


def test_cleaning_a_dead_master_leaves_no_master_outside_the_set():
    """Java would keep broker 1 as master with a sync state set of [2]."""
    model = Model(False)
    for op in [("join", "g0"), ("join", "g0"), ("elect", "g0", 1, False),
               ("alter", "g0", {1, 2}, 1, 1, 1), ("down", "g0", 1), ("clean", "g0", {1}, False)]:
        model.run(op)
    state = model.manager.sync_state_info_table["g0"]
    assert (state.master_broker_id, sorted(state.sync_state_set)) == (None, [2])
