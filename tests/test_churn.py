"""Broker churn soak, short version (bench/churn_soak.py runs it for as long as you like).

Hundreds of simulated brokers register, re-register, freeze until they expire, drop their
connections, restart (sometimes on a new address), unregister gracefully and poll, through real
frames built from the genuine captures; after every step the NameServer's tables equal the
reference model of :mod:`churnsim`, and at the end nothing is left: no route, live entry, channel
index entry or cached body. See :mod:`churnsim` for what is simulated and checked.
"""
import dataclasses
import os

import pytest

import churnsim

SEED = int(os.environ.get("ROCKETPY_CHURN_SEED", "7"))


@pytest.mark.parametrize("profile", ["4.9", "5.0", "5.3"])
def test_churn_matches_the_model_and_leaves_nothing(profile):
    sim = churnsim.Simulation(profile, groups=150, seed=SEED + ["4.9", "5.0", "5.3"].index(profile))
    sim.run(25)
    counts = dict(sim.counts)
    sim.finish()
    assert sim.steps > 1000, sim.counts
    assert len(sim.instances) > 180                  # hundreds of brokers (masters and slaves)
    for action in ("register", "drop", "unregister", "scan", "query_data_version"):
        assert counts.get(action, 0) > 0, counts
    assert sim.model.live == {} and sim.model.groups == {}
    if profile != "4.9":                             # 4.9 unregisters synchronously: no queue
        assert counts.get("heartbeat", 0) > 0


def test_frames_come_from_every_genuine_registration_style():
    for gen in ("rmq49", "rmq50"):
        found = churnsim.templates(gen)
        styles = {(t.command.serialize_type, t.compressed, t.command.is_oneway) for t in found[103]}
        assert {s[0] for s in styles} == {0, 1}, styles       # JSON and ROCKETMQ headers
        assert {s[1] for s in styles} == {False, True}, styles  # JSON and zlib bodies
        assert any(s[2] for s in styles), styles              # oneway re-registrations
        assert found[104] and found[322]


def test_queued_unregistrations_of_a_restarted_broker_are_ignored():
    """apache/rocketmq#11043: a close's unregistration still queued when the broker is back on a
    new connection must not remove it. The soak meets this many times; the model counts them."""
    sim = churnsim.Simulation("5.3", groups=150, seed=SEED + 1)
    sim.run(30)
    assert sim.model.stale_ignored > 0


def test_the_check_catches_a_route_manager_without_the_channel_guard():
    """The model is strict enough to notice #11043 coming back: strip the channel identity from
    the queued requests (as Java < 5.1 had it) and the soak fails."""
    sim = churnsim.Simulation("5.3", groups=150, seed=SEED + 1)
    apply = sim.rim.unregister_brokers
    sim.rim.unregister_brokers = lambda batch: apply(
        [dataclasses.replace(r, channel_id=None, live_generation=None) for r in batch])
    with pytest.raises(churnsim.Mismatch):
        sim.run(30)


def test_registration_body_cache_forgets_departed_brokers():
    """Brokers restarting on new addresses (pods) must not leave their bodies cached."""
    sim = churnsim.Simulation("5.3", groups=1, seed=SEED, readdress=1.0)
    inst = sim.instances[0]
    cache = sim.processor.reader.cache
    for _ in range(400):
        sim.register(inst)
        sim.drop(inst)
        sim.drain()
    sim.check()
    assert sim._addresses > 300
    assert len(cache._last) <= 64, len(cache._last)
    sim.finish()
