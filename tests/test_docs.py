"""The documentation site: it builds with Sphinx without a single warning, and says what the code does.

Runs ``python -m sphinx -W --keep-going`` in a subprocess, into a temporary directory (nothing is
written into docs/). Sphinx and myst-parser come with the ``docs`` extra; without them these
tests fail rather than skip, because a docs site nobody builds is a docs site that rots.
"""
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
OPTIONAL_PAGES = ("server", "capture", "request-codes")
BUILD_TIMEOUT = 180


def _require_sphinx():
    missing = [m for m in ("sphinx", "myst_parser") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: python3 -m pip install -e '.[docs]'")


def _build(srcdir, outdir):
    _require_sphinx()
    outdir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(outdir / "doctrees"), str(srcdir), str(outdir / "html")]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=env,
                          cwd=outdir)
    return proc, outdir / "html"


def _text(path):
    raw = path.read_text(encoding="utf-8")
    raw = re.sub(r"<script.*?</script>|<style.*?</style>", " ", raw, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The real docs/ tree, built once for every test here."""
    proc, out = _build(DOCS, tmp_path_factory.mktemp("docs"))
    assert proc.returncode == 0 and "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, (
        f"sphinx-build failed (exit {proc.returncode}):\n{proc.stderr}\n{proc.stdout[-2000:]}")
    return out


def test_site_builds_without_warnings(site):
    assert (site / "index.html").is_file()
    for page in ("quickstart", "architecture", "protocol", "configuration", "api/index"):
        assert (site / f"{page}.html").is_file(), page


def _toctree(index_html):
    """The HTML of the index page's table of contents (not the page's prose links)."""
    text = index_html.read_text(encoding="utf-8")
    match = re.search(r'<div class="toctree-wrapper.*?</div>', text, re.S)
    assert match, "no toctree on the index page"
    return match.group(0)


def test_every_page_is_in_the_toctree(site):
    """Any .md page anyone adds to docs/ is reachable from the index (the glob)."""
    toc = _toctree(site / "index.html")
    for page in sorted(DOCS.glob("*.md")):
        if page.stem != "index":
            assert f'href="{page.stem}.html"' in toc, page.name
    assert 'href="api/index.html"' in toc


def _rocketpy_modules():
    names = []
    for path in sorted((ROOT / "rocketpy").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts) or len(parts) < 2:
            continue
        names.append(".".join(parts))
    return names


def test_api_reference_covers_every_module(site):
    modindex = _text(site / "py-modindex.html")
    for name in _rocketpy_modules():
        assert name in modindex, f"{name} is missing from the API reference"


def test_configuration_page_lists_every_key_from_the_code(site):
    page = _text(site / "configuration.html")
    config = importlib.import_module("rocketpy.namesrv.config")
    keys = config.NamesrvConfig().keys() + config.NettyServerConfig().keys()
    assert len(keys) > 30
    for key in keys:
        assert re.search(rf"\b{re.escape(key)}\b", page), key
    assert "is not in this checkout" not in page  # built from the code, not the Java fallback


def test_java_key_table_agrees_with_the_code():
    """docs/_ext/configtable.JAVA_KEYS (read from the Java source) names rocketpy's keys; each
    profile reports the keys whose releases (``config.JAVA_RELEASES``, the page's "Java" column)
    hold its release: 7 + 14 in 4.9.8, 18 + 15 in 5.0.0, 22 + 18 in 5.3.3."""
    config = importlib.import_module("rocketpy.namesrv.config")
    profile = importlib.import_module("rocketpy.namesrv.profile")
    configtable = _configtable()
    as_policies = importlib.import_module("rocketpy.namesrv.policy").as_policies
    assert {k.key for k in configtable.JAVA_KEYS} == set(config.JAVA_RELEASES)
    for name, count in (("PROFILE_49", 21), ("PROFILE_50", 33), ("PROFILE_53", 40)):
        p = getattr(profile, name)
        keys = set(config.java_keys(as_policies(p)))
        assert keys == {k for k, r in config.JAVA_RELEASES.items() if p.release in r}, name
        assert len(keys) == count, name


def _configtable():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import configtable
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    return configtable


def test_tls_table_agrees_with_the_code():
    from rocketpy.transport import tls
    notes = _configtable().TLS_KEY_NOTES
    assert set(notes) == set(tls.TLS_KEYS)
    defaults = tls.TlsSettings.from_properties({})
    attrs = {"tls.server.mode": defaults.mode.value, "tls.config.file": defaults.config_file,
             "tls.test.mode.enable": defaults.test_mode,
             "tls.server.need.client.auth": defaults.need_client_auth,
             "tls.server.keyPath": defaults.key_path, "tls.server.keyPassword": defaults.key_password,
             "tls.server.certPath": defaults.cert_path, "tls.server.authClient": defaults.auth_client,
             "tls.server.trustCertPath": defaults.trust_cert_path}
    for key, value in attrs.items():
        shown = notes[key][0]
        expected = "" if value is None else str(value).lower() if isinstance(value, bool) else value
        assert shown == expected, key


def test_defaults_are_shown_without_the_builders_home(site):
    page = _text(site / "configuration.html")
    assert "~/namesrv/kvConfig.json" in page
    home = str(Path.home())
    if home not in ("/", ""):
        assert f"{home}/namesrv" not in page


def test_protocol_page_shows_real_frames(site):
    page = _text(site / "protocol.html")
    # the captured ROCKETMQ header of rmq49-mqadmin-rocketmq-serialize-topicRoute.pcap
    assert "00 00 00 6d" in page and "01 99" in page
    assert '{0:"127.0.0.1:30911"}' in page      # fastjson's unquoted numeric key
    assert "heartbeat" in page.lower()


def test_builds_without_the_optional_pages_and_picks_up_new_ones(tmp_path):
    """Pages of other work streams may be absent; any new page joins the toctree by itself.

    A copy of docs/ without the optional pages, with stub API pages (so it is quick), plus one
    new page: the build must stay warning-free and list the new page.
    """
    src = tmp_path / "src"
    docs = src / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("_build", "__pycache__"))
    for entry in ("rocketpy", "twisted", "tools", "ops"):  # what the pages point at
        if (ROOT / entry).exists():
            (src / entry).symlink_to(ROOT / entry, target_is_directory=True)
    for name in OPTIONAL_PAGES:
        for page in docs.glob(f"{name}.*"):
            page.unlink()
    (docs / "zz-extra.md").write_text("# An extra page\n\nAdded later.\n", encoding="utf-8")
    for page in (docs / "api").glob("*.rst"):  # stubs instead of autodoc: keeps this build quick
        if page.stem != "index":
            page.write_text(f"{page.stem}\n{'=' * len(page.stem)}\n", encoding="utf-8")
    proc, out = _build(docs, tmp_path / "out")
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    toc = _toctree(out / "index.html")
    assert 'href="zz-extra.html"' in toc
    for name in OPTIONAL_PAGES:
        assert f'href="{name}.html"' not in toc
    protocol = _text(out / "protocol.html")
    assert "request code page" in protocol  # the optional link degrades to text


def _ids(page, cache={}):
    if page not in cache:
        text = page.read_text(encoding="utf-8")
        cache[page] = set(re.findall(r'\b(?:id|name)="([^"]+)"', text))
    return cache[page]


def test_every_internal_link_resolves(site):
    """Every relative link of every built page (prose, toctree, API, viewcode) reaches a file,
    and its #fragment an id there. Sphinx does not warn about all of them (a role without a
    domain rendered every {optdoc} link as plain text, silently)."""
    from urllib.parse import unquote
    checked, broken = 0, []
    for page in sorted(site.rglob("*.html")):
        for href in re.findall(r'<a\s[^>]*href="([^"]*)"', page.read_text(encoding="utf-8")):
            href = html.unescape(href)
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|//", href):
                continue                                  # http:, mailto: ...: not ours
            path, _, fragment = href.partition("#")
            target = (page.parent / unquote(path)).resolve() if path else page
            checked += 1
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {href} (no such file)")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in _ids(target):
                broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    assert checked > 1000
    assert not broken, "\n".join(broken[:30])


def test_cross_references_render_as_links(site):
    """Each {doc}/{optdoc} reference of a page, to a page that exists, is a link in its body."""
    role = re.compile(r"\{(?:opt)?doc\}`(?:[^`<]*<)?([^`>]+)>?`")
    seen = 0
    for source in sorted(DOCS.glob("*.md")):
        body = (site / f"{source.stem}.html").read_text(encoding="utf-8")
        body = body.split('<div class="body" role="main">', 1)[1].split('<div class="sphinxsidebar"', 1)[0]
        for target in role.findall(source.read_text(encoding="utf-8")):
            if (DOCS / f"{target}.md").exists() or (DOCS / f"{target}.rst").exists():
                seen += 1
                assert f'href="{target}.html' in body, f"{source.name}: {target} is not a link"
    assert seen >= 10


def _test_exists(module, name):
    """True when ``tests/<module>`` defines ``name`` (``test_x`` or ``Class::test_x``)."""
    import ast
    tree = ast.parse((ROOT / "tests" / module).read_text(encoding="utf-8"))
    scope = tree.body
    *classes, function = name.split("::")
    for class_name in classes:
        found = [n for n in scope if isinstance(n, ast.ClassDef) and n.name == class_name]
        if not found:
            return False
        scope = found[0].body
    return any(isinstance(n, ast.FunctionDef) and n.name == function for n in scope)


def test_request_code_evidence_names_only_served_codes():
    """docs/request-codes.md's tables are generated from the catalogue; its hand-written
    evidence (which capture replays each code) may name only codes the catalogue says are
    served there."""
    catalogue = importlib.import_module("rocketpy.remoting.catalogue")
    page = (DOCS / "request-codes.md").read_text(encoding="utf-8")
    namesrv, controller = page.split("## The controller port", 1)
    for text, server, extra in ((namesrv, catalogue.NAMESRV, set()),
                                (controller, catalogue.CONTROLLER, {1008})):
        rows = {int(c) for c in re.findall(r"^\| (\d+) \| \w+", text, re.M)}
        assert rows, server
        assert rows - extra <= {d.code for d in catalogue.served(server)}, server
    assert "{rocketpy-request-codes} namesrv" in page and "{rocketpy-request-codes} all" in page


def test_every_fast_path_names_tests_that_exist():
    """docs/architecture.md's "fast paths and their oracles": each row names its oracle's test,
    and each named test exists (``::name`` continues the row's last module)."""
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = page.split("## Fast paths and their oracles", 1)[1].split("\n\n", 2)[2]
    rows = [line for line in table.split("\n\n", 1)[0].splitlines()
            if line.startswith("| ") and not line.startswith("| fast path")]
    assert len(rows) >= 15
    for row in rows:
        named = re.findall(r"`(?:tests/(test_\w+\.py))?::([\w:]+)`", row.split("|")[3])
        assert named, row
        module = None
        for found_module, test in named:
            module = found_module or module
            assert module and (_test_exists(module, test) or _assigned(module, test)), \
                f"{module}::{test} ({row[:60]})"


#: the compiled modules' method tables: every function they give Python is a fast path
_C_MODULES = ("rocketpy/remoting/_kernel/module.c", "rocketpy/capture/_native/module.c")


def _c_functions(source):
    """The functions and types a C module gives Python: the rows of the ``PyMethodDef`` table
    its ``PyModuleDef`` names, and the types it adds to the module, from any of its sources
    (their methods are the types' own)."""
    text = (ROOT / source).read_text(encoding="utf-8")
    table = re.search(r"PyModuleDef\s+\w+\s*=\s*\{[^}]*?(\w+)\s*,?\s*\}", text).group(1)
    rows = text.split(f"PyMethodDef {table}[] = {{", 1)[1].split("};", 1)[0]
    types = {name for path in (ROOT / source).parent.glob("*.c")
             for name in re.findall(r'PyModule_AddObject(?:Ref)?\(\w+, "(\w+)", \(PyObject \*\)&\w+',
                                    path.read_text(encoding="utf-8"))}
    return (set(re.findall(r'\{"(\w+)",', rows)) | types) - {"configure"}


def test_every_compiled_function_is_a_fast_path_with_its_oracle():
    """Each function the header kernel and the capture core give Python (``configure`` aside)
    is named in the first column of the fast paths table, so a C shortcut added without its
    row -- and the test tying it to its oracle -- fails here (the compiled hit path,
    ``answer_hits``, had none; its ``HitPath`` type that replaced it is checked as well)."""
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = page.split("## Fast paths and their oracles", 1)[1].split("\n\n", 2)[2]
    named = set()
    for row in table.split("\n\n", 1)[0].splitlines():
        if row.startswith("| ") and not row.startswith("| fast path"):
            named |= set(re.findall(r"`(\w+)`", row.split("|")[1]))
    for source in _C_MODULES:
        functions = _c_functions(source)
        assert functions, source
        assert functions - named == set(), source
    assert _c_functions(_C_MODULES[0]) >= {"read_header", "HitPath", "repeated_keys"}
    assert _c_functions(_C_MODULES[1]) >= {"jsonl", "Decoder", "Tally"}


def _assigned(module, name):
    """A test case a module makes by assignment (a Hypothesis state machine's ``TestCase``)."""
    import ast
    tree = ast.parse((ROOT / "tests" / module).read_text(encoding="utf-8"))
    return any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name
                                                 for t in n.targets) for n in tree.body)


def test_java_53_page_covers_every_profile_difference_with_a_test():
    """docs/java-5.3-changes.md is the evidence for the default profile: each setting in which
    the 5.0 and 5.3 profiles differ is on it, and each test it names exists."""
    import dataclasses
    profile = importlib.import_module("rocketpy.namesrv.profile")
    page = (DOCS / "java-5.3-changes.md").read_text(encoding="utf-8")
    differing = [f.name for f in dataclasses.fields(profile.BehaviourProfile) if f.name != "name"
                 and getattr(profile.PROFILE_50, f.name) != getattr(profile.PROFILE_53, f.name)]
    assert len(differing) >= 10
    for name in differing:
        assert f"`{name}`" in page, f"{name} differs between 5.0 and 5.3 but is not on the page"
    points = re.findall(r"^\d+\. \*\*.*?(?=^\d+\. |^#|\Z)", page, re.M | re.S)
    assert len(points) > 20
    for point in points:
        assert re.search(r"`test_\w+\.py::", point), f"no test named for: {point[:70]}"
    named = re.findall(r"`(test_\w+\.py)::([\w:]+)`", page)
    for module, test in named:
        assert _test_exists(module, test), f"{module}::{test} named on the page does not exist"


def test_the_alert_rules_are_the_ops_file_included(site):
    """One source: docs/operations.md includes ops/prometheus/rules.yml (which promtool checks,
    tests/test_ops_kit.py) instead of a copy of it."""
    doc = (DOCS / "operations.md").read_text(encoding="utf-8")
    assert "```{literalinclude} ../ops/prometheus/rules.yml" in doc
    assert "groups:" not in doc and "- alert:" not in doc
    page = _text(site / "operations.html")
    alerts = re.findall(r"- alert: (\w+)", (ROOT / "ops" / "prometheus" / "rules.yml").read_text())
    assert len(alerts) == 14
    for alert in alerts:
        assert alert in page, alert
