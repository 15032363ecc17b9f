"""Web layer: the status page (``/``), rendered on the server from a
:class:`~rocketpy.web.state.NameServerView`.

One HTML document with its CSS and JavaScript inline: it fetches nothing from anywhere, uses no
framework, and works with JavaScript off. The query string carries everything -- ``q`` (filter
topics by topic or broker name), ``page`` and ``per`` (pagination), ``refresh`` (seconds, 0 =
off) -- so every view has a URL, the filter form is a plain GET form, and without JavaScript a
``<noscript>`` meta refresh reloads the same URL. With JavaScript, typing in the filter box
(debounced), the pager links and the periodic refresh fetch the same URL and swap the page's
``<main>`` in place, so the filter box keeps focus and what was typed; the URL is updated with
``history.replaceState``.

Thousands of topics stay usable because only one page of them (100 by default) is rendered;
filtering happens on the server, over all topics. The Content-Security-Policy allows only this
page's own inline style and script (by hash) and same-origin fetches.
"""
import base64
import hashlib
import time
from html import escape

from .state import DEFAULT_LIMIT

__all__ = ["render_status_page", "page_parameters", "CONTENT_SECURITY_POLICY", "MAX_PER_PAGE",
           "DEFAULT_REFRESH"]

MAX_PER_PAGE = 1000
DEFAULT_REFRESH = 10
#: KV entries shown per namespace (the rest are in /api/kv)
KV_SHOWN = 500

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
""".strip()

_JS = """
(function(){
  var form=document.getElementById('filter'),q=document.getElementById('q'),
      auto=document.getElementById('auto'),status=document.getElementById('status'),
      content=document.getElementById('content'),seq=0,debounce=null,pending=0;
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
    u.searchParams.delete('page');
    return u.pathname+u.search;
  }
  q.addEventListener('input',function(){
    clearTimeout(debounce);debounce=setTimeout(function(){debounce=null;load(filtered(),true);},200);
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
_FAVICON = ('<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns=%27http%3A//www.w3.org/2000/svg%27 '
            'viewBox=%270 0 16 16%27%3E%3Ccircle cx=%278%27 cy=%278%27 r=%277%27 fill=%27%232458b3%27/%3E'
            '%3C/svg%3E">')


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
    """``q``, ``page``, ``per``, ``refresh`` from a ``{name: value}`` query, with defaults."""
    q = (args.get("q") or "").strip()[:200]
    return {"q": q,
            "page": _int(args.get("page"), 1, 1, 10 ** 9),
            "per": _int(args.get("per"), DEFAULT_LIMIT, 1, MAX_PER_PAGE),
            "refresh": _int(args.get("refresh"), DEFAULT_REFRESH, 0, 3600)}


def _query(params, **changes):
    from urllib.parse import urlencode
    merged = dict(params, **changes)
    items = []
    if merged["q"]:
        items.append(("q", merged["q"]))
    if merged["page"] != 1:
        items.append(("page", merged["page"]))
    if merged["per"] != DEFAULT_LIMIT:
        items.append(("per", merged["per"]))
    if merged["refresh"] != DEFAULT_REFRESH:
        items.append(("refresh", merged["refresh"]))
    return "/" + ("?" + urlencode(items) if items else "")


def _e(value):
    return escape("" if value is None else str(value))


def _ago(seconds):
    if seconds is None:
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _summary(summary):
    cards = (("clusters", "clusters"), ("brokerGroups", "broker groups"), ("brokers", "live brokers"),
             ("topics", "topics"), ("connections", "connections"),
             ("unregistrationQueueDepth", "unregistrations queued"),
             ("kvNamespaces", "KV namespaces"))
    out = ['<section id="summary"><div class="cards">']
    for key, label in cards:
        out.append(f'<div class="card" id="count-{key}"><b>{summary[key]}</b><span>{label}</span></div>')
    out.append("</div></section>")
    return "".join(out)


def _broker_state(broker):
    conn = broker["connection"]
    if not broker["live"]:
        return '<span class="st st-expired">not live</span>'
    age, timeout = broker["secondsSinceHeartbeat"], broker["heartbeatTimeoutSeconds"]
    late = ""
    if age is not None and timeout and age > timeout:
        late = ' <span class="st st-expired">expired</span>'
    elif age is not None and timeout and age > timeout / 2:
        late = ' <span class="st st-late">late</span>'
    return f'<span class="st st-{_e(conn)}">{_e(conn)}</span>{late}'


def _clusters(clusters):
    out = ['<section id="clusters"><h2>Clusters, broker groups and brokers</h2>']
    if not clusters:
        out.append('<p class="empty">No broker has registered.</p></section>')
        return "".join(out)
    out.append('<table id="brokers"><thead><tr><th>Cluster</th><th>Broker group</th><th>Id</th>'
               '<th>Address</th><th>Version</th><th>Data version</th><th>Last heartbeat</th>'
               '<th>Timeout</th><th>Topics</th><th>Connection</th></tr></thead><tbody>')
    for cluster in clusters:
        first_in_cluster = True
        rows_in_cluster = sum(max(1, len(g["brokers"])) for g in cluster["brokerGroups"]) or 1
        if not cluster["brokerGroups"]:
            out.append(f'<tr><td>{_e(cluster["cluster"])}</td><td colspan="9" class="muted">'
                       'no broker group</td></tr>')
            continue
        for group in cluster["brokerGroups"]:
            brokers = group["brokers"] or [None]
            for i, broker in enumerate(brokers):
                cells = []
                if first_in_cluster:
                    cells.append(f'<td rowspan="{rows_in_cluster}">{_e(cluster["cluster"])}</td>')
                    first_in_cluster = False
                if i == 0:
                    zone = f' <span class="muted">zone {_e(group["zoneName"])}</span>' if group["zoneName"] else ""
                    cells.append(f'<td rowspan="{len(brokers)}">{_e(group["brokerName"])}{zone}</td>')
                if broker is None:
                    cells.append('<td colspan="6" class="muted">no address</td>')
                    cells.append(f'<td class="num" rowspan="1">{group["topicCount"]}</td><td></td>')
                    out.append('<tr>' + "".join(cells) + '</tr>')
                    continue
                dv = broker["dataVersion"]
                dv_text = "" if dv is None else (
                    f'<span class="mono" title="timestamp {dv["timestamp"]}">{dv["counter"]}'
                    f'{"/" + str(dv["stateVersion"]) if dv["stateVersion"] else ""}</span>')
                version = _e(broker["version"] or "")
                if broker["language"]:
                    version += f' <span class="muted">{_e(broker["language"])}</span>'
                timeout = broker["heartbeatTimeoutSeconds"]
                cells += [
                    f'<td class="num">{broker["brokerId"]}</td>',
                    f'<td class="mono">{_e(broker["address"])}</td>',
                    f'<td>{version}</td>',
                    f'<td>{dv_text}</td>',
                    f'<td class="num">{_e(_ago(broker["secondsSinceHeartbeat"]))}</td>',
                    f'<td class="num">{"" if timeout is None else f"{timeout:g} s"}</td>',
                    f'<td class="num">{group["topicCount"]}</td>',
                    f'<td>{_broker_state(broker)}</td>']
                out.append('<tr class="broker" data-addr="' + _e(broker["address"]) + '">'
                           + "".join(cells) + '</tr>')
    out.append("</tbody></table></section>")
    return "".join(out)


def _pager(params, matched, per):
    pages = max(1, -(-matched // per))
    page = min(params["page"], pages)
    parts = ['<nav class="pager">']
    if page > 1:
        parts.append(f'<a class="pg" href="{_e(_query(params, page=1))}">« first</a>')
        parts.append(f'<a class="pg" rel="prev" href="{_e(_query(params, page=page - 1))}">‹ previous</a>')
    parts.append(f'<span>page {page} of {pages}</span>')
    if page < pages:
        parts.append(f'<a class="pg" rel="next" href="{_e(_query(params, page=page + 1))}">next ›</a>')
        parts.append(f'<a class="pg" href="{_e(_query(params, page=pages))}">last »</a>')
    parts.append("</nav>")
    return "".join(parts)


def _queue_data(qd):
    flag = f' <span class="muted">sysflag {qd["topicSysFlag"]}</span>' if qd["topicSysFlag"] else ""
    return (f'<span class="qd">{_e(qd["brokerName"])}: <span class="mono">r{qd["readQueueNums"]} '
            f'w{qd["writeQueueNums"]} {_e(qd["permText"])}</span>{flag}</span>')


def _topic_row(topic):
    queues = "<br>".join(_queue_data(qd) for qd in topic["queueDatas"])
    if topic["brokerDatas"]:
        route = "<br>".join(
            f'{_e(bd["brokerName"])} <span class="muted">({_e(bd["cluster"])})</span>: '
            + ", ".join(f'<span class="mono">{_e(bid)}={_e(addr)}</span>'
                        for bid, addr in bd["brokerAddrs"].items())
            for bd in topic["brokerDatas"])
    else:
        route = '<span class="muted">no route (no broker data)</span>'
    order = topic.get("orderTopicConf")
    extra = f'<br><span class="muted">order conf</span> <span class="mono">{_e(order)}</span>' if order else ""
    return (f'<tr class="topic"><td class="mono">{_e(topic["topic"])}</td><td>{queues}</td>'
            f'<td>{route}{extra}</td></tr>')


def _topics(view, params):
    per = params["per"]
    names = view.topic_names(params["q"])
    matched = len(names)
    total = view.counts()["topics"]
    pages = max(1, -(-matched // per))
    page = min(params["page"], pages)
    offset = (page - 1) * per
    shown = [view.topic(name) for name in names[offset:offset + per]]
    out = ['<section id="topics"><h2>Topics</h2>']
    what = f' matching “{_e(params["q"])}” ({total} in all)' if params["q"] else ""
    out.append(f'<p class="count" id="topic-count" data-matched="{matched}" data-total="{total}">'
               f'Showing {offset + 1 if shown else 0}–{offset + len(shown)} of {matched} '
               f'topics{what}.</p>')
    if not shown:
        out.append('<p class="empty">No topic matches.</p></section>' if params["q"]
                   else '<p class="empty">No topic is registered.</p></section>')
        return "".join(out)
    pager = _pager(dict(params, page=page), matched, per)
    out.append(pager)
    out.append('<table id="topic-table"><thead><tr><th>Topic</th><th>Queue data '
               '(broker: read/write queues, permission)</th><th>Route (broker id = address)</th>'
               '</tr></thead><tbody>')
    out.extend(_topic_row(t) for t in shown if t is not None)
    out.append("</tbody></table>")
    out.append(pager)
    out.append("</section>")
    return "".join(out)


def _kv(kv):
    out = ['<section id="kv"><h2>KV config namespaces</h2>']
    if not kv:
        out.append('<p class="empty">No KV config.</p></section>')
        return "".join(out)
    for namespace, entries in kv.items():
        out.append(f'<details><summary><span class="mono">{_e(namespace)}</span> '
                   f'<span class="muted">({len(entries)} keys)</span></summary>'
                   '<table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody>')
        for i, (key, value) in enumerate(entries.items()):
            if i == KV_SHOWN:
                out.append(f'<tr><td colspan="2" class="muted">… {len(entries) - KV_SHOWN} more in '
                           '<a href="/api/kv">/api/kv</a></td></tr>')
                break
            out.append(f'<tr><td class="mono">{_e(key)}</td><td class="mono">{_e(value)}</td></tr>')
        out.append("</tbody></table></details>")
    out.append("</section>")
    return "".join(out)


def render_status_page(view, params):
    """The whole page as ``bytes`` (UTF-8) for the parsed query ``params``."""
    summary = view.summary()
    refresh = params["refresh"]
    noscript = (f'<noscript><meta http-equiv="refresh" content="{refresh}"></noscript>'
                if refresh else "")
    uptime = summary["uptimeSeconds"]
    meta = (f'rocketpy {_e(summary["version"])} · answers like RocketMQ {_e(summary["profile"])}'
            f'{" · remoting " + _e(summary["listen"]) if summary["listen"] else ""}'
            f' · up {_e(_ago(uptime) if uptime < 7200 else f"{uptime / 3600:.1f} h")}')
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<title>rocketpy NameServer status</title>', _FAVICON, noscript,
        f'<style>{_CSS}</style></head><body>',
        f'<header><h1>rocketpy NameServer</h1><span class="meta">{meta}</span>',
        '<nav><a href="#clusters">Brokers</a><a href="#topics">Topics</a><a href="#kv">KV config</a>'
        '<a href="/metrics">Metrics</a><a href="/api/">JSON API</a></nav></header>',
        '<form id="filter" method="get" action="/" role="search">',
        '<label for="q">Filter topics</label>',
        f'<input id="q" name="q" type="search" value="{_e(params["q"])}" '
        'placeholder="topic or broker name" autocomplete="off" spellcheck="false">',
    ]
    if params["per"] != DEFAULT_LIMIT:
        parts.append(f'<input type="hidden" name="per" value="{params["per"]}">')
    if params["refresh"] != DEFAULT_REFRESH:
        parts.append(f'<input type="hidden" name="refresh" value="{params["refresh"]}">')
    parts += [
        '<button type="submit">Filter</button>',
        f'<label class="auto" id="autobox" hidden><input type="checkbox" id="auto" checked> '
        f'refresh every {refresh} s</label><span id="status"></span></form>',
        f'<main id="content" data-refresh="{refresh}">',
        _summary(summary), _clusters(view.clusters()), _topics(view, params), _kv(view.kv()),
        f'<p class="muted" id="updated">Updated {_e(time.strftime("%H:%M:%S"))} '
        f'(server time {summary["serverTime"]} ms).</p></main>',
        '<footer>Read-only. The same data as JSON: <a href="/api/">/api/</a>; Prometheus: '
        '<a href="/metrics">/metrics</a>.</footer>',
        f'<script>{_JS}</script></body></html>',
    ]
    return "".join(parts).encode("utf-8")
