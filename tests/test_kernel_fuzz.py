"""A fixed 3,000 inputs of bench/kernel_fuzz.py: the header kernel under AddressSanitizer on
mutated genuine frames and random bytes (issue 31's hostile numbers among them), each reading
compared with the Python codec's, every fifth one's cost in the codec counted and held to the
genuine frames' per byte, and the answer cache's compiled hit path on streams of them and of
cached requests, compared with the Python path. A count of inputs, never a time budget, so a
busy machine runs the same inputs."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = 3000


def test_a_fixed_kernel_fuzz_run_under_addresssanitizer_finds_nothing():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_fuzz.py"), "--inputs", str(INPUTS)],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert f"kernel_fuzz: {INPUTS} inputs under AddressSanitizer, no finding" in out.stdout
    read = int(out.stdout.split("no finding (")[1].split()[0])
    assert read > INPUTS // 10       # the kernel read many of them, not only refused them
    assert f"kernel_fuzz: cost of {INPUTS // 5} inputs in the pure-Python codec counted" in out.stdout
    compiled = int(out.stdout.split(" of them by HitPath")[0].rsplit(None, 1)[1])
    assert compiled > INPUTS // 10   # and the hit path answered many
