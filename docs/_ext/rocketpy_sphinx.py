"""Sphinx glue for the rocketpy documentation (docs only; never imported by rocketpy itself).

The site must build without warnings while the code base grows, so nothing here is a
hand-kept list that could drift:

* ``rocketpy-toctree``: a ``toctree`` that takes a preferred order, silently drops entries whose
  page does not exist (yet), and ends with a glob that picks up any other page. Pages written by
  other work streams (``server.md``, ``capture.md``, ``request-codes.md``) join when they appear.
* ``optdoc`` role: a link to a page when the page exists, plain text otherwise.
* ``rocketpy-automodules``: an ``automodule`` section for a package and every module under it,
  found on disk at build time, so a new module is documented without editing the docs.
* ``rocketpy-config-table``: the configuration reference, built from
  ``rocketpy.namesrv.config`` (and ``rocketpy.service.tap``, ``rocketpy.transport.tls``) when
  they exist, else from the Java key list in :mod:`configtable`.
* ``rocketpy-profile-table``: the version differences, from
  ``rocketpy.namesrv.profile.BehaviourProfile``.
* ``rocketpy-request-codes``: the request code tables, from the protocol catalogue
  (``rocketpy.remoting.catalogue``) and the handlers bound to it (:mod:`codetable`).
* ``rocketpy-java-map``: the Java-class-to-module table; every module it names must exist.
* A build warning (fatal under ``-W``) when a ``rocketpy`` subpackage has no ``docs/api`` page.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Parser as RSTParser
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from docutils.utils import new_document
from sphinx.directives.other import TocTree
from sphinx.roles import XRefRole
from sphinx.util import logging
from sphinx.util import docname_join
from sphinx.util.docutils import SphinxDirective
from sphinx.util.matching import patfilter
from sphinx.util.nodes import nested_parse_with_titles

import codetable
import configtable

logger = logging.getLogger(__name__)

_GLOB = re.compile(r".*[*?\[].*")
_EXPLICIT_TITLE = re.compile(r"^(.+?)\s*(?<!\x00)<(.*?)>$", re.DOTALL)


class RocketpyTocTree(TocTree):
    """``toctree`` whose missing entries vanish instead of warning.

    An explicit entry is kept only if its page exists; a glob entry only if it matches a page no
    earlier entry claimed (Sphinx warns on an empty glob, and the build runs with ``-W``).
    """

    def run(self):
        found = set(self.env.found_docs)
        found.discard(self.env.docname)
        claimed = set()
        kept = []
        for entry in self.content:
            entry = entry.strip()
            if not entry:
                continue
            explicit = _EXPLICIT_TITLE.match(entry)
            target = explicit.group(2) if explicit else entry
            for suffix in self.config.source_suffix:
                if target.endswith(suffix):
                    target = target[: -len(suffix)]
            target = docname_join(self.env.docname, target)  # relative to this page, as Sphinx
            if "glob" in self.options and not explicit and _GLOB.match(target):
                matches = set(patfilter(found - claimed, target))
                if matches:
                    claimed |= matches
                    kept.append(entry)
            elif target in found and target not in claimed:
                claimed.add(target)
                kept.append(entry)
        self.content = StringList(kept, source=self.content.source(0) if self.content else "")
        return super().run()


class OptionalDocRole(XRefRole):
    """``{optdoc}`text <page>```: a ``doc`` reference if ``page`` exists, else just ``text``.

    The reference is the standard domain's ``doc`` (what ``{doc}`` makes): with no domain, Sphinx
    resolves nothing and, the role not being a warning one, says nothing either, so every link
    came out as plain text. ``tests/test_docs.py`` checks each internal link of the built site.
    """

    def __init__(self):
        super().__init__(warn_dangling=True, innernodeclass=nodes.inline)

    def run(self):
        match = _EXPLICIT_TITLE.match(self.text)
        title, target = (match.group(1), match.group(2)) if match else (self.text, self.text)
        if docname_join(self.env.docname, target) not in self.env.found_docs:
            return [nodes.inline(self.rawtext, title)], []
        self.refdomain, self.reftype = "std", "doc"
        self.classes = ["xref", "std", "std-doc"]
        return self.create_xref_node()


def parse_rst(directive, text, source):
    """Nodes of reStructuredText ``text``, whatever the page's own markup (MyST or rst).

    Inside a MyST page, ``state.nested_parse`` would read the text as Markdown, so the text is
    parsed into a document of its own (as MyST's ``eval-rst`` does) and its nodes moved over.
    """
    host = directive.state.document
    doc = new_document(source, host.settings)
    doc.reporter = host.reporter
    doc["source"] = host["source"]
    RSTParser().parse(text, doc)
    for node in doc.findall(nodes.section):
        host.note_implicit_target(node, node)
    return list(doc.children)


def _skip_module(name):
    leaf = name.rsplit(".", 1)[-1]
    return leaf.startswith("_") or leaf.startswith("test")


def _walk(directory, prefix):
    """``[(dotted name, path)]`` of the modules under ``directory``, packages with or without
    ``__init__``. Found on disk, not imported: autodoc imports them later, with its mocks."""
    found = []
    for path in sorted(Path(directory).iterdir()):
        if path.suffix == ".py" and path.stem != "__init__" and not _skip_module(path.stem):
            found.append((f"{prefix}.{path.stem}", path))
        elif (path.is_dir() and path.name.isidentifier() and not _skip_module(path.name)
              and any(path.rglob("*.py"))):
            init = path / "__init__.py"
            found.append((f"{prefix}.{path.name}", init if init.exists() else None))
            found += _walk(path, f"{prefix}.{path.name}")
    return found


def package_modules(package_name, mock_imports=()):
    """``[(dotted name, path)]``: the package first, then every module under it, sorted.

    Empty when the package does not exist (yet).
    """
    from sphinx.ext.autodoc.mock import mock

    try:
        with mock(list(mock_imports)):
            package = importlib.import_module(package_name)
    except ModuleNotFoundError as exc:
        if exc.name and package_name.startswith(exc.name):
            return []
        raise
    found = {}
    for directory in getattr(package, "__path__", ()):
        found.update(_walk(directory, package_name))
    return [(package_name, getattr(package, "__file__", None))] + sorted(found.items())


class AutoModules(SphinxDirective):
    """``.. rocketpy-automodules:: rocketpy.remoting``: one section per module of a package."""

    required_arguments = 1
    option_spec = {"heading": directives.unchanged}

    def run(self):
        package_name = self.arguments[0]
        try:
            modules = package_modules(package_name, self.config.autodoc_mock_imports)
        except Exception as exc:  # an import error is a real problem: report, don't hide
            logger.warning("cannot import %s: %s", package_name, exc, location=self.get_location())
            return []
        if not modules:
            return [nodes.paragraph(text=f"{package_name} is not part of this checkout yet.")]
        lines = []
        for name, source in modules:
            if source:
                self.env.note_dependency(str(source))
            if name == package_name:
                # the package's own docstring; its re-exports are documented where defined
                lines += [f".. automodule:: {name}", "   :no-members:", ""]
                continue
            title = f"``{name}``"
            lines += [title, self.options.get("heading", "-")[0] * len(title), ""]
            lines += [f".. automodule:: {name}", "   :members:", "   :show-inheritance:", ""]
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=f"<{package_name}>"),
                                 container)
        return container.children


class ConfigTable(SphinxDirective):
    """``.. rocketpy-config-table:: [keys | properties | limits | bounds | restart | controller |
    twistd]``: configuration reference."""

    optional_arguments = 1
    _RENDER = {"keys": configtable.render, "properties": configtable.render_properties,
               "limits": configtable.render_limits, "bounds": configtable.render_bounds,
               "restart": configtable.render_restart, "controller": configtable.render_controller,
               "twistd": configtable.render_twistd_usage}

    def run(self):
        what = self.arguments[0] if self.arguments else "keys"
        if what not in self._RENDER:
            raise self.error(f"unknown table {what!r}; one of {', '.join(self._RENDER)}")
        rst, sources = self._RENDER[what]()
        if not rst:
            return [nodes.paragraph(text="(Not available in this checkout.)")]
        for source in sources:
            self.env.note_dependency(source)
        return parse_rst(self, rst, f"<rocketpy-config-table {what}>")


def profile_rows():
    """``(profile names, rows, source path)`` from ``rocketpy.namesrv.profile``, or None.

    One row per :class:`BehaviourProfile` field: its name, the ``#:`` comment above it, and its
    value in each ``PROFILE_*`` constant (ordered by server version).
    """
    import dataclasses
    import inspect

    try:
        module = importlib.import_module("rocketpy.namesrv.profile")
    except ModuleNotFoundError as exc:
        if exc.name and "rocketpy.namesrv.profile".startswith(exc.name):
            return None
        raise
    cls = getattr(module, "BehaviourProfile", None)
    if cls is None or not dataclasses.is_dataclass(cls):
        return None
    profiles = sorted({v for k, v in vars(module).items() if k.startswith("PROFILE_")},
                      key=lambda p: p.server_version)
    docs, comment = {}, []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            comment.append(stripped[2:].strip())
            continue
        match = re.match(r"([a-z_][a-z0-9_]*)\s*:", stripped)
        if match and comment:
            docs[match.group(1)] = " ".join(comment)
        comment = []
    rows = []
    for field in dataclasses.fields(cls):
        if field.name == "name":
            continue
        rows.append((field.name, docs.get(field.name, ""),
                     [getattr(p, field.name) for p in profiles]))
    return [p.name for p in profiles], rows, module.__file__


def _profile_value(value):
    import enum

    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "\u2014"
    if isinstance(value, enum.Enum):   # a Release: its tag
        value = value.value
    return f"``{value}``"


class ProfileTable(SphinxDirective):
    """``.. rocketpy-profile-table::``: the version differences rocketpy models, from the code."""

    def run(self):
        found = profile_rows()
        if found is None:
            return [nodes.paragraph(text="(rocketpy.namesrv.profile is not in this checkout.)")]
        names, rows, source = found
        self.env.note_dependency(source)
        lines = [".. list-table::", "   :header-rows: 1",
                 f"   :widths: 22 {' '.join(['8'] * len(names))} 46", "",
                 "   * - setting", *[f"     - {n}" for n in names], "     - meaning"]
        for field, doc, values in rows:
            lines.append(f"   * - ``{field}``")
            lines += [f"     - {_profile_value(v)}" for v in values]
            lines.append(f"     - {doc or ' '}")
        return parse_rst(self, "\n".join(lines), "<rocketpy-profile-table>")


def resolve_target(target, root):
    """True when ``target`` exists: a path under the repository, or a dotted Python name."""
    if "/" in target:
        return (Path(root) / target).exists()
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


class JavaMap(SphinxDirective):
    """``.. rocketpy-java-map::`` with lines ``JavaClass | target, target | note``.

    Renders the Java-class-to-rocketpy table of the architecture page and checks every target
    (a dotted Python name or a repository path) exists, so a renamed module fails the build.
    """

    has_content = True

    def run(self):
        root = Path(self.env.srcdir).parent
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 26 40 34", "",
                 "   * - Java", "     - rocketpy", "     - notes"]
        for number, raw in enumerate(self.content):
            if not raw.strip():
                continue
            java, targets, *note = [part.strip() for part in raw.split("|")]
            cells = []
            for target in filter(None, (t.strip() for t in targets.split(","))):
                if not resolve_target(target, root):
                    logger.warning("architecture map: %s (for %s) does not exist", target, java,
                                   location=(self.env.docname, self.content_offset + number + 1))
                cells.append(f"``{target}``" if "/" in target else f":py:obj:`{target}`")
            lines.append(f"   * - {java}")
            lines.append(f"     - {', '.join(cells) or ' '}")
            lines.append(f"     - {note[0] if note and note[0] else ' '}")
        return parse_rst(self, "\n".join(lines), "<rocketpy-java-map>")


def _check_api_pages(app, env, docnames):
    """Warn when a rocketpy subpackage has no API page (docs/api/<name>.rst)."""
    import rocketpy

    api = Path(app.srcdir) / "api"
    for directory in rocketpy.__path__:
        for path in sorted(Path(directory).iterdir()):
            if (path.is_dir() and path.name.isidentifier() and not _skip_module(path.name)
                    and any(path.rglob("*.py"))
                    and not any((api / f"{path.name}{ext}").exists() for ext in (".rst", ".md"))):
                logger.warning("rocketpy.%s has no API page: add docs/api/%s.rst containing "
                               "'.. rocketpy-automodules:: rocketpy.%s'",
                               path.name, path.name, path.name)


class RequestCodeTable(SphinxDirective):
    """``.. rocketpy-request-codes:: namesrv | controller | all``: a table of request codes,
    generated from the protocol catalogue."""

    required_arguments = 1

    def run(self):
        what = self.arguments[0]
        if what not in ("namesrv", "controller", "all"):
            raise self.error(f"unknown table {what!r}; one of namesrv, controller, all")
        rst, sources = codetable.render(what)
        for source in sources:
            self.env.note_dependency(source)
        return parse_rst(self, rst, f"<rocketpy-request-codes {what}>")


def _skip_enum_members(app, what, name, obj, skip, options):
    """Big enums (the code tables: hundreds of members) are documented as classes only."""
    import enum

    if what == "class" and isinstance(obj, enum.Enum) and len(type(obj).__members__) > 16:
        return True
    return None


def setup(app):
    app.add_directive("rocketpy-toctree", RocketpyTocTree)
    app.add_role("optdoc", OptionalDocRole())
    app.add_directive("rocketpy-automodules", AutoModules)
    app.add_directive("rocketpy-config-table", ConfigTable)
    app.add_directive("rocketpy-profile-table", ProfileTable)
    app.add_directive("rocketpy-java-map", JavaMap)
    app.add_directive("rocketpy-request-codes", RequestCodeTable)
    app.connect("env-before-read-docs", _check_api_pages)
    app.connect("autodoc-skip-member", _skip_enum_members)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
