"""rocketpy.capture: RocketMQ traffic captures (pcap/pcapng) to a table of frames.

Layer: capture reading on the codec ``rocketpy.remoting`` (no Twisted, no pyspark), so Spark
executors import it as they are.  The reference decoder is pure Python, one module per step::

    readers     pcap / pcapng records (both byte orders, µs/ns, pcapng interfaces)
    layers      Ethernet/VLAN, SLL, SLL2, NULL/LOOP, raw IP -> IPv4/IPv6 -> TCP segment
    reassembly  per-direction TCP reassembly (reorder, retransmit, overlap, loss, snaplen)
    framing     RocketMQ frames found by content, resynchronising after gaps
    schema      the stable output schema (and the code tables its named columns read)
    rows        one row per frame, decoded with the codec
    decoder     connections, request/response pairing by opaque, latency; byte-range mode
    stats       the counters
    source      inputs (paths, globs, directories, URIs, rotated sets) -> rows

and ``_native`` is its C port (built by ``pip install .``), proven to give the same rows::

    engine      both decoders behind one interface, handing over batches (Arrow when asked)
    plan        one capture decoded in byte ranges (the Spark job): plan, decode, stitch
    split       byte ranges and their first record
    arrow       the schema as Arrow, rows to record batches, the CLI's Parquet writer
    summary     frames per code, error responses, latency percentiles, top talkers
    groups      the summary's group-by (pyarrow hash kernels and numpy)
    plots       the latency and rate plots (matplotlib, the plots extra)
    formats     the output formats, one table for both front ends, and their writers
    cli         the ``rocketpy-capture`` console script (in-process, no Spark)

    from rocketpy.capture import decode_paths
    for row in decode_paths(["capture.pcap"]):
        print(row["code_name"], row["latency_ms"])
"""
from rocketpy._lazy import lazy_exports

#: public name -> the module that defines it; imported on first use (PEP 562), so that the
#: console script and the compiled engine start without the reference decoder and the codec
_EXPORTS = {
    "CaptureDecoder": ".decoder", "Connection": ".decoder", "Stats": ".stats",
    "CaptureFormatError": ".readers", "iter_packets": ".readers", "read_capture_info": ".readers",
    "COLUMNS": ".schema", "SCHEMA": ".schema",
    "decode_file": ".source", "decode_paths": ".source", "expand_inputs": ".source",
}

__all__ = ["CaptureDecoder", "Connection", "Stats", "CaptureFormatError", "iter_packets",
           "read_capture_info", "COLUMNS", "SCHEMA", "decode_file", "decode_paths",
           "expand_inputs"]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
