"""The output formats are one table (rocketpy.capture.formats.FORMATS) that both front ends
read: the console script offers and writes every format of it, the Spark job those marked for
Spark, each with a Spark writer it must have; and the console script imports only what the
chosen format needs (counted in sys.modules of a fresh interpreter, never timed)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocketpy.capture import cli, formats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import capture_job  # noqa: E402

FIXTURES = ROOT.parent / "shared" / "fixtures" / "pcap"
PROBE = FIXTURES / "rmq49-client-api-probe-rocketmq-serialize.pcap"


def _choices(parser, dest="format"):
    return next(a.choices for a in parser._actions if a.dest == dest)


def test_both_front_ends_offer_the_table_s_formats():
    assert list(_choices(cli.build_parser())) == list(formats.FORMATS)
    assert list(_choices(capture_job.build_parser())) == [
        f.name for f in formats.FORMATS.values() if f.spark]
    assert set(capture_job.SPARK_WRITERS) == {f.name for f in formats.FORMATS.values() if f.spark}


class _CountingWriter(formats.JsonWriter):
    """A format of one line per batch: its row count."""

    def _write(self, out, part):
        out.write(f"{part.num_rows} rows\n".encode())


def test_a_new_format_is_one_table_entry(monkeypatch, capsys):
    table = dict(formats.FORMATS, counts=formats.Format("counts", "rows per batch",
                                                        _CountingWriter, spark=False))
    monkeypatch.setattr(formats, "FORMATS", table)
    assert "counts" in _choices(cli.build_parser())
    assert cli.main([str(PROBE), "--format", "counts"]) == 0
    out, err = capsys.readouterr()
    assert out == "51 rows\n" and err == ""      # a data format on stdout: no summary


def test_the_job_refuses_a_spark_format_it_has_no_writer_for():
    table = dict(formats.FORMATS, avro=formats.Format("avro", "Apache Avro", _CountingWriter))
    with pytest.raises(RuntimeError, match="offers avro to Spark, but the job has no Spark "
                                           "writer for it"):
        capture_job.spark_formats(table)
    assert capture_job.spark_formats(table, dict(capture_job.SPARK_WRITERS, avro=None))[-1] == "avro"


def test_a_format_that_needs_an_output_file_says_so_in_one_line(capsys):
    assert cli.main([str(PROBE), "--format", "parquet"]) == 2
    assert capsys.readouterr().err == "rocketpy-capture: --format parquet needs --output FILE\n"


IMPORTED = """
import json, sys
from rocketpy.capture.cli import main
status = main(sys.argv[1:])
heavy = ("pyarrow", "numpy", "pandas", "rocketpy.capture.decoder")
print(json.dumps([status, sorted({m.split(".")[0] if m.split(".")[0] != "rocketpy" else m
                                  for m in sys.modules if m.startswith(heavy)})]))
"""


def _imported(*args, tmp_path):
    """(exit status, the heavy modules imported) of the console script run on ``args``."""
    out = subprocess.run([sys.executable, "-c", IMPORTED, str(PROBE), *args],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("args", [[], ["--format", "json"], ["--format", "table", "--summary", "no"],
                                  ["--format", "json", "-o", "frames.jsonl"]])
def test_formats_without_arrow_start_without_pyarrow_or_numpy(tmp_path, args):
    """JSON Lines and the table are written, and the summary counted, from the compiled core's
    buffers: pyarrow, numpy and the reference decoder stay unimported (the codec comes in for
    the bodies' summaries)."""
    assert _imported(*args, tmp_path=tmp_path) == [0, []]


@pytest.mark.parametrize("args", [["--format", "parquet", "-o", "frames.parquet"],
                                  ["--format", "csv", "--summary", "no"],
                                  ["--format", "json", "--errors-only"]])
def test_formats_with_arrow_import_it(tmp_path, args):
    """(The counts above can fail: what needs pyarrow imports it.)"""
    status, heavy = _imported(*args, tmp_path=tmp_path)
    assert status == 0 and {"numpy", "pyarrow"} <= set(heavy)
    assert "rocketpy.capture.decoder" not in heavy
