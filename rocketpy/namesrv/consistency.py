"""NameServer state layer: whether several NameServers agree, as values (pure: the reading is
the admin client's, :mod:`rocketpy.admin.consistency`, and the status page's, from the server's
own tables). They never replicate, so partial registrations and restarts leave them with
different brokers and routes (apache/rocketmq#4807, #9411, where the advice is "a monitor tool to
compare the routing table of each topic").

:func:`view_of` makes what one NameServer holds -- its cluster table, its broker table and the
route of every topic it lists -- one canonical text per item (a :class:`NamesrvView`);
:func:`compare_views` digests and compares such views."""
import dataclasses
import hashlib
import json

__all__ = ["NamesrvView", "Difference", "Comparison", "SECTIONS", "view_of", "compare_views",
           "digest"]

#: (item kind, :class:`NamesrvView` attribute), in the order they are compared and printed.
SECTIONS = (("cluster", "clusters"), ("broker", "brokers"), ("topic", "topics"))


def digest(items):
    """A short digest of ``{name: text}``: equal tables, equal digests."""
    encoded = json.dumps(sorted(items.items()), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()[:12]


@dataclasses.dataclass
class NamesrvView:
    """What one NameServer holds: ``{name: canonical text}`` per section (a text of None is a
    topic it lists without a route), or the ``error`` that kept it from being read whole."""

    addr: str
    clusters: dict = dataclasses.field(default_factory=dict)
    brokers: dict = dataclasses.field(default_factory=dict)
    topics: dict = dataclasses.field(default_factory=dict)
    error: str = None

    def digests(self):
        return {section: digest(getattr(self, section)) for _, section in SECTIONS}


@dataclasses.dataclass(frozen=True)
class Difference:
    """One item the NameServers disagree on: ``values`` is ``{addr: text, or None if absent}``."""

    kind: str
    name: str
    values: dict


@dataclasses.dataclass
class Comparison:
    """The views compared (in the order of the addresses) and what differs among those read."""

    views: list
    differences: list

    @property
    def consistent(self):
        return not self.differences and not any(view.error for view in self.views)

    def to_json(self):
        return {"consistent": self.consistent,
                "nameServers": {view.addr: {
                    "error": view.error,
                    **{section: len(getattr(view, section)) for _, section in SECTIONS},
                    "digests": view.digests()} for view in self.views},
                "differences": [dataclasses.asdict(d) for d in self.differences]}


def cluster_text(broker_names):
    return " ".join(sorted(broker_names or ()))


def broker_text(broker):
    addrs = " ".join(f"{i}={a}" for i, a in sorted((broker.broker_addrs or {}).items()))
    return f"cluster {broker.cluster} {addrs}"


def route_text(route):
    """A route's broker groups and their queues, by broker name. Broker addresses are left to
    the broker table, so one moved broker is one difference, not one per topic."""
    queues = {q.broker_name: q for q in route.queue_datas or []}
    names = sorted(set(queues) | {b.broker_name for b in route.broker_datas or []})
    parts = []
    for name in names:
        queue = queues.get(name)
        parts.append(f"{name} (no queues)" if queue is None else
                     f"{name} r{queue.read_queue_nums} w{queue.write_queue_nums} p{queue.perm}"
                     + (f" sys{queue.topic_sys_flag}" if queue.topic_sys_flag else ""))
    if route.order_topic_conf:
        parts.append(f"order {route.order_topic_conf}")
    return "; ".join(parts)


def view_of(addr, info, routes):
    """The :class:`NamesrvView` of a NameServer's ``info`` (a
    :class:`~rocketpy.remoting.bodies.ClusterInfo`) and ``routes`` (``{topic:
    TopicRouteData, or None for a listed topic without a route}``), however they were read:
    over the wire, or from a server's own tables (the status page's side of a comparison)."""
    return NamesrvView(
        addr,
        clusters={name: cluster_text(brokers)
                  for name, brokers in (info.cluster_addr_table or {}).items()},
        brokers={name: broker_text(broker)
                 for name, broker in (info.broker_addr_table or {}).items()},
        topics={topic: None if route is None else route_text(route)
                for topic, route in routes.items()})


def compare_views(views):
    """A :class:`Comparison` of ``views``: every item whose text is not the same on every
    NameServer that could be read (absent counts as different)."""
    read = [view for view in views if view.error is None]
    differences = []
    for kind, section in SECTIONS:
        names = set()
        for view in read:
            names.update(getattr(view, section))
        for name in sorted(names):
            values = {view.addr: getattr(view, section).get(name, _ABSENT) for view in read}
            if len(set(values.values())) > 1:
                differences.append(Difference(kind, name, {
                    addr: (None if text is _ABSENT else text or "(no route)")
                    for addr, text in values.items()}))
    return Comparison(list(views), differences)


_ABSENT = object()
