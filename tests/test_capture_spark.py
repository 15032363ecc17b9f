"""The Spark job end to end (tools/capture_job.py) on a local[2] session shared by this module:
the genuine fixtures (whole-file path) and a generated capture split into byte ranges (range
path with the per-connection shuffle) must give exactly the rows of the in-process decoder."""
import json
import os
import sys
from pathlib import Path

import pytest

from rocketpy.capture import decode_paths, Stats
from rocketpy.capture.summary import SummaryBuilder

import capture_synth as cs

from extras import require

require("spark", "pyspark", "pyarrow", "pandas", "matplotlib")   # else these fail, never skip
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"
KEY = ["file", "ts_ns", "src", "dst", "conn", "stream_offset", "frame_len", "serialize_type",
       "code", "code_name", "flag", "opaque", "is_response", "is_oneway", "language", "version",
       "version_name", "remark", "body_len", "body_summary", "request_code",
       "request_code_name", "latency_ms", "error"]


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("rocketpy-capture-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def job():
    sys.path.insert(0, str(ROOT / "tools"))
    import capture_job
    yield capture_job
    sys.path.remove(str(ROOT / "tools"))


def _key(r):
    return tuple(round(r[k], 6) if k == "latency_ms" and r[k] is not None else r[k] for k in KEY) \
        + (tuple(sorted((r["ext_fields"] or {}).items())),)


def _spark_rows(spark, path):
    return [r.asDict() for r in spark.read.parquet(path).collect()]


def test_fixtures_whole_file_path(spark, job, tmp_path, capsys):
    out = tmp_path / "out"
    summary = job.run(spark, [str(FIXTURES), "--output", str(out), "--quiet", "--plots"])
    got = _spark_rows(spark, str(out / "frames"))
    stats = Stats()
    want = list(decode_paths([str(FIXTURES)], stats=stats))
    assert sorted(map(_key, got)) == sorted(map(_key, want))
    sb = SummaryBuilder()
    for r in want:
        sb.add(r)
    local = sb.result(stats)
    for k in ("frames", "requests", "oneway", "responses", "error_responses",
              "unanswered_requests", "unmatched_responses"):
        assert summary[k] == local[k], k
    assert summary["top_talkers"] == local["top_talkers"]
    assert set(summary["latency_ms"]) == set(local["latency_ms"])
    text = capsys.readouterr().out
    assert "request code" in text and "105 GET_ROUTEINFO_BY_TOPIC" in text
    assert json.loads((out / "summary.json").read_text())["frames"] == len(want)
    assert (out / "plots" / "latency.png").stat().st_size > 1000
    assert (out / "plots" / "rate.png").stat().st_size > 1000


def test_split_capture_matches_in_process(spark, job, tmp_path):
    # ~13 MB with reordering and retransmissions, read in 8 MiB ranges: packets of one
    # connection land in different ranges and meet again in the shuffle
    segs = cs.many_conversations(1200, seed=5, damage=True)
    path = tmp_path / "big.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(segs), 1))
    assert path.stat().st_size > 12 << 20
    out = tmp_path / "out"
    job.run(spark, [str(path), "--output", str(out), "--quiet", "--chunk-mb", "8",
                    "--no-summary"])
    got = _spark_rows(spark, str(out / "frames"))
    want = list(decode_paths([str(path)]))
    assert len(want) > 10000 and not any(r["error"] for r in want)
    assert sorted(map(_key, got)) == sorted(map(_key, want))


def test_json_and_csv_output(spark, job, tmp_path):
    src = FIXTURES / "rmq49-broker-register-compressed.pcap"
    for fmt in ("json", "csv"):
        out = tmp_path / fmt
        job.run(spark, [str(src), "--output", str(out), "--quiet", "--format", fmt, "--no-summary"])
        files = [p for p in (out / "frames").iterdir() if p.suffix == f".{fmt}"]
        text = "".join(p.read_text() for p in files)
        assert "REGISTER_BROKER" in text and "broker-a" in text
