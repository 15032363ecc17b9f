"""Controller state layer: the replica state kept in etcd (``controllerType=etcd``), rocketpy's
stand-in for the DLedger/jRaft group of Java's controllers.

etcd is the consensus engine; rocketpy only lays out its keys, under
``/rocketpy/controller/<controllerDLegerGroup>/``:

* ``log/<seq, 20 digits>``: the events of one change (a JSON list of
  :func:`~rocketpy.controller.events.event_to_obj`), numbered from 1 without gaps. The leader
  writes entries with one transaction that succeeds only while the entry's key does not exist
  and its own election key is still the one it created (:func:`append_txn`): a deposed leader
  cannot write, two leaders cannot both write ``seq``;
* ``snapshot``: the whole state after entry ``seq``, zlib-compressed (:func:`snapshot_value`),
  written by the leader every :data:`SNAPSHOT_ENTRIES` entries in the transaction of an entry,
  which also deletes the entries before that transaction's own: the log holds a short tail;
* ``leader``: the election key, ``{"id", "address"}`` of the controller that created it, bound
  to that controller's lease (:func:`campaign_txn`): it disappears when the lease is not kept
  alive (the leader died or lost etcd), and the others campaign.

Every controller applies the entries in order to its own
:class:`~rocketpy.controller.replicas.ReplicasInfoManager` (:class:`ReplicaLog`), from the
snapshot and the entries after it read at start (in pages of :data:`RANGE_PAGE`, all at the
snapshot's revision) and the watch after that, so all hold the same state; the leader applied
its own entries before writing them and skips their echo. :class:`Leadership` is what the
processor asks before answering as leader. Pure: builds and reads the JSON gateway's bodies
(``/v3/kv/txn``, ``/v3/kv/range``, ``/v3/watch``), no I/O.
"""
import base64
import json
import zlib

from .events import event_from_obj, event_to_obj
from .store import SnapshotError, load_snapshot, snapshot_text

__all__ = ["ReplicaLog", "Leadership", "EtcdSettings", "ReplicationError", "NotCommitted",
           "key_prefix",
           "entry_key", "snapshot_key", "leader_key", "snapshot_request", "append_txn",
           "campaign_txn", "range_request", "watch_request",
           "leader_value", "parse_leader", "b64", "unb64", "ENTRY_DIGITS", "ETCD_TYPE",
           "ETCD_INT_KEYS", "ETCD_ENDPOINTS_KEY", "RANGE_PAGE", "SNAPSHOT_ENTRIES",
           "MAX_SNAPSHOT_BYTES", "MAX_SNAPSHOT_TEXT", "snapshot_value"]

#: digits of an entry's sequence number in its key (keys sort as numbers)
ENTRY_DIGITS = 20
#: log entries one range request reads
RANGE_PAGE = 500
#: entries written after a snapshot before the leader writes the next one
SNAPSHOT_ENTRIES = 1000
#: a larger snapshot is not written (etcd refuses requests over 1.5 MiB by default)
MAX_SNAPSHOT_BYTES = 1024 * 1024
#: a snapshot that inflates beyond this is refused (10,000 broker ids are about 2.2 MB; parsing
#: 8 MiB of the smallest JSON values a hostile value can pack takes ~0.5 s on the reactor)
MAX_SNAPSHOT_TEXT = 8 * 1024 * 1024
#: ``controllerType`` that keeps the state in etcd
ETCD_TYPE = "etcd"


class ReplicationError(ValueError):
    """What etcd holds is not a log this version wrote, or has a gap."""


class NotCommitted(Exception):
    """A change etcd did not commit (another controller leads, no endpoint answered, the entry
    was refused): the replicated controller's failed write, as a full disk is the file
    store's -- no bug."""


def b64(text):
    """The gateway's bytes fields are base64 strings."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return base64.b64encode(data).decode("ascii")


def unb64(text):
    return base64.b64decode(text or "")


def key_prefix(group):
    return f"/rocketpy/controller/{group or 'DEFAULT'}/"


def entry_key(prefix, seq):
    return f"{prefix}log/{seq:0{ENTRY_DIGITS}d}"


def _prefix_end(prefix):
    """``range_end`` covering every key that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def snapshot_key(prefix):
    return prefix + "snapshot"


def leader_key(prefix):
    """The election key: the leader's id and address, under its lease."""
    return prefix + "leader"


def snapshot_request(prefix):
    """``/v3/kv/range`` body: the snapshot key (its answer's revision pins the log's pages)."""
    return {"key": b64(snapshot_key(prefix))}


def snapshot_value(manager, seq):
    """The snapshot key's value: the file store's snapshot of ``manager`` after entry ``seq``,
    zlib-compressed (the text repeats its field names per broker: 2.2 MB at the 10,000 broker
    bound is 93 KB, well under etcd's 1.5 MiB request limit)."""
    return zlib.compress(snapshot_text(manager, seq).encode("utf-8"), 6)


def _inflate(data):
    inflater = zlib.decompressobj()
    text = inflater.decompress(data, MAX_SNAPSHOT_TEXT)
    if inflater.unconsumed_tail or not inflater.eof:
        raise ValueError(f"not a whole snapshot of at most {MAX_SNAPSHOT_TEXT} bytes")
    return text.decode("utf-8")


def range_request(prefix, from_seq=1, revision=None, limit=RANGE_PAGE):
    """``/v3/kv/range`` body: at most ``limit`` log entries from ``from_seq`` on, in key order,
    as they were at ``revision`` (etcd's current state if None); the answer's ``more`` says
    whether entries follow."""
    body = {"key": b64(entry_key(prefix, from_seq)), "range_end": b64(_prefix_end(prefix + "log/")),
            "sort_order": "ASCEND", "sort_target": "KEY", "limit": str(limit)}
    if revision is not None:
        body["revision"] = str(revision)
    return body


def watch_request(prefix, start_revision):
    """``/v3/watch`` body: every change of the group's keys from ``start_revision``."""
    return {"create_request": {"key": b64(prefix), "range_end": b64(_prefix_end(prefix)),
                               "start_revision": str(start_revision)}}


def append_txn(prefix, first_seq, values, leader_revision, snapshot=None):
    """``/v3/kv/txn`` body writing ``values`` (bytes) as entries ``first_seq...``; it succeeds only
    if entry ``first_seq`` is new and the election key is still the one created at
    ``leader_revision``. With ``snapshot`` (:func:`snapshot_value` of the state after the last of
    ``values``) it also writes the snapshot and deletes the entries before ``first_seq`` (etcd
    refuses a transaction that puts and deletes the same key, so this batch's entries stay until
    the next snapshot)."""
    success = [{"request_put": {"key": b64(entry_key(prefix, first_seq + i)), "value": b64(v)}}
               for i, v in enumerate(values)]
    if snapshot is not None:
        success.append({"request_put": {"key": b64(snapshot_key(prefix)), "value": b64(snapshot)}})
        success.append({"request_delete_range": {"key": b64(prefix + "log/"),
                                                 "range_end": b64(entry_key(prefix, first_seq))}})
    return {"compare": [
        {"key": b64(leader_key(prefix)), "target": "CREATE", "result": "EQUAL",
         "create_revision": str(leader_revision)},
        {"key": b64(entry_key(prefix, first_seq)), "target": "CREATE", "result": "EQUAL",
         "create_revision": "0"}],
        "success": success}


def leader_value(self_id, address):
    return json.dumps({"id": self_id, "address": address}, sort_keys=True)


def parse_leader(value):
    """``(id, address)`` of an election key's value; ``(None, None)`` for anything else."""
    try:
        obj = json.loads(unb64(value))
        return str(obj["id"]), str(obj["address"])
    except (ValueError, KeyError, TypeError):
        return None, None


def campaign_txn(prefix, self_id, address, lease_id):
    """``/v3/kv/txn`` body creating the election key with ``lease_id`` if nobody holds it; on
    failure it reads the holder's key."""
    key = b64(leader_key(prefix))
    return {"compare": [{"key": key, "target": "CREATE", "result": "EQUAL",
                         "create_revision": "0"}],
            "success": [{"request_put": {"key": key, "value": b64(leader_value(self_id, address)),
                                         "lease": str(lease_id)}}],
            "failure": [{"request_range": {"key": key}}]}


class ReplicaLog:
    """Applies etcd's log entries, in order and each once, to ``manager``; numbers the entries
    the leader writes."""

    def __init__(self, manager, prefix):
        self.manager = manager
        self.prefix = prefix
        self.seq = 0                # the last entry applied (or recorded, on the leader)

    def reset(self):
        """Forget the state (before loading it again from etcd)."""
        self.manager.replica_info_table = {}
        self.manager.sync_state_info_table = {}
        self.manager.recount()
        self.seq = 0

    @staticmethod
    def encode(events):
        """The value of the entry holding ``events``."""
        return json.dumps([event_to_obj(e) for e in events], sort_keys=True).encode()

    def record(self, events, value=None):
        """The leader's change (already applied in memory): ``(seq, value)`` to write
        (``value``: :meth:`encode` of ``events``, when already made)."""
        self.seq += 1
        return self.seq, value if value is not None else self.encode(events)

    def entry_seq(self, key):
        """The sequence number of a log key (bytes or str), None for another key."""
        key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        head = self.prefix + "log/"
        if not key.startswith(head) or not key[len(head):].isdigit():
            return None
        return int(key[len(head):])

    def apply_snapshot(self, kv):
        """Load the snapshot key's value (``{"key", "value"}`` base64) when it is newer than the
        state; the snapshot's entry. ReplicationError for a value that is not a snapshot."""
        try:
            data = json.loads(_inflate(unb64(kv.get("value"))))   # read once
            seq = int(data["seq"])
            if seq > self.seq:
                self.seq = load_snapshot(self.manager, data)
        except (SnapshotError, zlib.error, ValueError, KeyError, TypeError,
                RecursionError) as exc:   # RecursionError: "[[[[..." 218 bytes compressed
            raise ReplicationError(f"snapshot: {exc}") from None
        return seq

    def apply_kv(self, kv):
        """Apply one entry of a range or watch answer (``{"key", "value"}`` base64); False when
        it was applied already. ReplicationError for a gap or an entry that is not events."""
        seq = self.entry_seq(unb64(kv.get("key")))
        if seq is None or seq <= self.seq:
            return False
        if seq != self.seq + 1:
            raise ReplicationError(f"log entry {seq} follows {self.seq}: a gap")
        try:
            events = [event_from_obj(obj) for obj in json.loads(unb64(kv.get("value")))]
        except (ValueError, TypeError, RecursionError) as exc:
            raise ReplicationError(f"log entry {seq}: {exc}") from None
        for event in events:
            self.manager.apply_event(event)
        self.seq = seq
        return True


class Leadership:
    """Who leads the controller group, as this controller knows it. ``is_leader`` only while
    it holds the election key and its lease is known to be alive (``lease_deadline_ms``: when
    the last kept-alive lease would expire), so a leader cut from etcd stops answering as leader
    by itself, before another can be elected."""

    def __init__(self, self_id, self_address):
        self.self_id = self_id
        self.self_address = self_address
        self.leader_id = None
        self.leader_address = None
        self.leading = False
        self.lease_deadline_ms = 0

    def is_leader(self, now_ms):
        return self.leading and now_ms < self.lease_deadline_ms

    def follow(self, leader_id, leader_address):
        self.leading = False
        self.leader_id, self.leader_address = leader_id, leader_address

    def lead(self, deadline_ms):
        self.leading = True
        self.leader_id, self.leader_address = self.self_id, self.self_address
        self.lease_deadline_ms = deadline_ms


#: The etcd keys: the endpoint list, and the positive integers with their defaults.
ETCD_ENDPOINTS_KEY = "controllerEtcdEndpoints"
ETCD_INT_KEYS = (("controllerEtcdLeaseTtl", 3), ("controllerEtcdTimeoutMillis", 3000))


class EtcdSettings:
    """rocketpy's keys for ``controllerType=etcd`` (not Java ``ControllerConfig`` fields: they
    are read from the file's other keys, so GET_CONTROLLER_CONFIG lists them as Java lists any
    key of the file).

    ``controllerEtcdEndpoints``: ``http://host:port`` of the etcd members, comma separated;
    ``controllerEtcdLeaseTtl``: seconds the election key outlives a silent leader (default 3);
    ``controllerEtcdTimeoutMillis``: how long one gateway request may take (default 3000)."""

    def __init__(self, endpoints, lease_ttl=3, timeout_ms=3000):
        self.endpoints = endpoints
        self.lease_ttl = lease_ttl
        self.timeout_ms = timeout_ms

    @classmethod
    def from_properties(cls, props):
        """ValueError (one line) for a missing or malformed key."""
        endpoints = [e.strip().rstrip("/") for e in props.get(ETCD_ENDPOINTS_KEY, "").split(",")
                     if e.strip()]
        if not endpoints:
            raise ValueError("controllerType=etcd needs controllerEtcdEndpoints")
        for endpoint in endpoints:
            if not endpoint.startswith("http://") or ":" not in endpoint[7:]:
                raise ValueError(f"controllerEtcdEndpoints entry {endpoint!r} is not http://host:port")
        values = {}
        for key, default in ETCD_INT_KEYS:
            text = props.get(key, str(default)).strip()
            if not text.isdigit() or int(text) < 1:
                raise ValueError(f"{key} must be a positive integer, not {text!r}")
            values[key] = int(text)
        return cls(endpoints, values["controllerEtcdLeaseTtl"], values["controllerEtcdTimeoutMillis"])
