"""A fixed few hundred inputs of bench/capture_fuzz.py: the compiled capture decoder under
AddressSanitizer on random and mutated captures (the long run is the benchmark script's; its input
count goes in the issue notes).  Any out-of-bounds access aborts the run; any exception but a
CaptureFormatError is a finding; every 10th input must decode as the pure-Python reference decodes
it, at a cost per byte (counted: tests/costmeter.py) near the genuine captures'.  The run is a
count of inputs, never a time budget, so a busy machine runs the same inputs."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = 200


def test_a_fixed_fuzz_run_under_addresssanitizer_finds_nothing(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "capture_fuzz.py"),
                          "--inputs", str(INPUTS), "--differential", "10", "--keep", str(tmp_path)],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "under AddressSanitizer, no finding" in out.stdout
    n = int(out.stdout.split("capture_fuzz: ")[1].split()[0])
    assert n == INPUTS
    checked = int(out.stdout.split(" also checked against")[0].rsplit(None, 1)[1])
    not_captures = int(out.stdout.split(" more not a capture at all")[0].rsplit(None, 1)[1])
    # every 10th input was compared, unless its file header was refused before any decoding
    assert checked + not_captures == INPUTS // 10 and checked >= INPUTS // 20
    assert f"the pure-Python decoder's cost of those {checked} counted" in out.stdout
