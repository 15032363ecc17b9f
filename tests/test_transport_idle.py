"""rocketpy.transport.idle: every connection's idle check on one reactor call."""
import math
import random

from twisted.internet.task import Clock

from rocketpy.transport.idle import IdleSchedule


def test_fires_in_deadline_order_and_leaves_no_call():
    clock = Clock()
    schedule, fired = IdleSchedule(clock), []
    for key, delay in (("a", 5), ("b", 3), ("c", 5), ("d", 1)):
        schedule.schedule(key, delay, lambda key=key: fired.append((key, clock.seconds())))
    assert len(clock.getDelayedCalls()) == 1
    clock.pump([1] * 10)
    assert fired == [("d", 1), ("b", 3), ("a", 5), ("c", 5)]
    assert clock.getDelayedCalls() == [] and len(schedule) == 0


def test_a_removed_key_never_fires_and_the_call_is_never_cancelled():
    """A cancelled call would stay in Twisted's timer heap until its time, one each time the
    last key left: the one call stays armed, fires, finds nothing due, and is reused by keys
    that come meanwhile. stop() cancels it."""
    clock = Clock()
    schedule, fired = IdleSchedule(clock), []
    schedule.schedule("a", 1, lambda: fired.append("a"))
    schedule.schedule("b", 2, lambda: fired.append("b"))
    [call] = clock.getDelayedCalls()
    schedule.remove("a")
    schedule.remove("missing")
    clock.advance(1)                  # the call armed for "a" fires early, finds nothing due
    assert fired == [] and not call.cancelled and len(clock.getDelayedCalls()) == 1
    clock.advance(1)
    assert fired == ["b"] and clock.getDelayedCalls() == []
    schedule.schedule("c", 7, lambda: fired.append("c"))
    [call] = clock.getDelayedCalls()
    schedule.remove("c")
    for key in range(10):             # keys coming and going: still that one call
        schedule.schedule(key, 7, lambda: fired.append("late"))
        schedule.remove(key)
    assert clock.getDelayedCalls() == [call] and not call.cancelled
    clock.advance(7)
    assert fired == ["b"] and clock.getDelayedCalls() == []
    schedule.schedule("d", 3, lambda: fired.append("d"))
    schedule.stop()
    assert clock.getDelayedCalls() == []


def test_scheduling_a_key_again_replaces_its_deadline():
    """As a connection's re-check does (from its own callback: a shorter delay than the
    others'), and a shorter delay scheduled from outside moves the call sooner."""
    clock = Clock()
    schedule, fired = IdleSchedule(clock), []

    def recheck():
        fired.append(("a", clock.seconds()))
        if len(fired) == 1:
            schedule.schedule("a", 2, recheck)
    schedule.schedule("a", 10, recheck)
    schedule.schedule("b", 20, lambda: fired.append(("b", clock.seconds())))
    clock.advance(10)
    clock.advance(2)
    assert fired == [("a", 10), ("a", 12)]
    schedule.schedule("b", 1, lambda: fired.append(("b", clock.seconds())))
    clock.advance(1)
    assert fired[-1] == ("b", 13)
    assert clock.getDelayedCalls() == []


def test_agrees_with_a_model_under_random_operations():
    rng = random.Random(21)
    clock = Clock()
    schedule, fired, model, sequence = IdleSchedule(clock), [], {}, 0
    for _ in range(5000):
        op = rng.random()
        key = rng.randrange(60)
        if op < 0.5:
            delay = rng.choice((0.5, 1, 2, 3.5, 7))
            schedule.schedule(key, delay, lambda key=key: fired.append(key))
            model[key] = (clock.seconds() + delay, sequence)
            sequence += 1
        elif op < 0.8:
            schedule.remove(key)
            model.pop(key, None)
        else:
            step = rng.choice((0, 0.5, 1, 2))
            now = clock.seconds() + step
            due = sorted((when, seq, k) for k, (when, seq) in model.items() if when <= now)
            fired.clear()
            clock.advance(step)
            assert fired == [k for _, _, k in due]
            for k in fired:
                del model[k]
        assert len(schedule) == len(model) and all(k in schedule for k in model)
        assert len(clock.getDelayedCalls()) == 1 or not model


def test_a_failing_callback_is_logged_and_the_others_still_run():
    """As with a reactor call each: one connection's failing check stops no other's."""
    from twisted.logger import globalLogPublisher
    clock = Clock()
    schedule, fired, events = IdleSchedule(clock), [], []

    def broken():
        raise RuntimeError("broken check")
    schedule.schedule("a", 1, broken)
    schedule.schedule("b", 1, lambda: fired.append("b"))
    schedule.schedule("c", 5, lambda: fired.append("c"))
    globalLogPublisher.addObserver(events.append)
    try:
        clock.advance(1)
    finally:
        globalLogPublisher.removeObserver(events.append)
    assert fired == ["b"]
    [failed] = [e for e in events if "log_failure" in e]
    assert failed["log_failure"].check(RuntimeError) and failed["key"] == "a"
    clock.advance(4)
    assert fired == ["b", "c"]


def run_one_reactor_call(clock, step):
    """Let the reactor run exactly one call, ``step`` seconds on (Clock.advance runs every
    call due, including those the call itself makes due)."""
    [call] = clock.getDelayedCalls()
    clock.rightNow += step
    clock.calls.remove(call)
    call.func(*call.args, **call.kw)


def test_what_a_firing_schedules_waits_for_the_next_one():
    """A callback that schedules a key due at once (a re-check whose deadline rounds to now)
    does not have it run again within the same firing, which would not end; and the firing
    arms one call, at its end, not one per callback."""
    clock = Clock()
    schedule, fired = IdleSchedule(clock), []

    def again(key):
        fired.append(key)
        schedule.schedule_at(key, clock.seconds(), lambda: fired.append(key + "'"))
    schedule.schedule("a", 1, lambda: again("a"))
    schedule.schedule("b", 1, lambda: again("b"))
    schedule.schedule("c", 5, lambda: fired.append("c"))
    run_one_reactor_call(clock, 1)
    assert fired == ["a", "b"]
    assert [call.getTime() for call in clock.getDelayedCalls()] == [1]
    run_one_reactor_call(clock, 0)
    assert fired == ["a", "b", "a'", "b'"]
    clock.advance(4)
    assert fired[-1] == "c" and clock.getDelayedCalls() == []


def test_stop_then_start_arms_the_checks_still_scheduled():
    clock = Clock()
    schedule, fired = IdleSchedule(clock), []
    schedule.schedule("a", 2, lambda: fired.append("a"))
    schedule.stop()
    assert clock.getDelayedCalls() == []
    schedule.start()
    clock.advance(2)
    assert fired == ["a"]


class CountingDict(dict):
    writes = 0

    def __setitem__(self, key, value):
        CountingDict.writes += 1
        super().__setitem__(key, value)


def test_removing_every_connection_costs_log_n_each():
    """Anything a stranger can size (a connection count) in time proportional to it: n
    connections leaving in any order move O(n log n) heap entries (each move updates the
    index once), at n and at 2n and 4n."""
    for n in (1024, 2048, 4096):
        clock = Clock()
        schedule = IdleSchedule(clock)
        schedule._where = CountingDict()
        for key in range(n):
            schedule.schedule(key, 120 + (key * 7919) % 13, lambda: None)
        order = list(range(n))
        random.Random(n).shuffle(order)
        CountingDict.writes = 0
        for key in order:
            schedule.remove(key)
        assert len(schedule) == 0
        assert CountingDict.writes <= 2 * n * (math.log2(n) + 2), (n, CountingDict.writes)
