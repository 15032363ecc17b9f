"""Service layer: a controller of a group sharing its state through etcd (``controllerType=etcd``;
the key layout and the pure parts are :mod:`rocketpy.controller.replicated`, the roles and their
transitions :mod:`rocketpy.controller.grouprole`).

At start the controller loads the snapshot from etcd and applies the entries after it, read in
pages at the snapshot's revision, then watches the group's keys from that revision: every entry
the leader writes reaches every controller's state machine, in order. It campaigns for the
election key with a lease it keeps alive every third of ``controllerEtcdLeaseTtl``; the winner
first applies the entries it has not seen, then leads.
The leader's changes are applied in memory, numbered and handed to :meth:`ControllerGroup.submit`
(the DISK lane of the controller's requests and of its own elections): they are written in
order, those that wait together (at most :data:`MAX_TXN_ENTRIES` entries of
:data:`MAX_TXN_BYTES` in all) in one transaction that only succeeds while the entry keys are
new and the leader still holds the key it created, and answered once etcd has committed them.
Every :data:`~rocketpy.controller.replicated.SNAPSHOT_ENTRIES` entries, when a batch ends at the
newest change, its transaction also writes the state as the snapshot and deletes the entries
before the batch, so what a start reads stays short however long the group runs.

A change whose entry would exceed :data:`MAX_ENTRY_BYTES` is refused before it is applied
(:meth:`ControllerGroup.entry_refusal`, asked by the processor): etcd refuses a request over
``--max-request-bytes`` (1.5 MiB by default), and that refusal says nothing about who leads. If
etcd still refuses a write for its size, a batch is split, a snapshot left for later, and a
single entry fails alone: the leader keeps its key and reads the state again before it goes on
(the refused change is in its memory, not in the log). Any other failed or refused write, a lost
lease, or a lease that would have expired unrefreshed ends its leadership -- without etcd it
cannot know whether another was elected, so it stops answering as leader before another can
be: it revokes its lease (the key goes at once, the others elect), forgets its state and reads
it again.

The role is one :class:`~rocketpy.controller.grouprole.GroupRole`; every change of it goes
through :meth:`ControllerGroup._fire`, which acts on the role entered. Reading the state is one
owned task (:meth:`ControllerGroup._catch_up`) that whoever needs it joins: a join while it
reads (a watch gap, a step-down, a win) makes it read once more, so two reads never run at once.
A group without a known leader is logged when it starts and ends, and its time is counted
(:meth:`ControllerGroup.leaderless_seconds`, in the metrics).
"""
from collections import deque

from twisted.application.service import Service
from twisted.internet.defer import Deferred, inlineCallbacks, maybeDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from ..controller.grouprole import ELECTING, LEADING, LOADING, STOPPED, WINNING, GroupRole
from ..controller.replicated import (MAX_SNAPSHOT_BYTES, SNAPSHOT_ENTRIES, NotCommitted,
                                     ReplicaLog, ReplicationError, append_txn, campaign_txn,
                                     key_prefix, leader_key, parse_leader, range_request,
                                     snapshot_key, snapshot_request, snapshot_value, unb64,
                                     watch_request)
from .etcd import EtcdError, EtcdGateway, EtcdRequestTooLarge
from ..transport import logs

__all__ = ["ControllerGroup", "LogEntry", "MAX_TXN_ENTRIES", "MAX_TXN_BYTES", "MAX_ENTRY_BYTES",
           "RETRY_SECONDS"]

#: entries written by one transaction (etcd's --max-txn-ops defaults to 128, plus 2 compares)
MAX_TXN_ENTRIES = 100
#: entry bytes written by one transaction: with a snapshot (at most MAX_SNAPSHOT_BYTES) it stays
#: under etcd's default --max-request-bytes of 1.5 MiB
MAX_TXN_BYTES = 256 * 1024
#: the largest entry: a change that would take more is refused before it is applied
MAX_ENTRY_BYTES = MAX_TXN_BYTES
#: pause before trying etcd again after a failed start, read, campaign or watch
RETRY_SECONDS = 1.0


class LogEntry:
    """A leader's change waiting to be written: its sequence number and value."""

    __slots__ = ("seq", "value")

    def __init__(self, seq, value):
        self.seq = seq
        self.value = value


class ControllerGroup(Service):
    """One controller's membership of the group: state from etcd, leadership, writes.

    :param manager: the processor's ReplicasInfoManager.
    :param leadership: the processor's :class:`~rocketpy.controller.replicated.Leadership`.
    :param settings: the :class:`~rocketpy.controller.replicated.EtcdSettings`.
    :param write_pool: the writer that takes every other DISK job (the config file), or None.
    """

    name = "controller-etcd"
    log = Logger(namespace="rocketpy.controller", observer=logs.observer)

    def __init__(self, reactor, manager, leadership, settings, group, write_pool=None,
                 gateway=None):
        self.reactor = reactor
        self.leadership = leadership
        self.settings = settings
        self.group = group
        self.prefix = key_prefix(group)
        self.replica_log = ReplicaLog(manager, self.prefix)
        self.gateway = gateway or EtcdGateway(reactor, settings.endpoints,
                                              settings.timeout_ms / 1000.0)
        self.write_pool = write_pool
        self.role = GroupRole()
        self.revision = 0            # the newest etcd revision seen
        self.snapshot_seq = 0        # the entry of the newest snapshot known to be in etcd
        self.loaded = False          # the state was read once
        self._lease = None
        self._lease_deadline_ms = 0
        self._won_revision = None    # the election key's create revision, while it holds it
        self._leader_revision = None  # the same, while it leads (the writes' compare)
        self._queue = deque()        # (LogEntry, Deferred), oldest first
        self.entries_moved = 0       # entries taken off the queue (and copied), for a cost test
        self._writing = False
        self._encoded = (None, None)  # (events, value) the last entry_refusal encoded
        self._campaigning = False
        self._calls = {}             # name -> DelayedCall: retries, the lease deadline
        self._reading = None         # the catch-up task (a Deferred) while it runs
        self._joined = []            # Deferreds of those who joined it
        self._again = False          # read once more: joined (a gap, a reset, a win) meanwhile
        self._resets = 0             # times the state was forgotten (a read under way restarts)
        self._leaderless_since_ms = None
        self._leaderless_ms = 0
        #: counts: times without a leader, step-downs, entries etcd refused for their size,
        #: changes refused before they were applied
        self.leaderless_spells = 0
        self.step_downs = 0
        self.refused_entries = 0
        self.refused_changes = 0
        self._keepalive = LoopingCall(self._keep_alive)
        self._keepalive.clock = reactor

    def _now_ms(self):
        return int(self.reactor.seconds() * 1000)

    # -- the role --------------------------------------------------------------------------

    def _fire(self, event, why=None):
        """Apply ``event`` to the role; act on the role entered. True when it changed."""
        old = self.role.fire(event)
        if old is None:
            return False
        new = self.role.role
        self.log.debug("controller {id}: {old} -> {new} ({event})", id=self.leadership.self_id,
                       old=old, new=new, event=event)
        if new == LOADING:
            self._step_down(why)
        elif new == ELECTING:
            self._campaign()
        elif new == WINNING:
            self._read_before_leading(old, why)
        elif new == LEADING:
            self._leader_revision = self._won_revision
            self.leadership.lead(self._lease_deadline_ms)
            self._watch_deadline()
            self.log.info("controller {id} leads the controller group (entry {seq})",
                          id=self.leadership.self_id, seq=self.replica_log.seq)
        self._note_leader()
        return True

    def _follow(self, leader_id, address):
        self.leadership.follow(leader_id, address)
        self._note_leader()

    @property
    def leaderless(self):
        """No controller is known to answer as the group's leader (once the state was read)."""
        return (self.loaded and self.role.role != STOPPED and not self.leadership.leading
                and self.leadership.leader_id is None)

    def _note_leader(self):
        now = self._now_ms()
        if self.leaderless and self._leaderless_since_ms is None:
            self._leaderless_since_ms = now
            self.leaderless_spells += 1
            self.log.warn("controller group {group} has no leader (as {id} sees it)",
                          group=self.group, id=self.leadership.self_id)
        elif not self.leaderless and self._leaderless_since_ms is not None:
            spell = now - self._leaderless_since_ms
            self._leaderless_ms += spell
            self._leaderless_since_ms = None
            if self.role.role != STOPPED:
                self.log.info("controller group {group} has a leader again ({leader}) after "
                              "{ms} ms without one", group=self.group,
                              leader=self.leadership.leader_id, ms=spell)

    def leaderless_seconds(self):
        """Seconds this controller knew of no leader, in all (the current spell included)."""
        since = self._leaderless_since_ms
        current = 0 if since is None else self._now_ms() - since
        return (self._leaderless_ms + current) / 1000.0

    # -- what the processor hands over ------------------------------------------------------

    def entry_refusal(self, events):
        """Why the change of ``events`` cannot be written (the processor's ``entry_refusal``,
        asked before it applies them): its entry is over :data:`MAX_ENTRY_BYTES`; else None."""
        value = self.replica_log.encode(events)
        self._encoded = (events, value)
        if len(value) <= MAX_ENTRY_BYTES:
            return None
        self.refused_changes += 1
        return (f"the change is {len(value)} bytes as an etcd entry, more than "
                f"{MAX_ENTRY_BYTES}: refused, nothing applied")

    def record(self, events):
        """The leader's applied events as the next entry (the processor's ``persist``)."""
        done, value = self._encoded
        self._encoded = (None, None)
        return LogEntry(*self.replica_log.record(events, value if done is events else None))

    def submit(self, job, peer=None, cancel=None, budget=None, size=0):
        """A Deferred that fires once ``job`` is durable: a :class:`LogEntry` committed in etcd,
        anything else (the config file) by the writer. ``peer``, ``cancel``, ``budget`` and
        ``size`` are the pools' (a write is never cancelled)."""
        if job.__class__ is not LogEntry:
            if self.write_pool is None:
                return maybeDeferred(job)
            return self.write_pool.submit(job, peer, cancel, budget)
        d = Deferred()
        self._queue.append((job, d))
        if not self._writing:
            self._write()
        return d

    def _take(self, most):
        """The next batch: at most ``most`` entries of :data:`MAX_TXN_BYTES` (one at least)."""
        batch, size = [], 0
        while self._queue and len(batch) < most:
            length = len(self._queue[0][0].value)
            if batch and size + length > MAX_TXN_BYTES:
                break
            batch.append(self._queue.popleft())
            size += length
        return batch

    @inlineCallbacks
    def _write(self):
        self._writing = True
        most, snapshots = MAX_TXN_ENTRIES, True
        try:
            while self._queue:
                batch = self._take(most)
                self.entries_moved += len(batch)
                why = event = None
                if self._leader_revision is None:
                    why = "not the leader any more"
                else:
                    snapshot = self._snapshot_for(batch[-1][0].seq) if snapshots else None
                    body = append_txn(self.prefix, batch[0][0].seq, [e.value for e, _ in batch],
                                      self._leader_revision, snapshot)
                    try:
                        answer = yield self.gateway.post("/v3/kv/txn", body)
                        if not answer.get("succeeded"):
                            why, event = "etcd refused the entry: another controller leads", "lost"
                        elif snapshot is not None:
                            self.snapshot_seq = batch[-1][0].seq
                    except EtcdRequestTooLarge as exc:
                        if snapshot is not None or len(batch) > 1:
                            # smaller: the batch without the snapshot, then halves of it
                            self._queue.extendleft(reversed(batch))
                            if snapshot is not None:
                                snapshots = False
                                self.log.warn("controller snapshot left for later: {why}", why=exc)
                            else:
                                most = len(batch) // 2
                            continue
                        why, event = str(exc), "entry_refused"
                    except EtcdError as exc:
                        why, event = str(exc), "lost"
                if why is None:
                    for _, d in batch:
                        d.callback(None)
                    most, snapshots = MAX_TXN_ENTRIES, True
                    continue
                # the entries after a failed one were made on top of it: none can be written
                failed = batch + list(self._queue)
                self.entries_moved += len(failed)
                self._queue.clear()
                for _, d in failed:
                    d.errback(NotCommitted(f"not committed in etcd: {why}"))
                if event == "entry_refused":
                    self.refused_entries += 1
                if event is not None:
                    self._fire(event, why)
        finally:
            self._writing = False

    def _snapshot_for(self, last_seq):
        """The state as a snapshot value when the batch ending at ``last_seq`` is due one and ends
        at the newest change (the state in memory is the state after it), else None."""
        if last_seq - self.snapshot_seq < SNAPSHOT_ENTRIES or last_seq != self.replica_log.seq:
            return None
        value = snapshot_value(self.replica_log.manager, last_seq)
        if len(value) > MAX_SNAPSHOT_BYTES:
            self.log.warn("controller state of {size} bytes compressed is too large for one etcd "
                          "key: no snapshot, the log keeps its entries", size=len(value))
            self.snapshot_seq = last_seq
            return None
        return value

    # -- reading the state -------------------------------------------------------------------

    def _catch_up(self):
        """Join the read of the state under way, or start one: a Deferred of its end. A join
        while it reads makes it read once more (what made the joiner ask may be newer)."""
        d = Deferred()
        self._joined.append(d)
        if self._reading is None:
            self._again = False
            self._reading = self._read_state()
            self._reading.addBoth(self._read_done)
        else:
            self._again = True
        return d

    def _read_done(self, result):
        self._reading = None
        joined, self._joined = self._joined, []
        for d in joined:
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(result)

    @inlineCallbacks
    def _read_state(self):
        """Load a snapshot newer than the state, apply the entries after it, until nobody joined
        meanwhile. Every page is read at the snapshot's revision: a snapshot written between two
        pages (which deletes entries) cannot cut the log being read. A reset while it reads
        starts it again."""
        while True:
            self._again = False
            resets = self._resets
            answer = yield self.gateway.post("/v3/kv/range", snapshot_request(self.prefix))
            if resets != self._resets:
                continue
            revision = int(answer["header"]["revision"])
            for kv in answer.get("kvs") or ():
                self.snapshot_seq = max(self.snapshot_seq, self.replica_log.apply_snapshot(kv))
            more = True
            while more and resets == self._resets:
                before = self.replica_log.seq
                answer = yield self.gateway.post("/v3/kv/range", range_request(
                    self.prefix, before + 1, revision))
                if resets != self._resets:
                    break
                for kv in answer.get("kvs") or ():
                    self.replica_log.apply_kv(kv)
                # a page of keys that are not entries (sorted after them) ends the read
                more = answer.get("more") and self.replica_log.seq > before
            if resets != self._resets:
                continue
            self.revision = max(self.revision, revision)
            if not self._again:
                return

    def _reset(self):
        """Forget the state (it is read again): a read under way starts over."""
        self.replica_log.reset()
        self._resets += 1

    # -- start, watch ------------------------------------------------------------------------

    def startService(self):
        super().startService()
        self._keepalive.start(max(self.settings.lease_ttl / 3.0, 0.2), now=False)
        self._load()

    def _load(self):
        """Read the state (``loading``); then the role moves on, or it tries again."""
        self._calls.pop("load", None)
        if not self.running or self.role.role != LOADING:
            return
        self._catch_up().addCallbacks(self._loaded, self._not_loaded)

    def _loaded(self, _):
        if not self.running or self.role.role != LOADING:
            return
        if not self.loaded:
            self.loaded = True
            self.log.info("controller state read from etcd: {groups} broker groups, entry {seq}",
                          groups=len(self.replica_log.manager.sync_state_info_table),
                          seq=self.replica_log.seq)
            self._watch()
        self._fire("loaded")

    def _not_loaded(self, failure):
        failure.trap(EtcdError, ReplicationError)
        self.log.warn("cannot read the controller state from etcd: {why}",
                      why=failure.getErrorMessage())
        self._later("load", self._load)

    def _later(self, name, function):
        if self.running and name not in self._calls:
            self._calls[name] = self.reactor.callLater(RETRY_SECONDS, function)

    @inlineCallbacks
    def _watch(self):
        while self.running:
            reason = yield self.gateway.watch(watch_request(self.prefix, self.revision + 1),
                                              self._on_watch)
            if not self.running:
                return
            self.log.warn("controller watch on etcd ended ({why}); watching again",
                          why=reason or "closed")
            wait = Deferred()
            self._calls["watch"] = self.reactor.callLater(RETRY_SECONDS, wait.callback, None)
            yield wait
            self._calls.pop("watch", None)

    def _on_watch(self, message):
        result = message.get("result") or {}
        for event in result.get("events", ()):
            kv = event.get("kv") or {}
            self.revision = max(self.revision, int(kv.get("mod_revision", 0)))
            key = unb64(kv.get("key"))
            if key == leader_key(self.prefix).encode():
                self._on_leader_key(event.get("type") == "DELETE", kv)
                continue
            if event.get("type") == "DELETE" or key == snapshot_key(self.prefix).encode():
                continue      # a snapshot's: it covers what this controller has applied
            try:
                self.replica_log.apply_kv(kv)
            except ReplicationError as exc:   # a gap: read what is missing
                if self._reading is None:
                    self.log.warn("controller log from etcd: {why}; reading it again", why=exc)
                self._catch_up().addErrback(self._log_failure, "catch up")

    def _on_leader_key(self, deleted, kv):
        if deleted:
            self._follow(None, None)
            self._fire("leader_gone", "the election key is gone")
            return
        leader_id, address = parse_leader(kv.get("value"))
        if leader_id == self.leadership.self_id:
            return            # its own key, seen through the watch
        self._follow(leader_id, address)
        self._fire("leader_seen", f"controller {leader_id} holds the election key")

    # -- leadership -------------------------------------------------------------------------

    def _campaign(self):
        self._calls.pop("campaign", None)
        if self._campaigning or not self.running or self.role.role != ELECTING:
            return
        self._campaigning = True
        self._run_campaign()

    @inlineCallbacks
    def _run_campaign(self):
        retry = False
        try:
            if self._lease is None:
                sent = self._now_ms()
                answer = yield self.gateway.post("/v3/lease/grant",
                                                 {"TTL": str(self.settings.lease_ttl)})
                self._lease = answer["ID"]
                self._lease_deadline_ms = sent + int(answer["TTL"]) * 1000
            answer = yield self.gateway.post("/v3/kv/txn", campaign_txn(
                self.prefix, self.leadership.self_id, self.leadership.self_address, self._lease))
            if answer.get("succeeded"):
                self._won_revision = int(answer["header"]["revision"])
                if not self._fire("won") and self.role.role not in (WINNING, LEADING):
                    self._revoke()    # stopped or reading meanwhile: the key must not stay
            else:
                kvs = answer["responses"][0]["response_range"].get("kvs") or []
                leader_id, address = parse_leader(kvs[0].get("value")) if kvs else (None, None)
                if leader_id is not None and leader_id != self.leadership.self_id:
                    self._follow(leader_id, address)
                    self._fire("leader_seen")
                else:
                    retry = True      # the key went between the compare and the read
        except (EtcdError, ReplicationError, KeyError, ValueError, TypeError) as exc:
            self.log.warn("controller campaign failed: {why}", why=exc)
            retry = True
        finally:
            self._campaigning = False
        if retry:
            self._later("campaign", self._campaign)

    def _read_before_leading(self, old, why):
        """``winning``: the key is its own; read the state (again, after a refused entry: what
        it applied is not all in the log) before answering as leader."""
        if old == LEADING:
            self.log.warn("controller {id} reads the state again before it goes on leading: "
                          "{why}", id=self.leadership.self_id, why=why)
            self._won_revision, self._leader_revision = self._leader_revision, None
            self._follow(None, None)
            self._reset()
        self._catch_up().addCallbacks(self._read_to_lead, self._not_read_to_lead)

    def _read_to_lead(self, _):
        if self.role.role == WINNING:
            self._fire("caught_up")

    def _not_read_to_lead(self, failure):
        failure.trap(EtcdError, ReplicationError)
        if self.role.role == WINNING:
            # it holds the key: a retry would find itself there and follow itself, and the
            # group would have no leader until it restarts
            self._fire("lost", f"cannot read the state after winning: {failure.getErrorMessage()}")

    @inlineCallbacks
    def _keep_alive(self):
        if self._lease is None:
            if self.role.role == ELECTING:
                self._campaign()
            return
        sent = self._now_ms()
        try:
            answer = yield self.gateway.post("/v3/lease/keepalive", {"ID": self._lease})
            ttl = int((answer.get("result") or {}).get("TTL", 0))
        except (EtcdError, ValueError, TypeError) as exc:
            self.log.warn("controller lease not kept alive: {why}", why=exc)
            ttl = None
        if ttl == 0:
            self._lease = None
            self._fire("lost", "the lease expired")
            return
        if ttl is not None:
            self._lease_deadline_ms = sent + ttl * 1000
            if self.leadership.leading:
                self.leadership.lease_deadline_ms = self._lease_deadline_ms
                self._watch_deadline()
        else:
            self._deadline_passed()

    def _watch_deadline(self):
        """Look again when the lease kept alive last would expire: a leader that etcd did not
        answer until then stops answering as leader (``Leadership.is_leader``) at that moment,
        so it stops leading then, not when a keep-alive finally times out."""
        call = self._calls.pop("deadline", None)
        if call is not None and call.active():
            call.cancel()
        wait = max(self.leadership.lease_deadline_ms - self._now_ms(), 0) / 1000.0
        self._calls["deadline"] = self.reactor.callLater(wait, self._deadline_passed)

    def _deadline_passed(self):
        call = self._calls.get("deadline")
        if call is not None and not call.active():
            del self._calls["deadline"]
        if self.leadership.leading and self._now_ms() >= self.leadership.lease_deadline_ms:
            self._fire("lost", "etcd unreachable for the lease's time to live")

    def _step_down(self, why):
        """``loading`` after ``winning`` or ``leading``: stop leading, revoke the lease (the key
        goes), read the state again from etcd."""
        self.step_downs += 1
        self.log.warn("controller {id} stops leading: {why}", id=self.leadership.self_id, why=why)
        leadership = self.leadership
        if leadership.leader_id == leadership.self_id:      # else: the one it saw take over
            self._follow(None, None)
        else:
            self._follow(leadership.leader_id, leadership.leader_address)
        self._won_revision = self._leader_revision = None
        self._revoke()
        self._reset()
        self._load()

    def _revoke(self):
        lease, self._lease = self._lease, None
        if lease is not None:
            self.gateway.post("/v3/lease/revoke", {"ID": lease}).addErrback(
                self._log_failure, "revoke")

    def _log_failure(self, failure, what):
        self.log.warn("controller {what} on etcd failed: {why}", what=what,
                      why=failure.getErrorMessage())

    def stopService(self):
        super().stopService()
        leading = self.leadership.leading
        self._fire("stop")
        for call in self._calls.values():
            if call.active():
                call.cancel()
        self._calls.clear()
        if self._keepalive.running:
            self._keepalive.stop()
        self.gateway.stop_watch()
        lease, self._lease = self._lease, None
        self._follow(None, None)
        if lease is None or not leading:
            return self.gateway.close()
        # a stopping leader hands over at once
        d = self.gateway.post("/v3/lease/revoke", {"ID": lease})
        d.addErrback(self._log_failure, "revoke")
        d.addBoth(lambda _: self.gateway.close())
        return d
