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
    require("spark", "matplotlib")     # (also in the plots extra)
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


@pytest.mark.parametrize("row_group_rows", [1 << 17, 1000])
def test_parquet_reads_back_as_the_decoded_frames(tmp_path, monkeypatch, row_group_rows):
    """The writer's options (dictionaries, statistics, row groups of several batches) change
    the file's layout, not what reads back; it stays snappy, with ``ts`` statistics."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rocketpy.capture import arrow
    from rocketpy.capture.engine import decode_batches
    monkeypatch.setattr(arrow, "ROW_GROUP_ROWS", row_group_rows)
    out = tmp_path / "f.parquet"
    assert main([str(FIXTURES), "--format", "parquet", "-o", str(out), "--summary", "no"]) == 0
    batches = list(decode_batches([str(FIXTURES)]))
    want = pa.Table.from_batches(batches, arrow.ARROW_SCHEMA)
    got = pq.read_table(out)
    assert got.schema == arrow.ARROW_SCHEMA and got.equals(want)
    meta = pq.ParquetFile(out).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert all(n >= row_group_rows for n in sizes[:-1]) and len(sizes) < len(batches) / 4
    ts = [meta.row_group(i).column(COLUMNS.index("ts")) for i in range(len(sizes))]
    assert {c.compression for c in ts} == {"SNAPPY"}
    assert min(c.statistics.min for c in ts) == min(want["ts"].to_pylist())
    assert max(c.statistics.max for c in ts) == max(want["ts"].to_pylist())


def test_parquet_of_no_frames_is_an_empty_file_of_the_schema(tmp_path):
    import pyarrow.parquet as pq
    from rocketpy.capture.arrow import ARROW_SCHEMA
    out = tmp_path / "f.parquet"
    assert main([str(PROBE), "--format", "parquet", "-o", str(out), "--port", "1"]) == 0
    t = pq.read_table(out)
    assert t.num_rows == 0 and t.schema == ARROW_SCHEMA


# ---- first-run friction and the details of issue 11 --------------------------------------------

import subprocess  # noqa: E402
import sys  # noqa: E402

import capture_synth as cs  # noqa: E402
from rocketpy.remoting import RemotingCommand  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args, stdin=None, pre=""):
    """The console script in a fresh interpreter (``pre``: Python run before it)."""
    code = pre + "import sys\nfrom rocketpy.capture.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_missing_input_is_one_line():
    out = _cli("/nonexistent/capture.pcap", "--format", "json")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == "rocketpy-capture: no such file or directory: /nonexistent/capture.pcap\n"


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_closed_pipe_is_one_line(fmt):
    """``rocketpy-capture ... | head -1``: the reader goes away; one line, no traceback (the
    table's summary comes after the frames, on the same stdout)."""
    code = "import sys\nfrom rocketpy.capture.cli import main\nsys.exit(main(sys.argv[1:]))"
    p = subprocess.Popen([sys.executable, "-c", code, str(FIXTURES), "--format", fmt],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0
    assert (json.loads(first)["file"].endswith(".pcap") if fmt == "json"
            else b" > " in first)
    assert len(err.splitlines()) == 1 and err.startswith("rocketpy-capture: output closed")


def test_plots_without_matplotlib_name_the_extra(tmp_path):
    block = ("import sys\nclass B:\n    def find_spec(self, n, p=None, t=None):\n"
             "        if n.split('.')[0] == 'matplotlib': raise ImportError(n)\n"
             "sys.meta_path.insert(0, B())\nimport importlib.util\n"
             "importlib.util.find_spec = lambda n, *a: None if n == 'matplotlib' else "
             "importlib.machinery.PathFinder.find_spec(n)\n")
    out = _cli(PROBE, "--plots", tmp_path / "p", pre=block)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("rocketpy-capture: --plots needs matplotlib, from the plots extra: "
                          "pip install -e '.[plots]' in the rocketpy checkout (the PyPI package "
                          "named rocketpy is another project)\n")


def test_a_plots_directory_that_cannot_be_made_fails_before_decoding(tmp_path):
    afile = tmp_path / "plots"
    afile.write_text("not a directory")
    out = _cli(PROBE, "--plots", afile)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"rocketpy-capture: cannot write plots to {afile}: File exists\n"


def test_closed_standard_output_is_one_line():
    """``rocketpy-capture x.pcap >&-``: Python starts with no sys.stdout at all."""
    code = "import sys\nfrom rocketpy.capture.cli import main\nsys.exit(main(sys.argv[1:]))"
    out = subprocess.run(["bash", "-c", 'exec "$0" -c "$1" "$2" >&-', sys.executable, code,
                          str(PROBE)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr == "rocketpy-capture: standard output is closed: give --output FILE\n"


def test_a_full_output_device_is_a_write_error_in_one_line():
    out = _cli(PROBE, "--format", "json", "-o", "/dev/full")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == ("rocketpy-capture: cannot write /dev/full: "
                          "No space left on device\n")


@pytest.mark.parametrize("engine_name", ["native", "python"])
def test_a_capture_cut_inside_a_record_is_named_in_one_line(tmp_path, engine_name):
    cut = tmp_path / "cut.pcap"
    data = PROBE.read_bytes()
    cut.write_bytes(data[:len(data) - 7])
    out = _cli(cut, "--format", "json", pre=f"import os\nos.environ['ROCKETPY_CAPTURE_ENGINE'] = "
                                            f"'{engine_name}'\n")
    assert out.returncode == 0 and len(out.stdout.splitlines()) > 10
    assert out.stderr == (f"rocketpy-capture: {cut}: the file ends inside a packet record (cut "
                          "short, or still being written): decoded up to its last whole packet\n")


def test_without_pyarrow_the_cli_says_so_in_one_line():
    block = ("import sys\nclass B:\n    def find_spec(self, n, p=None, t=None):\n"
             "        if n.split('.')[0] == 'pyarrow': raise ImportError('No module named ' + n)\n"
             "sys.meta_path.insert(0, B())\n")
    out = _cli(PROBE, "--format", "parquet", "-o", "/tmp/never.parquet", pre=block)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith("rocketpy-capture: needs pyarrow, a dependency of rocketpy")


def _responses(tmp_path, codes_):
    frames = []
    for i, code in enumerate(codes_):
        req = RemotingCommand.request(11, {"topic": "T"}, opaque=i + 1, version=409)
        frames += [(0, req.encode()), (1, req.create_response(code, remark="r").encode())]
    path = tmp_path / "pull.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(cs.conversation(frames)), 1))
    return path


def test_pull_statuses_are_not_error_responses(tmp_path, capsys):
    # PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED, SUBSCRIPTION_NOT_LATEST are what
    # a consumer's pull normally gets; SYSTEM_BUSY (2) is an error
    path = _responses(tmp_path, [0, 19, 20, 21, 25, 19, 2])
    assert main([str(path), "--format", "json", "--summary", "yes"]) == 0
    err = capsys.readouterr().err
    assert "11 PULL_MESSAGE -> 2 SYSTEM_BUSY: 1" in err
    assert "PULL_NOT_FOUND:" not in err and "PULL_OFFSET_MOVED:" not in err
    assert err.count("11 PULL_MESSAGE -> ") == 1


def test_an_empty_directory_is_one_line_and_a_failure(tmp_path):
    (tmp_path / "notes.txt").write_text("not a capture\n")   # exited 0 silently
    out = _cli(tmp_path, "--format", "json")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == f"rocketpy-capture: no capture files (pcap, pcapng, gzip) in {tmp_path}\n"


def test_rate_plot_x_axis_is_a_date_not_epoch_seconds():
    from rocketpy.capture.plots import rate_axis_label
    assert rate_axis_label(1700000000.0) == "seconds since 2023-11-14 22:13:20 UTC"


def test_rate_plot_shows_idle_seconds_as_zero():
    from rocketpy.capture.plots import rate_series
    xs, ys = rate_series({100: 4, 101: 2, 105: 1}, 100, 105, 1.0)
    assert xs == [0, 1, 2, 3, 4, 5] and ys == [4, 2, 0, 0, 0, 1]
    xs, ys = rate_series({0: 10, 2999: 5}, 0, 2999, 1.0)      # long: at most 1000 buckets
    assert len(xs) <= 1000 and ys[0] == 10 / 3 and ys[-1] == 5 / 3 and sum(ys[1:-1]) == 0


def test_csv_is_rfc4180(tmp_path):
    import csv
    req = RemotingCommand.request(105, {"topic": 'a "b", c'}, opaque=1, version=409)
    resp = req.create_response(17, remark='line one "quoted"\nline two, and more')
    path = tmp_path / "q.pcap"
    path.write_bytes(cs.write_pcap(cs.packets(cs.conversation([(0, req.encode()),
                                                                (1, resp.encode())])), 1))
    out = tmp_path / "f.csv"
    assert main([str(path), "--format", "csv", "-o", str(out)]) == 0
    raw = out.read_text()
    assert '"line one ""quoted""\nline two, and more"' in raw          # quotes doubled
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[1]["remark"] == 'line one "quoted"\nline two, and more'
    assert json.loads(rows[0]["ext_fields"]) == {"topic": 'a "b", c'}
    assert rows[1]["is_response"] == "true" and rows[1]["request_code"] == "105"


def test_one_capture_reads_a_rotated_set_as_one(tmp_path, capsys):
    frames = cs.sample_exchange(40)
    pk = cs.packets(cs.conversation(frames, mss=700))
    for i, (a, b) in enumerate([(0, 37), (37, 81), (81, len(pk))]):
        (tmp_path / f"rot{9 - i}.pcap").write_bytes(cs.write_pcap(pk[a:b], 1))
    assert main([str(tmp_path), "--format", "json", "--one-capture"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(frames) and not any(r["error"] for r in rows)
    assert all(r["request_code"] is not None for r in rows if r["is_response"])
    assert main([str(tmp_path), "--format", "json"]) == 0            # file by file: frames lost
    apart = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (len(apart) < len(frames) or any(r["error"] for r in apart)
            or any(r["request_code"] is None for r in apart if r["is_response"]))
