"""Web layer: the topic names the status page and ``/api/topics`` list, sorted and filtered
without stalling the reactor (issue 31 hole 8: sorting and filtering every topic per request took
1.1-1.4 s at 1 M topics, route queries stalled as long, and the web port has no allow-list by
default).

* :class:`TopicIndex` keeps the names sorted, current by the topic table's own counters of
  arrivals and removals (:class:`~rocketpy.namesrv.shapes.ShapeTable`): a change costs one pass
  (the new names sorted among themselves, then merged: Timsort merges two sorted runs in linear
  time), never a sort of every name per request.
* :class:`TopicSearch` runs a filter over the index :data:`SEARCH_STEP` names per reactor turn,
  one search at a time, identical searches sharing one; at most :data:`MAX_SEARCHES` wait (more
  are refused: :class:`SearchBusy`, HTTP 503), and the last :data:`KEPT_RESULTS` results are
  kept per route generation, so paging through one costs nothing more.
"""
from collections import OrderedDict

from twisted.internet.defer import Deferred, fail, succeed

__all__ = ["TopicIndex", "TopicSearch", "SearchBusy", "SEARCH_STEP", "MAX_SEARCHES",
           "KEPT_RESULTS"]

#: names one step of a search looks at (one reactor turn: a few milliseconds)
SEARCH_STEP = 20_000
#: searches running or waiting at once; one more is refused
MAX_SEARCHES = 8
#: results kept (keyed by query, system-topic choice and route generation)
KEPT_RESULTS = 16


class SearchBusy(Exception):
    """As many searches as allowed are under way."""


class TopicIndex:
    """The names of ``shapes.topics`` (a :class:`~rocketpy.namesrv.shapes.ShapeTable`), sorted.
    :meth:`current` is a list never changed after it is handed out (a search reads it over many
    turns while the table changes)."""

    def __init__(self, shapes):
        self.shapes = shapes
        self._names = []
        self._version = (0, 0)        # the (arrivals, removals) the names are current for

    def current(self):
        """The sorted names now; refreshed only when topics arrived or left."""
        shapes = self.shapes
        version = (shapes.arrivals, shapes.removals)
        if version == self._version:
            return self._names
        topics = shapes.topics
        names = self._names
        if version[1] != self._version[1]:     # some left (or the dicts were rebuilt)
            names = list(filter(topics.__contains__, names))
        added = sorted(topics.keys() - set(names))
        if added:
            names = names + added
            names.sort()                       # two sorted runs: one linear merge
        self._names, self._version = names, version
        return names


class _Search:
    __slots__ = ("key", "names", "keep", "position", "found", "waiting")

    def __init__(self, key, names, keep):
        self.key = key
        self.names = names
        self.keep = keep
        self.position = 0
        self.found = []
        self.waiting = []


class TopicSearch:
    """``search(query, hide_system)``: a Deferred of the sorted names that ``keep(query,
    hide_system)`` (a predicate on one name) keeps, looked at ``step`` names a reactor turn.

    :param index: the :class:`TopicIndex`.
    :param keep: ``keep(query, hide_system) -> predicate``, built once per search.
    :param generation: ``generation()``: a number that changes whenever routes may (the
        snapshots'), keying the kept results.
    :param clock: an ``IReactorTime`` (each step is a ``callLater(0)``).
    """

    def __init__(self, index, keep, generation, clock, step=SEARCH_STEP,
                 max_searches=MAX_SEARCHES, kept=KEPT_RESULTS):
        self.index = index
        self.keep = keep
        self.generation = generation
        self.clock = clock
        self.step = step
        self.max_searches = max_searches
        self.kept = kept
        self._results = OrderedDict()
        self._searches = OrderedDict()    # key -> _Search, oldest first; the first runs
        self._call = None
        #: counts: names looked at, the most in one step, searches run, refused
        self.examined = 0
        self.most_in_a_step = 0
        self.searches = 0
        self.refused = 0

    def search(self, query, hide_system):
        query = (query or "").lower()
        if not query and not hide_system:
            return succeed(self.index.current())
        key = (query, hide_system, self.generation())
        found = self._results.get(key)
        if found is not None:
            self._results.move_to_end(key)
            return succeed(found)
        running = self._searches.get(key)
        if running is None:
            if len(self._searches) >= self.max_searches:
                self.refused += 1
                return fail(SearchBusy(f"{len(self._searches)} topic searches are under way"))
            running = self._searches[key] = _Search(key, self.index.current(),
                                                    self.keep(query, hide_system))
            self.searches += 1
            if self._call is None:
                self._call = self.clock.callLater(0, self._run)
        d = Deferred()
        running.waiting.append(d)
        return d

    def _run(self):
        self._call = None
        search = next(iter(self._searches.values()))
        chunk = search.names[search.position:search.position + self.step]
        search.position += len(chunk)
        search.found.extend(filter(search.keep, chunk))
        self.examined += len(chunk)
        self.most_in_a_step = max(self.most_in_a_step, len(chunk))
        if search.position >= len(search.names):
            del self._searches[search.key]
            self._results[search.key] = search.found
            while len(self._results) > self.kept:
                self._results.popitem(last=False)
            for d in search.waiting:
                d.callback(search.found)
        if self._searches:
            self._call = self.clock.callLater(0, self._run)

    def stop(self):
        """Cancel the next step (the web service stops)."""
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
