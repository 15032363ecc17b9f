"""NameServer state layer: the route tables as plain values, for a warm restart (a rocketpy
addition: a Java NameServer starts empty and answers TOPIC_NOT_EXIST until each broker's next
registration, up to ``registerNameServerPeriod``, 30 s, later; apache/rocketmq#9411).

An image is what the tables hold, in their orders, with the largest size each Java table
reached (which fixes its iteration order), so tables filled from it answer every request byte
for byte as the tables it was taken from. It is two values, kept in two files by the service
layer (:mod:`rocketpy.service.routesnapshot`, format :mod:`rocketpy.namesrv.routefile`):

* :class:`MainImage`: clusters, broker groups, live brokers (each with its last update, its
  timeout and the host whose connection registered it) and their filter servers: small (a few
  hundred bytes a broker), taken whole in one step;
* :class:`RoutesImage`: the queue layouts, the topics (in their table order, as runs of topics
  sharing one layout) and the static-topic mappings with the group that registered each (it
  goes with that group's last member): large, taken by :class:`RoutesCapture` in
  steps of bounded size between which the reactor turns, and abandoned when the tables change
  meanwhile (:exc:`TablesChanged`), so an image is always the tables at one moment.

Filling the tables (:func:`restore_deltas`) is a sequence of
:class:`~rocketpy.namesrv.delta.RouteDelta` values (their ops the very ops a replica would be
sent) for the one writer, each bounded in the topic-broker pairs it adds, the live entries
last: loaded live entries are *provisional* (``RouteInfoManager.provisional``) until their
broker registers again, and expire as they would have. Nothing here reads a clock or a file."""
from dataclasses import dataclass, field
from itertools import groupby, islice
from typing import NamedTuple

from .delta import (PutLive, RestoreAppliedDigest, RestoreCluster, RestoreHighWater,
                    RestoreTopics, RouteDelta, SetBroker, SetMapping)
from .model import MappingInfo

__all__ = ["LiveImage", "MainImage", "RoutesImage", "RoutesCapture", "TablesChanged",
           "capture_main", "capture_routes", "routes_mark", "restore_deltas", "delta_work", "is_empty",
           "CAPTURE_STEP", "RESTORE_SLICE_PAIRS"]

#: topics a capture step copies (a dict walk of ~35 ns a topic on a busy machine)
CAPTURE_STEP = 50_000
#: topic-broker pairs one restore delta adds (bulk dict operations, ~0.3-0.6 µs a pair on a
#: busy machine; the topic dict's growth past 700,000 topics moves its entries in one step more)
RESTORE_SLICE_PAIRS = 16_384


class LiveImage(NamedTuple):
    """One live broker: its live-table key (``cluster`` None for 4.9, which keys by address),
    what the entry holds, the host that registered it (None: unknown) and its filter servers
    (None: none registered)."""

    cluster: "str | None"
    addr: str
    last_update_ms: int
    timeout_ms: int
    data_version: object
    ha_server_addr: "str | None"
    broker_name: str
    host: "str | None"
    filter_servers: "list[str] | None"


@dataclass
class MainImage:
    """Clusters (``(name, broker names, largest set size)``), broker groups (``(BrokerData,
    applied topic-table digest or None)``) and live brokers (:class:`LiveImage`), in table
    order; ``taken_ms`` on the server's clock; the broker-name and cluster tables' high-water
    marks."""

    profile: str
    taken_ms: int
    clusters: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    live: list = field(default_factory=list)
    brokers_high: int = 0
    clusters_high: int = 0

    @property
    def filter_servers(self):
        return sum(len(entry.filter_servers or ()) for entry in self.live)


@dataclass
class RoutesImage:
    """Layouts (``(QueueData tuple, high-water size)``), the topics in table order, ``runs``
    (``(layout index, topic count)``, consecutive, covering ``topics``), static-topic mappings
    (``(topic, MappingInfo, owner)``: the group that registered it) and the topic table's
    high-water mark. ``mark`` is the
    tables' :func:`routes_mark` when it was taken (None for one read from a file)."""

    profile: str
    shapes: list = field(default_factory=list)
    topics: list = field(default_factory=list)
    runs: list = field(default_factory=list)
    mappings: list = field(default_factory=list)
    topics_high: int = 0
    mark: object = field(default=None, compare=False)

    @property
    def pairs(self):
        shapes = self.shapes
        return sum(count * len(shapes[index][0]) for index, count in self.runs)


class TablesChanged(Exception):
    """The topic table changed while a :class:`RoutesCapture` was under way."""


def routes_mark(rim):
    """A value that changes whenever what a :class:`RoutesImage` holds may have: the gate's
    generation (every change of a topic's layout or mapping moves it) and the topic table's
    removals and arrivals (a rebuild of its dict moves those)."""
    shapes = rim.shapes
    return rim.snapshots.generation, shapes.removals, shapes.arrivals


def capture_main(rim, profile, taken_ms, host_of_channel):
    """The :class:`MainImage` of ``rim`` now; ``host_of_channel(channel_id)`` is the host a
    live entry's connection comes from (None when gone), a provisional entry keeping its own."""
    provisional = rim.provisional
    filters = rim.filter_server_table
    live = []
    for key, entry in rim.broker_live_table.items():
        host = provisional[key] if key in provisional else (
            None if entry.channel_id is None else host_of_channel(entry.channel_id))
        servers = filters.get(key)
        live.append(LiveImage(key[0], key[1], entry.last_update_ms, entry.heartbeat_timeout_ms,
                              entry.data_version, entry.ha_server_addr, entry.broker_name, host,
                              None if servers is None else list(servers)))
    _, brokers_high, clusters_high = rim.high_water_marks()
    return MainImage(
        profile, taken_ms,
        clusters=[(cluster, tuple(names), rim.cluster_high_water(cluster))
                  for cluster, names in rim.cluster_addr_table.items()],
        groups=[(data, rim.applied_digest(name)) for name, data in rim.broker_addr_table.items()],
        live=live, brokers_high=brokers_high, clusters_high=clusters_high)


class RoutesCapture:
    """Takes the :class:`RoutesImage` of ``rim`` in steps of ``step_topics`` topics (and as many
    mappings), for a caller that lets the reactor turn between them: :meth:`step` returns the
    image once complete, else None, and raises :exc:`TablesChanged` when the tables changed
    since the first step (the partial image is dropped). ``steps`` and ``largest_step`` count
    the work done (entries copied)."""

    def __init__(self, rim, profile, step_topics=CAPTURE_STEP):
        self.rim = rim
        self.step_topics = step_topics
        self.mark = routes_mark(rim)
        table = rim.topic_queue_table
        self._keys, self._values = iter(table), iter(table.values())
        self._mappings = iter(rim.topic_queue_mapping_info_table.items())
        self._topics_left = len(table)
        self._shapes = {}          # id(shape) -> (index, shape)
        self.image = RoutesImage(profile, topics_high=rim.high_water_marks()[0], mark=self.mark)
        self.steps = 0
        self.largest_step = 0

    def step(self):
        if routes_mark(self.rim) != self.mark:
            raise TablesChanged()
        image, n = self.image, self.step_topics
        try:
            if self._topics_left:   # the topics first, then the mappings
                done = min(n, self._topics_left)
                image.topics.extend(islice(self._keys, done))
                self._add_runs(list(islice(self._values, done)))
                self._topics_left -= done
                complete = False
            else:
                found = [(topic, list(by_broker.values()))
                         for topic, by_broker in islice(self._mappings, n)]
                owner = self.rim.mapping_owner
                image.mappings.extend((topic, info, owner(topic, info.bname))
                                      for topic, infos in found for info in infos)
                done = len(found)
                complete = done < n
        except RuntimeError:   # a dict changed size under the walk (the mark moves too)
            raise TablesChanged() from None
        self.steps += 1
        self.largest_step = max(self.largest_step, done)
        return image if complete else None

    def _add_runs(self, values):
        shapes, runs, image = self._shapes, self.image.runs, self.image
        for shape_id, members in groupby(values, key=id):   # by identity: shapes are interned
            shape = next(members)
            count = 1 + sum(1 for _ in members)
            entry = shapes.get(shape_id)
            if entry is None:   # held here, so its id stays its own while the capture runs
                entry = shapes[shape_id] = (len(image.shapes), shape)
                image.shapes.append((tuple(shape.queues.values()), shape.high))
            if runs and runs[-1][0] == entry[0]:
                runs[-1] = (entry[0], runs[-1][1] + count)
            else:
                runs.append((entry[0], count))


def capture_routes(rim, profile):
    """The whole :class:`RoutesImage` of ``rim`` at once (a test, a shutdown, a small table)."""
    capture = RoutesCapture(rim, profile, step_topics=1 + max(
        len(rim.topic_queue_table), len(rim.topic_queue_mapping_info_table)))
    image = None
    while image is None:
        image = capture.step()
    return image


def is_empty(rim):
    """Whether ``rim`` holds nothing an image would fill (a warm restart fills empty tables)."""
    return not (rim.topic_queue_table or rim.broker_addr_table or rim.broker_live_table
                or rim.cluster_addr_table or rim.topic_queue_mapping_info_table)


class _Slices:
    """Deltas of at most ``budget`` units of work each: a topic-broker pair, or one entry of
    any other kind."""

    def __init__(self, budget):
        self.budget = budget
        self.left = budget
        self.delta = RouteDelta()
        self.full = []

    def add(self, op, units=1):
        self.delta.add(op)
        self.spend(units)

    def spend(self, units):
        self.left -= units
        if self.left <= 0:
            self.cut()

    def cut(self):
        if self.delta:
            self.full.append(self.delta)
        self.delta, self.left = RouteDelta(), self.budget


def delta_work(delta):
    """The units of work of a delta of :func:`restore_deltas` (what it spent on its ops)."""
    return sum(len(op.names) * len(op.queue_datas) if type(op) is RestoreTopics else
               max(1, len(op.broker_names)) if type(op) is RestoreCluster else 1
               for op in delta.ops)


def restore_deltas(main, routes, shift_ms=0, slice_pairs=RESTORE_SLICE_PAIRS):
    """The deltas that fill empty tables with ``main`` and ``routes``, in order, each of at
    most ``slice_pairs`` units of work (:func:`delta_work`; a topic-broker pair is one, and a
    topic is never split): broker groups first, then the topics, the mappings, and the live
    entries last, their times moved on by ``shift_ms`` (from the image's clock to this
    server's), provisional."""
    out = _Slices(slice_pairs)
    out.add(RestoreHighWater(routes.topics_high, main.brokers_high, main.clusters_high))
    for cluster, names, set_high in main.clusters:
        out.add(RestoreCluster(cluster, tuple(names), set_high), max(1, len(names)))
        yield from _drain(out)
    for broker_data, applied in main.groups:
        out.add(SetBroker.of(broker_data))
        if applied is not None:
            out.add(RestoreAppliedDigest(broker_data.broker_name, applied))
        yield from _drain(out)
    position, topics, shapes = 0, routes.topics, routes.shapes
    for index, count in routes.runs:
        queue_datas, high = shapes[index]
        width = len(queue_datas)
        while count:
            take = min(count, max(1, out.left // width))
            out.add(RestoreTopics(tuple(queue_datas), high,
                                  tuple(topics[position:position + take])), take * width)
            position, count = position + take, count - take
            yield from _drain(out)
    for topic, info, owner in routes.mappings:
        out.add(SetMapping(topic, MappingInfo.of(info), owner))
        yield from _drain(out)
    for entry in main.live:
        servers = entry.filter_servers
        out.add(PutLive((entry.cluster, entry.addr), entry.last_update_ms + shift_ms,
                        entry.timeout_ms, entry.data_version, None, entry.ha_server_addr,
                        entry.broker_name, None if servers is None else tuple(servers),
                        provisional=True, host=entry.host))
        yield from _drain(out)
    out.cut()
    yield from _drain(out)


def _drain(slices):
    while slices.full:
        yield slices.full.pop(0)
