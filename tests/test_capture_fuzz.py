"""A few seconds of bench/capture_fuzz.py: the compiled capture decoder under AddressSanitizer on
random and mutated captures (the long run is the benchmark script's; its input count goes in the
issue notes).  Any out-of-bounds access aborts the run; any exception but a CaptureFormatError
is a finding; every 10th input must decode as the pure-Python reference decodes it."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_short_fuzz_run_under_addresssanitizer_finds_nothing(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "capture_fuzz.py"), "--seconds", "8",
                          "--differential", "10", "--keep", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "under AddressSanitizer, no finding" in out.stdout
    n = int(out.stdout.split("capture_fuzz: ")[1].split()[0])
    assert n > 100
