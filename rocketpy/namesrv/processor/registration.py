"""NameServer processor layer: REGISTER_BROKER to route-table input (Java
``DefaultRequestProcessor.extractRegisterBrokerBodyFromRequest`` / ``RegisterBrokerBody.decode``):
its body as route records, and the request as one :class:`~rocketpy.namesrv.model.Registration`
(:func:`registration_of`), which goes whole to the bounds, the release's rules and the tables.

Brokers re-register every 30 s with the same body (~1.3 MB for 10,000 topics), so:

* each broker address's last body is remembered by its digest, with its decoded form less its
  topics; an identical body (same length and digest, not CRC) is not decoded again while the
  route tables would read none of its topics (the group applied that very table last and lost
  none of it since), and the tables skip the topic walk by the same digest;
* Java checks ``bodyCrc32`` first; the cache remembers the header CRC its body was verified
  against, so the same body with the same CRC is not summed again (the CRC of 1.5 MB costs about
  as much as the rest of the request);
* the codec reads the body straight into route records
  (:func:`rocketpy.remoting.bodies.read_register_broker_body`);
* a big body not in the cache (:func:`worth_a_thread`) is decoded by a
  :class:`~rocketpy.namesrv.pending.Pending` whose ``work`` touches nothing shared. A compressed
  body's cost is unknown until inflated (160 KB can hold 3 million topic lines), so every one
  past 128 bytes qualifies;
* every decode spends from its own :class:`~rocketpy.remoting.budget.DecodeBudget` (bytes
  inflated, JSON values and topic lines, counted while they are read) and is refused past it, and
  the Pending's ``cancel`` stops it at the next check (shutdown)."""
import logging
from dataclasses import replace
from functools import partial
from hashlib import blake2b

from rocketpy.remoting import bodies, fastjson
from rocketpy.remoting.codes import MQVersion, ResponseCode
from rocketpy.remoting.budget import DEFAULT_DECODE_BUDGET, DecodeBudget
from rocketpy.remoting.errors import BodyDecodeError, DecodeBudgetExceeded
from rocketpy.remoting.fastjson import FASTJSON_1_2_83
from rocketpy.remoting.headers import ZONE_NAME, RegisterBrokerResponseHeader
from rocketpy.remoting.lengths import NameTooLongError

from ..model import DataVersion, Registration, TopicConfig, TopicConfigWrapper
from ..pending import Pending
from ..replies import Reply, error, java_exception_remark
from ..settings import int_values

log = logging.getLogger("rocketpy.namesrv")

__all__ = ["RegistrationReader", "max_topics_from_properties", "MAX_TOPICS_KEY",
           "DECODE_BUDGET_KEY", "decode_budget_from_properties",
           "DEFAULT_MAX_TOPICS", "TooManyTopics", "worth_a_thread", "RegistrationBodies",
           "read_body", "registration_of", "with_body"]

_UNDECODABLE_REMARK = java_exception_remark(
    "org.apache.rocketmq.remoting.exception.RemotingCommandException",
    "Failed to decode RegisterBrokerBody")


def registration_of(header, request, channel=None, now_ms=0):
    """The :class:`~rocketpy.namesrv.model.Registration` of a REGISTER_BROKER (its
    ``RegisterBrokerRequestHeader``, the zone its extFields name, the channel's id), its body
    not read yet (:func:`with_body`)."""
    return Registration(
        header.cluster_name, header.broker_addr, header.broker_name, header.broker_id,
        header.ha_server_addr, None, None,
        getattr(channel, "channel_id", channel), now_ms,
        (request.ext_fields or {}).get(ZONE_NAME), header.heartbeat_timeout_millis,
        header.enable_acting_master)


def with_body(registration, wrapper, filter_servers):
    """``registration`` with its decoded body."""
    r = registration
    return Registration(r.cluster_name, r.broker_addr, r.broker_name, r.broker_id,
                        r.ha_server_addr, wrapper, filter_servers, r.channel_id, r.now_ms,
                        r.zone_name, r.timeout_millis, r.enable_acting_master)


def read_body(body, compressed, broker_version, check_count=None, budget=None,
              check_mappings=None, dialect=FASTJSON_1_2_83):
    """(wrapper, filter servers) of a RegisterBrokerBody, as route records, a JSON body read as
    ``dialect`` (the release's fastjson) reads it; raises the codec's errors."""
    version, table, filters, infos = bodies.read_register_broker_body(
        body, compressed, broker_version, TopicConfig, DataVersion, check_count,
        budget=budget, check_mappings=check_mappings, dialect=dialect)
    return TopicConfigWrapper(version, table, infos, _body_digest(body)), filters


#: Bodies not in the cache and bigger than these (bytes) are decoded by a Pending, off the
#: reactor thread under the transport. Decoding there costs the same CPU and still shares the
#: GIL, which the reactor gets back within the switch interval (1 ms under the decode pool), so
#: a body is worth a thread when its *worst* decode takes longer than a millisecond or two; the
#: trip itself costs 60-120 µs. Worst cases measured (``bench/registration_bomb.py --part
#: thresholds``): compressed, repeated topic lines, 10-35 µs per body byte (124 B: 1.3 ms,
#: 3.9 KB: 142 ms); plain, tiny topics ``"1a":{}``, 0.2-0.35 µs per byte (8 KiB: 1.6 ms,
#: 256 KiB: 88 ms). Genuine bodies cost less (plain ~25 µs per KiB: every captured one, up to
#: ~50 topics, is decoded on the spot).
COMPRESSED_INLINE_MAX = 128
PLAIN_INLINE_MAX = 8 * 1024


def worth_a_thread(body, compressed):
    """True when decoding ``body`` may cost more than a trip to a worker thread."""
    return len(body) > (COMPRESSED_INLINE_MAX if compressed else PLAIN_INLINE_MAX)


def _body_digest(body):
    return blake2b(body, digest_size=16).digest()


class RegistrationBodies:
    """What the last registration body of each broker address was: its digest, and its decoded
    form without its topics (data version, filter servers, content digest).

    An identical body (same length and digest) is not decoded again when the route tables say
    its topics would not be read (:meth:`RouteInfoManager.repeats_applied
    <rocketpy.namesrv.route_info_manager.RouteInfoManager.repeats_applied>`): the usual
    re-registration every 30 s. Keeping the decoded topics instead (230 B each) made the cache
    the largest thing in the server after the route state (64 MiB for 28 brokers of 10,000
    topics). An entry costs the same whatever its body; ``limit`` bounds the entries, the ones
    put longest ago going first, and entries of brokers that are gone are dropped whenever the
    cache has doubled since the last sweep (``is_live``)."""

    def __init__(self, limit=4096):
        self.limit = limit
        self._last = {}
        self._sweep_at = 64

    def entry(self, key, body, compressed, version):
        """``[digest, compressed, version, decoded without topics, verified header CRC or 0,
        length]`` for an identical body, else None."""
        entry = self._last.get(key)
        if (entry is not None and entry[1] == compressed and entry[2] == version
                and entry[5] == len(body) and entry[0] == _body_digest(body)):
            return entry
        return None

    def put(self, key, body, compressed, version, decoded, is_live=None, crc=0):
        """Remember ``decoded`` (``(wrapper, filter servers)``) of ``body`` for ``key``."""
        self.forget(key)
        if is_live is not None and len(self._last) >= self._sweep_at:
            self.forget_departed(is_live)
        last = self._last
        while len(last) >= self.limit:
            self.forget(next(iter(last)))
        wrapper, filters = decoded
        light = replace(wrapper, topic_config_table={}, topic_queue_mapping_info_map={})
        digest = wrapper.digest or _body_digest(body)
        last[key] = [digest, compressed, version, (light, filters), crc, len(body)]

    def forget(self, key):
        self._last.pop(key, None)

    def forget_departed(self, is_live):
        """Drop the entries of brokers that are gone (``is_live(key)`` False)."""
        for old in [k for k in self._last if not is_live(k)]:
            self.forget(old)
        self._sweep_at = max(64, 2 * len(self._last))


#: rocketpy's bound on the topics of one registration (Java has none); 0 turns it off.
MAX_TOPICS_KEY = "registerBrokerMaxTopics"
#: Applying a registration puts each new topic in the route tables on the reactor thread (~6 µs
#: a topic), and a plain body is parsed by one ``json.loads`` that holds the GIL (~1.3 µs an
#: object): 200,000 topics stall the server about a second. A plain body within the 16 MiB frame
#: limit holds at most ~125,000 genuine topic entries; only a compressed body can carry more.
DEFAULT_MAX_TOPICS = 200_000
#: JSON objects and arrays a plain body may hold per allowed topic (a 5.x entry has two objects,
#: its config and its attributes), plus a few for the body's own structure.
_CONTAINERS_PER_TOPIC = 4
_CONTAINERS_SLACK = 1024


class TooManyTopics(Exception):
    """A registration over ``registerBrokerMaxTopics``; ``detail`` says what the body holds."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


def max_topics_from_properties(props):
    """``registerBrokerMaxTopics`` from ``-D`` / ``-c`` properties; ValueError when bad."""
    table = ((MAX_TOPICS_KEY, "max_topics", DEFAULT_MAX_TOPICS, ""),)
    return int_values(props, table).get("max_topics", DEFAULT_MAX_TOPICS)


#: rocketpy's bound on the work of one registration body's decode (work units of
#: :mod:`rocketpy.remoting.budget`); 0 turns it off.
DECODE_BUDGET_KEY = "registerBrokerDecodeBudget"


def decode_budget_from_properties(props):
    """``registerBrokerDecodeBudget`` from ``-D`` / ``-c`` properties; ValueError when bad."""
    table = ((DECODE_BUDGET_KEY, "budget", DEFAULT_DECODE_BUDGET, ""),)
    return int_values(props, table).get("budget", DEFAULT_DECODE_BUDGET)


def _too_many_topics(exc, max_topics):
    log.warning("registration refused: the body %s, over %s=%s", exc.detail, MAX_TOPICS_KEY,
                max_topics)
    return error(ResponseCode.SYSTEM_ERROR,
                 f"[REFUSED] the registration body {exc.detail}, over {MAX_TOPICS_KEY}={max_topics}")


class RegistrationReader:
    """REGISTER_BROKER bodies as route records, for one NameServer.

    :param registration: the registration policy (which broker version a body is read as).
    :param wire: the :class:`~rocketpy.namesrv.policy.WireShape` (the remark of a null body).
    :param is_live: ``is_live((cluster, addr))``: whether a cached body's broker is still live.
    :param max_topics: ``registerBrokerMaxTopics`` (0: no bound); static topic mappings too.
    :param decode_budget: work units of one body's decode (0: no bound).
    :param repeats_applied: ``repeats_applied(registration)``
        (``RouteInfoManager.repeats_applied``): whether the tables would read none of its
        topics.
    """

    def __init__(self, registration, wire, is_live, max_topics=DEFAULT_MAX_TOPICS,
                 decode_budget=DEFAULT_DECODE_BUDGET, repeats_applied=None):
        self._body_version = registration.body_version
        self._null_body_remark = wire.null_register_body_remark
        self._dialect = wire.header_dialect
        self._is_live = is_live
        self._repeats_applied = repeats_applied
        self.max_topics = max_topics
        self.decode_budget = decode_budget
        self.cache = RegistrationBodies()

    def decode(self, request, header, registration=None):
        """(wrapper, filter servers), or the Reply Java gives when the body fails its CRC check
        (``bodyCrc32``, when not 0) or does not decode; for a big body to decode, a
        :class:`~rocketpy.namesrv.pending.Pending` of either. A body identical to the
        address's last is summed once per header CRC and not decoded again while the tables
        would read none of its topics (then its wrapper holds no topics). ``registration``:
        the request's (:func:`registration_of`), made from ``header`` when not given."""
        key = (header.cluster_name, header.broker_addr)
        body = request.body or b""
        compressed = header.compressed
        entry = self.cache.entry(key, body, compressed, request.version)
        crc = header.body_crc32
        if entry is not None:
            if crc and entry[4] != crc:
                if bodies.body_crc32(body) != crc:
                    return _crc_mismatch()
                entry[4] = crc
            if self._repeats(registration or registration_of(header, request), entry[3]):
                return entry[3]
            crc = 0   # verified already
        budget = DecodeBudget(self.decode_budget)
        work = partial(self._checked_decode, request.version, body, compressed, crc, budget)
        remember = partial(self._remember, key, body, compressed, request.version,
                           header.body_crc32)
        if worth_a_thread(body, compressed):
            return Pending(work, remember, cancel=budget.cancel, budget=budget)
        return remember(work())

    def _repeats(self, registration, decoded):
        repeats = self._repeats_applied
        return repeats is not None and repeats(with_body(registration, *decoded))

    def _checked_decode(self, request_version, body, compressed, crc, budget):
        """The work of a Pending: Java's ``bodyCrc32`` check, then the decode; pure (any
        thread): it reads nothing but its arguments and this reader's settings."""
        if crc and bodies.body_crc32(body) != crc:
            return _crc_mismatch()
        max_topics = self.max_topics
        try:
            decoded = self._decode(request_version, body, compressed, budget)
            if max_topics and not isinstance(decoded, Reply):
                count = len(decoded[0].topic_config_table)
                if count > max_topics:
                    raise TooManyTopics(f"holds {count} topics")
        except TooManyTopics as exc:
            return _too_many_topics(exc, max_topics)
        except DecodeBudgetExceeded as exc:
            log.warning("registration refused: %s", exc)
            return error(ResponseCode.SYSTEM_ERROR,
                         f"[REFUSED] decoding the registration body costs over {exc.limit} work "
                         f"units (bytes inflated, JSON values, topic lines; at {exc.what}), "
                         f"over {DECODE_BUDGET_KEY}={exc.limit}; nothing was applied")
        return decoded

    def _check_count(self, count):
        if self.max_topics and count > self.max_topics:
            raise TooManyTopics(f"declares {count} topics")

    def _check_mappings(self, count):
        if self.max_topics and count > self.max_topics:
            raise TooManyTopics(f"declares {count} static topic mappings")

    def _decode(self, request_version, body, compressed, budget=None):
        max_topics = self.max_topics
        if max_topics and body and not compressed:
            # a cheap count before json.loads, which holds the GIL for the whole parse
            containers = body.count(b"{") + body.count(b"[")
            if containers > max_topics * _CONTAINERS_PER_TOPIC + _CONTAINERS_SLACK:
                raise TooManyTopics(f"holds {containers} JSON objects and arrays")
        if request_version < MQVersion.V3_0_11:   # a bare TopicConfigSerializeWrapper
            if not body:
                return TopicConfigWrapper(), None
            bodies.charge_plain(budget, body)
            version, table, _, infos = bodies.register_broker_body_records(
                bodies.TopicConfigSerializeWrapper.from_json(body, self._dialect, budget),
                TopicConfig,
                DataVersion)
            return TopicConfigWrapper(version, table, infos), None
        try:
            return read_body(body, compressed, self._body_version(request_version),
                             self._check_count, budget, self._check_mappings, self._dialect)
        except DecodeBudgetExceeded:
            raise
        except NameTooLongError as exc:     # a rocketpy bound: said as it is
            log.warning("registration refused: %s", exc)
            return error(ResponseCode.SYSTEM_ERROR, f"[REFUSED] {exc}; nothing was applied")
        except BodyDecodeError:
            if not compressed and _read_as_null(body, budget):
                return error(ResponseCode.SYSTEM_ERROR, self._null_body_remark)
            return error(ResponseCode.SYSTEM_ERROR, _UNDECODABLE_REMARK)

    def _remember(self, key, body, compressed, version, crc, decoded):
        """Cache a decoded body (on the reactor thread: the cache is shared state)."""
        if not isinstance(decoded, Reply):
            self.cache.put(key, body, compressed, version, decoded, self._is_live, crc)
        return decoded

    def forget_departed_brokers(self):
        """Drop the cached bodies of brokers no longer live (after brokers leave)."""
        self.cache.forget_departed(self._is_live)


def _read_as_null(body, budget=None):
    """Whether Java's ``RegisterBrokerBody.decode`` reads a plain body that rocketpy's beans
    refuse as null (then the processor's NullPointerException): text that is not UTF-8, or
    JSON ``null``; read again on what is left of the decode's ``budget``."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return True
    try:
        return fastjson.loads_lenient(body, budget=budget) is None
    except BodyDecodeError:   # the budget's errors too
        return False


def _crc_mismatch():
    return error(ResponseCode.SYSTEM_ERROR, "crc32 not match", RegisterBrokerResponseHeader())
