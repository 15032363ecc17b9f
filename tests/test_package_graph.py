"""Layering: rocketpy's imports point one way, down the picture in ``docs/architecture.md``.

The picture is the one statement of the order: each of its rows names one or more packages
(``rocketpy.web | rocketpy.admin | rocketpy.broker``), the top row first. A module may import its
own package and the rows below its own; never a row above, never a sibling on its row. Every
import counts -- at the top of a module, inside a function (a lazy import), a name a package
offers through ``rocketpy._lazy.lazy_exports``, a literal ``importlib.import_module`` -- and no
cycle may run through them, between packages or between modules (STYLE.md, "Layers, one
direction"). A lazy import is fine where it only spares start-up time; it may not hide a cycle.

A fresh interpreter then imports every module and records every import executed while doing so,
each of which the static reading must have found."""
import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "architecture.md"
_ROW = re.compile(r"^(rocketpy[\w.]*(?: \| rocketpy[\w.]*)*)(?:\s|$)")


def picture_rows(text=None):
    """The rows of the architecture picture, top first: ``[("rocketpy.service",), ...]``."""
    text = PICTURE.read_text() if text is None else text
    block = text.split("<!-- package-graph -->", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    rows = []
    for line in block.splitlines():
        match = _ROW.match(line)
        if match:
            rows.append(tuple(match.group(1).split(" | ")))
    return rows


def module_files():
    """``{module name: path}`` of every module of the rocketpy package, the compiled extensions
    included (they import nothing of rocketpy)."""
    out = {}
    for path in sorted((ROOT / "rocketpy").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    for path in sorted((ROOT / "rocketpy").rglob("*")):
        # the C sources' directories (rocketpy/remoting/_kernel/) and what is built from them
        # (_kernel.cpython-311-x86_64-linux-gnu.so) are one module of that name
        source_dir = path.is_dir() and not (path / "__init__.py").exists() and \
            path.name != "__pycache__"
        if source_dir or path.suffix == ".so":
            parts = list(path.relative_to(ROOT).parts)
            parts[-1] = parts[-1].split(".")[0]
            out.setdefault(".".join(parts), path)
    return out


def _resolve(importer, is_package, level, name):
    if not level:
        return name
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _deepest(name, modules):
    """The module ``name`` names, or the deepest of its packages that is one."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def static_edges(modules):
    """``{(importer, imported)}``: every import of a rocketpy module by another (line numbers in
    the values: ``{edge: [(line, "lazy"|"top")]}``)."""
    edges = {}
    for module, path in modules.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        top = {id(node) for node in tree.body}
        top |= {id(n) for node in tree.body if isinstance(node, (ast.If, ast.Try))
                for n in ast.walk(node)}
        dicts = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)
                 and isinstance(node.value, ast.Dict)}

        def add(target, node, kind=None):
            target = _deepest(target, modules)
            if target and target != module:
                where = kind or ("top" if id(node) in top else "lazy")
                edges.setdefault((module, target), []).append((node.lineno, where))

        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name, node)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module)
                if not module.startswith(base + "."):   # (its own packages run first anyway)
                    add(base, node)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        add(full, node)
            elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                called = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if called == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
                    package = node.args[1].value if len(node.args) > 1 and isinstance(
                        node.args[1], ast.Constant) else None
                    target = node.args[0].value
                    if target.startswith(".") and package:
                        target = _resolve(package, True, len(target) - len(target.lstrip(".")),
                                          target.lstrip("."))
                    add(target, node, "lazy")
                elif called == "lazy_exports" and len(node.args) > 1:
                    table = node.args[1]
                    table = dicts.get(table.id) if isinstance(table, ast.Name) else table
                    for value in getattr(table, "values", ()):
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            relative = value.value
                            dots = len(relative) - len(relative.lstrip("."))
                            add(_resolve(module, is_package, dots, relative.lstrip(".")), node,
                                "lazy")
    return edges


def package_of(module, rows, modules):
    """The picture's package that holds ``module`` (the longest prefix that names it), or None.
    ``rocketpy`` holds only the root package and the modules directly in it."""
    best = None
    for row in rows:
        for package in row:
            if package == "rocketpy":
                root = module == "rocketpy" or (module.count(".") == 1
                                               and modules[module].name != "__init__.py")
                if root and best is None:
                    best = package
            elif (module == package or module.startswith(package + ".")) and (
                    best is None or len(package) > len(best)):
                best = package
    return best


def layering_violations(edges, rows, modules):
    """One line per import against the picture: upward, between siblings, or from a module the
    picture does not place."""
    level = {package: i for i, row in enumerate(rows) for package in row}
    out = []
    for (importer, imported), where in sorted(edges.items()):
        a, b = package_of(importer, rows, modules), package_of(imported, rows, modules)
        lines = ", ".join(f"line {line} ({kind})" for line, kind in where)
        if a is None or b is None:
            out.append(f"{importer} -> {imported}: {importer if a is None else imported} is in "
                       f"no row of the picture ({lines})")
        elif a != b and level[a] >= level[b]:
            how = "a sibling" if level[a] == level[b] else "a row above"
            out.append(f"{importer} -> {imported}: {b} is {how} of {a} ({lines})")
    return out


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


@pytest.fixture(scope="module")
def graph():
    modules = module_files()
    return modules, static_edges(modules), picture_rows()


def test_the_picture_names_every_package_and_only_real_ones(graph):
    modules, _, rows = graph
    named = [package for row in rows for package in row]
    assert len(named) == len(set(named)), "a package on two rows"
    assert [p for p in named if p not in modules] == []
    assert [m for m in modules if package_of(m, rows, modules) is None] == []
    assert {"rocketpy.remoting", "rocketpy.namesrv", "rocketpy.namesrv.processor",
            "rocketpy.controller", "rocketpy.transport", "rocketpy.web",
            "rocketpy.service"} <= set(named)


def test_every_import_points_down_the_picture(graph):
    modules, edges, rows = graph
    assert layering_violations(edges, rows, modules) == []


def test_no_import_cycle_lazy_imports_included(graph):
    _, edges, _ = graph
    assert cycles(edges) == []


def test_the_check_refuses_an_upward_a_sibling_and_a_cyclic_import(graph):
    """The checks can fail: the codec importing the transport, the web importing the admin,
    and two codec modules importing each other (one of them lazily)."""
    modules, edges, rows = graph
    bad = dict(edges)
    bad[("rocketpy.remoting.frame", "rocketpy.transport.protocol")] = [(1, "lazy")]
    bad[("rocketpy.web.peers", "rocketpy.admin.api")] = [(1, "top")]
    found = layering_violations(bad, rows, modules)
    assert any("rocketpy.remoting.frame -> rocketpy.transport.protocol" in line
               and "a row above" in line for line in found)
    assert any("rocketpy.web.peers -> rocketpy.admin.api" in line and "a sibling" in line
               for line in found)
    bad = dict(edges)
    bad[("rocketpy.remoting.codes", "rocketpy.remoting.frame")] = [(1, "lazy")]
    assert any("rocketpy.remoting.codes" in c and "rocketpy.remoting.frame" in c
               for c in cycles(bad))


def test_tools_and_the_plugin_import_only_what_the_picture_gives_them():
    """tools/ is the Spark job: it imports the capture package (and the root) only; the twistd
    plugin names the service layer's tap module only."""
    modules = module_files()
    for path, allowed in ((ROOT / "tools" / "capture_job.py", ("rocketpy.capture", "rocketpy")),):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                if name.split(".")[0] == "rocketpy":
                    target = _deepest(name, modules)
                    assert target == "rocketpy" or target.startswith(allowed[0]), (path, name)
    plugin = (ROOT / "twisted" / "plugins" / "rocketnamesrv.py").read_text()
    assert re.findall(r'"(rocketpy\.[\w.]+)"', plugin) == ["rocketpy.service.tap"]


RECORDER = textwrap.dedent("""
    import builtins, importlib, json, pkgutil, sys
    seen = set()
    real_import = builtins.__import__

    def recording(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        importer = (globals or {}).get("__name__", "")
        if importer.startswith("rocketpy"):
            if level:
                package = globals.get("__package__") or importer.rpartition(".")[0]
                name = importlib.util.resolve_name("." * level + (name or ""), package)
            targets = [name] + [f"{name}.{item}" for item in fromlist or () if item != "*"]
            for target in targets:
                if target.startswith("rocketpy") and target in sys.modules:
                    seen.add((importer, target))
        return module

    builtins.__import__ = recording
    import importlib.util
    import rocketpy
    names = ["rocketpy"] + [info.name for info in pkgutil.walk_packages(rocketpy.__path__, "rocketpy.")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:   # an optional extra that is not installed
            failed[name] = str(exc)
    print(json.dumps({"names": names, "failed": failed, "seen": sorted(seen)}))
""")


def test_every_module_imports_and_every_import_it_runs_is_seen(graph):
    modules, edges, _ = graph
    done = subprocess.run([sys.executable, "-c", RECORDER], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert set(found["names"]) == set(modules)
    assert found["failed"] == {}
    unseen = [(a, b) for a, b in map(tuple, found["seen"])
              if (a, _deepest(b, modules)) not in edges and _deepest(b, modules) != a
              and not a.startswith(_deepest(b, modules) + ".")]
    assert unseen == []
