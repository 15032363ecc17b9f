"""The output table's schema, and the code tables its named columns are filled from.

Layer: ``rocketpy.capture`` (pure: stdlib + ``rocketpy.remoting.codes``).  One statement of what
the table is, read by the reference rows (:mod:`rocketpy.capture.rows`), the Arrow schema
(:mod:`rocketpy.capture.arrow`), the Spark job's DDL, and the compiled core, which is handed the
columns (their order and types), the name tables, the flag bits and the registration code at
configure time (:func:`rocketpy.capture.engine._native_module`) instead of restating them.  It
imports no codec beyond the code tables, so the compiled path starts without the frame schema.
"""
from __future__ import annotations

from rocketpy.remoting import codes

__all__ = ["SCHEMA", "COLUMNS", "REQUEST_NAMES", "RESPONSE_NAMES", "VERSION_NAMES",
           "LANGUAGE_NAMES", "SERIALIZE_NAMES", "FLAG_RESPONSE", "FLAG_ONEWAY", "REGISTRATION"]

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

#: the names the columns show for codes (``code_name``, ``language``, ``version_name``, ...)
REQUEST_NAMES = {int(c): c.name for c in codes.RequestCode}
RESPONSE_NAMES = {int(c): c.name for c in codes.ResponseCode}
VERSION_NAMES = codes.VERSION_NAMES
LANGUAGE_NAMES = {int(c): c.name for c in codes.LanguageCode}
SERIALIZE_NAMES = {int(t): t.name for t in codes.SerializeType}

#: the flag bits that make ``is_response`` and ``is_oneway`` (Java RemotingCommand's RPC_TYPE
#: and RPC_ONEWAY bits)
FLAG_RESPONSE = codes.FLAG_RESPONSE
FLAG_ONEWAY = codes.FLAG_ONEWAY
#: the request whose body summary names the registering broker and cluster (REGISTER_BROKER)
REGISTRATION = int(codes.RequestCode.REGISTER_BROKER)
