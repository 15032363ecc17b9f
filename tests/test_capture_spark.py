"""The Spark job end to end (tools/capture_job.py) on the shared local[2] session: the genuine
fixtures (whole-file tasks), generated captures cut into byte ranges (plan, range decode,
stitch), a capture dominated by one connection (work per task follows bytes), a rotated set
read as one capture, CSV and JSON output, and the engines on the executors -- always the rows
of the in-process decoder."""
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketpy.capture import Stats, decode_paths
from rocketpy.capture.arrow import rows_to_batch
from rocketpy.capture.summary import SummaryBuilder

import capture_synth as cs

from extras import require

require("spark", "pyspark", "pandas", "matplotlib")   # else these fail, never skip
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "pcap"
KEY = ["ts_ns", "src", "dst", "conn", "stream_offset", "frame_len", "serialize_type",
       "code", "code_name", "flag", "opaque", "is_response", "is_oneway", "language", "version",
       "version_name", "remark", "body_len", "body_summary", "request_code",
       "request_code_name", "latency_ms", "error"]


@pytest.fixture(scope="module")
def job():
    sys.path.insert(0, str(ROOT / "tools"))
    import capture_job
    yield capture_job
    sys.path.remove(str(ROOT / "tools"))


def _key(r, with_file=True):
    ext = r["ext_fields"]
    if isinstance(ext, str):
        ext = json.loads(ext) if ext else None
    return ((r["file"],) if with_file else ()) + tuple(
        round(r[k], 6) if k == "latency_ms" and r[k] is not None else r[k] for k in KEY) \
        + (tuple(sorted(dict(ext or {}).items())),)


def _spark_rows(spark, path):
    return [r.asDict() for r in spark.read.parquet(path).collect()]


def _same_rows(got, want, with_file=True):
    assert sorted(_key(r, with_file) for r in got) == sorted(_key(r, with_file) for r in want)


def test_fixtures_whole_file_path(spark, job, tmp_path, capsys):
    out = tmp_path / "out"
    summary = job.run(spark, [str(FIXTURES), "--output", str(out), "--quiet", "--plots"])
    got = _spark_rows(spark, str(out / "frames"))
    stats = Stats()
    want = list(decode_paths([str(FIXTURES)], stats=stats))
    _same_rows(got, want)
    sb = SummaryBuilder()
    sb.add_batch(rows_to_batch(want))
    local = sb.result(stats)
    for k in ("frames", "requests", "oneway", "responses", "error_responses",
              "unanswered_requests", "unmatched_responses", "decode_errors", "first_ts",
              "last_ts"):
        assert summary[k] == local[k], k
    assert summary["top_talkers"] == local["top_talkers"]
    # percentiles are approximate in Spark (percentile_approx); counts and maxima are exact
    assert {c: (v["n"], v["max"]) for c, v in summary["latency_ms"].items()} == \
        {c: (v["n"], v["max"]) for c, v in local["latency_ms"].items()}
    assert summary["engines"] == {"native": summary["engines"]["native"]}   # shipped, loaded
    text = capsys.readouterr().out
    assert "request code" in text and "105 GET_ROUTEINFO_BY_TOPIC" in text
    assert json.loads((out / "summary.json").read_text())["frames"] == len(want)
    assert (out / "plots" / "latency.png").stat().st_size > 1000
    assert (out / "plots" / "rate.png").stat().st_size > 1000


def test_split_capture_matches_in_process(spark, job, tmp_path):
    # ~25 MB with reordering and retransmissions, read in 8 MiB ranges: connections cross range
    # boundaries, frames straddle them, responses answer requests of the previous range
    segs = cs.many_conversations(2400, seed=5, damage=True)
    path = tmp_path / "big.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    assert path.stat().st_size > 24 << 20
    out = tmp_path / "out"
    summary = job.run(spark, [str(path), "--output", str(out), "--quiet", "--chunk-mb", "8"])
    got = _spark_rows(spark, str(out / "frames"))
    stats = Stats()
    want = list(decode_paths([str(path)], stats=stats))
    assert len(want) > 20000 and not any(r["error"] for r in want)
    _same_rows(got, want)
    assert summary["range_task_bytes"]["tasks"] >= 3
    for key in ("connections", "rocketmq_connections", "packets", "retransmitted_bytes"):
        assert summary["stats"][key] == stats[key], key
    assert summary["unanswered_requests"] == stats["unanswered_requests"]


def _one_connection(n_pairs, seed=1):
    """A capture dominated by one long connection (plus a few short ones)."""
    import random
    rng = random.Random(seed)
    frames = cs.sample_exchange(n_pairs, rng, big_every=4)
    segs = cs.conversation(frames, mss=1460, step_ns=200_000)
    segs += cs.many_conversations(20, seed=seed)
    segs.sort(key=lambda s: s.ts_ns)
    return segs


def test_one_big_connection_spreads_over_tasks_by_bytes(spark, job, tmp_path):
    path = tmp_path / "one.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(_one_connection(9000)), 1))
    out = tmp_path / "out"
    summary = job.run(spark, [str(path), "--output", str(out), "--quiet", "--chunk-mb", "8",
                              "--no-summary"])
    tb = summary["range_task_bytes"]
    assert tb["tasks"] >= 3 and tb["max"] <= 2 * tb["mean"], tb
    _same_rows(_spark_rows(spark, str(out / "frames")), list(decode_paths([str(path)])))


def test_rotated_set_read_as_one_capture(spark, job, tmp_path):
    """tcpdump -C/-G: one capture in several files; connections carry on from one file into
    the next, so frames cut by a file boundary are whole and responses find their requests."""
    pk = cs.packets(_one_connection(3000, seed=2))
    cuts = [0, len(pk) // 3 + 1, 2 * len(pk) // 3 + 7, len(pk)]
    names = []
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        p = tmp_path / "set" / f"cap{2 - i}.pcap"         # names out of capture order
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(cs.write_pcap(pk[a:b], 1))
        names.append(p)
    whole = tmp_path / "whole.pcap"
    whole.write_bytes(cs.write_pcap(pk, 1))
    want = list(decode_paths([str(whole)]))
    local = list(decode_paths([str(tmp_path / "set")], one_capture=True))
    _same_rows(local, want, with_file=False)
    apart = list(decode_paths([str(tmp_path / "set")]))
    assert sum(1 for r in apart if r["error"]) > 0 or len(apart) != len(want)
    out = tmp_path / "out"
    job.run(spark, [str(tmp_path / "set"), "--output", str(out), "--quiet", "--one-capture",
                    "--chunk-mb", "8", "--no-summary"])
    _same_rows(_spark_rows(spark, str(out / "frames")), local)


def test_csv_is_rfc4180_with_remarks_holding_newlines_and_quotes(spark, job, tmp_path):
    """TOPIC_NOT_EXIST's remark holds a line break; a remark may hold quotes.  The CSV must read
    back with a standard reader (and the summary, which reads it back, must not fail)."""
    import pandas as pd     # the spark extra brings it
    frames = cs.sample_exchange(4)
    req = cs.RemotingCommand.request(105, {"topic": 'say "hi", ok'}, opaque=99, version=409)
    resp = req.create_response(17, remark='No topic route info: "say \\"hi\\""\nSee the FAQ,\r\nplease')
    frames += [(0, req.encode()), (1, resp.encode())]
    path = tmp_path / "q.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(cs.conversation(frames)), 1))
    src = [path, FIXTURES / "rmq49-mqadmin-topicRoute-notexist.pcap"]
    want = list(decode_paths([str(p) for p in src]))
    out = tmp_path / "csv"
    summary = job.run(spark, [*map(str, src), "--output", str(out), "--quiet", "--format", "csv"])
    sb = SummaryBuilder()
    sb.add_batch(rows_to_batch(want))
    local = sb.result()
    for k in ("frames", "requests", "responses", "error_responses", "unmatched_responses"):
        assert summary[k] == local[k], k
    files = sorted(p for p in (out / "frames").iterdir() if p.suffix == ".csv")
    got = []
    for p in files:
        with open(p, newline="", encoding="utf-8") as f:
            got += list(csv.DictReader(f))
        assert len(pd.read_csv(p)) == sum(1 for _ in csv.DictReader(open(p, newline="")))
    remarks = sorted(r["remark"] for r in got if r["remark"])
    assert remarks == sorted(r["remark"] for r in want if r["remark"])
    exts = [json.loads(r["ext_fields"]) for r in got if r["ext_fields"]]
    assert {"topic": 'say "hi", ok'} in exts


def test_json_output(spark, job, tmp_path):
    src = FIXTURES / "rmq49-broker-register-compressed.pcap"
    out = tmp_path / "json"
    job.run(spark, [str(src), "--output", str(out), "--quiet", "--format", "json", "--no-summary"])
    rows = [json.loads(line) for p in (out / "frames").iterdir() if p.suffix == ".json"
            for line in p.read_text().splitlines()]
    want = list(decode_paths([str(src)]))
    assert sorted(r["opaque"] for r in rows) == sorted(r["opaque"] for r in want)
    assert any(r["code_name"] == "REGISTER_BROKER" for r in rows)


def test_pure_python_engine_on_the_executors(spark, job, tmp_path):
    segs = cs.many_conversations(300, seed=9, damage=True)
    path = tmp_path / "p.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    out = tmp_path / "out"
    summary = job.run(spark, [str(path), "--output", str(out), "--quiet", "--engine", "python",
                              "--no-summary"])
    assert summary["engines"] == {"python": 1}
    _same_rows(_spark_rows(spark, str(out / "frames")), list(decode_paths([str(path)])))


def test_progress_counts_bytes_read_either_way(job):
    """The decoders read blocks into a reused buffer (readinto); progress counts those too."""
    class Progress:
        n = 0

        def add(self, k):
            self.n += k

    p = Progress()
    f = job._Counting(io.BytesIO(bytes(10_000)), p)
    buf = bytearray(4096)
    assert len(f.read(100)) == 100
    assert f.readinto(buf) == 4096 and f.readinto(memoryview(buf)) == 4096
    assert f.readinto(buf) == 1708 and f.readinto(buf) == 0
    assert p.n == 10_000


def test_progress_counts_bytes_while_tasks_run(spark, job):
    """Executors report the bytes they have read as they go (not when a task ends)."""
    display = job._ProgressDisplay(spark.sparkContext, job._Console(spark.sparkContext), 1000,
                                   interval=0.1)
    display.phase = "decoding"
    display.start()
    try:
        sender = job._Progress(display.addr, "d7")
        sender.add(250)
        sender.close()
        for _ in range(50):
            if display.seen.get("d7") == 250:
                break
            display.stop.wait(0.05)
        assert "read 0.0/0.0 MB 25%" in display.line()
    finally:
        display.stop.set()


def test_progress_ignores_datagrams_without_the_job_token_and_stays_bounded(spark, job):
    """The driver's progress port is reachable by anyone who can reach the driver: a datagram
    without this job's token changes nothing, and the table of tasks has a ceiling."""
    display = job._ProgressDisplay(spark.sparkContext, job._Console(spark.sparkContext), 1000)
    try:
        token = display.addr[2]
        display.count(b"d7 999")                       # the old, token-less form
        display.count(b"not-the-token d7 999")
        display.count(b"\xff\xfe garbage")
        assert display.seen == {}
        display.count(f"{token} d7 250".encode())
        assert display.seen == {"d7": 250}
        display.MAX_PROGRESS_KEYS = 3
        for i in range(10):
            display.count(f"{token} x{i} 1".encode())
        display.count(f"{token} d7 300".encode())      # a known task still advances
        assert len(display.seen) == 3 and display.seen["d7"] == 300
    finally:
        display.sock.close()


def test_spark_submit_is_quiet_and_reports_on_stderr(tmp_path):
    """Under spark-submit: no INFO lines, progress and notes on stderr, the summary on stdout."""
    from pyspark.find_spark_home import _find_spark_home
    submit = os.path.join(_find_spark_home(), "bin", "spark-submit")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=str(ROOT))
    out = subprocess.run([submit, "--master", "local[1]", str(ROOT / "tools" / "capture_job.py"),
                          str(FIXTURES / "rmq49-broker-register.pcap"), "--output",
                          str(tmp_path / "o")], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert " INFO " not in out.stderr and " INFO " not in out.stdout
    assert "[capture_job]" in out.stderr and "[capture_job]" not in out.stdout
    assert "request code" in out.stdout and "REGISTER_BROKER" in out.stdout


def test_output_of_an_earlier_run_is_kept_unless_overwrite(spark, job, tmp_path):
    """The job replaced DIR/frames silently (issue 30); now it refuses before any work, in one
    line, and --overwrite replaces it."""
    capture = FIXTURES / "rmq49-mqadmin-topicRoute.pcap"
    out = tmp_path / "out"
    job.run(spark, [str(capture), "--output", str(out), "--quiet", "--no-summary"])
    before = sorted(p.name for p in (out / "frames").iterdir())
    with pytest.raises(SystemExit) as refused:
        job.run(spark, [str(FIXTURES / "rmq49-mqadmin-clusterList.pcap"), "--output", str(out),
                        "--quiet", "--no-summary"])
    assert str(refused.value) == (f"capture_job: {out}/frames exists (an earlier run's frames): "
                                  "give --overwrite to replace them, or another --output")
    assert sorted(p.name for p in (out / "frames").iterdir()) == before
    job.run(spark, [str(FIXTURES / "rmq49-mqadmin-clusterList.pcap"), "--output", str(out),
                    "--quiet", "--no-summary", "--overwrite"])
    _same_rows(_spark_rows(spark, str(out / "frames")),
               list(decode_paths([str(FIXTURES / "rmq49-mqadmin-clusterList.pcap")])))


def test_a_file_beside_the_captures_is_skipped_as_rocketpy_capture_skips_it(spark, job, tmp_path):
    """A directory walk decodes what starts like a capture; README.md beside the captures was
    counted as a bad file by the job (and skipped by rocketpy-capture). A file named on the
    command line is still reported."""
    folder = tmp_path / "captures"
    folder.mkdir()
    (folder / "a.pcap").write_bytes((FIXTURES / "rmq49-mqadmin-topicRoute.pcap").read_bytes())
    (folder / "README.md").write_text("# captures of the test cluster\n")
    summary = job.run(spark, [str(folder), "--output", str(tmp_path / "out"), "--quiet"])
    assert summary["stats"]["files"] == 1 and "bad_files" not in summary["stats"], summary["stats"]
    assert summary["frames"] == len(list(decode_paths([str(folder)])))
    named = job.run(spark, [str(folder / "a.pcap"), str(folder / "README.md"), "--output",
                            str(tmp_path / "named"), "--quiet"])
    assert named["stats"]["bad_files"] == 1
