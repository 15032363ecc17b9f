"""Admin layer: whether several NameServers agree. They never replicate, so partial
registrations and restarts leave them with different brokers and routes (apache/rocketmq#4807,
#9411, where the advice is "a monitor tool to compare the routing table of each topic").

:func:`namesrv_view` reads what one NameServer holds -- its cluster table, its broker table and
the route of every topic it lists -- as one canonical text per item (:func:`view_of`, also for
tables read some other way); :func:`compare_views`
digests and compares such views; :func:`compare_nameservers` does both for every address of an
:class:`~rocketpy.admin.api.MQAdmin` (``rocketpy-admin compareNamesrv``, and the status page,
given its peers)."""
import dataclasses
import hashlib
import json

from twisted.internet.defer import DeferredList, DeferredSemaphore, inlineCallbacks

from ..remoting.codes import ResponseCode
from ..transport.client import RemotingCommandError

__all__ = ["NamesrvView", "Difference", "Comparison", "SECTIONS", "namesrv_view", "view_of",
           "compare_views", "compare_nameservers"]

#: (item kind, :class:`NamesrvView` attribute), in the order they are compared and printed.
SECTIONS = (("cluster", "clusters"), ("broker", "brokers"), ("topic", "topics"))


def _one_line(exc):
    return " ".join(str(exc).split())


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


@inlineCallbacks
def namesrv_view(admin, addr):
    """Read the NameServer ``addr``: cluster info, the topic list, then every listed topic's
    route (``admin.concurrency`` at a time, on the one connection)."""
    try:
        info = yield admin.examine_broker_cluster_info(at=addr)
        listed = yield admin.fetch_all_topic_list(at=addr)
    except Exception as exc:  # any failure: this NameServer could not be read
        return NamesrvView(addr, error=_one_line(exc))
    topics = list(dict.fromkeys(listed.topic_list or ()))
    semaphore = DeferredSemaphore(admin.concurrency)
    results = yield DeferredList([semaphore.run(admin.examine_topic_route_info, topic, at=addr)
                                  for topic in topics], consumeErrors=True)
    routes, error = {}, None
    for topic, (ok, result) in zip(topics, results):
        if ok:
            routes[topic] = result
        elif (result.check(RemotingCommandError)
              and result.value.code == ResponseCode.TOPIC_NOT_EXIST):
            routes[topic] = None  # listed, but no route (no queue data left)
        elif error is None:
            error = f"route of {topic}: {_one_line(result.value)}"
    view = view_of(addr, info, routes)
    view.error = error
    return view


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


@inlineCallbacks
def compare_nameservers(admin):
    """Read every NameServer of ``admin.namesrv_addrs`` at once and compare them."""
    addrs = list(dict.fromkeys(admin.namesrv_addrs))
    views = yield DeferredList([namesrv_view(admin, addr) for addr in addrs])
    return compare_views([view for _, view in views])
