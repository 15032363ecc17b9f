"""Test helper and pytest plugin: test modules that need an optional extra say so.

A test module that needs a package of one of ``setup.cfg``'s extras calls :func:`require` (at
import, or in a test). Without the package its tests fail -- never skip -- with the command that
installs the extra; the rest of the suite still runs (a plain ``import pyspark`` would abort the
whole collection, so a ``pip install -e '.[test]'`` ran zero tests).

Loaded for the suite by ``tests/conftest.py``; ``python3 -m pytest -p extras`` loads it elsewhere.
"""
import configparser
import importlib.util
from pathlib import Path

import pytest

__all__ = ["require", "MissingExtra", "extras_of_setup_cfg", "INSTALL_COMMAND"]

ROOT = Path(__file__).resolve().parents[1]
#: The README's command, which installs every extra the suite needs (and the system packages).
INSTALL_COMMAND = "bash tests/install.sh"


def extras_of_setup_cfg():
    """``{extra: [requirement, ...]}`` as ``setup.cfg`` declares them."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    section = parser["options.extras_require"]
    return {name: [line.strip() for line in section[name].splitlines() if line.strip()]
            for name in section}


class MissingExtra(Exception):
    """Raised by :func:`require`; the plugin turns it into a failing test, not a crash."""

    def __init__(self, extra, missing):
        requirements = extras_of_setup_cfg().get(extra)
        if requirements is None:
            raise ValueError(f"setup.cfg has no extra {extra!r}")
        super().__init__(
            f"needs the {extra!r} extra ({', '.join(requirements)}); missing: "
            f"{', '.join(missing)}. Install it with `{INSTALL_COMMAND}` (everything the tests "
            f"need) or `python3 -m pip install -e '.[{extra}]' --config-settings "
            "editable_mode=compat`.")
        self.extra = extra
        self.missing = missing


def require(extra, *modules):
    """Check that ``modules`` (top-level or dotted names) are importable, else raise
    :class:`MissingExtra` naming ``extra``, the ``setup.cfg`` extra that provides them."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:          # a dotted name whose parent is missing
            found = False
        if not found:
            missing.append(name)
    if missing:
        raise MissingExtra(extra, missing)


class _NeedsExtra(pytest.Item):
    """What a test module that could not import its extra collects to: one failing test."""

    def __init__(self, *, message, **kwargs):
        super().__init__(**kwargs)
        self.message = message

    def runtest(self):
        pytest.fail(self.message, pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}: {self.name}"


class _Module(pytest.Module):
    def collect(self):
        try:
            return super().collect()
        except MissingExtra as exc:
            item = _NeedsExtra.from_parent(self, name=f"needs-{exc.extra}-extra",
                                           message=f"{self.path.name} {exc}")
            if any(line.split(":")[0].strip() == exc.extra
                   for line in self.config.getini("markers")):
                item.add_marker(exc.extra)     # `-m "not spark"` deselects it like the tests
            return [item]


def pytest_pycollect_makemodule(module_path, parent):
    return _Module.from_parent(parent, path=module_path)
