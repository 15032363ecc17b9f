"""Layering: the NameServer's version differences live in its policies, and its wire names in the
codec (STYLE.md, "One source of truth").

* Outside ``rocketpy/namesrv/profile.py`` (the facts) and ``rocketpy/namesrv/policy.py`` (which
  turns them into policy objects), no module reads a ``BehaviourProfile`` field: handlers,
  tables and services ask their policy, they never test a profile.
* The NameServer (state, processors), the transport and the services write no wire name by
  hand: every header key and body property is spelled once, in the codec's typed headers and
  bodies, and reached through them.
"""
import ast
import dataclasses
from pathlib import Path

from rocketpy.namesrv.profile import BehaviourProfile
from rocketpy.remoting import bodies, headers

ROOT = Path(__file__).resolve().parents[1]
POLICY_MODULES = {"rocketpy/namesrv/profile.py", "rocketpy/namesrv/policy.py"}
#: what a profile says, its fields and what it derives from them (``name`` and ``release`` are too
#: common words to tell a read apart; policies carry both)
PROFILE_FIELDS = ({f.name for f in dataclasses.fields(BehaviourProfile)}
                  | {k for k, v in vars(BehaviourProfile).items() if isinstance(v, property)}) - {
    "name", "release"}
#: header keys and body properties the codec declares, less plain English words that name other
#: things as well (a KV ``key``, a config ``namespace``, the web option ``peers``...)
WIRE_NAMES = ({spec.wire for cls in vars(headers).values()
               if isinstance(cls, type) and issubclass(cls, headers.CommandHeader)
               for spec in cls.FIELDS}
              | {prop.wire for cls in vars(bodies).values()
                 if isinstance(cls, type) and issubclass(cls, bodies.JsonBean)
                 for prop in cls.PROPS}) - {
    "topic", "key", "value", "namespace", "cluster", "table", "keys", "scope", "epoch", "dirty",
    "order", "perm", "gen", "bname", "counter", "timestamp", "changed", "peers"}
#: the layers that must reach the wire through the codec
WIRE_FREE = ("rocketpy/namesrv", "rocketpy/transport", "rocketpy/service")


def profile_reads(source):
    """``(line, field)`` of each read of a profile field."""
    return sorted((node.lineno, node.attr) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute) and node.attr in PROFILE_FIELDS)


def wire_literals(source):
    """``(line, name)`` of each string literal that is a wire name."""
    return sorted((node.lineno, node.value) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Constant) and node.value in WIRE_NAMES)


def _modules(*prefixes):
    for path in sorted(ROOT.glob("rocketpy/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(prefixes):
            yield rel, path.read_text()


def test_no_module_outside_the_policies_reads_the_profile():
    offenders = [f"{rel}:{line} .{field}" for rel, source in _modules("rocketpy/")
                 if rel not in POLICY_MODULES for line, field in profile_reads(source)]
    assert offenders == []


def test_the_policies_do_read_it():
    assert len(PROFILE_FIELDS) > 20
    read = {field for _, field in profile_reads((ROOT / "rocketpy/namesrv/policy.py").read_text())}
    assert read == PROFILE_FIELDS, PROFILE_FIELDS - read    # every fact reaches some policy


def test_no_wire_name_written_by_hand_outside_the_codec():
    assert {"brokerName", "brokerAddrs", "queueDatas", "minBrokerId", "wipeTopicCount"} <= WIRE_NAMES
    offenders = [f"{rel}:{line} {name!r}" for rel, source in _modules(*WIRE_FREE)
                 for line, name in wire_literals(source)]
    assert offenders == []


def test_no_test_double_in_production_code():
    """``twisted.internet.testing`` (MemoryReactor, StringTransport) is for tests only."""
    offenders = [f"{rel}:{node.lineno}" for rel, source in _modules("rocketpy/")
                 for node in ast.walk(ast.parse(source))
                 if isinstance(node, (ast.Import, ast.ImportFrom))
                 and any(name.startswith("twisted.internet.testing") for name in
                         ([node.module or ""] if isinstance(node, ast.ImportFrom)
                          else [a.name for a in node.names]))]
    assert offenders == []


def test_the_checks_catch_what_they_forbid():
    assert profile_reads("if proc.profile.v5_registration:\n    x = p.server_version\n") == [
        (1, "v5_registration"), (2, "server_version")]
    assert wire_literals('ext = {"minBrokerId": str(m), "offlineBrokerAddr": a}\n') == [
        (1, "minBrokerId"), (1, "offlineBrokerAddr")]
    assert wire_literals('"""brokerName in a docstring"""\nx = "topic"\n') == []
