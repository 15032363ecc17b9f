"""The output table: its stable schema, and one row per frame built with the project's codec.

Layer: ``rocketpy.capture`` (pure: stdlib + the codec).  Each frame is decoded with
``rocketpy.remoting.decode_frame`` (Java ``RemotingCommand.decode``); a frame that does not
decode is still a row, with ``error`` set and whatever the damaged frame revealed.

The schema (:data:`SCHEMA`) is the contract between the in-process CLI (``--format json``), the
Spark job's Parquet output and ``docs/capture.md``: columns are only ever added at the end.
"""
from __future__ import annotations

import zlib

from rocketpy.remoting import decode_frame
from rocketpy.remoting import codes, fastjson
from rocketpy.remoting.errors import RemotingCodecError

__all__ = ["SCHEMA", "COLUMNS", "frame_row", "body_summary", "empty_row"]

#: (column, type) in output order.  Types use Spark SQL DDL spelling; JSON output uses the
#: natural JSON types (map -> object, null for missing).
SCHEMA: list[tuple[str, str]] = [
    ("file", "string"),             # capture file the frame came from
    ("ts", "double"),               # capture time (s since epoch) of the frame's last byte
    ("ts_ns", "bigint"),            # the same, in integer nanoseconds
    ("src", "string"),              # sender ip:port ([v6]:port)
    ("dst", "string"),              # receiver ip:port
    ("conn", "string"),             # connection id: both endpoints, lower first; "#n" on reuse
    ("stream_offset", "bigint"),    # byte offset of the frame in its direction's TCP stream
    ("frame_len", "int"),           # whole frame, 4-byte length prefix included
    ("serialize_type", "string"),   # JSON | ROCKETMQ
    ("code", "int"),                # request code, or response code for responses
    ("code_name", "string"),        # RequestCode / ResponseCode name
    ("flag", "int"),
    ("opaque", "int"),
    ("is_response", "boolean"),
    ("is_oneway", "boolean"),
    ("language", "string"),         # LanguageCode name (JAVA, CPP, ...)
    ("version", "int"),             # MQVersion ordinal
    ("version_name", "string"),     # e.g. V4_9_8
    ("remark", "string"),
    ("ext_fields", "map<string,string>"),
    ("body_len", "int"),
    ("body_summary", "string"),     # short decoded summary for known bodies
    ("request_code", "int"),        # responses: the code of the request answered
    ("request_code_name", "string"),
    ("latency_ms", "double"),       # responses: ts(response) - ts(request)
    ("error", "string"),            # null when the frame decoded
]
COLUMNS = [name for name, _ in SCHEMA]

_SERIALIZE = {0: "JSON", 1: "ROCKETMQ"}


def empty_row() -> dict:
    return dict.fromkeys(COLUMNS)


def _language(lang) -> str | None:
    if isinstance(lang, str):
        return lang
    name = codes.language_name(lang)
    return name if name is not None else str(lang)


def _fill_header(row: dict, cmd) -> None:
    row["code"] = cmd.code
    row["flag"] = cmd.flag
    row["opaque"] = cmd.opaque
    resp = bool(cmd.flag & 1)
    row["is_response"] = resp
    row["is_oneway"] = bool(cmd.flag & 2) and not resp
    row["code_name"] = (codes.response_code_name(cmd.code) if resp
                        else codes.request_code_name(cmd.code))
    row["language"] = _language(cmd.language)
    row["version"] = cmd.version
    row["version_name"] = codes.version_name(cmd.version)
    row["remark"] = cmd.remark
    row["ext_fields"] = cmd.ext_fields
    row["serialize_type"] = _SERIALIZE.get(cmd.serialize_type, str(cmd.serialize_type))


def frame_row(frame, file: str | None, src: str, dst: str, conn: str) -> dict:
    """A row for a :class:`~rocketpy.capture.framing.Frame` (pairing columns left null)."""
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
    if len(data) >= 8:
        row["serialize_type"] = _SERIALIZE.get(data[4], str(data[4]))
        hlen = int.from_bytes(data[5:8], "big")
        row["body_len"] = max(0, frame.length - 8 - hlen)
    if frame.lost or frame.error:
        if frame.header is not None:
            _fill_header(row, frame.header)
        row["error"] = frame.error
        return row
    try:
        cmd = decode_frame(data)
    except (RemotingCodecError, ValueError) as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    _fill_header(row, cmd)
    if cmd.body:
        row["body_summary"] = body_summary(cmd)
    return row


# ---- body summaries ---------------------------------------------------------------------------

def _compressed_register_topics(body: bytes, version: int):
    """Topic count of a compressed RegisterBrokerBody (Java ``RegisterBrokerBody.decode``),
    through the codec's ``bodies.RegisterBrokerBody``; a plain reading of the leading parts
    (DataVersion JSON, then the topic count) when that is unavailable or refuses the body."""
    try:
        from rocketpy.remoting.bodies import RegisterBrokerBody
        return len(RegisterBrokerBody.decode(body, True, broker_version=version)
                   .topic_config_table)
    except Exception:
        pass
    raw = zlib.decompress(body)
    n = int.from_bytes(raw[0:4], "big")            # DataVersion JSON length, then the JSON
    return int.from_bytes(raw[4 + n:8 + n], "big")  # then the topic count


def body_summary(cmd) -> str | None:
    """A short human summary of a body the codec knows, else None (never raises)."""
    body = cmd.body
    try:
        if body[:1] not in (b"{", b"["):
            ext = cmd.ext_fields or {}
            if cmd.code == 103 and not cmd.flag & 1:
                topics = _compressed_register_topics(body, cmd.version)
                return (f"broker={ext.get('brokerName')} cluster={ext.get('clusterName')} "
                        f"topics={topics} compressed")
            return None
        obj = fastjson.loads(body)
    except Exception:
        return None
    if not isinstance(obj, dict):
        return None
    ext = cmd.ext_fields or {}
    if "topicConfigSerializeWrapper" in obj:
        wrapper = obj.get("topicConfigSerializeWrapper") or {}
        table = wrapper.get("topicConfigTable") or {}
        return (f"broker={ext.get('brokerName')} cluster={ext.get('clusterName')} "
                f"topics={len(table)}")
    if "brokerDatas" in obj or "queueDatas" in obj:
        brokers = obj.get("brokerDatas") or []
        queues = obj.get("queueDatas") or []
        names = ",".join(sorted(str(b.get("brokerName")) for b in brokers if isinstance(b, dict)))
        rq = sum(int(q.get("readQueueNums", 0) or 0) for q in queues if isinstance(q, dict))
        wq = sum(int(q.get("writeQueueNums", 0) or 0) for q in queues if isinstance(q, dict))
        return f"brokers={len(brokers)}[{names}] queueDatas={len(queues)} read={rq} write={wq}"
    if "brokerAddrTable" in obj and "clusterAddrTable" in obj:
        return (f"clusters={len(obj.get('clusterAddrTable') or {})} "
                f"brokers={len(obj.get('brokerAddrTable') or {})}")
    if "topicList" in obj:
        return f"topics={len(obj.get('topicList') or [])}"
    if "table" in obj and isinstance(obj.get("table"), dict):
        return f"kv={len(obj['table'])}"
    if "counter" in obj and "timestamp" in obj:
        return f"dataVersion counter={obj.get('counter')} timestamp={obj.get('timestamp')}"
    if "topicConfigTable" in obj:
        return f"topics={len(obj.get('topicConfigTable') or {})}"
    return None
