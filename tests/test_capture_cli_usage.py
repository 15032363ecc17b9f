"""``rocketpy-capture``'s usage errors are one line on stderr, status 2 (issue 30): a bad
``--format`` or ``--port`` printed argparse's five-line usage first, and ``--port 70000`` was
taken (no TCP segment has such a port: the filter silently matched nothing)."""
import pytest

from rocketpy.capture.cli import main

HINT = " (rocketpy-capture --help lists the options)"


@pytest.mark.parametrize("args, message", [
    (["--port", "70000"], "argument --port: '70000' is not a TCP port (1..65535)"),
    (["--port", "0"], "argument --port: '0' is not a TCP port (1..65535)"),
    (["--port", "x"], "argument --port: 'x' is not a TCP port (1..65535)"),
    (["--format", "xml"], "argument --format: invalid choice: 'xml' (choose from 'table', "
                          "'json', 'csv', 'parquet')"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_a_bad_option_is_one_line_and_status_2(capsys, tmp_path, args, message):
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path), *args])
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and out == ""
    assert err.splitlines() == [f"rocketpy-capture: {message}{HINT}"]


def test_ports_in_range_are_taken(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("not a capture")   # nothing to decode: status 2 anyway
    assert main([str(tmp_path), "--port", "1", "--port", "65535"]) == 2
    assert capsys.readouterr().err.startswith("rocketpy-capture: no capture files")
