"""Transport layer: encoded answers reused with the opaque patched in (the hot path,
GET_ROUTEINFO_BY_TOPIC; Java re-encodes every answer).

Clients ask for the same routes over and over, and an answer changes only when its route does.
Entries are keyed by the request's bytes **without the opaque**
(:func:`rocketpy.remoting.layout.request_without_opaque`) and hold the version of the route
snapshot the answer was built from; an identical request whose topic still has that version is
answered without decoding, processing or encoding: its opaque goes into the stored
:class:`~rocketpy.remoting.layout.OpaqueTemplate`.

The processor decides eligibility: only an answer that names the one snapshot it was computed
from (``response.reuse``, :class:`~rocketpy.namesrv.replies.ReusableResponse`) is kept.
An entry is stored only after the full decoder accepted the request and decoded exactly the
opaque digits the key was cut around, so a hit is byte for byte an accepted request with another
(canonical) opaque.

The cache is bounded by bytes, evicting by "second chance" (a hit only marks its entry; eviction
passes a marked entry once, unmarking it), so a hit costs one store, not a reordering.

A hit asks the route tables for its topic's version (``version_of``) only when their generation
(``versions.generation``, :class:`~rocketpy.namesrv.snapshot.RouteSnapshots`: it moves whenever
any version may) is not the one the entry's version was last confirmed at: between route
changes, a hit is a dict lookup and the opaque patched in.

Hits are most of the traffic, so where the header kernel is built they are answered in C, a run
of them per call (:attr:`AnswerCache.answer_run`, the kernel's ``HitPath``): it reads these
entries as :meth:`lookup` does and stops at the first frame that is not a hit, which
:meth:`lookup` then sees; it finds an entry again without making its key (a memo of the dict's
entries, dropped whenever the dict changes) and can send a read's answers on the socket itself.
This module's Python stays the reference (``tests/test_transport_hitpath.py``)."""
from ..remoting.command import FLAG_RESPONSE
from ..remoting.frame import encode_template
from ..remoting.kernel import KERNEL
from ..remoting.layout import JSON, request_without_opaque

__all__ = ["AnswerCache", "DEFAULT_MAX_BYTES"]

#: 32 MiB: ~100,000 answers of a route with a few brokers
DEFAULT_MAX_BYTES = 32 << 20
#: what an entry costs beyond its bytes (the dict slot, the tuples, the template object)
_ENTRY_OVERHEAD = 200


class AnswerCache:
    """Encoded answers by (request shape, route snapshot version): ``version_of(topic)`` is the
    topic's current version (``RouteInfoManager.route_version``), ``versions`` (or None) what
    has the route tables' ``generation`` (``RouteInfoManager.snapshots``); ``max_bytes`` bounds
    the entries, and requests longer than ``max_request`` are never looked up.
    ``compiled=False`` leaves the kernel's hit path out (:attr:`answer_run` is None)."""

    def __init__(self, version_of, max_bytes=DEFAULT_MAX_BYTES, max_request=2048, compiled=True,
                 versions=None):
        self._version_of = version_of
        self._versions = versions
        self.max_bytes = max_bytes
        # shape -> [topic, version, template, size, used, generation its version was confirmed
        # at, shape, the template's (serialize_type, pre, post, body)], oldest first (the kernel
        # reads them in this form: rocketpy/remoting/_kernel/hits.c)
        self._entries = {}
        self.bytes = 0
        self._hits = 0
        hitpath = getattr(KERNEL, "HitPath", None) if compiled else None
        self._compiled = (None if hitpath is None
                          else hitpath(self._entries, version_of, versions, max_request))
        self._max_request = max_request
        #: ``answer_run(data, pos, most, room, max_frame_length, fd=-1)``: the answers of the
        #: whole frames at ``data[pos:]`` that are hits, up to the first that is not (or
        #: ``most`` answers, or ``room`` bytes of them), as ``(answers not sent, pos after them,
        #: count, bytes sent)`` -- with ``fd >= 0`` (nothing else waits to be written) a run of
        #: all of ``data`` is sent on that socket once, first --, or None when the first is not
        #: a hit; None without the kernel
        self.answer_run = None if self._compiled is None else self._compiled.run

    @property
    def max_request(self):
        return self._max_request

    @max_request.setter
    def max_request(self, value):
        self._max_request = value
        if self._compiled is not None:
            self._compiled.max_request = value

    @property
    def hits(self):
        """Frames answered from the cache (by :meth:`lookup` and by the kernel)."""
        return self._hits + (self._compiled.hits if self._compiled is not None else 0)

    def __len__(self):
        return len(self._entries)

    def clear(self):
        self._changed()
        self._entries.clear()
        self.bytes = 0

    def _changed(self):
        """The entries dict changed: the kernel's memo of it goes."""
        if self._compiled is not None:
            self._compiled.forget()

    def lookup(self, frame):
        """The answer bytes for ``frame`` (bytes), else a key to :meth:`answer` under (a tuple),
        else None (this frame cannot be cached)."""
        if len(frame) > self._max_request:
            return None
        split = request_without_opaque(frame)
        if split is None:
            return None
        shape = split[0]
        entry = self._entries.get(shape)
        if entry is None:
            return split
        versions = self._versions
        generation = versions.generation if versions is not None else None
        if generation is None or entry[5] != generation:
            if self._version_of(entry[0]) != entry[1]:
                return split
            entry[5] = generation
        entry[4] = True
        self._hits += 1
        template = entry[2]
        opaque = split[1]
        if opaque.__class__ is bytes:       # a JSON request's digits
            if template.serialize_type == JSON:
                return template.frame(opaque)
            opaque = int(opaque)
        patched = template.opaque_bytes(opaque)
        return None if patched is None else template.frame(patched)

    def answer(self, key, request, response):
        """``response`` (a RemotingCommand answering ``request``) encoded, and kept under ``key``
        (from :meth:`lookup`) if it names the snapshot it was built from."""
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        reuse = getattr(response, "reuse", None)
        shape, opaque = key
        if reuse is None or (opaque.__class__ is bytes and opaque != str(request.opaque).encode()):
            return response.encode()  # not eligible, or not the opaque the decoder read
        template = encode_template(response)
        size = (_ENTRY_OVERHEAD + len(shape[0]) + len(shape[1]) + len(template.pre)
                + len(template.post) + len(template.body))
        entries = self._entries
        self._changed()
        old = entries.pop(shape, None)
        if old is not None:
            self.bytes -= old[3]
        if size <= self.max_bytes:
            entries[shape] = [reuse[0], reuse[1], template, size, False, None, shape,
                              (template.serialize_type, template.pre, template.post, template.body)]
            self.bytes += size
            while self.bytes > self.max_bytes:
                oldest = next(iter(entries))
                entry = entries.pop(oldest)
                if entry[4]:                     # used since it last came up: a second chance
                    entry[4] = False
                    entries[oldest] = entry
                else:
                    self.bytes -= entry[3]
        return template.encode_for(request.opaque)
