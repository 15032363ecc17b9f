"""Web layer: the topic names the status page and ``/api/topics`` list, sorted and filtered
without stalling the reactor (issue 31 hole 8: sorting and filtering every topic per request took
1.1-1.4 s at 1 M topics, route queries stalled as long, and the web port has no allow-list by
default).

* :class:`TopicIndex` keeps the names sorted, current by the topic table's own counters of
  arrivals and removals (:class:`~rocketpy.namesrv.shapes.ShapeTable`), refreshed in steps of
  one pass each (runs of :data:`SEARCH_STEP` names sorted, then merged pairwise: Timsort merges
  two sorted runs in linear time): never a sort of every name in one turn, nor per request.
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
    """The names of ``shapes.topics`` (a :class:`~rocketpy.namesrv.shapes.ShapeTable`), sorted,
    brought up to date by :meth:`refresh`, a generator of steps each of which costs at most one
    pass over the names (a reactor turn each): a sort of :data:`SEARCH_STEP` names, a merge of
    two sorted runs (Timsort merges them in linear time), a chunk of a filter. :attr:`names` is a
    list never changed after it is handed out (a search reads it over many turns)."""

    def __init__(self, shapes, step=SEARCH_STEP):
        self.shapes = shapes
        self.step = step
        self.names = []
        self._version = (0, 0)        # the (arrivals, removals) the names are current for

    def version(self):
        return self.shapes.arrivals, self.shapes.removals

    @property
    def current(self):
        return self.version() == self._version

    def refresh(self):
        """Steps that make :attr:`names` current for the table as it was at the first step."""
        version = self.version()
        if version == self._version:
            return
        step = self.step
        topics = self.shapes.topics
        names = self.names
        if version[1] != self._version[1]:      # some left (or the dicts were rebuilt)
            kept = []
            for i in range(0, len(names), step):
                kept.extend(filter(topics.__contains__, names[i:i + step]))
                yield
            names = kept
        known = set()
        for i in range(0, len(names), step):
            known.update(names[i:i + step])
            yield
        keys = list(topics)
        yield
        runs = [names] if names else []
        for i in range(0, len(keys), step):
            added = [t for t in keys[i:i + step] if t not in known]
            if added:
                added.sort()
                runs.append(added)
            yield
        del known, keys
        while len(runs) > 1:                    # pairwise merges, the shortest runs first
            runs.sort(key=len, reverse=True)
            last, before = runs.pop(), runs.pop()
            merged = before + last
            merged.sort()
            runs.append(merged)
            yield
        self.names, self._version = (runs[0] if runs else []), version


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
        self._refresh = None              # the index's refresh under way (its steps)
        self._call = None

    def search(self, query, hide_system):
        query = (query or "").lower()
        if not query and not hide_system and self.index.current:
            return succeed(self.index.names)
        key = (query, hide_system, self.generation())
        found = self._results.get(key)
        if found is not None:
            self._results.move_to_end(key)
            return succeed(found)
        running = self._searches.get(key)
        if running is None:
            if len(self._searches) >= self.max_searches:
                return fail(SearchBusy(f"{len(self._searches)} topic searches are under way"))
            keep = self.keep(query, hide_system) if query or hide_system else None
            running = self._searches[key] = _Search(key, None, keep)
            if self._call is None:
                self._call = self.clock.callLater(0, self._run)
        d = Deferred()
        running.waiting.append(d)
        return d

    def _run(self):
        """One step: of the index's refresh while it is not current, else of the oldest
        search."""
        self._call = None
        search = next(iter(self._searches.values()))
        if search.names is None:
            if self._refresh is None and not self.index.current:
                self._refresh = self.index.refresh()
            if self._refresh is not None:
                if next(self._refresh, StopIteration) is StopIteration:
                    self._refresh = None
                self._call = self.clock.callLater(0, self._run)
                return
            search.names = self.index.names
        if search.keep is None:             # every name: the index itself
            search.found, search.position = search.names, len(search.names)
        else:
            chunk = search.names[search.position:search.position + self.step]
            search.position += len(chunk)
            search.found.extend(filter(search.keep, chunk))
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
