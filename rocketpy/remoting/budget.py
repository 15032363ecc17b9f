"""Wire codec layer: the work a body's decode may cost (a rocketpy addition: Java decodes
whatever a broker sends, on one of its executor threads).

A compressed REGISTER_BROKER body of a few kilobytes can inflate to 64 MiB of topic lines or
JSON, and what it decodes to takes memory and time in proportion (one 2.2 MB body took a server
from 203 MiB to 1.17 GB; one 87 KB body kept the decode thread busy 60 s: issue 20). So every
decode spends from one :class:`DecodeBudget` *while* it reads, and stops at the bound: each
inflated byte costs a unit, each JSON value or topic line :data:`ITEM_COST` more (an unquoted
numeric key :data:`INT_KEY_COST`), charged before the part is parsed (:func:`json_cost` counts
them without parsing; a plain body's bytes came in
one frame and are not charged, its values are); what fastjson's lenient reader reads,
:data:`LENIENT_OP_COST` an operation as it reads. The same checks see the cancel flag, so a
shutdown stops a decode within one chunk, and call the budget's ``checkpoint``: where the decode
pool (``rocketpy.transport.offload``) lets another host's work take its turn."""
from .errors import DecodeBudgetExceeded, DecodeCancelled

__all__ = ["DecodeBudget", "DEFAULT_DECODE_BUDGET", "ITEM_COST", "LENIENT_OP_COST",
           "INT_KEY_COST", "json_items", "json_cost"]

#: Work units of one decode: a genuine 16 MiB plain body (~100,000 topics, 16 JSON values each)
#: costs ~51 M, a 10,000-topic compressed one ~3 M; 2 M JSON values at most (~200 MiB parsed).
DEFAULT_DECODE_BUDGET = 64 * 1024 * 1024
#: Units a JSON value or a topic line costs on top of its bytes: about what a parsed value
#: costs in memory (a Python object of 30-100 bytes) against a byte of inflated text.
ITEM_COST = 32
#: Units an operation of fastjson's lenient reader costs (a token, a comment, an escape:
#: :func:`rocketpy.remoting.fastjson.read_lenient`), charged as it reads. One takes ~0.5-1 µs
#: of Python, as a plain body's JSON value does, parsed and made a record: both come to
#: ~20-30 ns a unit (``bench/decode_units.py``). Uncounted, a 4 KB compressed body inflating
#: to lenient parts held the decode pool ~3 s (issue 31).
LENIENT_OP_COST = ITEM_COST
#: Units an unquoted numeric key costs on top of its value (fastjson's legacy map keys:
#: ``currIdMap``'s): the reader marks and restores it, and its bean converts it, in Python,
#: ~6 µs an entry against ~1 µs for a quoted key's (``bench/decode_units.py``: a mapping of
#: 250,000 queues took 1.6 s on a budget of 19 M units).
INT_KEY_COST = 6 * ITEM_COST


def json_items(raw):
    """At least the number of JSON values in ``raw`` (every value but the first follows a
    ``,`` ``:`` ``[`` or ``{``), counted in C without parsing."""
    return raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{") + 1


def json_cost(raw):
    """The units a JSON text costs to parse: :data:`ITEM_COST` a value, and
    :data:`INT_KEY_COST` more for each colon that does not follow a quote: every unquoted key's
    does (a colon in a string counts too: never less than the text costs), counted in C."""
    colons = raw.count(b":")
    return (json_items(raw) * ITEM_COST
            + (colons - raw.count(b'":') if colons else 0) * INT_KEY_COST)


class DecodeBudget:
    """Units left for one decode; ``spend`` raises :class:`DecodeBudgetExceeded` past
    ``limit`` (0: no bound) and :class:`DecodeCancelled` once :meth:`cancel` was called (from any
    thread: a flag read at the next check). ``checkpoint``, when set (by the pool that runs the
    decode), is called at every check: where the decode may wait for its next turn, once it has
    ``worked`` a quantum (the units spent, and those of work :meth:`progress` reports)."""

    __slots__ = ("limit", "spent", "worked", "cancelled", "checkpoint")

    def __init__(self, limit=DEFAULT_DECODE_BUDGET):
        self.limit = limit
        self.spent = self.worked = 0
        self.cancelled = False
        self.checkpoint = None

    def spend(self, units, what):
        if self.cancelled:
            raise DecodeCancelled(f"decode cancelled at {what}")
        self.spent += units
        if self.limit and self.spent > self.limit:
            raise DecodeBudgetExceeded(self.limit, what)
        self.progress(units, what)

    def progress(self, units, what):
        """A check after work of ``units`` that was charged before it was done (a plain body's
        values are, before one ``json.loads`` parses them all)."""
        self.worked += units
        if self.checkpoint is not None:
            self.checkpoint()
            if self.cancelled:
                raise DecodeCancelled(f"decode cancelled at {what}")

    def spend_items(self, count, what):
        self.spend(count * ITEM_COST, what)

    def spend_json(self, raw, what):
        """Charge a JSON text's values before it is parsed (:func:`json_cost`)."""
        self.spend(json_cost(raw), what)

    def cancel(self):
        self.cancelled = True
