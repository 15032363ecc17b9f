"""The in-process console script ``rocketpy-capture`` (rocketpy.capture.cli:main)."""
import json
from pathlib import Path

import pytest

from rocketpy.capture.cli import main
from rocketpy.capture.rows import COLUMNS
from extras import require

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pcap"
PROBE = FIXTURES / "rmq49-client-api-probe-rocketmq-serialize.pcap"


REQUIRED = {"ts", "src", "dst", "code", "code_name", "flag", "opaque", "is_response",
            "is_oneway", "serialize_type", "language", "version", "remark", "ext_fields",
            "body_len", "error", "request_code", "latency_ms"}


def test_json_lines(capsys):
    assert main([str(PROBE), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 51 and err == ""
    for r in rows:
        assert REQUIRED <= set(r) and list(r) == COLUMNS
        assert r["error"] is None and ":" in r["src"] and ":" in r["dst"]
    resp = [r for r in rows if r["is_response"]]
    assert all(r["request_code"] is not None and r["latency_ms"] > 0 for r in resp)
    req = next(r for r in rows if r["code"] == 105 and not r["is_response"])
    assert req["serialize_type"] == "ROCKETMQ" and req["language"] == "JAVA"
    assert req["version_name"] == "V4_9_8" and isinstance(req["ext_fields"], dict)
    assert req["ext_fields"]["topic"]


def test_json_with_summary_to_stderr(capsys):
    main([str(PROBE), "--format", "json", "--summary", "yes"])
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 51
    assert "9999" in err and "unanswered" in err and "top talkers" in err


def test_table_and_summary(capsys):
    assert main([str(FIXTURES / "rmq49-mqadmin-topicRoute-notexist.pcap")]) == 0
    out, _ = capsys.readouterr()
    assert "GET_ROUTEINFO_BY_TOPIC" in out and "TOPIC_NOT_EXIST <- GET_ROUTEINFO_BY_TOPIC" in out
    assert "105 GET_ROUTEINFO_BY_TOPIC" in out and "p50 ms" in out
    assert "105 GET_ROUTEINFO_BY_TOPIC -> 17 TOPIC_NOT_EXIST: 1" in out


def test_directory_port_filter_and_bad_files(tmp_path, capsys):
    (tmp_path / "a.pcap").write_bytes(PROBE.read_bytes())
    (tmp_path / "notes.txt").write_text("not a capture")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.pcap").write_bytes(PROBE.read_bytes())
    main([str(tmp_path), "--format", "json"])
    assert len(capsys.readouterr().out.splitlines()) == 102
    main([str(tmp_path / "*.pcap"), "--format", "json", "--port", "1"])
    assert capsys.readouterr().out == ""
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\xd4\xc3\xb2\xa1" + b"\0" * 3)
    assert main([str(bad), "--format", "json"]) == 1
    assert "bad.pcap" in capsys.readouterr().err


def test_csv_and_parquet(tmp_path, capsys):
    require("spark", "pyarrow")
    import pyarrow.parquet as pq
    out = tmp_path / "f.parquet"
    assert main([str(PROBE), "--format", "parquet", "-o", str(out), "--summary", "no",
                 "--plots", str(tmp_path / "plots")]) == 0
    t = pq.read_table(out)
    assert t.num_rows == 51 and t.column_names == COLUMNS
    assert str(t.schema.field("ext_fields").type).startswith("map<string, string")
    assert (tmp_path / "plots" / "latency.png").exists()
    csv_out = tmp_path / "f.csv"
    main([str(PROBE), "--format", "csv", "-o", str(csv_out), "--summary", "no"])
    import csv
    with open(csv_out, newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))
    assert lines[0] == COLUMNS and len(lines) == 52          # remarks may hold newlines
    ext = [row[COLUMNS.index("ext_fields")] for row in lines[1:]]
    assert any(json.loads(e) for e in ext if e)
