"""The request code tables of docs/request-codes.md, generated at doc-build time from the
protocol catalogue (``rocketpy.remoting.catalogue``), the profiles and the handlers' bindings:
nothing in these tables is written by hand.

* ``namesrv``: each code a NameServer release serves, per profile (served; answered
  REQUEST_CODE_NOT_SUPPORTED; or, where the release answers no unknown code, no answer), its
  handler, headers, bodies and who may send it;
* ``controller``: the same for the controller port;
* ``all``: every code of the catalogue, with the releases that define it and its source when it
  is not the Apache tags.

Run ``python3 docs/_ext/codetable.py`` to print the generated reStructuredText."""
from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

__all__ = ["render"]

_HANDLER_MODULES = ("rocketpy.namesrv.processor.kv", "rocketpy.namesrv.processor.broker",
                    "rocketpy.namesrv.processor.route", "rocketpy.namesrv.processor.topics",
                    "rocketpy.namesrv.processor.admin", "rocketpy.controller.processor")


def _list_table(header, rows, widths):
    out = [".. list-table::", "   :header-rows: 1", f"   :widths: {' '.join(map(str, widths))}", ""]
    for first, *rest in [header] + rows:
        out.append(f"   * - {first}")
        out.extend(f"     - {cell}" for cell in rest)
    out.append("")
    return out


def _handlers():
    """``{(server, code): "module.method"}`` of every method bound to a declaration."""
    catalogue = importlib.import_module("rocketpy.remoting.catalogue")
    found, sources = {}, []
    for name in _HANDLER_MODULES:
        module = importlib.import_module(name)
        sources.append(module.__file__)
        server = catalogue.CONTROLLER if name.startswith("rocketpy.controller") else \
            catalogue.NAMESRV
        short = name.rsplit(".", 1)[-1] if server == catalogue.NAMESRV else "processor"
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name:
                continue
            for attr, value in vars(cls).items():
                mark = getattr(value, "responds_to", None)
                if mark is not None:
                    found[(server, mark[0].code)] = f"``{short}.{attr}``"
    return found, sources


def _cell(value):
    return f"``{value}``" if value else "–"


def _access(decl):
    flags = [name.lower() for name in ("BROKER", "ADMIN")
             if decl.access is not None and decl.access & getattr(type(decl.access), name)]
    text = " + ".join(flags) or "any"
    return text + (f" (admin when ``{decl.admin_when}``)" if decl.admin_when else "")


def render_namesrv():
    catalogue = importlib.import_module("rocketpy.remoting.catalogue")
    profiles = importlib.import_module("rocketpy.namesrv.profile").PROFILES
    handlers, sources = _handlers()
    rows = []
    for decl in catalogue.served(catalogue.NAMESRV):
        cells = [str(decl.code), f"``{decl.name}``"]
        for profile in profiles:
            if decl.served_by(catalogue.NAMESRV, profile.release):
                cells.append("✓")
            else:
                cells.append("–" if profile.answer_unknown_code else "no answer")
        cells += [handlers.get((catalogue.NAMESRV, decl.code), "–"), _cell(decl.request),
                  _cell(decl.reply), _cell(decl.body), _cell(decl.reply_body), _access(decl),
                  str(decl.namesrv)]
        rows.append(cells)
    unknown = ["other", "unknown"] + ["–" if p.answer_unknown_code else "no answer"
                                      for p in profiles] + ["dispatcher"] + [" "] * 6
    header = ["code", "name", *[p.name for p in profiles], "handler", "request header",
              "reply header", "body", "reply body", "access", "NameServer releases"]
    widths = [5, 16, *[4] * len(profiles), 12, 12, 12, 9, 9, 6, 8]
    return "\n".join(_list_table(header, rows + [unknown], widths)), sources


def render_controller():
    catalogue = importlib.import_module("rocketpy.remoting.catalogue")
    handlers, sources = _handlers()
    rows = [[str(d.code), f"``{d.name}``", handlers.get((catalogue.CONTROLLER, d.code), "–"),
             _cell(d.request), _cell(d.reply), _cell(d.body), _cell(d.reply_body), _access(d),
             "leader only" if d.leader_only else "any controller", str(d.controller)]
            for d in catalogue.served(catalogue.CONTROLLER)]
    header = ["code", "name", "handler", "request header", "reply header", "body", "reply body",
              "access", "answered by", "controller releases"]
    return "\n".join(_list_table(header, rows, [5, 16, 12, 12, 12, 9, 9, 7, 8, 8])), sources


def render_all():
    catalogue = importlib.import_module("rocketpy.remoting.catalogue")
    rows = []
    for decl in catalogue.CATALOGUE:
        served = [server for server in (catalogue.NAMESRV, catalogue.CONTROLLER)
                  if decl.served_by(server)]
        name = f"``{decl.name}``" + (f" (alias of ``{decl.alias_of}``)" if decl.alias_of else "")
        rows.append([str(decl.code), name, str(decl.releases), ", ".join(served) or "–",
                     decl.source or " "])
    header = ["code", "name", "defined by", "served by rocketpy's", "source (if not the Apache "
              "tags)"]
    return "\n".join(_list_table(header, rows, [6, 30, 18, 12, 34])), [catalogue.__file__]


_RENDER = {"namesrv": render_namesrv, "controller": render_controller, "all": render_all}


def render(what):
    """``(rst, dependency paths)`` of one table: ``namesrv``, ``controller`` or ``all``."""
    return _RENDER[what]()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    for part in _RENDER:
        sys.stdout.write(render(part)[0] + "\n")
