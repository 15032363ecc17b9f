"""Test helper: the Spark job's byte-range pipeline (rocketpy.capture.plan) run in one process,
range after range, so its rows can be compared with a whole-capture decode without Spark."""
import contextlib
import os

import pyarrow as pa

from rocketpy.capture import engine
from rocketpy.capture.arrow import ARROW_SCHEMA, rows_to_batch
from rocketpy.capture.decoder import Stats
from rocketpy.capture.plan import Planner, decode_range, next_file, plan_ranges, stitch
from rocketpy.capture.source import open_capture
from rocketpy.capture.split import seek_record


def decode_in_ranges(paths, chunk, name="native", one_capture=False, ports=None, peaks=None,
                     **options):
    """(table, stats, per-range bytes) of the range pipeline over ``paths`` (in order);
    ``options`` go to each range's decoder, whose peak table size is appended to ``peaks``."""
    infos = {}
    files = []
    for p in paths:
        with open_capture(p) as (_f, info):
            infos[p] = info
        files.append((p, p, os.path.getsize(p), info))
    ranges = plan_ranges(files, chunk, one_capture)
    scans = {}
    scan = engine.SCANNERS[name]
    for r in ranges:
        with open_capture(r.path) as (f, info):
            start = seek_record(f, info, r.start)
            scans[r.index] = scan(f, info, start, r.end, ports)
    planner = Planner(ranges, scans)
    batches, edges = [], {}
    stats = Stats(planner.stats)
    for k, r in enumerate(ranges):
        dec = engine.ENGINES[name](ports=ports, plan=planner.plan(r), **options)
        nxt = next_file(ranges, k)
        following = None
        if nxt is not None:
            @contextlib.contextmanager
            def opened(nxt=nxt):
                with open_capture(nxt.path) as (f2, _info):
                    yield f2
            following = (nxt, infos[nxt.path], opened)
        with open_capture(r.path) as (f, info):
            start = seek_record(f, info, r.start)
            batches += decode_range(dec, r, info, f, start, following)
        edges[r.index] = dec.edges
        if peaks is not None:
            peaks.append(dec.table["peak_connections"])
        stats.merge(dec.stats)
    rows, settled = stitch(ranges, edges)
    stats.merge(settled)
    if rows:
        batches.append(rows_to_batch(rows))
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA), stats, [r.end - r.start for r in ranges]
