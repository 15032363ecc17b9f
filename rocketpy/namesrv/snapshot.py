"""NameServer state layer: route snapshots, one immutable value per topic with a version
(rocketmq-rust's ``TopicRouteSnapshot``; Java rebuilds every answer).

The tables' mutation gate reports the topics a change touched (:meth:`RouteSnapshots.touched`);
each gets a new version from one counter and loses its snapshot, which the next reader builds
again and keeps, with its bodies encoded per dialect, until the next touch. Reused answers are
keyed by version, so nothing outside the tables restates what a route depends on. A topic without
a route has the *absent* version, which changes only when everything is invalidated (a config
update): answers for unknown topics are reusable too, and nothing is kept per unknown name."""
from itertools import count

__all__ = ["RouteSnapshot", "RouteSnapshots"]


class RouteSnapshot:
    """The route of ``topic`` at ``version`` (a ``TopicRouteData`` record, or None when the
    topic's queue data names no known broker), and the bodies encoded from it."""

    __slots__ = ("topic", "version", "route", "_bodies")

    def __init__(self, topic, version, route):
        self.topic = topic
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
    """Versions and snapshots of the topics in the route tables."""

    def __init__(self):
        self._clock = count(1)
        self._versions = {}
        self._snapshots = {}
        #: the version of every topic without a route
        self.absent = next(self._clock)
        #: the last version handed out: it moves whenever any topic's route may have changed
        self.generation = self.absent

    def __len__(self):
        return len(self._versions)

    def version(self, topic):
        """A number that changes whenever the route of ``topic`` may have changed."""
        return self._versions.get(topic, self.absent)

    def touched(self, topics, present):
        """The gate's report: ``topics`` changed; those still in ``present`` (the topic table)
        get a new version, the others go back to the absent version."""
        versions, snapshots, clock = self._versions, self._snapshots, self._clock
        for topic in topics:
            snapshots.pop(topic, None)
            if topic in present:
                versions[topic] = self.generation = next(clock)
            else:
                versions.pop(topic, None)
                self.generation = next(clock)

    def invalidate_all(self):
        """Something every answer reads changed (a config update): every version is new."""
        clock = self._clock
        self._snapshots.clear()
        self._versions = {topic: next(clock) for topic in self._versions}
        self.absent = self.generation = next(clock)

    def get(self, topic, build):
        """The snapshot of ``topic`` (``build(topic)`` makes its route), or None when the topic
        has no route at all."""
        snapshot = self._snapshots.get(topic)
        if snapshot is None:
            version = self._versions.get(topic)
            if version is None:
                return None
            snapshot = self._snapshots[topic] = RouteSnapshot(topic, version, build(topic))
        return snapshot
