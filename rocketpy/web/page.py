"""Web layer: the status page (``/``), rendered on the server from a
:class:`~rocketpy.web.state.NameServerView` with ``twisted.web.template``, so every value a peer
sent (topic, broker and KV names) is escaped by the template, never formatted into a string.

What an rocketmq-dashboard user looks for: clusters, broker groups, each broker's role in words,
addresses, version, data version, heartbeat and connection; the last minute's request and error
rates by code (:mod:`rocketpy.web.rates`); topics with queue data and routes (system topics
hidden unless asked for); the KV config.

Built for thousands of brokers and topics: one row of counts per cluster, then one page of
broker groups (:data:`GROUPS_PER_PAGE`, natural order, each collapsed into one line with its
counts) and one page of topics (100; a topic on more than :data:`QUEUE_DATAS_INLINE` groups
collapsed likewise), both filtered on the server, so the page's size does not grow with the
state.

One HTML document with inline CSS and JavaScript: it fetches nothing elsewhere and works with
JavaScript off. The query string (``q`` filter, ``sys``, ``page``/``per``, ``gpage``,
``refresh``) carries everything, so every view has a URL and the filter is a plain GET form (a
``<noscript>`` meta refresh reloads it). With JavaScript the filter box (debounced), toggle,
pagers and refresh fetch the same URL and swap ``<main>`` in place, keeping the box's focus and
the sections that were opened (remembered for the tab in ``sessionStorage``);
``history.replaceState`` updates the URL. The
Content-Security-Policy allows only this page's inline style and script (by hash) and
same-origin fetches; those two constants are the only text written without the template (it
would escape the script's ``<`` and ``&&``)."""
import base64
import hashlib
import time
from urllib.parse import quote, urlencode

from twisted.web.template import Comment, Tag, flatten, tags

from .state import DEFAULT_LIMIT

__all__ = ["render_status_page", "page_parameters", "CONTENT_SECURITY_POLICY", "MAX_PER_PAGE",
           "DEFAULT_REFRESH", "GROUPS_PER_PAGE", "QUEUE_DATAS_INLINE"]

MAX_PER_PAGE = 1000
DEFAULT_REFRESH = 10
#: broker groups per page
GROUPS_PER_PAGE = 50
#: a topic on more broker groups than this shows them collapsed, with a count
QUEUE_DATAS_INLINE = 3
#: broker groups listed per topic when opened (all of them are in /api/topics/<topic>)
QUEUE_DATAS_SHOWN = 20
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
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
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
.agree{color:var(--ok)}
details.group{padding:2px 8px;margin:3px 0}
details.group>summary{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:baseline}
details.group>summary b{min-width:9em}
details.group table{margin:6px 0}
td details{border:0;padding:0;margin:0;background:none}
""".strip()

_JS = """
(function(){
  var form=document.getElementById('filter'),q=document.getElementById('q'),
      auto=document.getElementById('auto'),status=document.getElementById('status'),
      content=document.getElementById('content'),sys=document.getElementById('sys'),
      seq=0,debounce=null,pending=0,KEY='rocketpy-open';
  function opened(){try{return new Set(JSON.parse(sessionStorage.getItem(KEY)||'[]'));}
    catch(e){return new Set();}}
  function restore(root){var s=opened();
    root.querySelectorAll('details[id]').forEach(function(d){if(s.has(d.id))d.open=true;});}
  document.addEventListener('toggle',function(e){
    var d=e.target,s=opened();if(!d.id)return;
    if(d.open)s.add(d.id);else s.delete(d.id);
    try{sessionStorage.setItem(KEY,JSON.stringify(Array.from(s).slice(-500)));}catch(x){}
  },true);
  restore(content);
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
        restore(fresh);content.replaceWith(fresh);content=fresh;
        if(remember)history.replaceState(null,'',href);
        status.textContent='';document.body.setAttribute('data-loaded',String(n));
      })
      .catch(function(e){if(n===seq)status.textContent='refresh failed: '+e.message;})
      .then(function(){if(remember)pending--;});
  }
  function filtered(){
    var u=new URL(location.href);
    if(q.value)u.searchParams.set('q',q.value);else u.searchParams.delete('q');
    if(sys.checked)u.searchParams.set('sys','1');else u.searchParams.delete('sys');
    u.searchParams.delete('page');u.searchParams.delete('gpage');
    return u.pathname+u.search;
  }
  q.addEventListener('input',function(){
    clearTimeout(debounce);debounce=setTimeout(function(){debounce=null;load(filtered(),true);},200);
  });
  sys.addEventListener('change',function(){
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
    """``q``, ``sys`` (show system topics), ``page``, ``per``, ``gpage`` (broker groups),
    ``refresh`` from a ``{name: value}`` query, with defaults."""
    q = (args.get("q") or "").strip()[:200]
    return {"q": q,
            "sys": (args.get("sys") or "").lower() in ("1", "true", "on", "yes"),
            "page": _int(args.get("page"), 1, 1, 10 ** 9),
            "gpage": _int(args.get("gpage"), 1, 1, 10 ** 9),
            "per": _int(args.get("per"), DEFAULT_LIMIT, 1, MAX_PER_PAGE),
            "refresh": _int(args.get("refresh"), DEFAULT_REFRESH, 0, 3600)}


def _query(params, **changes):
    merged = dict(params, **changes)
    items = []
    if merged["q"]:
        items.append(("q", merged["q"]))
    if merged["sys"]:
        items.append(("sys", 1))
    if merged["gpage"] != 1:
        items.append(("gpage", merged["gpage"]))
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
    if broker.get("provisional"):   # loaded from a route snapshot, not registered since
        state += [" ", tags.span("provisional", class_="st st-late",
                                 title="loaded from the route snapshot at start; expires unless "
                                       "the broker registers")]
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


_BROKER_COLUMNS = ("Id", "Role", "Address", "HA address", "Version", "Data version",
                   "Last heartbeat", "Timeout", "Topics", "Connection")
#: the broker columns whose cells are numbers, right-aligned, their headers too
_NUMERIC_BROKER_COLUMNS = frozenset(("Id", "Last heartbeat", "Timeout", "Topics"))
_CLUSTER_COLUMNS = (("brokerGroups", "Broker groups"), ("brokers", "Brokers"), ("live", "Live"),
                    ("late", "Late"), ("expired", "Expired"), ("noMaster", "Groups without master"))


def _clusters(summaries):
    heading = tags.h2("Clusters")
    if not summaries:
        return tags.section(heading, tags.p("No broker has registered.", class_="empty"),
                            id="clusters")
    warn = {"late", "expired", "noMaster"}
    rows = [tags.tr(tags.td(row["cluster"]),
                    [tags.td(str(row[key]), class_="num bad" if key in warn and row[key] else "num")
                     for key, _ in _CLUSTER_COLUMNS],
                    class_="cluster", **{"data-cluster": row["cluster"]})
            for row in summaries]
    table = tags.table(tags.thead(tags.tr(tags.th("Cluster"),
                                          [tags.th(label, class_="num")
                                           for _, label in _CLUSTER_COLUMNS])),
                       tags.tbody(rows), id="cluster-table")
    return tags.section(heading, table, id="clusters")


def _peers(report):
    """``--peers``: whether the NameServers agree, one row each, and what differs."""
    heading = tags.h2("NameServers compared")
    if report.get("nameservers") is None:
        return tags.section(heading, tags.p("Not compared yet.", class_="empty"), id="peers")
    clusters, brokers = report["clusterDifferences"], report["brokerDifferences"]
    topics = report["topicDifferences"]
    if report["agree"]:
        verdict = tags.p("All NameServers agree on clusters, brokers and topics.", class_="agree",
                         id="peers-verdict", **{"data-agree": "true"})
    else:
        verdict = tags.p(f"The NameServers diverge: {clusters} cluster(s), {brokers} broker "
                         f"group(s) and {topics} topic(s) differ.", class_="bad",
                         id="peers-verdict", **{"data-agree": "false"})
    rows = [tags.tr(tags.td(row["nameserver"], class_="mono"),
                    tags.td(row["hash"] or "", class_="mono"),
                    tags.td("" if row["brokers"] is None else str(row["brokers"]), class_="num"),
                    tags.td("" if row["topics"] is None else str(row["topics"]), class_="num"),
                    tags.td(row["error"] or "", class_="bad"),
                    class_="peer", **{"data-nameserver": row["nameserver"]})
            for row in report["nameservers"]]
    table = tags.table(tags.thead(tags.tr(tags.th("NameServer"), tags.th("Digest"),
                                          tags.th("Broker groups", class_="num"),
                                          tags.th("Topics", class_="num"),
                                          tags.th("Error"))),
                       tags.tbody(rows), id="peer-table")
    names = [row["nameserver"] for row in report["nameservers"] if row["error"] is None]
    details = []
    for kind, count, title in (("cluster", clusters, "Cluster"), ("broker", brokers, "Broker group")):
        if report[f"{kind}s"]:
            details.append(tags.details(
                tags.summary(f"{count} {title.lower()}(s) differ"),
                tags.table(tags.thead(tags.tr(tags.th(title), [tags.th(n) for n in names])),
                           tags.tbody([tags.tr(tags.td(d[kind], class_="mono"),
                                               [tags.td(d["values"].get(n) or "—", class_="mono")
                                                for n in names], class_=f"peer-{kind}")
                                       for d in report[f"{kind}s"]])),
                id=f"peers-{kind}s"))
    if report["topics"]:
        details.append(tags.details(
            tags.summary(f"{topics} topic(s) differ"),
            tags.table(tags.thead(tags.tr(tags.th("Topic"), tags.th("Missing on"))),
                       tags.tbody([tags.tr(tags.td(d["topic"], class_="mono"),
                                           tags.td(", ".join(d["missingOn"])), class_="peer-topic")
                                   for d in report["topics"]])),
            id="peers-topics"))
    when = _muted(f' (compared every {report["intervalSeconds"]:g} s; every route: '
                  "rocketpy-admin)")
    return tags.section(heading, verdict, when, table, details, id="peers")


def _group_line(group):
    """A broker group's one line: name, cluster, roles, topics, and what is wrong."""
    brokers = group["brokers"]
    roles = {}
    for broker in brokers:
        roles[broker["role"]] = roles.get(broker["role"], 0) + 1
    words = ", ".join(f"{n} {role}" if n > 1 else role for role, n in roles.items()) or "no address"
    live = sum(1 for b in brokers if b["live"])
    state = tags.span("all live", class_="st st-open") if brokers and live == len(brokers) else \
        tags.span(f"{live}/{len(brokers)} live", class_="st st-expired")
    late = [b for b in brokers if b["live"] and b["secondsSinceHeartbeat"] is not None
            and b["heartbeatTimeoutSeconds"] and b["secondsSinceHeartbeat"] > b["heartbeatTimeoutSeconds"] / 2]
    provisional = sum(1 for b in brokers if b.get("provisional"))
    zone = [_muted(f'zone {group["zoneName"]}')] if group["zoneName"] else []
    return tags.summary(tags.b(group["brokerName"]), _muted(group["cluster"]), zone,
                        tags.span(f"{len(brokers)} broker{'s' if len(brokers) != 1 else ''}: {words}"),
                        tags.span(f'{group["topicCount"]} topics'), state,
                        tags.span(f"{len(late)} late", class_="st st-late") if late else "",
                        tags.span(f"{provisional} provisional", class_="st st-late")
                        if provisional else "")


def _groups(view, params):
    per = GROUPS_PER_PAGE
    found = view.broker_groups(params["q"], (params["gpage"] - 1) * per, per)
    matched, total = found["matched"], found["total"]
    pages = max(1, -(-matched // per))
    page = min(params["gpage"], pages)
    if page != params["gpage"]:             # past the end: the last page
        found = view.broker_groups(params["q"], (page - 1) * per, per)
    offset, groups = found["offset"], found["groups"]
    scope = f' matching “{params["q"]}” ({total} in all)' if params["q"] else ""
    count = tags.p(f"Showing {offset + 1 if groups else 0}–{offset + len(groups)} of {matched} "
                   f"broker groups{scope}.", class_="count", id="group-count",
                   **{"data-matched": str(matched), "data-total": str(total)})
    heading = tags.h2("Broker groups and brokers")
    if not groups:
        empty = "No broker group matches." if params["q"] else "No broker has registered."
        return tags.section(heading, count, tags.p(empty, class_="empty"), id="groups")
    blocks = []
    for group in groups:
        rows = [tags.tr(_broker_cells(b, group["topicCount"]), class_="broker",
                        **{"data-addr": b["address"], "data-role": b["role"]})
                for b in group["brokers"]]
        blocks.append(tags.details(
            _group_line(group),
            tags.table(tags.thead(tags.tr([tags.th(c, class_="num") if c in _NUMERIC_BROKER_COLUMNS
                                           else tags.th(c) for c in _BROKER_COLUMNS])),
                       tags.tbody(rows)),
            class_="group", id=f'g-{group["cluster"]}/{group["brokerName"]}',
            **{"data-group": group["brokerName"]}))
    pager = _pager(dict(params, gpage=page), matched, per, "gpage")
    return tags.section(heading, count, pager, blocks, pager.clone(), id="groups")


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
    table = tags.table(tags.thead(tags.tr(tags.th("Request code"),
                                          tags.th("requests/s", class_="num"),
                                          tags.th("error answers/s", class_="num"))),
                       tags.tbody(rows), id="traffic-table")
    return tags.section(heading, tags.p(what), table, id="traffic")


def _workers(workers):
    """The processes of a server of several (:mod:`rocketpy.service.workers`)."""
    heading = tags.h2("Worker processes")
    what = _muted(" (worker 0 writes the route tables; the others answer from replicas of "
                  f"them, fed by its stream, now at record {workers[0]['sequence']:,})")
    rows = [tags.tr(tags.td(str(w["worker"]), class_="num"), tags.td(str(w["pid"]), class_="num"),
                    tags.td(w["role"]), tags.td(w["state"]),
                    tags.td(f'{w["connections"]:,}', class_="num"),
                    tags.td(f'{w["sequence"] - w["applied"]:,}', class_="num"),
                    tags.td(str(w["restarts"]), class_="num"),
                    class_="worker", **{"data-worker": str(w["worker"])})
             for w in workers]
    table = tags.table(tags.thead(tags.tr(
        tags.th("worker", class_="num"), tags.th("pid", class_="num"), tags.th("role"),
        tags.th("state"), tags.th("connections", class_="num"),
        tags.th("records behind", class_="num"), tags.th("restarts", class_="num"))),
        tags.tbody(rows), id="workers-table")
    return tags.section(heading, tags.p(what), table, id="workers")


def _pager(params, matched, per, key="page"):
    pages = max(1, -(-matched // per))
    page = min(params[key], pages)
    parts = []
    if page > 1:
        parts.append(tags.a("« first", class_="pg", href=_query(params, **{key: 1})))
        parts.append(tags.a("‹ previous", class_="pg", rel="prev", href=_query(params, **{key: page - 1})))
    parts.append(tags.span(f"page {page} of {pages}"))
    if page < pages:
        parts.append(tags.a("next ›", class_="pg", rel="next", href=_query(params, **{key: page + 1})))
        parts.append(tags.a("last »", class_="pg", href=_query(params, **{key: pages})))
    return tags.nav(parts, class_="pager", **{"data-key": key})


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


def _collapsed(items, what, key, topic):
    """``items`` joined by line breaks; past :data:`QUEUE_DATAS_INLINE`, inside a closed
    ``<details>`` whose line says how many, and at most :data:`QUEUE_DATAS_SHOWN` of them."""
    if len(items) <= QUEUE_DATAS_INLINE:
        return _joined(items, tags.br)
    shown = _joined(items[:QUEUE_DATAS_SHOWN], tags.br)
    if len(items) > QUEUE_DATAS_SHOWN:
        href = "/api/topics/" + quote(topic, safe="")
        shown += [tags.br(), _muted(f"… {len(items) - QUEUE_DATAS_SHOWN} more in "),
                  tags.a(href, href=href)]
    return tags.details(tags.summary(f"{len(items)} {what}"), shown, id=key)


def _topic_row(topic):
    name = topic["topic"]
    queues = _collapsed([_queue_data(qd) for qd in topic["queueDatas"]], "broker groups",
                        f"tq-{name}", name)
    if topic["brokerDatas"]:
        route = _collapsed([[bd["brokerName"], " ", _muted(f'({bd["cluster"]})'), ": ",
                             _joined([_mono(f"{bid}={addr}") for bid, addr in bd["brokerAddrs"].items()],
                                     lambda: ", ")]
                            for bd in topic["brokerDatas"]], "broker groups", f"tr-{name}", name)
    else:
        route = _muted("no route (no broker data)")
    order = topic.get("orderTopicConf")
    extra = [tags.br(), _muted("order conf"), " ", _mono(order)] if order else []
    return tags.tr(tags.td(topic["topic"], class_="mono"), tags.td(queues), tags.td(route, extra),
                   class_="topic system" if topic["system"] else "topic")


def _topics(view, params, names):
    per = params["per"]
    matched = len(names)
    total = view.counts()["topics"]
    pages = max(1, -(-matched // per))
    page = min(params["page"], pages)
    offset = (page - 1) * per
    shown = [t for t in (view.topic(name) for name in names[offset:offset + per]) if t is not None]
    what = []
    if params["q"]:
        what.append(f"matching “{params['q']}”")
    if not params["sys"]:
        what.append("without system topics")
    scope = f' {", ".join(what)} ({total} in all)' if what else ""
    count = tags.p(f"Showing {offset + 1 if shown else 0}–{offset + len(shown)} of {matched} "
                   f"topics{scope}.", class_="count", id="topic-count",
                   **{"data-matched": str(matched), "data-total": str(total)})
    heading = tags.h2("Topics")
    if not shown:
        empty = "No topic matches." if params["q"] or total else "No topic is registered."
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
            tags.table(tags.thead(tags.tr(tags.th("Key"), tags.th("Value"))), tags.tbody(rows)),
            id=f"kv-{namespace}"))
    return tags.section(heading, blocks, id="kv")


def _uptime(seconds):
    return _ago(seconds) if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _filter_form(params, refresh):
    hidden = []
    if params["per"] != DEFAULT_LIMIT:
        hidden.append(tags.input(type="hidden", name="per", value=str(params["per"])))
    if params["refresh"] != DEFAULT_REFRESH:
        hidden.append(tags.input(type="hidden", name="refresh", value=str(params["refresh"])))
    show = tags.input(type="checkbox", id="sys", name="sys", value="1")
    if params["sys"]:
        show(checked="checked")
    return tags.form(
        tags.label("Filter", for_="q"),
        tags.input(id="q", name="q", type="search", value=params["q"],
                   placeholder="topic, broker or address", autocomplete="off", spellcheck="false"),
        tags.label(show, " show system topics", for_="sys", class_="toggle"),
        hidden, tags.button("Filter", type="submit"),
        tags.label(tags.input(type="checkbox", id="auto", checked="checked"),
                   f" refresh every {refresh} s", class_="auto", id="autobox", hidden="hidden"),
        tags.span(id="status"),
        id="filter", method="get", action="/", role="search")


def _document(view, params, names):
    summary = view.summary()
    peers = view.peers()
    workers = view.workers()
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
    nav = tags.nav(tags.a("Clusters", href="#clusters"), tags.a("Brokers", href="#groups"),
                   tags.a("Traffic", href="#traffic"),
                   tags.a("Topics", href="#topics"), tags.a("KV config", href="#kv"),
                   tags.a("Metrics", href="/metrics"), tags.a("JSON API", href="/api/"))
    main = Tag("main")(          # not in twisted.web.template's (pre-HTML5) list of tag names
        _summary(summary), _clusters(view.cluster_summaries()),
        _peers(peers) if peers is not None else "", _groups(view, params),
        _traffic(summary.get("traffic")),
        _workers(workers) if workers is not None else "",
        _topics(view, params, names), _kv(view.kv()),
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


def render_status_page(view, params, names):
    """The whole page as ``bytes`` (UTF-8) for the parsed query ``params`` and the topic names
    it matched (``view.topic_names``)."""
    out, failures = [], []
    flatten(None, _document(view, params, names), out.append).addErrback(failures.append)
    if failures:             # nothing here waits, so flattening is done when flatten() returns
        failures[0].raiseException()
    page = b"".join(out)
    page = page.replace(f"<!--{_CSS_MARK}-->".encode(), _CSS.encode("utf-8"), 1)
    page = page.replace(f"<!--{_JS_MARK}-->".encode(), _JS.encode("utf-8"), 1)
    return b"<!doctype html>" + page
