"""Benchmark (not a test): frames per second through the remoting codec.

Two workloads:

(a) a small GET_ROUTEINFO_BY_TOPIC request (the genuine 4.9.8 client frame, 136 bytes, JSON
    header; and the same command with a ROCKETMQ binary header) and its route answer;
(b) a REGISTER_BROKER of a broker with 1,000 topics (5.x JSON body, ~190 KB; and the same
    registration compressed, as ``compressedRegister=true`` brokers send it).

Each is decoded and encoded three ways: the plain construct schema, the ``.compile()``d schema,
and the codec's fast path (``decode_frame``/``encode_frame``, struct slicing). The construct
rows parse only what the schema covers (framing, plus the binary header; a JSON header goes
through ``json.loads``), so they are the cost of the specification, not of a full command. The
last rows add what a NameServer does with the frame: typed header and typed body.

The fast path runs twice, back to back: with the compiled header kernel
(``rocketpy.remoting._kernel``) and with the pure-Python codec alone (the fallback, what ran
before the kernel). The last table is the header decode cost per frame over every genuine
capture frame (``tests/fuzzharness.corpus``), and the answer cache's key and the overload peek,
both ways.

Run: ``python3 bench/codec_bench.py [--seconds 0.5]``.
"""
import argparse
import json
import os
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rocketpy.remoting import RemotingCommand, decode_frame, encode_frame  # noqa: E402
from rocketpy.remoting import frame as codec_frame, layout  # noqa: E402
from rocketpy.remoting import bodies as B, headers as H  # noqa: E402
from rocketpy.remoting.codes import MQVersion  # noqa: E402
from rocketpy.remoting.frame import (FRAME, FRAME_COMPILED, ROCKETMQ_HEADER,  # noqa: E402
                                     ROCKETMQ_HEADER_COMPILED)

ROUTE_QUERY = (  # rmq49-sc-probe.pcap
    b'\x00\x00\x00\x84\x00\x00\x00\x80{"code":105,"extFields":{"topic":"TopicA"},"flag":0,'
    b'"language":"JAVA","opaque":4,"serializeTypeCurrentRPC":"JSON","version":409}')


def registration(topics=1000, compressed=False):
    table = {f"BenchTopic_{i:04d}": B.TopicConfig(topic_name=f"BenchTopic_{i:04d}",
                                                 read_queue_nums=8, write_queue_nums=8, perm=6)
             for i in range(topics)}
    wrapper = B.TopicConfigAndMappingSerializeWrapper(
        data_version=B.DataVersion(counter=7, timestamp=1795304749769),
        topic_config_table=table)
    body = B.RegisterBrokerBody(topic_config_serialize_wrapper=wrapper).encode(compressed)
    header = H.RegisterBrokerRequestHeader(
        broker_name="broker-a", broker_addr="127.0.0.1:10911", cluster_name="DefaultCluster",
        ha_server_addr="127.0.0.1:10912", broker_id=0, enable_acting_master=False,
        compressed=compressed, body_crc32=B.body_crc32(body))
    return RemotingCommand.request(103, header.to_ext_fields(), body, opaque=11,
                                   version=MQVersion.V5_3_3).encode()


def route_answer():
    route = B.TopicRouteData(
        queue_datas=[B.QueueData(broker_name="broker-a", perm=7, read_queue_nums=8,
                                 write_queue_nums=8)],
        broker_datas=[B.BrokerData(cluster="DefaultCluster", broker_name="broker-a",
                                   broker_addrs={0: "127.0.0.1:10911"})])
    request = decode_frame(ROUTE_QUERY)
    return request.create_response(0, body=route.to_json(standard=True)).encode()


def as_rocketmq(frame):
    cmd = decode_frame(frame)
    cmd.serialize_type = 1
    return cmd.encode()


def construct_decode(schema, header_schema):
    def run(frame):
        parsed = schema.parse(frame)
        if parsed.serialize_type == 0:
            return json.loads(parsed.header), parsed.body
        return header_schema.parse(parsed.header), parsed.body
    return run


def construct_encode(schema):
    def run(parts):
        return schema.build(parts)
    return run


def rate(func, arg, seconds):
    timer = timeit.Timer(lambda: func(arg))
    number, elapsed = timer.autorange()
    loops = max(1, int(number * seconds / max(elapsed, 1e-9)))
    best = min(timer.repeat(repeat=3, number=loops)) / loops
    return 1.0 / best


def kernel_off(func):
    """``func`` run with the kernel left out (the pure-Python codec reads every header)."""
    def run(arg):
        return func(arg)
    run.no_kernel = True
    return run


def measure(func, arg, seconds):
    """rate() with the kernel on, or off for a kernel_off function."""
    if not getattr(func, "no_kernel", False):
        return rate(func, arg, seconds)
    saved = codec_frame.KERNEL, layout.KERNEL
    codec_frame.KERNEL = layout.KERNEL = None
    try:
        return rate(func, arg, seconds)
    finally:
        codec_frame.KERNEL, layout.KERNEL = saved


def per_frame(func, frames, repeat=5):
    """Best microseconds per frame of ``func`` over all ``frames``."""
    def run():
        for f in frames:
            func(f)
    best = min(timeit.repeat(run, number=1, repeat=repeat))
    return best / len(frames) * 1e6


def corpus_table():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import fuzzharness
    frames = fuzzharness.corpus()
    requests = fuzzharness.request_corpus()
    spans = [layout.header_span(f) for f in frames]
    headers = [(t, f[a:b]) for (t, a, b), f in zip(spans, frames)]
    kernel = codec_frame.KERNEL

    def kernel_header(th):
        return kernel.read_header(*th)

    def python_header(th):
        return codec_frame.python_decode_header(*th)

    print(f"\nper genuine frame ({len(frames)} frames, {len(requests)} requests), microseconds:")
    print(f"{'what':40} {'kernel':>10} {'Python':>10}")
    rows = [("header decode", kernel_header, python_header, headers)]
    saved = codec_frame.KERNEL, layout.KERNEL
    for label, fn in (("answer cache key (request_without_opaque)", layout.request_without_opaque),
                      ("overload peek (peek_request)", layout.peek_request)):
        rows.append((label, fn, kernel_off(fn), requests))
    for label, on, off, items in rows:
        fast = per_frame(on, items)
        codec_frame.KERNEL = layout.KERNEL = None
        try:
            slow = per_frame(off, items)
        finally:
            codec_frame.KERNEL, layout.KERNEL = saved
        print(f"{label:40} {fast:10.2f} {slow:10.2f}")


def full_register(frame):
    cmd = decode_frame(frame)
    header = H.RegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
    B.check_body_crc32(cmd.body, header.body_crc32)
    return B.RegisterBrokerBody.decode(cmd.body, header.compressed, cmd.version)


def full_route(frame):
    cmd = decode_frame(frame)
    header = H.GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
    route = B.TopicRouteData(
        queue_datas=[B.QueueData(broker_name="broker-a", perm=7, read_queue_nums=8,
                                 write_queue_nums=8)],
        broker_datas=[B.BrokerData(cluster="DefaultCluster", broker_name=header.topic,
                                   broker_addrs={0: "127.0.0.1:10911"})])
    return cmd.create_response(0, body=route.to_json(standard=True)).encode()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    args = parser.parse_args()

    workloads = [
        ("route query, JSON header", ROUTE_QUERY),
        ("route query, ROCKETMQ header", as_rocketmq(ROUTE_QUERY)),
        ("route answer (standard JSON body)", route_answer()),
        ("register 1000 topics, JSON body", registration(1000)),
        ("register 1000 topics, ROCKETMQ header", as_rocketmq(registration(1000))),
        ("register 1000 topics, zlib body", registration(1000, compressed=True)),
    ]
    ways = [
        ("construct plain", construct_decode(FRAME, ROCKETMQ_HEADER), construct_encode(FRAME)),
        ("construct compiled", construct_decode(FRAME_COMPILED, ROCKETMQ_HEADER_COMPILED),
         construct_encode(FRAME_COMPILED)),
        ("fast path, kernel", decode_frame, encode_frame),
        ("fast path, Python", kernel_off(decode_frame), encode_frame),
    ]
    print(f"{'workload':40} {'bytes':>8} {'way':20} {'decode/s':>12} {'encode/s':>12}")
    for label, frame in workloads:
        parts = FRAME.parse(frame)
        parts = dict(serialize_type=parts.serialize_type, header=parts.header, body=parts.body)
        cmd = decode_frame(frame)
        for way, decode, encode in ways:
            encode_arg = cmd if encode is encode_frame else parts
            print(f"{label:40} {len(frame):8d} {way:20} {measure(decode, frame, args.seconds):12,.0f} "
                  f"{rate(encode, encode_arg, args.seconds):12,.0f}")
    print()
    print("with typed header and body (what the NameServer does per request):")
    for label, func, frame in [
        ("route query -> typed header -> answer frame", full_route, ROUTE_QUERY),
        ("  (kernel off)", kernel_off(full_route), ROUTE_QUERY),
        ("register 1000, JSON: header+crc+body", full_register, registration(1000)),
        ("register 1000, zlib: header+crc+body", full_register, registration(1000, True)),
    ]:
        print(f"{label:48} {measure(func, frame, args.seconds):12,.1f} frames/s")
    corpus_table()


if __name__ == "__main__":
    main()
