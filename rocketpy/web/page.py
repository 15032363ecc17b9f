"""Web layer: the status page (``/``), rendered on the server from a
:class:`~rocketpy.web.state.NameServerView` with ``twisted.web.template``, so every value a peer
sent (topic, broker and KV names) is escaped by the template, never formatted into a string.

What an rocketmq-dashboard user looks for: clusters, broker groups, each broker's role in words,
addresses, version, data version, heartbeat and connection; the last minute's request and error
rates by code (:mod:`rocketpy.web.rates`); topics with queue data and routes (system topics can
be hidden); the KV config.

One HTML document with inline CSS and JavaScript: it fetches nothing elsewhere and works with
JavaScript off. The query string (``q`` filter, ``nosys``, ``page``/``per``, ``refresh``) carries
everything, so every view has a URL and the filter is a plain GET form (a ``<noscript>`` meta
refresh reloads it). With JavaScript the filter box (debounced), toggle, pager and refresh fetch
the same URL and swap ``<main>`` in place, keeping the box's focus; ``history.replaceState``
updates the URL. Only one page of topics (100) is rendered, filtered on the server. The
Content-Security-Policy allows only this page's inline style and script (by hash) and
same-origin fetches; those two constants are the only text written without the template (it
would escape the script's ``<`` and ``&&``)."""
import base64
import hashlib
import time
from urllib.parse import urlencode

from twisted.web.template import Comment, Tag, flatten, tags

from .state import DEFAULT_LIMIT

__all__ = ["render_status_page", "page_parameters", "CONTENT_SECURITY_POLICY", "MAX_PER_PAGE",
           "DEFAULT_REFRESH"]

MAX_PER_PAGE = 1000
DEFAULT_REFRESH = 10
#: KV entries shown per namespace (the rest are in /api/kv)
KV_SHOWN = 500
#: request codes shown in the traffic table (all of them are in /api/summary)
CODES_SHOWN = 12

_CSS = """
:root{--fg:#1d2330;--mut:#5b6475;--bg:#f6f7f9;--card:#fff;--line:#dde1e7;--acc:#2458b3;
--ok:#1e7b34;--warn:#9a6200;--bad:#b3261e}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;flex-wrap:wrap;gap:8px 24px;align-items:baseline}
header h1{font-size:18px;margin:0}
header .meta{color:#c6cbd6;font-size:13px}
header nav a{color:#cfe0ff;margin-right:14px;text-decoration:none}
header nav a:hover{text-decoration:underline}
#filter{position:sticky;top:0;z-index:2;background:#e9edf3;border-bottom:1px solid var(--line);
padding:8px 20px;display:flex;flex-wrap:wrap;gap:8px;align-items:center}
#filter input[type=search]{width:min(420px,70vw);padding:6px 8px;border:1px solid #aab3c2;border-radius:4px;font-size:14px}
#filter button{padding:6px 12px;border:1px solid #aab3c2;border-radius:4px;background:#fff;cursor:pointer}
#filter .auto{margin-left:auto;color:var(--mut)}
main{padding:8px 20px 40px}
section{margin:18px 0}
h2{font-size:16px;margin:0 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:22px}
.card span{color:var(--mut);font-size:12px}
table{border-collapse:collapse;background:var(--card);width:100%;border:1px solid var(--line)}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#eef1f5;font-weight:600;font-size:13px;position:sticky;top:49px}
tbody tr:hover{background:#f3f7ff}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.muted{color:var(--mut)}
.st{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;border:1px solid}
.st-open{color:var(--ok);border-color:var(--ok)}
.st-paused,.st-closing,.st-late{color:var(--warn);border-color:var(--warn)}
.st-closed,.st-none,.st-expired{color:var(--bad);border-color:var(--bad)}
.pager{margin:8px 0;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
.pager a{color:var(--acc)}
.qd{white-space:nowrap}
.empty{padding:12px;background:var(--card);border:1px dashed var(--line);color:var(--mut)}
details{background:var(--card);border:1px solid var(--line);border-radius:4px;margin:6px 0;padding:4px 8px}
summary{cursor:pointer}
footer{color:var(--mut);font-size:12px;padding:0 20px 20px}
#status{color:var(--mut);font-size:12px}
.role{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#eef1f5}
.role-master{background:#dbe7ff;color:#173f8a}
.role-acting{background:#fff1d6;color:#7a4d00}
.bad{color:var(--bad)}
tr.system td:first-child::after{content:" system";color:var(--mut);font:12px system-ui,sans-serif}
""".strip()

_JS = """
(function(){
  var form=document.getElementById('filter'),q=document.getElementById('q'),
      auto=document.getElementById('auto'),status=document.getElementById('status'),
      content=document.getElementById('content'),nosys=document.getElementById('nosys'),
      seq=0,debounce=null,pending=0;
  var period=parseInt(content.getAttribute('data-refresh'),10)||0;
  document.getElementById('autobox').hidden=!(period>0);
  function here(){return location.pathname+location.search;}
  function load(href,remember){
    var n=++seq;
    if(remember)pending++;
    return fetch(href,{headers:{'Accept':'text/html'},cache:'no-store',credentials:'same-origin'})
      .then(function(r){if(!r.ok)throw new Error('HTTP '+r.status);return r.text();})
      .then(function(text){
        if(n!==seq)return;
        var fresh=new DOMParser().parseFromString(text,'text/html').getElementById('content');
        if(!fresh)throw new Error('no content');
        content.replaceWith(fresh);content=fresh;
        if(remember)history.replaceState(null,'',href);
        status.textContent='';document.body.setAttribute('data-loaded',String(n));
      })
      .catch(function(e){if(n===seq)status.textContent='refresh failed: '+e.message;})
      .then(function(){if(remember)pending--;});
  }
  function filtered(){
    var u=new URL(location.href);
    if(q.value)u.searchParams.set('q',q.value);else u.searchParams.delete('q');
    if(nosys.checked)u.searchParams.set('nosys','1');else u.searchParams.delete('nosys');
    u.searchParams.delete('page');
    return u.pathname+u.search;
  }
  q.addEventListener('input',function(){
    clearTimeout(debounce);debounce=setTimeout(function(){debounce=null;load(filtered(),true);},200);
  });
  nosys.addEventListener('change',function(){
    clearTimeout(debounce);debounce=null;load(filtered(),true);
  });
  form.addEventListener('submit',function(e){
    e.preventDefault();clearTimeout(debounce);debounce=null;load(filtered(),true);
  });
  document.addEventListener('click',function(e){
    var a=e.target.closest&&e.target.closest('a.pg');
    if(a&&!e.ctrlKey&&!e.metaKey&&!e.shiftKey){e.preventDefault();load(a.getAttribute('href'),true);}
  });
  if(period>0)setInterval(function(){
    // never over a filter or page change still on its way (it would bring the old view back)
    if(auto.checked&&!document.hidden&&!pending&&!debounce)load(here(),false);
  },period*1000);
})();
""".strip()



#: an inline icon, so the browser does not ask for /favicon.ico
_FAVICON = ("data:image/svg+xml,%3Csvg xmlns=%27http%3A//www.w3.org/2000/svg%27 viewBox=%270 0 16 "
            "16%27%3E%3Ccircle cx=%278%27 cy=%278%27 r=%277%27 fill=%27%232458b3%27/%3E%3C/svg%3E")
#: where the two constants go (escaped text can hold no '<!--', so the marks are unique)
_CSS_MARK, _JS_MARK = "rocketpy-style", "rocketpy-script"


def _hash(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


#: Only this page's own style and script, same-origin fetches, no framing, no forms elsewhere.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src {_hash(_CSS)}; script-src {_hash(_JS)}; "
    "connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'")


def _int(value, default, low, high):
    try:
        n = int(value)
    except (TypeError, ValueError):
        return default
    return max(low, min(n, high))


def page_parameters(args):
    """``q``, ``nosys``, ``page``, ``per``, ``refresh`` from a ``{name: value}`` query, with
    defaults."""
    q = (args.get("q") or "").strip()[:200]
    return {"q": q,
            "nosys": (args.get("nosys") or "").lower() in ("1", "true", "on", "yes"),
            "page": _int(args.get("page"), 1, 1, 10 ** 9),
            "per": _int(args.get("per"), DEFAULT_LIMIT, 1, MAX_PER_PAGE),
            "refresh": _int(args.get("refresh"), DEFAULT_REFRESH, 0, 3600)}


def _query(params, **changes):
    merged = dict(params, **changes)
    items = []
    if merged["q"]:
        items.append(("q", merged["q"]))
    if merged["nosys"]:
        items.append(("nosys", 1))
    if merged["page"] != 1:
        items.append(("page", merged["page"]))
    if merged["per"] != DEFAULT_LIMIT:
        items.append(("per", merged["per"]))
    if merged["refresh"] != DEFAULT_REFRESH:
        items.append(("refresh", merged["refresh"]))
    return "/" + ("?" + urlencode(items) if items else "")


def _ago(seconds):
    if seconds is None:
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _rate(per_second):
    return f"{per_second:.3g}" if per_second < 100 else f"{per_second:,.0f}"


def _mono(text):
    return tags.span(text, class_="mono")


def _muted(text):
    return tags.span(text, class_="muted")


def _card(key, value, label, extra_class=""):
    return tags.div(tags.b(str(value)), tags.span(label), class_=f"card {extra_class}".strip(),
                    id=f"count-{key}")


def _summary(summary):
    cards = (("clusters", "clusters"), ("brokerGroups", "broker groups"), ("brokers", "live brokers"),
             ("topics", "topics"), ("connections", "connections"),
             ("unregistrationQueueDepth", "unregistrations queued"),
             ("kvNamespaces", "KV namespaces"))
    items = [_card(key, summary[key], label) for key, label in cards]
    traffic = summary.get("traffic")
    if traffic is not None:
        errors = traffic["errors"]
        items += [_card("requestRate", _rate(traffic["requests"]), "requests/s"),
                  _card("errorRate", _rate(errors), "error answers/s", "bad" if errors else "")]
    return tags.section(tags.div(items, class_="cards"), id="summary")


_ROLE_CLASS = {"master": "role role-master", "acting master": "role role-acting", "slave": "role"}


def _broker_state(broker):
    if not broker["live"]:
        return tags.span("not live", class_="st st-expired")
    conn = broker["connection"]
    state = [tags.span(conn, class_=f"st st-{conn}")]
    age, timeout = broker["secondsSinceHeartbeat"], broker["heartbeatTimeoutSeconds"]
    if age is not None and timeout and age > timeout:
        state += [" ", tags.span("expired", class_="st st-expired")]
    elif age is not None and timeout and age > timeout / 2:
        state += [" ", tags.span("late", class_="st st-late")]
    return state


def _broker_cells(broker, topic_count):
    dv = broker["dataVersion"]
    data_version = "" if dv is None else tags.span(
        f'{dv["counter"]}{"/" + str(dv["stateVersion"]) if dv["stateVersion"] else ""}',
        class_="mono", title=f'timestamp {dv["timestamp"]}')
    version = [broker["version"] or ""]
    if broker["language"]:
        version += [" ", _muted(broker["language"])]
    timeout = broker["heartbeatTimeoutSeconds"]
    return [tags.td(str(broker["brokerId"]), class_="num"),
            tags.td(tags.span(broker["role"], class_=_ROLE_CLASS[broker["role"]]), class_="role-cell"),
            tags.td(broker["address"], class_="mono"),
            tags.td(broker["haServerAddr"] or "", class_="mono ha"),
            tags.td(version), tags.td(data_version),
            tags.td(_ago(broker["secondsSinceHeartbeat"]), class_="num"),
            tags.td("" if timeout is None else f"{timeout:g} s", class_="num"),
            tags.td(str(topic_count), class_="num"),
            tags.td(_broker_state(broker))]


_BROKER_COLUMNS = ("Cluster", "Broker group", "Id", "Role", "Address", "HA address", "Version",
                   "Data version", "Last heartbeat", "Timeout", "Topics", "Connection")


def _clusters(clusters):
    heading = tags.h2("Clusters, broker groups and brokers")
    if not clusters:
        return tags.section(heading, tags.p("No broker has registered.", class_="empty"),
                            id="clusters")
    rows = []
    for cluster in clusters:
        groups = cluster["brokerGroups"]
        if not groups:
            rows.append(tags.tr(tags.td(cluster["cluster"]),
                                tags.td("no broker group", colspan=str(len(_BROKER_COLUMNS) - 1),
                                        class_="muted")))
            continue
        cluster_cell = tags.td(cluster["cluster"],
                               rowspan=str(sum(max(1, len(g["brokers"])) for g in groups)))
        for group in groups:
            brokers = group["brokers"] or [None]
            name = [group["brokerName"]]
            if group["zoneName"]:
                name += [" ", _muted(f'zone {group["zoneName"]}')]
            group_cell = tags.td(name, rowspan=str(len(brokers)))
            for broker in brokers:
                cells = [c for c in (cluster_cell, group_cell) if c is not None]
                cluster_cell = group_cell = None
                if broker is None:
                    rows.append(tags.tr(cells, tags.td("no address", colspan="8", class_="muted"),
                                        tags.td(str(group["topicCount"]), class_="num"), tags.td()))
                    continue
                rows.append(tags.tr(cells, _broker_cells(broker, group["topicCount"]),
                                    class_="broker", **{"data-addr": broker["address"],
                                                        "data-role": broker["role"]}))
    table = tags.table(tags.thead(tags.tr([tags.th(c) for c in _BROKER_COLUMNS])),
                       tags.tbody(rows), id="brokers")
    return tags.section(heading, table, id="clusters")


def _traffic(traffic):
    heading = tags.h2("Requests of the last minute")
    if traffic is None:
        return tags.section(heading, tags.p("No traffic counters.", class_="empty"), id="traffic")
    what = _muted(f' (over the last {traffic["seconds"]:.0f} s; error answers: any code but '
                  "SUCCESS; answers from the answer cache count as requests)")
    if not traffic["byCode"]:
        return tags.section(heading, tags.p("No request.", what, class_="empty"), id="traffic")
    rows = [tags.tr(tags.td(row["name"], class_="mono"),
                    tags.td(_rate(row["requests"]), class_="num"),
                    tags.td(_rate(row["errors"]), class_="num bad" if row["errors"] else "num"),
                    class_="code", **{"data-code": str(row["code"])})
            for row in traffic["byCode"][:CODES_SHOWN]]
    table = tags.table(tags.thead(tags.tr(tags.th("Request code"), tags.th("requests/s"),
                                          tags.th("error answers/s"))),
                       tags.tbody(rows), id="traffic-table")
    return tags.section(heading, tags.p(what), table, id="traffic")


def _pager(params, matched, per):
    pages = max(1, -(-matched // per))
    page = min(params["page"], pages)
    parts = []
    if page > 1:
        parts.append(tags.a("« first", class_="pg", href=_query(params, page=1)))
        parts.append(tags.a("‹ previous", class_="pg", rel="prev", href=_query(params, page=page - 1)))
    parts.append(tags.span(f"page {page} of {pages}"))
    if page < pages:
        parts.append(tags.a("next ›", class_="pg", rel="next", href=_query(params, page=page + 1)))
        parts.append(tags.a("last »", class_="pg", href=_query(params, page=pages)))
    return tags.nav(parts, class_="pager")


def _queue_data(qd):
    flag = [" ", _muted(f'sysflag {qd["topicSysFlag"]}')] if qd["topicSysFlag"] else []
    return tags.span(f'{qd["brokerName"]}: ',
                     _mono(f'r{qd["readQueueNums"]} w{qd["writeQueueNums"]} {qd["permText"]}'),
                     flag, class_="qd")


def _joined(items, separator):
    out = []
    for i, item in enumerate(items):
        if i:
            out.append(separator())
        out.append(item)
    return out


def _topic_row(topic):
    queues = _joined([_queue_data(qd) for qd in topic["queueDatas"]], tags.br)
    if topic["brokerDatas"]:
        route = _joined([[bd["brokerName"], " ", _muted(f'({bd["cluster"]})'), ": ",
                          _joined([_mono(f"{bid}={addr}") for bid, addr in bd["brokerAddrs"].items()],
                                  lambda: ", ")]
                         for bd in topic["brokerDatas"]], tags.br)
    else:
        route = _muted("no route (no broker data)")
    order = topic.get("orderTopicConf")
    extra = [tags.br(), _muted("order conf"), " ", _mono(order)] if order else []
    return tags.tr(tags.td(topic["topic"], class_="mono"), tags.td(queues), tags.td(route, extra),
                   class_="topic system" if topic["system"] else "topic")


def _topics(view, params):
    per = params["per"]
    names = view.topic_names(params["q"], params["nosys"])
    matched = len(names)
    total = view.counts()["topics"]
    pages = max(1, -(-matched // per))
    page = min(params["page"], pages)
    offset = (page - 1) * per
    shown = [t for t in (view.topic(name) for name in names[offset:offset + per]) if t is not None]
    what = []
    if params["q"]:
        what.append(f"matching “{params['q']}”")
    if params["nosys"]:
        what.append("without system topics")
    scope = f' {", ".join(what)} ({total} in all)' if what else ""
    count = tags.p(f"Showing {offset + 1 if shown else 0}–{offset + len(shown)} of {matched} "
                   f"topics{scope}.", class_="count", id="topic-count",
                   **{"data-matched": str(matched), "data-total": str(total)})
    heading = tags.h2("Topics")
    if not shown:
        empty = "No topic matches." if what else "No topic is registered."
        return tags.section(heading, count, tags.p(empty, class_="empty"), id="topics")
    pager = _pager(dict(params, page=page), matched, per)
    table = tags.table(
        tags.thead(tags.tr(tags.th("Topic"),
                           tags.th("Queue data (broker: read/write queues, permission)"),
                           tags.th("Route (broker id = address)"))),
        tags.tbody([_topic_row(t) for t in shown]), id="topic-table")
    return tags.section(heading, count, pager, table, pager.clone(), id="topics")


def _kv(kv):
    heading = tags.h2("KV config namespaces")
    if not kv:
        return tags.section(heading, tags.p("No KV config.", class_="empty"), id="kv")
    blocks = []
    for namespace, entries in kv.items():
        rows = []
        for i, (key, value) in enumerate(entries.items()):
            if i == KV_SHOWN:
                rows.append(tags.tr(tags.td(f"… {len(entries) - KV_SHOWN} more in ",
                                            tags.a("/api/kv", href="/api/kv"),
                                            colspan="2", class_="muted")))
                break
            rows.append(tags.tr(tags.td(key, class_="mono"), tags.td(value, class_="mono")))
        blocks.append(tags.details(
            tags.summary(_mono(namespace), " ", _muted(f"({len(entries)} keys)")),
            tags.table(tags.thead(tags.tr(tags.th("Key"), tags.th("Value"))), tags.tbody(rows))))
    return tags.section(heading, blocks, id="kv")


def _uptime(seconds):
    return _ago(seconds) if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _filter_form(params, refresh):
    hidden = []
    if params["per"] != DEFAULT_LIMIT:
        hidden.append(tags.input(type="hidden", name="per", value=str(params["per"])))
    if params["refresh"] != DEFAULT_REFRESH:
        hidden.append(tags.input(type="hidden", name="refresh", value=str(params["refresh"])))
    nosys = tags.input(type="checkbox", id="nosys", name="nosys", value="1")
    if params["nosys"]:
        nosys(checked="checked")
    return tags.form(
        tags.label("Filter topics", for_="q"),
        tags.input(id="q", name="q", type="search", value=params["q"],
                   placeholder="topic or broker name", autocomplete="off", spellcheck="false"),
        tags.label(nosys, " hide system topics", for_="nosys", class_="toggle"),
        hidden, tags.button("Filter", type="submit"),
        tags.label(tags.input(type="checkbox", id="auto", checked="checked"),
                   f" refresh every {refresh} s", class_="auto", id="autobox", hidden="hidden"),
        tags.span(id="status"),
        id="filter", method="get", action="/", role="search")


def _document(view, params):
    summary = view.summary()
    refresh = params["refresh"]
    meta = [f'rocketpy {summary["version"]} · answers like RocketMQ {summary["profile"]}']
    if summary["listen"]:
        meta.append(f' · remoting {summary["listen"]}')
    meta.append(f' · up {_uptime(summary["uptimeSeconds"])}')
    head = tags.head(
        tags.meta(charset="utf-8"),
        tags.meta(name="viewport", content="width=device-width, initial-scale=1"),
        tags.title("rocketpy NameServer status"),
        tags.link(rel="icon", href=_FAVICON),
        tags.noscript(tags.meta(**{"http-equiv": "refresh", "content": str(refresh)})) if refresh else "",
        tags.style(Comment(_CSS_MARK)))
    nav = tags.nav(tags.a("Brokers", href="#clusters"), tags.a("Traffic", href="#traffic"),
                   tags.a("Topics", href="#topics"), tags.a("KV config", href="#kv"),
                   tags.a("Metrics", href="/metrics"), tags.a("JSON API", href="/api/"))
    main = Tag("main")(          # not in twisted.web.template's (pre-HTML5) list of tag names
        _summary(summary), _clusters(view.clusters()), _traffic(summary.get("traffic")),
        _topics(view, params), _kv(view.kv()),
        tags.p(f'Updated {time.strftime("%H:%M:%S")} (server time {summary["serverTime"]} ms).',
               class_="muted", id="updated"),
        id="content", **{"data-refresh": str(refresh)})
    body = tags.body(
        tags.header(tags.h1("rocketpy NameServer"), tags.span(meta, class_="meta"), nav),
        _filter_form(params, refresh), main,
        tags.footer("Read-only. The same data as JSON: ", tags.a("/api/", href="/api/"),
                    "; Prometheus: ", tags.a("/metrics", href="/metrics"), "."),
        tags.script(Comment(_JS_MARK)))
    return tags.html(head, body, lang="en")


def render_status_page(view, params):
    """The whole page as ``bytes`` (UTF-8) for the parsed query ``params``."""
    out, failures = [], []
    flatten(None, _document(view, params), out.append).addErrback(failures.append)
    if failures:             # nothing here waits, so flattening is done when flatten() returns
        failures[0].raiseException()
    page = b"".join(out)
    page = page.replace(f"<!--{_CSS_MARK}-->".encode(), _CSS.encode("utf-8"), 1)
    page = page.replace(f"<!--{_JS_MARK}-->".encode(), _JS.encode("utf-8"), 1)
    return b"<!doctype html>" + page
