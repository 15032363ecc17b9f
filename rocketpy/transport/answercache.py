"""Transport layer: encoded answers reused with the opaque patched in (a shortcut for the hot path,
GET_ROUTEINFO_BY_TOPIC; Java has none and re-encodes every answer).

Clients ask for the same routes over and over, and the answer only changes when the route does.
So for a request the processor declares *cacheable*, the transport keeps the encoded answer keyed
by the request's bytes **without its opaque** (the JSON header split around ``"opaque":<digits>``,
or the ROCKETMQ header without its 4 opaque bytes, plus the body). The next identical request is
answered without decoding, processing or encoding anything: the request's opaque goes into the
stored answer, the two length fields are recomputed, done.

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
import re

__all__ = ["AnswerCache"]

_OPAQUE = re.compile(rb'"opaque":(-?[0-9]{1,10})(?=[,}\s])')
_ZERO_OR_MINUS = b"0-"
_FLAG_RESPONSE = 1
_FLAG_ONEWAY = 2


def _canonical(digits):
    """Digits that ``json`` would read back to the same text (no leading zero, no ``-0``)."""
    if digits[:1] == b"-":
        return len(digits) > 1 and digits[1] != 48
    return digits[0] != 48 or len(digits) == 1


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
        """The answer bytes for ``frame`` (bytes), else a key to :meth:`store` under (a tuple),
        else None (this frame cannot be cached)."""
        if len(frame) > self.max_request:
            return None
        header_end = 8 + int.from_bytes(frame[5:8], "big")
        if frame[4] == 0:
            start = frame.find(b'"opaque":', 8, header_end) + 9
            if start == 8:
                return None
            end = frame.find(b",", start, header_end)
            digits = frame[start:end]
            if end < 0 or not digits.isdigit() or (digits[0] == 48 and len(digits) > 1):
                # not Java's `"opaque":123,` form: the general (rarer) path
                m = _OPAQUE.match(frame, start - 9, header_end)
                if m is None:
                    return None
                end = m.end(1)
                digits = m.group(1)
                if digits[0] in _ZERO_OR_MINUS and not _canonical(digits):
                    return None
            key = (frame[8:start], frame[end:])
            opaque = None
        elif frame[4] == 1 and header_end >= 17:
            # ROCKETMQ header: int16 code, int8 language, int16 version, int32 opaque, ...
            key = (frame[8:13], frame[17:])
            digits = None
            opaque = int.from_bytes(frame[13:17], "big", signed=True)
        else:
            return None
        entry = self._entries.get(key)
        if entry is None or entry[0]() != entry[1]:
            self.misses += 1
            return key if digits is None else key + (digits,)
        self.hits += 1
        if entry[2]:
            patched = digits if digits is not None else str(opaque).encode()
        else:
            value = opaque if digits is None else int(digits)
            if not -0x80000000 <= value <= 0x7FFFFFFF:
                return None
            patched = value.to_bytes(4, "big", signed=True)
        heads = entry[3]
        head = heads.get(len(patched))
        if head is None:
            head = heads[len(patched)] = self._head(entry, len(patched))
        return b"".join((head, patched, entry[4]))

    @staticmethod
    def _head(entry, opaque_length):
        """Length prefix, serialize type, header length and the header up to the opaque."""
        _, _, _, _, _, serialize_type, pre, post_length, body_length = entry
        header_length = len(pre) + opaque_length + post_length
        return b"".join(((4 + header_length + body_length).to_bytes(4, "big"), serialize_type,
                         header_length.to_bytes(3, "big"), pre))

    def store(self, key, request, channel, now_ms, answer):
        """Keep ``answer`` (the encoded frame) for ``key`` if the processor allows it."""
        if request.flag & (_FLAG_RESPONSE | _FLAG_ONEWAY):
            return
        if len(key) == 3:
            if key[2] != str(request.opaque).encode():
                return  # the digits we cut around are not the opaque the decoder read
            key = key[:2]
        stamp = self._stamp_for(request, channel, now_ms)
        if stamp is None:
            return
        serialize_type = answer[4]
        header_length = int.from_bytes(answer[5:8], "big")
        header = answer[8:8 + header_length]
        body = answer[8 + header_length:]
        if serialize_type == 0:
            m = _OPAQUE.search(header)
            if m is None or m.group(1) != str(request.opaque).encode():
                return
            pre, post = header[:m.start(1)], header[m.end(1):]
        elif serialize_type == 1:
            pre, post = header[:5], header[9:]
        else:
            return
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        # stamp, its value, JSON answer?, {opaque length: frame start}, header after the opaque
        # + body, serialize type byte, header before the opaque, len(post), len(body)
        self._entries[key] = (stamp, stamp(), serialize_type == 0, {}, post + body, answer[4:5],
                              pre, len(post), len(body))
