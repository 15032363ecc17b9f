"""The output table: its stable schema, and one row per frame built with the project's codec.

Layer: ``rocketpy.capture`` (pure: stdlib + the codec).  Each frame is decoded with
``rocketpy.remoting.decode_frame`` (Java ``RemotingCommand.decode``); a frame that does not
decode is still a row, with ``error`` set and whatever the damaged frame revealed.

The schema (:data:`SCHEMA`, defined in :mod:`rocketpy.capture.schema`) is the contract between
the in-process CLI (``--format json``), the Spark job's Parquet output and ``docs/capture.md``:
columns are only ever added at the end.
"""
from __future__ import annotations

import functools

from rocketpy.remoting import decode_frame
from rocketpy.remoting import bodies, fastjson
from rocketpy.remoting.errors import RemotingCodecError
from rocketpy.remoting.layout import body_length, has_prefix, read_prefix
from rocketpy.remoting.numbers import INT32, cast_to_integer

from .schema import (COLUMNS, FLAG_ONEWAY, FLAG_RESPONSE, LANGUAGE_NAMES, REGISTRATION,
                     REQUEST_NAMES, RESPONSE_NAMES, SCHEMA, SERIALIZE_NAMES, VERSION_NAMES)

__all__ = ["SCHEMA", "COLUMNS", "frame_row", "body_summary", "empty_row", "header_columns"]

def empty_row() -> dict:
    return dict.fromkeys(COLUMNS)


def header_columns(cmd) -> dict:
    """The columns a frame's header gives, from ``code`` to ``ext_fields`` in SCHEMA order."""
    flag = cmd.flag
    resp = flag & FLAG_RESPONSE
    code = cmd.code
    language = cmd.language
    return {
        "code": code,
        "code_name": RESPONSE_NAMES.get(code) if resp else REQUEST_NAMES.get(code),
        "flag": flag, "opaque": cmd.opaque, "is_response": bool(resp),
        "is_oneway": bool(flag & FLAG_ONEWAY) and not resp,
        "language": language if language.__class__ is str else LANGUAGE_NAMES.get(language, str(language)),
        "version": cmd.version, "version_name": VERSION_NAMES.get(cmd.version),
        "remark": cmd.remark, "ext_fields": cmd.ext_fields,
    }


def frame_row(frame, file: str | None, src: str, dst: str, conn: str) -> dict:
    """A row for a :class:`~rocketpy.capture.framing.Frame` (pairing columns left null)."""
    data = frame.data
    if frame.lost or frame.error or not has_prefix(data):
        return _damaged_row(frame, file, src, dst, conn)
    try:
        cmd = decode_frame(data)
    except (RemotingCodecError, ValueError) as exc:
        row = _damaged_row(frame, file, src, dst, conn)
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    # one dict display in SCHEMA order: a frame's row is built once per frame of the capture
    ts = frame.ts_ns
    _, stype, hlen = read_prefix(data)
    return {
        "file": file, "ts": ts / 1e9, "ts_ns": ts, "src": src, "dst": dst, "conn": conn,
        "stream_offset": frame.offset, "frame_len": frame.length,
        "serialize_type": SERIALIZE_NAMES.get(stype, str(stype)),
        **header_columns(cmd),
        "body_len": body_length(frame.length, hlen),
        "body_summary": body_summary(cmd) if cmd.body else None,
        "request_code": None, "request_code_name": None, "latency_ms": None, "error": None,
    }


def _damaged_row(frame, file, src, dst, conn) -> dict:
    """The row of a frame the capture damaged: what its prefix and header revealed."""
    row = dict.fromkeys(COLUMNS)
    row["file"] = file
    row["ts_ns"] = frame.ts_ns
    row["ts"] = frame.ts_ns / 1e9
    row["src"] = src
    row["dst"] = dst
    row["conn"] = conn
    row["stream_offset"] = frame.offset
    row["frame_len"] = frame.length
    data = frame.data
    if has_prefix(data):
        _, stype, hlen = read_prefix(data)
        row["serialize_type"] = SERIALIZE_NAMES.get(stype, str(stype))
        row["body_len"] = max(0, body_length(frame.length, hlen))
    header = frame.header
    if header is not None:
        row.update(header_columns(header))
        row["serialize_type"] = SERIALIZE_NAMES.get(header.serialize_type, str(header.serialize_type))
    row["error"] = frame.error
    return row


# ---- body summaries ---------------------------------------------------------------------------

def body_summary(cmd) -> str | None:
    """A short human summary of a body the codec knows, else None (never raises).

    The summary depends on the body, the broker and cluster names and whether the frame is a
    registration; bodies up to :data:`_MEMO_BODY_BYTES` are remembered on that key, because a
    NameServer's traffic repeats them: every client polls each topic's route every 30 s and gets
    the same answer until the route changes, and a broker re-registers the same body.
    """
    body = cmd.body
    ext = cmd.ext_fields or {}
    key = (ext.get("brokerName"), ext.get("clusterName"),
           cmd.code == REGISTRATION and not cmd.flag & FLAG_RESPONSE, body)
    if len(body) <= _MEMO_BODY_BYTES and body.__class__ is bytes:
        return _memo_summary(*key)
    return _summary(*key)


def _summary(broker, cluster, registration, body) -> str | None:
    """The summary of ``body`` (see :func:`body_summary`); None for a body it cannot read."""
    try:
        return _read_summary(broker, cluster, registration, body)
    except Exception:   # a body from a stranger: anything it holds is no summary, never a crash
        return None


_W = {name: bean.wire_name(attr) for name, bean, attr in (
    ("wrapper", bodies.RegisterBrokerBody, "topic_config_serialize_wrapper"),
    ("topics", bodies.TopicConfigSerializeWrapper, "topic_config_table"),
    ("broker_datas", bodies.TopicRouteData, "broker_datas"),
    ("queue_datas", bodies.TopicRouteData, "queue_datas"),
    ("broker_name", bodies.BrokerData, "broker_name"),
    ("read", bodies.QueueData, "read_queue_nums"),
    ("write", bodies.QueueData, "write_queue_nums"),
    ("broker_addrs", bodies.ClusterInfo, "broker_addr_table"),
    ("clusters", bodies.ClusterInfo, "cluster_addr_table"),
    ("topic_list", bodies.TopicList, "topic_list"),
    ("table", bodies.KVTable, "table"),
    ("counter", bodies.DataVersion, "counter"),
    ("timestamp", bodies.DataVersion, "timestamp"))}
#: the keys a body needs for a summary (the compiled core skips bodies without any of them)
SUMMARY_MARKERS = tuple(_W[name] for name in ("wrapper", "broker_datas", "queue_datas",
                                               "broker_addrs", "topic_list", "table", "counter",
                                               "topics"))


def _read_summary(broker, cluster, registration, body) -> str | None:
    if body[:1] not in (b"{", b"["):
        if registration:
            topics = bodies.compressed_topic_count(body)
            if topics is None:
                return None
            return f"broker={broker} cluster={cluster} topics={topics} compressed"
        return None
    obj = fastjson.loads(body)
    if not isinstance(obj, dict):
        return None
    w = _W
    if w["wrapper"] in obj:
        wrapper = obj.get(w["wrapper"]) or {}
        table = wrapper.get(w["topics"]) or {}
        return f"broker={broker} cluster={cluster} topics={len(table)}"
    if w["broker_datas"] in obj or w["queue_datas"] in obj:
        brokers = obj.get(w["broker_datas"]) or []
        queues = obj.get(w["queue_datas"]) or []
        names = ",".join(sorted(str(b.get(w["broker_name"])) for b in brokers if isinstance(b, dict)))
        # the codec's one number reader (a stranger's "1e999999" costs its bytes)
        datas = [q for q in queues if isinstance(q, dict)]
        rq = sum(cast_to_integer(q.get(w["read"]), INT32) or 0 for q in datas)
        wq = sum(cast_to_integer(q.get(w["write"]), INT32) or 0 for q in datas)
        return f"brokers={len(brokers)}[{names}] queueDatas={len(queues)} read={rq} write={wq}"
    if w["broker_addrs"] in obj and w["clusters"] in obj:
        return (f"clusters={len(obj.get(w['clusters']) or {})} "
                f"brokers={len(obj.get(w['broker_addrs']) or {})}")
    if w["topic_list"] in obj:
        return f"topics={len(obj.get(w['topic_list']) or [])}"
    if w["table"] in obj and isinstance(obj.get(w["table"]), dict):
        return f"kv={len(obj[w['table']])}"
    if w["counter"] in obj and w["timestamp"] in obj:
        return f"dataVersion counter={obj.get(w['counter'])} timestamp={obj.get(w['timestamp'])}"
    if w["topics"] in obj:
        return f"topics={len(obj.get(w['topics']) or {})}"
    return None


#: bodies up to this size are memoised (a 10-topic registration is ~2 KiB, a route ~250 B)
_MEMO_BODY_BYTES = 16 << 10
_memo_summary = functools.lru_cache(maxsize=2048)(_summary)
