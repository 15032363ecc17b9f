"""NameServer state layer: a batch of route ops (what one outermost change of the tables
applied, ``RouteInfoManager.journal``) as bytes, for a replica of the tables in a worker
process (:mod:`rocketpy.service.workers`), which applies it through the same
``RouteInfoManager.apply``.

INTERIM, until the typed op records and their versioned encoding land (issue 32 part 3): the
ops of this tree are ``(name, args)`` pairs of frozen records, pickled; a registration's
off-reactor hints (``FreshTopics``, which point into the writer's own tables) are dropped, as
they only make an op faster to apply and never change what it does. The bytes travel only
between the writer and the workers it started, over a socket pair nobody else holds. Nothing
else in rocketpy encodes ops: replace this module, keep its three names."""
import pickle
from dataclasses import replace

__all__ = ["FORMAT", "OpStreamError", "encode_batch", "decode_batch"]

FORMAT = 0   # interim
_TAG = "rocketpy route ops"


class OpStreamError(ValueError):
    """Bytes that are not an op batch, and why (one line)."""


def _without_hints(op):
    name, args = op
    if name == "put_topics" and len(args) > 3 and args[3] is not None:
        return name, args[:3] + (None,)
    if name == "merge_topics" and getattr(args[1], "fresh", None) is not None:
        return name, (args[0], replace(args[1], fresh=None)) + tuple(args[2:])
    return op


def encode_batch(batch):
    """The bytes of ``batch`` (a sequence of ops)."""
    return pickle.dumps((_TAG, FORMAT, tuple(map(_without_hints, batch))),
                        pickle.HIGHEST_PROTOCOL)


def decode_batch(blob):
    """The ops of ``blob`` (bytes of :func:`encode_batch`), a tuple."""
    try:
        tag, form, batch = pickle.loads(blob)
    except Exception as exc:
        raise OpStreamError(f"not an op batch: {exc}") from None
    if tag != _TAG or form != FORMAT or type(batch) is not tuple:
        raise OpStreamError(f"not an op batch of format {FORMAT}")
    return batch
