"""Service layer: a controller of a group sharing its state through etcd (``controllerType=etcd``;
the key layout and the pure parts are :mod:`rocketpy.controller.replicated`).

At start the controller loads the snapshot from etcd and applies the entries after it, read in
pages at the snapshot's revision, then watches the group's keys from that revision: every entry
the leader writes reaches every controller's state machine, in order. It campaigns for the
election key with a lease it keeps alive every third of ``controllerEtcdLeaseTtl``; the winner
first applies the entries it has not seen, then leads.
The leader's changes are applied in memory, numbered and handed to :meth:`ControllerGroup.submit`
(the DISK lane of the controller's requests and of its own elections): they are written in
order, those that wait together in one transaction that only succeeds while the entry keys are
new and the leader still holds the key it created, and answered once etcd has committed them.
Every :data:`~rocketpy.controller.replicated.SNAPSHOT_ENTRIES` entries, when a batch ends at the
newest change, its transaction also writes the state as the snapshot and deletes the entries
before the batch, so what a start reads stays short however long the group runs.

A leader stops leading when a write is refused or fails (it then revokes its lease, so the key
goes at once, forgets its state and reads it again from etcd: what it applied but could not
write is gone), when its lease is lost, or when its last kept-alive lease would have expired --
without etcd it cannot know whether another was elected, so it stops answering as leader
before another can be. A stopping leader revokes its lease: the others elect at once.
"""
from collections import deque

from twisted.application.service import Service
from twisted.internet.defer import Deferred, inlineCallbacks, maybeDeferred
from twisted.internet.task import LoopingCall, deferLater
from twisted.logger import Logger

from ..controller.replicated import (MAX_SNAPSHOT_BYTES, SNAPSHOT_ENTRIES, ReplicaLog,
                                     ReplicationError, append_txn, campaign_txn, key_prefix,
                                     leader_key, parse_leader, range_request, snapshot_key, snapshot_request,
                                     snapshot_value, unb64, watch_request)
from .etcd import EtcdError, EtcdGateway
from ..transport import logs

__all__ = ["ControllerGroup", "LogEntry", "MAX_TXN_ENTRIES", "RETRY_SECONDS"]

#: entries written by one transaction (etcd's --max-txn-ops defaults to 128, plus 2 compares)
MAX_TXN_ENTRIES = 100
#: pause before trying etcd again after a failed start, campaign or watch
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
        self.prefix = key_prefix(group)
        self.replica_log = ReplicaLog(manager, self.prefix)
        self.gateway = gateway or EtcdGateway(reactor, settings.endpoints,
                                              settings.timeout_ms / 1000.0)
        self.write_pool = write_pool
        self.revision = 0            # the newest etcd revision seen
        self.snapshot_seq = 0        # the entry of the newest snapshot known to be in etcd
        self.loaded = False
        self._lease = None
        self._lease_deadline_ms = 0
        self._leader_revision = None
        self._queue = deque()        # (LogEntry, Deferred), oldest first
        self.entries_moved = 0       # entries taken off the queue (and copied), for a cost test
        self._writing = False
        self._campaigning = False
        self._syncing = False
        self._missed = False
        self._keepalive = LoopingCall(self._keep_alive)
        self._keepalive.clock = reactor

    def _now_ms(self):
        return int(self.reactor.seconds() * 1000)

    # -- what the processor hands over ------------------------------------------------------

    def record(self, events):
        """The leader's applied events as the next entry (the processor's ``persist``)."""
        return LogEntry(*self.replica_log.record(events))

    def submit(self, job, peer=None, cancel=None):
        """A Deferred that fires once ``job`` is durable: a :class:`LogEntry` committed in etcd,
        anything else (the config file) by the writer. ``peer`` and ``cancel`` are the pools'
        (a write is never cancelled)."""
        if job.__class__ is not LogEntry:
            if self.write_pool is None:
                return maybeDeferred(job)
            return self.write_pool.submit(job, peer, cancel)
        d = Deferred()
        self._queue.append((job, d))
        if not self._writing:
            self._write()
        return d

    @inlineCallbacks
    def _write(self):
        self._writing = True
        try:
            while self._queue:
                batch = [self._queue.popleft()
                         for _ in range(min(MAX_TXN_ENTRIES, len(self._queue)))]
                self.entries_moved += len(batch)
                why = None
                if self._leader_revision is None:
                    why = "not the leader any more"
                else:
                    snapshot = self._snapshot_for(batch[-1][0].seq)
                    body = append_txn(self.prefix, batch[0][0].seq, [e.value for e, _ in batch],
                                      self._leader_revision, snapshot)
                    try:
                        answer = yield self.gateway.post("/v3/kv/txn", body)
                        if not answer.get("succeeded"):
                            why = "etcd refused the entry: another controller leads"
                        elif snapshot is not None:
                            self.snapshot_seq = batch[-1][0].seq
                    except EtcdError as exc:
                        why = str(exc)
                if why is None:
                    for _, d in batch:
                        d.callback(None)
                    continue
                failed = batch + list(self._queue)
                self.entries_moved += len(failed)
                self._queue.clear()
                for _, d in failed:
                    d.errback(EtcdError(f"not committed in etcd: {why}"))
                if self._leader_revision is not None:
                    self._step_down(why)
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

    # -- start, state, watch ----------------------------------------------------------------

    def startService(self):
        super().startService()
        self._keepalive.start(max(self.settings.lease_ttl / 3.0, 0.2), now=False)
        self._start()

    @inlineCallbacks
    def _start(self):
        while self.running:
            try:
                yield self._catch_up()
                break
            except (EtcdError, ReplicationError) as exc:
                self.log.warn("cannot read the controller state from etcd: {why}", why=exc)
                yield deferLater(self.reactor, RETRY_SECONDS, lambda: None)
        if not self.running:
            return
        self.loaded = True
        self.log.info("controller state read from etcd: {groups} broker groups, entry {seq}",
                      groups=len(self.replica_log.manager.sync_state_info_table),
                      seq=self.replica_log.seq)
        self._watch()
        self._campaign()

    @inlineCallbacks
    def _catch_up(self):
        """Load a snapshot newer than the state, apply the entries after it, until none was
        missed meanwhile. Every page is read at the snapshot's revision: a snapshot written
        between two pages (which deletes entries) cannot cut the log being read."""
        self._syncing = True
        try:
            while True:
                self._missed = False
                answer = yield self.gateway.post("/v3/kv/range", snapshot_request(self.prefix))
                revision = int(answer["header"]["revision"])
                for kv in answer.get("kvs") or ():
                    self.snapshot_seq = max(self.snapshot_seq, self.replica_log.apply_snapshot(kv))
                more = True
                while more:
                    before = self.replica_log.seq
                    answer = yield self.gateway.post("/v3/kv/range", range_request(
                        self.prefix, before + 1, revision))
                    for kv in answer.get("kvs") or ():
                        self.replica_log.apply_kv(kv)
                    # a page of keys that are not entries (sorted after them) ends the read
                    more = answer.get("more") and self.replica_log.seq > before
                self.revision = max(self.revision, revision)
                if not self._missed:
                    return
        finally:
            self._syncing = False

    @inlineCallbacks
    def _watch(self):
        while self.running:
            reason = yield self.gateway.watch(watch_request(self.prefix, self.revision + 1),
                                              self._on_watch)
            if not self.running:
                return
            self.log.warn("controller watch on etcd ended ({why}); watching again",
                          why=reason or "closed")
            yield deferLater(self.reactor, RETRY_SECONDS, lambda: None)

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
                self._missed = True
                if not self._syncing:
                    self.log.warn("controller log from etcd: {why}; reading it again", why=exc)
                    self._catch_up().addErrback(self._log_failure, "catch up")

    def _on_leader_key(self, deleted, kv):
        if deleted:
            if self.leadership.leading:
                self._step_down("the election key is gone")
            self.leadership.follow(None, None)
            self._campaign()
            return
        leader_id, address = parse_leader(kv.get("value"))
        if leader_id != self.leadership.self_id:
            if self.leadership.leading:
                self._step_down(f"controller {leader_id} holds the election key")
            self.leadership.follow(leader_id, address)

    # -- leadership -------------------------------------------------------------------------

    @inlineCallbacks
    def _campaign(self):
        if self._campaigning or self.leadership.leading or not self.running or not self.loaded:
            return
        self._campaigning = True
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
                revision = int(answer["header"]["revision"])
                try:
                    yield self._catch_up()
                except (EtcdError, ReplicationError) as exc:
                    # it holds the key: a retry would find itself there and follow itself,
                    # and the group would have no leader until it restarts
                    self._step_down(f"cannot read the state after winning: {exc}")
                    return
                self._leader_revision = revision
                self.leadership.lead(self._lease_deadline_ms)
                self.log.info("controller {id} leads the controller group (entry {seq})",
                              id=self.leadership.self_id, seq=self.replica_log.seq)
            else:
                kvs = answer["responses"][0]["response_range"].get("kvs") or []
                if kvs:
                    self.leadership.follow(*parse_leader(kvs[0].get("value")))
                else:
                    retry = True      # the key went between the compare and the read
        except (EtcdError, ReplicationError, KeyError, ValueError, TypeError) as exc:
            self.log.warn("controller campaign failed: {why}", why=exc)
            retry = True
        finally:
            self._campaigning = False
        if retry and self.running:
            self.reactor.callLater(RETRY_SECONDS, self._campaign)

    @inlineCallbacks
    def _keep_alive(self):
        if self._lease is None:
            if not self.leadership.leading and self.loaded and self.leadership.leader_id is None:
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
            if self.leadership.leading:
                self._step_down("the lease expired")
            return
        if ttl is not None:
            self._lease_deadline_ms = sent + ttl * 1000
            if self.leadership.leading:
                self.leadership.lease_deadline_ms = self._lease_deadline_ms
        elif self.leadership.leading and self._now_ms() >= self.leadership.lease_deadline_ms:
            self._step_down("etcd unreachable for the lease's time to live")

    def _step_down(self, why):
        """Stop leading: revoke the lease (the key goes), read the state again from etcd."""
        self.log.warn("controller {id} stops leading: {why}", id=self.leadership.self_id, why=why)
        self.leadership.follow(None, None)
        self._leader_revision = None
        lease, self._lease = self._lease, None
        if lease is not None:
            self.gateway.post("/v3/lease/revoke", {"ID": lease}).addErrback(
                self._log_failure, "revoke")
        self.replica_log.reset()
        self._catch_up().addCallbacks(lambda _: self._campaign(), self._log_failure,
                                      errbackArgs=("read the state again",))

    def _log_failure(self, failure, what):
        self.log.warn("controller {what} on etcd failed: {why}", what=what,
                      why=failure.getErrorMessage())

    def stopService(self):
        super().stopService()
        if self._keepalive.running:
            self._keepalive.stop()
        self.gateway.stop_watch()
        lease, self._lease = self._lease, None
        leading = self.leadership.leading
        self.leadership.follow(None, None)
        if lease is None or not leading:
            return self.gateway.close()
        # a stopping leader hands over at once
        d = self.gateway.post("/v3/lease/revoke", {"ID": lease})
        d.addErrback(self._log_failure, "revoke")
        d.addBoth(lambda _: self.gateway.close())
        return d
