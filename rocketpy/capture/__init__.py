"""rocketpy.capture: RocketMQ traffic captures (pcap/pcapng) to a table of frames.

Layer: pure capture reading (stdlib + construct + the codec ``rocketpy.remoting``; no Twisted,
no pyspark), so Spark executors import it as they are.  Pipeline, one module per step::

    readers     pcap / pcapng records (both byte orders, µs/ns, pcapng interfaces)
    layers      Ethernet/VLAN, SLL, SLL2, NULL/LOOP, raw IP -> IPv4/IPv6 -> TCP segment
    reassembly  per-direction TCP reassembly (reorder, retransmit, overlap, loss, snaplen)
    framing     RocketMQ frames found by content, resynchronising after gaps
    rows        the stable output schema; one row per frame, decoded with the codec
    decoder     connections, request/response pairing by opaque, latency
    source      inputs (paths, globs, directories, URIs) -> rows
    summary     frames per code, error responses, latency percentiles, top talkers
    cli         the ``rocketpy-capture`` console script (in-process, no Spark)

    from rocketpy.capture import decode_paths
    for row in decode_paths(["capture.pcap"]):
        print(row["code_name"], row["latency_ms"])
"""
from .decoder import CaptureDecoder, Connection, Stats
from .readers import CaptureFormatError, iter_packets, read_capture_info
from .rows import COLUMNS, SCHEMA
from .source import decode_file, decode_paths, expand_inputs

__all__ = ["CaptureDecoder", "Connection", "Stats", "CaptureFormatError", "iter_packets",
           "read_capture_info", "COLUMNS", "SCHEMA", "decode_file", "decode_paths",
           "expand_inputs"]
