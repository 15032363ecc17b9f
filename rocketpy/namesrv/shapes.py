"""NameServer state layer: the topic table as topics pointing at shared queue layouts (Java's
``topicQueueTable``, ``Map<topic, Map<brokerName, QueueData>>``, stored the way a cluster uses
it).

Topics are created cluster-wide with one layout, so thousands of topics have the same
``broker name -> QueueData`` map, and their route answers are byte-identical (a route body does
not name its topic). A :class:`RouteShape` is one such map, immutable and hash-consed by the
:class:`ShapeTable`: a topic costs one entry in the topic table and one slot in its shape's
member list, and the route snapshot and its encoded bodies are kept per shape. The shape also
carries the largest size the topic's Java ``HashMap`` reached (it fixes the iteration order
of ``queueDatas``), so two topics share a shape only when Java would list them alike."""
from collections import deque
from collections.abc import Mapping
from itertools import count, repeat

from .javaorder import hashmap_capacity, ordered

__all__ = ["FreshTopics", "RouteShape", "ShapeTable"]


class RouteShape(Mapping):
    """A queue layout: broker name -> :class:`~rocketpy.namesrv.model.QueueData` in insertion
    order, read-only, equal to a dict with the same items. The table makes one object per
    distinct layout (and high-water size), and indexes shapes by ``id``.

    ``version`` changes (from the table's clock) when the shape is made and whenever a broker it
    names changes; ``snapshots`` holds the route snapshots built at that version."""

    __slots__ = ("queues", "high", "key", "version", "snapshots", "members", "live")

    def __init__(self, queue_datas, high, version):
        #: the layout as a dict (for hot loops; never changed)
        self.queues = {qd.broker_name: qd for qd in queue_datas}
        #: the largest size the topic's HashMap ever had (its capacity, hence its order)
        self.high = high
        self.key = (tuple(queue_datas), high)
        self.version = version
        self.snapshots = {}
        #: topics that joined, in order; stale ones are dropped on reading (see ShapeTable)
        self.members = []
        #: how many topics use the shape now
        self.live = 0

    def __getitem__(self, name):
        return self.queues[name]

    def __iter__(self):
        return iter(self.queues)

    def __len__(self):
        return len(self.queues)

    def __contains__(self, name):
        return name in self.queues

    def get(self, name, default=None):
        return self.queues.get(name, default)

    def java_order(self):
        """Broker names in the order Java's HashMap lists them."""
        return ordered(list(self.queues), hashmap_capacity(self.high))

    def __repr__(self):
        return f"RouteShape({list(self.queues.values())!r}, high={self.high})"


class ShapeTable:
    """The topic table (``topics``: topic -> :class:`RouteShape`) and the shapes it uses.

    Every change goes through :meth:`put`, :meth:`remove` and :meth:`drop`, which return whether
    the topic's layout changed. Transitions (shape + QueueData -> shape) are remembered until a
    shape dies, so a broker registering 10,000 topics of one layout builds the new layout once.
    ``clock`` hands out route versions (shared with the snapshots)."""

    def __init__(self, clock=None):
        self.clock = clock if clock is not None else count(1)
        self.topics = {}
        self._shapes = {}           # key -> shape
        self._moves = {}            # (id of a shape or None, op or its id) -> (op, shape)
        self._by_broker = {}        # broker name -> {id(shape): shape}
        #: how many times a topic left the table (a :class:`FreshTopics` is stale after one)
        self.removals = 0
        #: moves when topics join the table (while it stays, a :class:`FreshTopics` is current
        #: without looking its topics up)
        self.arrivals = 0

    def __len__(self):
        return len(self._shapes)

    # -- reading

    def shapes(self):
        return list(self._shapes.values())

    def broker_names(self):
        """The broker names some layout names."""
        return list(self._by_broker)

    def shapes_of_broker(self, name):
        return list(self._by_broker.get(name, {}).values())

    def members(self, shape):
        """The topics using ``shape`` now (compacting its member list)."""
        if len(shape.members) != shape.live:
            topics = self.topics
            shape.members = [t for t in dict.fromkeys(shape.members) if topics.get(t) is shape]
        return shape.members

    def topic_count(self, name):
        """How many topics' layouts name broker ``name``: each shape's ``live`` count summed over
        the shapes naming it, so the cost is its distinct layouts, not its topics."""
        return sum(shape.live for shape in self._by_broker.get(name, {}).values())

    def topics_of_broker(self, name):
        """The topics whose layout names broker ``name``."""
        found = []
        for shape in self.shapes_of_broker(name):
            found.extend(self.members(shape))
        return found

    # -- interning

    def _intern(self, queue_datas, high):
        key = (tuple(queue_datas), high)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = RouteShape(queue_datas, high, next(self.clock))
            for name in shape:
                self._by_broker.setdefault(name, {})[id(shape)] = shape
        return shape

    def _remember(self, move, entry):
        """Keep a transition; the memo never outgrows the shapes by much (each walk of a
        registration brings new records, so entries of live shapes would pile up)."""
        moves = self._moves
        if len(moves) >= 4 * len(self._shapes) + 4096:
            moves.clear()
        moves[move] = entry
        return entry

    def _with(self, shape, queue_data):
        # keyed by identities (a record's hash is computed in Python); the entry holds the
        # record, so its id stays its own, and entries go when any shape dies
        move = (None if shape is None else id(shape), id(queue_data))
        entry = self._moves.get(move)
        found = entry[1] if entry is not None and entry[0] is queue_data else None
        if found is None:
            if shape is None:
                found = self._intern((queue_data,), 1)
            else:
                name = queue_data.broker_name
                qds = [queue_data if qd.broker_name == name else qd for qd in shape.values()]
                if name not in shape:
                    qds.append(queue_data)
                found = self._intern(qds, max(shape.high, len(qds)))
            self._remember(move, (queue_data, found))
        return found

    def _without(self, shape, name):
        move = (id(shape), name)
        entry = self._moves.get(move)
        if entry is None:
            qds = [qd for qd in shape.values() if qd.broker_name != name]
            entry = self._remember(move, (name, self._intern(qds, shape.high) if qds else None))
        return entry[1]

    # -- membership

    def _move(self, topic, old, new):
        if new is not None:
            if old is None:
                self.arrivals += 1
            self.topics[topic] = new
            new.live += 1
            new.members.append(topic)
        else:
            del self.topics[topic]
            self.removals += 1
        if old is not None:
            old.live -= 1
            if not old.live:
                self._retire(old)
            elif len(old.members) > 2 * old.live + 8:
                self.members(old)

    def _retire(self, shape):
        """No topic uses ``shape``: forget it (and every remembered transition, which may name
        it; they are rebuilt on demand)."""
        del self._shapes[shape.key]
        shape.members = []
        shape.snapshots = {}
        for name in shape:
            shapes = self._by_broker[name]
            del shapes[id(shape)]
            if not shapes:
                del self._by_broker[name]
        self._moves.clear()

    # -- writing

    def put(self, topic, queue_data):
        """Set ``topic``'s QueueData of its broker; True when that changed the layout."""
        old = self.topics.get(topic)
        if old is not None and old.get(queue_data.broker_name) == queue_data:
            return False
        self._move(topic, old, self._with(old, queue_data))
        return True

    def remove(self, topic, name):
        """Take broker ``name`` out of ``topic``'s layout (the topic goes with its last
        broker); True when it was there."""
        old = self.topics.get(topic)
        if old is None or name not in old:
            return False
        self._move(topic, old, self._without(old, name))
        return True

    def drop(self, topic):
        """Remove ``topic``; the number of its brokers (0 when it was not there)."""
        old = self.topics.get(topic)
        if old is None:
            return 0
        self._move(topic, old, None)
        return len(old)

    def add_fresh(self, fresh, queue_data_of):
        """Add the topics of ``fresh`` (a :class:`FreshTopics`), each with the one QueueData
        ``queue_data_of(value)`` (a layout of that one broker, as :meth:`put` would make it), in
        their order, as bulk dict operations: True, or False (and nothing changed) when the table
        no longer lacks them all or a topic left it since they were found."""
        topics = self.topics
        if fresh.removals != self.removals or (fresh.arrivals != self.arrivals and not
                                               topics.keys().isdisjoint(fresh.names)):
            return False
        self.arrivals += 1
        shape_of = {value: self._intern((queue_data_of(value),), 1) for value in fresh.groups}
        if len(shape_of) == 1:
            topics.update(zip(fresh.names, repeat(next(iter(shape_of.values())))))
        else:
            topics.update(zip(fresh.names, map(shape_of.__getitem__, fresh.values)))
        for value, names in fresh.groups.items():
            shape = shape_of[value]
            shape.members.extend(names)
            shape.live += len(names)
        return True

    def restore(self, queue_datas, high, names):
        """Add ``names`` (topics the table lacks) with the layout ``queue_datas`` whose topics'
        HashMaps reached ``high`` entries, as bulk dict operations: a warm restart's topics
        (:mod:`rocketpy.namesrv.routeimage`). A name the table holds already, or one named
        twice, is added once at most; the names added, in order."""
        topics = self.topics
        if not topics.keys().isdisjoint(names):
            names = [name for name in names if name not in topics]
        if not names:
            return names
        shape = self._intern(tuple(queue_datas), high)
        size = len(topics)
        topics.update(zip(names, repeat(shape)))
        if len(topics) - size != len(names):   # a name twice
            names = list(dict.fromkeys(names))
        shape.members.extend(names)
        shape.live += len(names)
        self.arrivals += 1
        return names

    def remove_broker(self, name):
        """Take broker ``name`` out of every layout naming it, a layout's topics at a time as
        bulk dict operations (one by one, :meth:`remove` took ~2 µs a topic: 0.2 s for a broker
        of 100,000); the lists of topics whose layout changed."""
        topics = self.topics
        touched = []
        for shape in self.shapes_of_broker(name):
            members = self.members(shape)
            new = self._without(shape, name)
            if new is None:
                deque(map(topics.__delitem__, members), maxlen=0)
                self.removals += 1
            else:
                topics.update(zip(members, repeat(new)))
                new.members.extend(members)
                new.live += len(members)
            shape.live = 0
            self._retire(shape)   # every topic it had moved
            touched.append(members)
        return touched

    def rebuilt(self):
        """Its dicts were rebuilt in place (the memory release: emptied, then filled): a reader
        on another thread may have found the topic table empty meanwhile, so every
        :class:`FreshTopics` found before now is stale."""
        self.removals += 1

    def touch_broker(self, name):
        """A broker group or its filter servers changed: new versions for its shapes."""
        clock = self.clock
        for shape in self._by_broker.get(name, {}).values():
            shape.version = next(clock)
            shape.snapshots = {}

    def touch_all(self):
        clock = self.clock
        for shape in self._shapes.values():
            shape.version = next(clock)
            shape.snapshots = {}


class FreshTopics:
    """The topics of a registration's topic table that the topic table lacked when it was read
    (off the reactor, by :meth:`find`), in the registration's order, each with its QueueData
    value ``(readQueueNums, writeQueueNums, perm, topicSysFlag)``; ``rest`` is the table's other
    configs. :meth:`ShapeTable.add_fresh` adds them in bulk where the walk took ~3 µs a topic,
    so a broker's first registration of 500,000 topics is one short step on the reactor."""

    __slots__ = ("source", "removals", "arrivals", "names", "values", "groups", "rest")

    def __init__(self, source, counts, names, values, groups, rest):
        #: the registration's topic table these were found in (a hint for that table alone)
        self.source = source
        #: ``ShapeTable.removals`` and ``arrivals`` when the view was taken
        self.removals, self.arrivals = counts
        self.names = names
        self.values = values
        #: value -> the names with it, in order
        self.groups = groups
        self.rest = rest

    @classmethod
    def find(cls, configs, topics_get, counts, source=None):
        """Split ``configs`` (TopicConfig values, in table order) by whether ``topics_get(
        topic)`` (the topic table's ``get``; read from any thread: ``dict.get`` is atomic,
        shapes are immutable) finds the topic; None when a topic name repeats (then only the
        walk is exact). ``counts``: the table's ``(removals, arrivals)`` before the first look;
        ``source``: the registration's table they come from."""
        names, values, groups, rest, interned, seen = [], [], {}, [], {}, set()
        for config in configs:   # a Python loop: the reactor gets the GIL between topics
            topic = config.topic_name
            if topic in seen:
                return None
            seen.add(topic)
            if topics_get(topic) is None:
                value = (config.read_queue_nums, config.write_queue_nums, config.perm,
                         config.topic_sys_flag)
                value = interned.setdefault(value, value)
                names.append(topic)
                values.append(value)
                group = groups.get(value)
                if group is None:
                    group = groups[value] = []
                group.append(topic)
            else:
                rest.append(config)
        return cls(source, counts, names, values, groups, rest)
