"""A test module that needs an extra says so (tests/extras.py), and a missing extra fails its tests
without stopping the rest of the suite; the documented test commands install every extra the
tests name."""
import os
import re
import subprocess
import sys
from pathlib import Path

import extras

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _run_pytest(directory, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "extras", "-p", "no:cacheprovider",
                           "-q", "-o", "markers=spark: needs Spark", *args, str(directory)],
                          capture_output=True, text=True, env=env, cwd=directory, timeout=120)


def test_a_missing_extra_fails_its_module_and_the_rest_runs(tmp_path):
    (tmp_path / "test_needs.py").write_text(
        "from extras import require\n"
        "require('spark', 'rocketpy_no_such_module')\n"
        "def test_never_runs():\n    pass\n")
    (tmp_path / "test_plain.py").write_text("def test_runs():\n    pass\n")
    proc = _run_pytest(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out and "Interrupted" not in out, out
    assert "test_needs.py needs the 'spark' extra (pyspark" in out, out
    assert "missing: rocketpy_no_such_module" in out and "bash tests/install.sh" in out, out
    deselected = _run_pytest(tmp_path, "-m", "not spark")
    assert "1 passed, 1 deselected" in deselected.stdout, deselected.stdout


def test_require_inside_a_test_names_the_extra(tmp_path):
    (tmp_path / "test_inner.py").write_text(
        "from extras import require\n"
        "def test_parquet():\n    require('clients', 'rocketpy_no_such_module.sub')\n")
    proc = _run_pytest(tmp_path)
    assert "1 failed" in proc.stdout and "needs the 'clients' extra (rocketmq==0.4.4" in proc.stdout


def _required_extras():
    names = set()
    for path in TESTS.glob("*.py"):
        names.update(re.findall(r"""\brequire\(\s*["'](\w+)["']""", path.read_text()))
    return names


def _command_lines(text):
    """The lines of ``text``'s code blocks (fenced, or indented four spaces after a blank line)."""
    lines, fenced, indented = [], False, False
    previous = ""
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced:
            lines.append(line)
        elif line.startswith("    ") and (indented or not previous.strip()):
            indented = True
            lines.append(line)
        else:
            indented = False
        previous = line
    return [line.strip() for line in lines]


def _documented_test_commands():
    """Every command of the README and docs/ that runs the test suite."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line in _command_lines(path.read_text()):
            if re.search(r"(^|&& )python3 -m pytest\b|(^|&& )pytest\b", line):
                found.append((path.name, line))
    return found


def test_documented_test_commands_install_every_extra_the_tests_need():
    needed = _required_extras() | {"test"}
    assert {"spark", "clients"} <= needed        # the modules above do say so
    assert needed <= set(extras.extras_of_setup_cfg())
    install = (TESTS / "install.sh").read_text()
    installed = set(re.search(r"-e '\.\[([\w,]+)\]'", install).group(1).split(","))
    assert needed <= installed, f"tests/install.sh installs {installed}, the tests need {needed}"
    commands = _documented_test_commands()
    assert any(name == "README.md" for name, _ in commands)
    for name, line in commands:
        assert extras.INSTALL_COMMAND in line, f"{name}: {line!r} does not install the extras"

