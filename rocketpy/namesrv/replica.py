"""NameServer state layer: the writer's state as a stream of records, and a replica that
applies them (a rocketpy addition: Java's NameServer is one process whose threads share its
tables under a lock; rocketpy's worker processes, :mod:`rocketpy.service.workers`, each hold a
replica of the one writer's).

The writer's state changes in three places, each with a journal hook that a :class:`Feed`
turns into records, in the order they happen:

* :data:`ROUTES`: a batch of route ops, what one outermost change of
  :class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager` applied (its ``journal``),
  encoded by :mod:`rocketpy.namesrv.opcodec`; a replica applies it through the same
  ``RouteInfoManager.apply``, so its tables answer as the writer's;
* :data:`KV`: one change of the KV table as it is made (after its write is durable): the JSON
  ``[namespace, key, value]`` of a put, ``[namespace, key]`` of a delete;
* :data:`CONFIG`: the properties of an UPDATE_NAMESRV_CONFIG, as JSON; a replica updates its
  settings in memory (the writer alone writes the file) and moves every route version, as the
  handler does.

A replica starts from an *image* (:func:`encode_image`): the settings, the KV table with its
high-water marks and the route tables in
the warm restart's format (:mod:`rocketpy.namesrv.routefile`, taken as for a peer's
``--warm-from``, :mod:`rocketpy.namesrv.routeimage`), then the records after it. Everything is
read as a stranger's bytes would be: a record that does not parse is one
:exc:`ReplicaError`."""
import json

from .delta import RouteDelta
from .kvconfig import KVSnapshot
from .opcodec import OpStreamError, decode_batch, encode_batch
from .routefile import MainReader, RoutesReader, SnapshotRefused, part_length
from .routeimage import restore_deltas

__all__ = ["ROUTES", "KV", "CONFIG", "KINDS", "Feed", "Replica", "ReplicaError",
           "encode_image", "decode_image", "apply_batch"]

ROUTES, KV, CONFIG = "routes", "kv", "config"
KINDS = (ROUTES, KV, CONFIG)


class ReplicaError(ValueError):
    """A record or image a replica cannot apply, and why (one line)."""


def apply_batch(rim, batch):
    """Apply ``batch`` (the ops of one journal call) to ``rim`` as one change."""
    return rim.apply(RouteDelta(batch))


class Feed:
    """The journal hooks of the writer's tables, KV store and settings
    (:meth:`attach`), each change handed to ``publish(kind, payload, visible)`` as it happens:
    ``visible`` False for a route batch that moved nothing a request reads back (the tables'
    ``read_version``: a heartbeat's or an unchanged re-registration's new timestamps), whose
    answer need not wait for the replicas (they apply it all the same, in order)."""

    def __init__(self, publish):
        self.publish = publish
        self._rim = None
        self._read_version = None

    def attach(self, rim, kv, configuration):
        self._rim, self._read_version = rim, rim.read_version
        rim.journal = self.routes
        kv.journal = self.kv
        configuration.journal = self.config

    def routes(self, batch):
        version = self._rim.read_version
        visible, self._read_version = version != self._read_version, version
        self.publish(ROUTES, encode_batch(batch), visible)

    def kv(self, namespace, key, value, delete):
        self.publish(KV, _json([namespace, key] if delete else [namespace, key, value]), True)

    def config(self, props):
        self.publish(CONFIG, _json(props), True)


def _json(value):
    return json.dumps(value, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _loads(payload, what):
    try:
        return json.loads(bytes(payload).decode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReplicaError(f"{what} is not JSON: {exc}") from None


def _text(value, what, optional=False):
    if value is None and optional:
        return None
    if type(value) is not str:
        raise ReplicaError(f"{what} is not a string: {value!r:.60}")
    return value


def _properties(value, what):
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        raise ReplicaError(f"{what} is not an object of strings")
    return value


def encode_image(props, kv, route_stream):
    """What a replica starts from: the settings' properties (``Configuration.items()``),
    ``kv``'s table (a :class:`~rocketpy.namesrv.kvconfig.KVSnapshot`, its order kept) and
    ``route_stream`` (the two route parts, ``RouteSnapshotter.encode``)."""
    head = _json({"config": dict(props),
                  "kv": [[ns, list(map(list, table.items()))] for ns, table in kv.table.items()],
                  "kvHigh": kv.high, "kvNamespacesHigh": kv.namespaces_high})
    return head + b"\n" + route_stream   # (JSON's own text holds no raw newline)


def decode_image(data):
    """``(properties, KVSnapshot, route_stream)`` of :func:`encode_image`'s bytes."""
    cut = data.find(b"\n")
    if cut < 0:
        raise ReplicaError("an image without its route tables")
    head = _loads(memoryview(data)[:cut], "an image's head")
    if type(head) is not dict:
        raise ReplicaError("an image's head is not an object")
    props = _properties(head.get("config"), "the image's settings")
    table = {}
    namespaces = head.get("kv")
    if type(namespaces) is not list:
        raise ReplicaError("the image's KV table is not a list")
    for entry in namespaces:
        if type(entry) is not list or len(entry) != 2 or type(entry[1]) is not list:
            raise ReplicaError("a KV namespace of the image is not [name, entries]")
        pairs = table[_text(entry[0], "a KV namespace")] = {}
        for pair in entry[1]:
            if type(pair) is not list or len(pair) != 2:
                raise ReplicaError("a KV entry of the image is not [key, value]")
            pairs[_text(pair[0], "a KV key")] = _text(pair[1], "a KV value", optional=True)
    high = head.get("kvHigh")
    if type(high) is not dict or not all(type(v) is int for v in high.values()):
        raise ReplicaError("the image's KV high-water marks are not integers")
    namespaces_high = head.get("kvNamespacesHigh")
    if type(namespaces_high) is not int:
        raise ReplicaError("the image's KV namespace high-water mark is not an integer")
    return props, KVSnapshot(table, high, namespaces_high), bytes(memoryview(data)[cut + 1:])


class Replica:
    """Tables, KV store and settings that change only by the writer's records.

    :param rim: an empty :class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager`
        (built without a notifier: the writer's effects stay the writer's).
    :param kv: an empty in-memory :class:`~rocketpy.namesrv.kvconfig.KVConfigManager`.
    :param configuration: the :class:`~rocketpy.namesrv.config.Configuration` (no store)."""

    def __init__(self, rim, kv, configuration):
        self.rim = rim
        self.kv = kv
        self.configuration = configuration
        self._appliers = {ROUTES: self._routes, KV: self._kv, CONFIG: self._config}

    def restore(self, image, limits, profile, v5_keys):
        """Fill the empty state with ``image`` (:func:`encode_image`'s bytes). ``limits``: the
        route bounds' :class:`~rocketpy.namesrv.routefile.ReadLimits`."""
        props, kv, stream = decode_image(image)
        try:
            cut = part_length(stream)
            main = MainReader(stream[:cut], limits, profile, None, 0, v5_keys)
            while not main.step():
                pass
            routes = RoutesReader(stream[cut:], limits, profile, main.routes)
            while not routes.step():
                pass
        except SnapshotRefused as exc:
            raise ReplicaError(f"the image's route tables: {exc}") from None
        self._config(_json(props))
        self.kv.restore(kv)
        for delta in restore_deltas(main.image, routes.image):
            self.rim.apply(delta)

    def apply(self, kind, payload):
        """Apply one record of the stream."""
        applier = self._appliers.get(kind)
        if applier is None:
            raise ReplicaError(f"a record of kind {kind!r}, not one of {', '.join(KINDS)}")
        applier(payload)

    def _routes(self, payload):
        try:
            batch = decode_batch(payload)
        except OpStreamError as exc:
            raise ReplicaError(f"a route record: {exc}") from None
        apply_batch(self.rim, batch)

    def _kv(self, payload):
        record = _loads(payload, "a KV record")
        if type(record) is not list or len(record) not in (2, 3):
            raise ReplicaError("a KV record is not [namespace, key(, value)]")
        namespace, key = _text(record[0], "a KV namespace"), _text(record[1], "a KV key")
        if len(record) == 2:
            self.kv.delete_kv_config(namespace, key)
        else:
            self.kv.put_kv_config(namespace, key, _text(record[2], "a KV value", optional=True))

    def _config(self, payload):
        self.configuration.update(_properties(_loads(payload, "a config record"),
                                              "a config record"))
        self.rim.invalidate_routes()
