"""Transport layer: encoded answers reused with the opaque patched in (a shortcut for the hot path,
GET_ROUTEINFO_BY_TOPIC; Java has none and re-encodes every answer).

Clients ask for the same routes over and over, and the answer only changes when the route does.
So for a request the processor declares *cacheable*, the transport keeps the encoded answer keyed
by the request's bytes **without its opaque** (the JSON header split around ``"opaque":<digits>``,
or the ROCKETMQ header without its 4 opaque bytes, plus the body). The next identical request is
answered without decoding, processing or encoding anything: the request's opaque goes into the
stored answer (an :class:`~rocketpy.remoting.layout.OpaqueTemplate`), done.

Correctness rests on the processor's *stamp*: when it declares a request cacheable it hands over
a zero-argument callable whose value changes whenever the answer may change (for routes: the
topic's route version, the table epoch, the order config; the handler's module says which, see
:func:`rocketpy.namesrv.processor.route.answer_stamp`).
Every hit calls it and compares with the value stored with the answer; a difference is a miss,
and the slow path runs and stores the fresh answer. Only whole, well-formed requests reach the
cache: an entry is stored only after the full decoder accepted the request and the opaque it
decoded is exactly the digits the key was cut around, so a hit is byte-for-byte a request the
decoder accepted, with a different (canonical) opaque.
"""
from ..remoting.command import FLAG_RESPONSE
from ..remoting.frame import encode_template
from ..remoting.layout import JSON, request_without_opaque

__all__ = ["AnswerCache"]


class AnswerCache:
    """Encoded answers by request-without-opaque, validated by the processor's stamps.

    :param stamp_for: ``stamp_for(request, channel, now_ms)`` -> a zero-argument callable, or
        None when the answer to ``request`` must not be reused (the processor's
        ``answer_stamp``).
    """

    def __init__(self, stamp_for, max_entries=8192, max_request=2048):
        self._stamp_for = stamp_for
        self.max_entries = max_entries
        self.max_request = max_request
        self._entries = {}
        self.hits = 0
        self.misses = 0

    def __len__(self):
        return len(self._entries)

    def clear(self):
        self._entries.clear()

    def lookup(self, frame):
        """The answer bytes for ``frame`` (bytes), else a key to :meth:`answer` under (a tuple),
        else None (this frame cannot be cached)."""
        if len(frame) > self.max_request:
            return None
        split = request_without_opaque(frame)
        if split is None:
            return None
        entry = self._entries.get(split[0])
        if entry is None or entry[0]() != entry[1]:
            self.misses += 1
            return split
        self.hits += 1
        template = entry[2]
        opaque = split[1]
        if opaque.__class__ is bytes:       # a JSON request's digits
            if template.serialize_type == JSON:
                return template.frame(opaque)
            opaque = int(opaque)
        patched = template.opaque_bytes(opaque)
        return None if patched is None else template.frame(patched)

    def answer(self, key, request, channel, now_ms, response):
        """``response`` (a RemotingCommand answering ``request``) encoded, and kept under ``key``
        (from :meth:`lookup`) if the processor allows it."""
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        key, opaque = key
        if opaque.__class__ is bytes and opaque != str(request.opaque).encode():
            return response.encode()  # the digits we cut around are not the opaque the decoder read
        stamp = self._stamp_for(request, channel, now_ms)
        if stamp is None:
            return response.encode()
        template = encode_template(response)
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[key] = (stamp, stamp(), template)
        return template.encode_for(request.opaque)
