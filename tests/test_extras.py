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


def test_readme_keeps_two_setup_commands_and_says_what_they_need():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    assert _command_lines(setup) == ["python3 -m pip install . && twistd -n rocketnamesrv",
                                     f"{extras.INSTALL_COMMAND} && python3 -m pytest"]
    prose = " ".join(setup.split())
    assert "virtual environment" in prose and "externally-managed-environment" in prose
    assert "root" in prose and "network" in prose


def _fake_bin(tmp_path, **scripts):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("dirname", "cat"):
        (bin_dir / name).symlink_to(subprocess.run(["which", name], capture_output=True,
                                                    text=True).stdout.strip())
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _install(bin_dir):
    return subprocess.run(["/bin/bash", str(TESTS / "install.sh")], capture_output=True, text=True,
                          env={"PATH": str(bin_dir), "HOME": str(bin_dir)}, timeout=60)


def test_install_script_names_what_it_needs_before_touching_anything(tmp_path):
    """One line naming the problem: a system-managed Python (pip would refuse), or no root and
    no sudo to apt-get the missing Debian packages. Nothing is installed either way."""
    managed = _install(_fake_bin(tmp_path / "a", python3="cat >/dev/null; exit 1"))
    assert managed.returncode == 1
    assert "externally-managed-environment" in managed.stderr
    assert "python3 -m venv .venv" in managed.stderr
    no_root = _install(_fake_bin(tmp_path / "b", python3="cat >/dev/null; exit 0", id="echo 1000"))
    assert no_root.returncode == 1
    assert no_root.stderr.strip() == (
        "tests/install.sh: installing tshark chromium etcd-server prometheus with apt-get "
        "needs root: run it as root or install them first")


def test_install_script_says_what_it_does_one_line_per_step(tmp_path):
    """Each long step (apt-get, pip, npm) is announced before it runs: the script was silent
    for minutes."""
    ran = tmp_path / "ran"
    log = f"echo \"$0 $*\" >>{ran}"
    proc = _install(_fake_bin(tmp_path, python3=f"cat >/dev/null; {log}", id="echo 0",
                              npm=log, **{"apt-get": log}))
    assert proc.returncode == 0, proc.stderr
    steps = proc.stdout.splitlines()
    assert [line.split(" with ")[0] for line in steps] == [
        "tests/install.sh: installing tshark chromium etcd-server prometheus",
        "tests/install.sh: installing rocketpy",
        "tests/install.sh: installing the JS client (tests/clients)",
        "tests/install.sh: done"]
    assert len(ran.read_text().splitlines()) == 5  # apt-get twice, python3 twice, npm once
