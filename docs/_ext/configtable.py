"""The configuration reference of docs/configuration.md, generated at doc-build time.

Source of truth, in order:

1. ``rocketpy.namesrv.config`` when it imports: every field of its ``NamesrvConfig`` and
   ``NettyServerConfig`` (dataclasses, or plain classes with instance attributes), with the
   default the code really has. The Java key comes from the module's own mapping when it has
   one, else from the snake_case -> camelCase rule the module promises.
2. Otherwise the Java key list below, so the page still builds (and says where it came from).

``JAVA_KEYS`` is the key list of Java ``NamesrvConfig`` and ``NettyServerConfig`` in the tags
rocketmq-all-4.9.8 through 5.3.3 (read from the Apache source; facts, not code), with Java's
defaults and notes; it supplies the list of Java keys rocketpy does not have. Which releases
have a key is stated once, in ``rocketpy.namesrv.config`` (``JAVA_RELEASES``): the "Java"
column is read from there.

Run ``python3 docs/_ext/configtable.py`` to print the generated reStructuredText.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import os
import re
import sys
from pathlib import Path

__all__ = ["JAVA_KEYS", "JavaKey", "render", "snake_to_camel", "camel_to_snake"]


@dataclasses.dataclass(frozen=True)
class JavaKey:
    key: str
    java_class: str  # NamesrvConfig or NettyServerConfig
    default: str     # as a properties value, for the newest version that has the key
    note: str = ""


_N, _S = "NamesrvConfig", "NettyServerConfig"

JAVA_KEYS = (
    JavaKey("rocketmqHome", _N, "system property rocketmq.home.dir, else $ROCKETMQ_HOME",
            "Java refuses to start without it; rocketpy only reports it"),
    JavaKey("kvConfigPath", _N, "~/namesrv/kvConfig.json"),
    JavaKey("configStorePath", _N, "~/namesrv/namesrv.properties",
            "set to the -c file when one is given"),
    JavaKey("productEnvName", _N, "center"),
    JavaKey("clusterTest", _N, "false"),
    JavaKey("orderMessageEnable", _N, "false"),
    JavaKey("returnOrderTopicConfigToBroker", _N, "true"),
    JavaKey("clientRequestThreadPoolNums", _N, "8"),
    JavaKey("defaultThreadPoolNums", _N, "16"),
    JavaKey("clientRequestThreadPoolQueueCapacity", _N, "50000"),
    JavaKey("defaultThreadPoolQueueCapacity", _N, "10000"),
    JavaKey("scanNotActiveBrokerInterval", _N, "5000", "milliseconds; 4.9 scans every 10 s"),
    JavaKey("unRegisterBrokerQueueCapacity", _N, "3000"),
    JavaKey("supportActingMaster", _N, "false"),
    JavaKey("enableAllTopicList", _N, "true"),
    JavaKey("enableTopicList", _N, "true"),
    JavaKey("notifyMinBrokerIdChanged", _N, "false"),
    JavaKey("enableControllerInNamesrv", _N, "false"),
    JavaKey("needWaitForService", _N, "false"),
    JavaKey("waitSecondsForService", _N, "45"),
    JavaKey("deleteTopicWithBrokerRegistration", _N, "false"),
    JavaKey("configBlackList", _N, "configBlackList;configStorePath;kvConfigPath",
            "keys UPDATE_NAMESRV_CONFIG may not change"),
    JavaKey("bindAddress", _S, "0.0.0.0"),
    JavaKey("listenPort", _S, "9876",
            "the class says 8888 (4.9) / 0 (5.x); the NameServer's startup sets 9876"),
    JavaKey("serverWorkerThreads", _S, "8"),
    JavaKey("serverCallbackExecutorThreads", _S, "0"),
    JavaKey("serverSelectorThreads", _S, "3"),
    JavaKey("serverOnewaySemaphoreValue", _S, "256"),
    JavaKey("serverAsyncSemaphoreValue", _S, "64"),
    JavaKey("serverChannelMaxIdleTimeSeconds", _S, "120",
            "a connection with no traffic either way for this long is closed"),
    JavaKey("serverSocketSndBufSize", _S, "0",
            "0 = OS default; system property com.rocketmq.remoting.socket.sndbuf.size"),
    JavaKey("serverSocketRcvBufSize", _S, "0",
            "0 = OS default; system property com.rocketmq.remoting.socket.rcvbuf.size"),
    JavaKey("writeBufferHighWaterMark", _S, "0",
            "system property com.rocketmq.remoting.write.buffer.high.water.mark"),
    JavaKey("writeBufferLowWaterMark", _S, "0",
            "system property com.rocketmq.remoting.write.buffer.low.water.mark"),
    JavaKey("serverSocketBacklog", _S, "1024",
            "system property com.rocketmq.remoting.socket.backlog"),
    JavaKey("serverNettyWorkerGroupEnable", _S, "true"),
    JavaKey("serverPooledByteBufAllocatorEnable", _S, "true"),
    JavaKey("enableShutdownGracefully", _S, "false"),
    JavaKey("shutdownWaitTimeSeconds", _S, "30"),
    JavaKey("useEpollNativeSelector", _S, "false"),
)

CONFIG_MODULE = "rocketpy.namesrv.config"
PROFILE_MODULE = "rocketpy.namesrv.profile"
POLICY_MODULE = "rocketpy.namesrv.policy"
CONFIG_CLASSES = ("NamesrvConfig", "NettyServerConfig")
_JAVA_TYPES = {bool: "boolean", int: "int", str: "String"}


def snake_to_camel(name):
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def camel_to_snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _optional_import(name):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            return None
        raise


def _java_value(value):
    """A Python default as a Java properties value, with the home directory shown as ``~``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return ""
    text = str(value)
    home = os.path.expanduser("~")
    if home not in ("", "/", "~") and text.startswith(home + os.sep):
        text = "~" + text[len(home):]
    return text


def _defaults(cls):
    """``{attr: default}`` of a fresh instance, built with no environment influence."""
    saved = os.environ.pop("ROCKETMQ_HOME", None)
    try:
        instance = cls()
    finally:
        if saved is not None:
            os.environ["ROCKETMQ_HOME"] = saved
    if dataclasses.is_dataclass(instance):
        return instance, {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}
    return instance, {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def _readers(package_dir, attrs):
    """``{attr: [module, ...]}``: which rocketpy modules mention each setting's attribute."""
    found = {attr: [] for attr in attrs}
    if not attrs:
        return found, []
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, attrs)) + r")\b")
    sources = []
    for path in sorted(Path(package_dir).rglob("*.py")):
        sources.append(str(path))
        module = ".".join(path.relative_to(Path(package_dir).parent).with_suffix("").parts)
        module = module.removesuffix(".__init__").removeprefix("rocketpy.")
        for attr in set(pattern.findall(path.read_text(encoding="utf-8", errors="replace"))):
            found[attr].append(module)
    return found, sources


def code_rows():
    """``(rows, dependency paths)`` from ``rocketpy.namesrv.config``, or None without it."""
    module = _optional_import(CONFIG_MODULE)
    if module is None:
        return None
    classes = [getattr(module, name, None) for name in CONFIG_CLASSES]
    if not all(inspect.isclass(c) for c in classes):
        return None
    profiles = []
    profile_module = _optional_import(PROFILE_MODULE)
    if profile_module is not None:
        profiles = sorted({v for k, v in vars(profile_module).items()
                           if k.startswith("PROFILE_") and hasattr(v, "name")},
                          key=lambda p: p.server_version if hasattr(p, "server_version") else 0)
    policies_of = getattr(_optional_import(POLICY_MODULE), "as_policies", lambda p: p)
    to_attr = getattr(module, "attr_name", camel_to_snake)
    rows = []
    for cls in classes:
        instance, defaults = _defaults(cls)
        keys = instance.keys() if hasattr(instance, "keys") else [snake_to_camel(a) for a in defaults]
        reported = {}
        for profile in profiles:
            try:
                reported[profile.name] = set(instance.keys(policies_of(profile)))
            except TypeError:
                break
        for key in keys:
            attr = to_attr(key)
            default = defaults.get(attr)
            rows.append({"class": cls.__name__, "key": key, "attr": attr,
                         "type": _JAVA_TYPES.get(type(default), "String"),
                         "default": _java_value(default),
                         "profiles": [p for p in reported if key in reported[p]]})
    package_dir = Path(module.__file__).resolve().parents[1]
    readers, sources = _readers(package_dir, [r["attr"] for r in rows])
    for row in rows:
        row["readers"] = sorted(readers.get(row["attr"], []))
    return rows, sources, [p.name for p in profiles]


def _cell(text):
    return " ".join(str(text).split()) or " "


def _literal(text):
    text = _cell(text)
    return f"``{text}``" if text.strip() else " "


def _escape(text):
    return re.sub(r"([*`|_\\])", r"\\\1", _cell(text))


def _list_table(header, rows, widths):
    out = [".. list-table::", "   :header-rows: 1", f"   :widths: {' '.join(map(str, widths))}", ""]
    for row in [header] + rows:
        first, *rest = row
        out.append(f"   * - {first}")
        out.extend(f"     - {cell}" for cell in rest)
    out.append("")
    return out


def _java_fallback():
    lines = [".. note::", "",
             f"   ``{CONFIG_MODULE}`` is not in this checkout, so these tables list the Java "
             "keys (``NamesrvConfig`` and ``NettyServerConfig``, 4.9.8 to 5.3.3) with Java's "
             "defaults.", ""]
    for cls in CONFIG_CLASSES:
        rows = [[_literal(k.key), _literal(k.default), _escape(k.note)]
                for k in JAVA_KEYS if k.java_class == cls]
        lines += [f"``{cls}``", "~" * (len(cls) + 4), ""]
        lines += _list_table(["key", "default", "notes"], rows, [30, 30, 40])
    return lines


def render():
    """``(rst, dependency_paths)`` for the configuration tables."""
    found = code_rows()
    if found is None:
        return "\n".join(_java_fallback()), []
    rows, sources, profile_names = found
    java = {k.key: k for k in JAVA_KEYS}
    releases = getattr(importlib.import_module(CONFIG_MODULE), "JAVA_RELEASES", {})
    lines = []
    for cls in CONFIG_CLASSES:
        table = []
        for row in (r for r in rows if r["class"] == cls):
            known = java.get(row["key"])
            default = _literal(row["default"]) if row["default"] else "(unset)"
            if known and row["key"] == "rocketmqHome":
                default = "``$ROCKETMQ_HOME``"
            used = ", ".join(f"``{m}``" for m in row["readers"]) or "\u2014"
            cells = [f"``{row['key']}``", row["type"], default,
                     _cell(releases[row["key"]]) if known and row["key"] in releases
                     else "rocketpy only"]
            if profile_names:
                cells.append(", ".join(row["profiles"]) or "none")
            cells += [used, _escape(known.note) if known and known.note else " "]
            table.append(cells)
        header = ["key", "type", "default", "Java", *(["profiles"] if profile_names else []),
                  "used in", "notes"]
        widths = [24, 7, 18, 10, *([8] if profile_names else []), 15, 24]
        lines += [f"``{cls}``", "~" * (len(cls) + 4), ""]
        lines += _list_table(header, table, widths)
    present = {r["key"] for r in rows}
    missing = [k for k in JAVA_KEYS if k.key not in present]
    if missing:
        lines += ["Java keys rocketpy does not have", "~" * 32, ""]
        lines += [f"* ``{k.key}`` ({k.java_class})" for k in missing]
        lines.append("")
    return "\n".join(lines), sources


#: Java ``TlsSystemConfig`` keys the server side reads: default and meaning (facts from the Java
#: source, cross-checked at build time against ``rocketpy.transport.tls.TLS_KEYS``).
TLS_KEY_NOTES = {
    "tls.server.mode": ("permissive", "``disabled``, ``permissive`` (a first byte 0x16 starts "
                        "TLS, anything else is plain) or ``enforcing``"),
    "tls.config.file": ("/etc/rocketmq/tls.properties", "a properties file whose ``tls.*`` keys "
                        "override these (except the mode)"),
    "tls.test.mode.enable": ("true", "use a throw-away self-signed certificate"),
    "tls.server.need.client.auth": ("none", "``none``, ``optional`` or ``require``"),
    "tls.server.keyPath": ("", "PEM private key (when test mode is off)"),
    "tls.server.keyPassword": ("", "password of that key"),
    "tls.server.certPath": ("", "PEM certificate chain (when test mode is off)"),
    "tls.server.authClient": ("false", "verify client certificates against the trust file"),
    "tls.server.trustCertPath": ("", "PEM CA certificates for client certificates"),
}


def render_properties():
    """``(rst, dependency paths)``: the ``-D`` properties that are not config keys."""
    tls = _optional_import("rocketpy.transport.tls")
    tap = _optional_import("rocketpy.service.tap")
    frame = _optional_import("rocketpy.remoting.frame")
    rows, sources = [], []
    if tap is not None and frame is not None and hasattr(tap, "FRAME_MAX_LENGTH_KEY"):
        sources += [tap.__file__]
        rows.append([f"``{tap.FRAME_MAX_LENGTH_KEY}``",
                     f"``{frame.DEFAULT_MAX_FRAME_LENGTH}``",
                     "largest frame accepted, length field included; a larger one closes the "
                     "connection"])
    if tls is not None and hasattr(tls, "TLS_KEYS"):
        sources += [tls.__file__]
        for key in tls.TLS_KEYS:
            default, note = TLS_KEY_NOTES.get(key, ("", "see :mod:`rocketpy.transport.tls`"))
            rows.append([f"``{key}``", _literal(default) if default else "(unset)", note])
    if not rows:
        return "", sources
    return "\n".join(_list_table(["property", "default", "meaning"], rows, [30, 25, 45])), sources


def _render_key_tables(tables, header):
    """``(rst, dependency paths)``: one table of rocketpy's own ``(key, attribute, default,
    meaning)`` settings, from each ``(module, attribute)`` of ``tables`` that imports."""
    rows, sources = [], []
    for module_name, attr in tables:
        module = _optional_import(module_name)
        if module is None or not hasattr(module, attr):
            continue
        sources.append(module.__file__)
        rows += [[f"``{key}``", _literal(str(default)), meaning]
                 for key, _attr, default, meaning in getattr(module, attr)]
    if not rows:
        return "", sources
    return "\n".join(_list_table(["key", "default", header], rows, [30, 15, 55])), sources


def render_limits():
    """``(rst, dependency paths)``: rocketpy's transport limits (``rocketpy.transport.limits``)."""
    return _render_key_tables([("rocketpy.transport.limits", "LIMIT_KEYS")],
                              "meaning (0 = no limit)")


#: rocketpy's bounds on what the wire may store (issue 12): ``(module, attribute)`` of each table
BOUND_TABLES = (("rocketpy.namesrv.kvconfig", "KV_LIMIT_KEYS"),
                ("rocketpy.namesrv.route_bounds", "ROUTE_BOUND_KEYS"))


def render_bounds():
    """``(rst, dependency paths)``: rocketpy's bounds on the KV store and the route state."""
    return _render_key_tables(BOUND_TABLES, "meaning (0 = no bound)")


def render_restart():
    """``(rst, dependency paths)``: the warm restart's keys
    (``rocketpy.service.routesnapshot.ROUTE_SNAPSHOT_KEYS``)."""
    return _render_key_tables([("rocketpy.service.routesnapshot", "ROUTE_SNAPSHOT_KEYS")],
                              "meaning")


def render_controller():
    """``(rst, dependency paths)``: the controller's ``ControllerConfig`` keys
    (``rocketpy.controller.config.CONTROLLER_SPECS``: key, type, default, meaning)."""
    module = _optional_import("rocketpy.controller.config")
    if module is None or not hasattr(module, "CONTROLLER_SPECS"):
        return "", []
    rows = [[f"``{key}``", _literal(_java_value(default)), _escape(meaning)]
            for key, _kind, default, meaning in module.CONTROLLER_SPECS]
    return "\n".join(_list_table(["key", "default", "meaning"], rows, [30, 20, 50])), [module.__file__]


def render_twistd_usage():
    """``(rst, dependency paths)``: what ``twistd rocketnamesrv --help`` prints."""
    tap = _optional_import("rocketpy.service.tap")
    if tap is None or not hasattr(tap, "Options"):
        return "", []
    usage = tap.Options().getUsage(width=88).rstrip()
    lines = [".. code-block:: text", ""]
    lines += [f"   {line}".rstrip() for line in usage.splitlines()]
    return "\n".join(lines + [""]), [tap.__file__]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    for part in (render, render_properties, render_limits, render_bounds, render_restart,
                 render_controller, render_twistd_usage):
        sys.stdout.write(part()[0] + "\n")
