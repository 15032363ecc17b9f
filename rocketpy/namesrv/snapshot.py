"""NameServer state layer: route snapshots, immutable values with a version (rocketmq-rust's
``TopicRouteSnapshot``; Java rebuilds every answer).

A topic's route is a function of its queue layout (its :class:`~rocketpy.namesrv.shapes.RouteShape`),
the broker groups and filter servers of the brokers the layout names, the configuration and,
for a few topics, the topic itself: a static-topic mapping, and the
``rmq_sys_SYNC_BROKER_MEMBER_`` prefix (no acting-master view). So versions and snapshots are
kept per shape: every topic of one layout answers from one snapshot and one encoded body per
dialect. The shape table moves a shape's version when a broker it names changes; a topic with a
mapping has the version (its shape's, its mapping's) and a snapshot of its own. Reused answers
are keyed by version, so nothing outside the tables restates what a route depends on. A topic
without a route has the *absent* version, which changes only when everything is invalidated (a
config update): answers for unknown topics are reusable too, and nothing is kept per unknown
name."""
from .model import SYNC_BROKER_MEMBER_GROUP_PREFIX

__all__ = ["RouteSnapshot", "RouteSnapshots"]


class RouteSnapshot:
    """A route (a ``TopicRouteData`` record, or None when the layout names no known broker) at
    ``version``, and the bodies encoded from it."""

    __slots__ = ("version", "route", "_bodies")

    def __init__(self, version, route):
        self.version = version
        self.route = route
        self._bodies = {}

    def body(self, dialect, encode, *args):
        """The body in ``dialect`` (standard JSON or not: at most two kept),
        ``encode(*args)`` the first time. Bodies carrying a KV value (orderTopicConf) are
        not kept here: they would sit outside the KV store's byte bound."""
        body = self._bodies.get(dialect)
        if body is None:
            body = self._bodies[dialect] = encode(*args)
        return body


class RouteSnapshots:
    """Versions and snapshots of the routes in a :class:`~rocketpy.namesrv.shapes.ShapeTable`;
    ``mapped`` is the static-topic mapping table (topic -> {broker name: info})."""

    def __init__(self, shapes, mapped):
        self._shapes = shapes
        self._mapped = mapped
        self._clock = shapes.clock
        self._own = {}              # mapped topic -> (its mapping's serial, snapshot or None)
        #: the version of every topic without a route
        self.absent = next(self._clock)
        #: moves whenever any route may have changed
        self.generation = self.absent

    def __len__(self):
        return len(self._shapes.topics)

    def version(self, topic):
        """A value that changes whenever the route of ``topic`` may have changed."""
        shape = self._shapes.topics.get(topic)
        if shape is None:
            return self.absent
        own = self._own.get(topic)
        return shape.version if own is None else (shape.version, own[0])

    def mapping_changed(self, topic):
        """``topic``'s static-topic mapping changed: it versions its route itself from now on,
        until its last mapping is gone (then its shape's version is its own again: the route
        of that version had no mapping either)."""
        if self._mapped.get(topic):
            self._own[topic] = (next(self._clock), None)
        else:
            self._own.pop(topic, None)

    def changed(self):
        """The gate's report that something changed (the listings' generation)."""
        self.generation = next(self._clock)

    def invalidate_all(self):
        """Something every answer reads changed (a config update): every version is new."""
        self._shapes.touch_all()
        clock = self._clock
        self._own = {topic: (next(clock), None) for topic in self._own}
        self.absent = self.generation = next(clock)

    def get(self, topic, build):
        """The snapshot of ``topic`` (``build(topic)`` makes its route), or None when the topic
        has no route at all."""
        shape = self._shapes.topics.get(topic)
        if shape is None:
            return None
        own = self._own.get(topic)
        if own is not None:
            version = (shape.version, own[0])
            snapshot = own[1]
            if snapshot is None or snapshot.version != version:
                snapshot = RouteSnapshot(version, build(topic))
                self._own[topic] = (own[0], snapshot)
            return snapshot
        kind = topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX)
        snapshot = shape.snapshots.get(kind)
        if snapshot is None:
            snapshot = shape.snapshots[kind] = RouteSnapshot(shape.version, build(topic))
        return snapshot
