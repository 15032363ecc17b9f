"""Admin layer: mqadmin 4.9.8's NameServer subcommands (names, options, requests, printed layout;
``org.apache.rocketmq.tools.command``), plus ``getKvConfig`` and ``getKvListByNamespace``.

Each :class:`SubCommand` runs against an :class:`~rocketpy.admin.api.MQAdmin` and writes to an
:class:`Output`: mqadmin's text (its ``printf`` formats, ``null``, Java's collection orders, the
missing final newlines of ``updateOrderConf``), a ``data`` value for ``--json``, and one line per
error. Where mqadmin prints a stack trace and carries on, the line is printed as mqadmin prints
it, the error recorded in ``Output.errors``, and the command ends with a non-zero status."""
import dataclasses
import json
import re

from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater

from ..namesrv.consistency import SECTIONS
from ..remoting import fastjson
from ..remoting.bodies import java_view
from ..remoting.javahash import concurrent_hashmap_order, hashmap_order, hashmap_ordered
from .api import ORDER_TOPIC_CONFIG, cluster_of
from .consistency import compare_nameservers

__all__ = ["SubCommand", "Option", "Output", "COMMANDS", "printable", "json_text", "print_configs"]

#: ``MixAll.RETRY_GROUP_TOPIC_PREFIX``, ``MixAll.DLQ_GROUP_TOPIC_PREFIX``
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"
#: ``CommandUtil.ERROR_MESSAGE``
NO_CLUSTER = "Make sure the specified clusterName exists or the name server connected to is correct."


@dataclasses.dataclass(frozen=True)
class Option:
    """One commons-cli option: ``-short``/``--long``, with an argument or a flag."""

    short: str
    long: str
    has_arg: bool
    required: bool
    description: str


#: The options several subcommands share, as mqadmin spells them.
TOPIC = Option("t", "topic", True, True, "topic name")
NAMESPACE = Option("s", "namespace", True, True, "set the namespace")
KEY = Option("k", "key", True, True, "set the key name")


#: What a terminal acts on rather than shows: C0, DEL, C1 (a lone 0x9b is a CSI to some
#: terminals), the line and paragraph separators U+2028 and U+2029 (a line break to many
#: terminals, editors and log viewers: a name could forge a line) and the bidirectional marks,
#: overrides and isolates that reorder what is shown.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                          "\u2066-\u2069]")


def printable(text, keep=""):
    """``text`` with every character a terminal would act on (escape sequences, line breaks,
    bidi controls; all but those in ``keep``) written as ``\\xNN``/``\\uNNNN``: names come from
    the wire (any peer may register a broker called ``"\\x1b]0;..."``), text output must not let
    them drive the terminal or forge lines. :func:`json_text` escapes them in ``--json``."""
    def escape(match):
        ch = match.group()
        if ch in keep:
            return ch
        return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"
    return _UNPRINTABLE.sub(escape, text)


def json_text(data):
    """``--json``'s document: indented, non-ASCII text as it is, but every character
    :func:`printable` escapes written as a JSON escape (``json`` leaves DEL, C1, U+2028 and the
    bidi controls raw), so the document reads back the same and drives no terminal."""
    def escape(match):
        ch = match.group()
        return ch if ch == "\n" else f"\\u{ord(ch):04x}"     # "\n" is layout: json escapes its own
    return _UNPRINTABLE.sub(escape, json.dumps(data, indent=2, ensure_ascii=False, default=str))


class Output:
    """What a command produced: ``text`` (mqadmin's), ``data`` (``--json``), ``errors``."""

    def __init__(self, sink=None):
        self.parts = []
        self.data = None
        self.errors = []
        self.sink = sink

    def flush(self):
        """Hand what is printed so far to ``sink`` (``clusterList -i`` prints as it goes)."""
        if self.sink is not None:
            self.sink(self.text)
            self.parts = []

    def printf(self, fmt, *args):
        """Java ``System.out.printf`` of a format using ``%s %d %-Ns %N.Mf %n``, every string
        argument :func:`printable`."""
        self.parts.append(fmt.replace("%n", "\n") % tuple(
            printable(a) if isinstance(a, str) else a for a in map(_java, args)))

    def print_layout(self, text):
        """``text`` whose line breaks and tabs are its layout (a pretty JSON document)."""
        self.parts.append(printable(text, keep="\n\t"))

    @property
    def text(self):
        return "".join(self.parts)


def _java(value):
    """A value as Java's ``%s`` shows it: null as ``null``, booleans in lower case."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    return value


def _java_map_string(mapping):
    """``AbstractMap.toString`` of a ``HashMap``: ``{k=v, k=v}`` in hash order."""
    return "{" + ", ".join(f"{k}={v}" for k, v in hashmap_ordered(mapping).items()) + "}"


def _front(text, size):
    """``UtilAll.frontStringAtLeast``: at most ``size`` characters (null stays null)."""
    return text[:size] if text is not None and len(text) > size else text


def _one_line(failure):
    return " ".join(failure.getErrorMessage().split())


class SubCommand:
    """A subcommand: ``name``, ``description``, ``options``; ``run(admin, args, out)``."""

    name = ""
    description = ""
    options = ()

    def run(self, admin, args, out):
        raise NotImplementedError


# -- cluster ----------------------------------------------------------------------------------------

class ClusterList(SubCommand):
    """``ClusterListSubCommand``: brokers by cluster, with statistics asked of each broker
    (GET_BROKER_RUNTIME_INFO, ``--concurrency`` at a time here, one by one in mqadmin). ``-c``
    is 5.x's."""

    name = "clusterList"
    description = "List all of clusters"
    options = (Option("m", "moreStats", False, False, "Print more stats"),
               Option("i", "interval", True, False, "specify intervals numbers, it is in seconds"),
               Option("c", "clusterName", True, False, "which cluster"))

    BASE = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s%n"
    MORE = "%-16s  %-32s %14s %14s %14s %14s%n"

    @inlineCallbacks
    def run(self, admin, args, out):
        interval = None
        if args.interval is not None:
            if not args.interval.isdigit() or int(args.interval) < 1:
                raise ValueError(f"-i: {args.interval!r} is not a number of seconds")
            interval = int(args.interval)
        while True:
            yield self._once(admin, args, out)
            if interval is None:
                return
            out.flush()
            yield deferLater(admin.client.clock, interval, lambda: None)

    @inlineCallbacks
    def _once(self, admin, args, out):
        info = yield admin.examine_broker_cluster_info()
        table = info.cluster_addr_table or {}
        wanted = args.clusterName or ""
        clusters = [wanted] if wanted else hashmap_order(table)
        rows = []
        for cluster in clusters:
            for broker_name in sorted(table.get(cluster) or ()):
                broker = (info.broker_addr_table or {}).get(broker_name)
                if broker is None:
                    continue
                for broker_id, addr in hashmap_ordered(broker.broker_addrs or {}).items():
                    rows.append((cluster, broker_name, broker_id, addr))
        stats = yield admin.fetch_broker_runtime_stats_of([addr for *_, addr in rows])
        now_ms = int(admin.client.clock.seconds() * 1000)
        out.data = []
        if args.moreStats:
            out.printf(self.MORE, "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest",
                       "#InTotalToday", "#OutTotalToday")
        else:
            out.printf(self.BASE, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version",
                       "#InTPS(LOAD)", "#OutTPS(LOAD)", "#PCWait(ms)", "#Hour", "#SPACE")
        for (cluster, broker_name, broker_id, addr), (ok, result) in zip(rows, stats):
            kv = result.table if ok else {}
            if not ok:
                out.errors.append(f"broker {broker_name} ({addr}): {_one_line(result)}")
            out.data.append({"cluster": cluster, "brokerName": broker_name, "brokerId": broker_id,
                             "addr": addr, "stats": kv if ok else None,
                             "error": None if ok else _one_line(result)})
            if args.moreStats:
                out.printf(self.MORE, cluster, broker_name, *_totals(kv))
            else:
                self._base_row(out, cluster, broker_name, broker_id, addr, kv, ok, now_ms)

    def _base_row(self, out, cluster, broker_name, broker_id, addr, kv, ok, now_ms):
        """One row of ``printClusterBaseInfo``: after a failed fetch every value is ""."""
        get = kv.get if ok else (lambda key: "")
        tps_in = _first_double(get("putTps")) if ok else 0.0
        tps_out = _first_double(get("getTransferedTps")) if ok else 0.0
        earliest, ratio = get("earliestMessageTimeStamp"), get("commitLogDiskRatio")
        hour = (now_ms - int(earliest)) / 1000.0 / 60.0 / 60.0 if earliest else 0.0
        space = float(ratio) if ratio else 0.0
        out.printf(self.BASE, cluster, broker_name, broker_id, addr, get("brokerVersionDesc"),
                   "%9.2f(%s,%sms)" % (tps_in, _java(get("sendThreadPoolQueueSize")),
                                       _java(get("sendThreadPoolQueueHeadWaitTimeMills"))),
                   "%9.2f(%s,%sms)" % (tps_out, _java(get("pullThreadPoolQueueSize")),
                                       _java(get("pullThreadPoolQueueHeadWaitTimeMills"))),
                   get("pageCacheLockTimeMills"), "%2.2f" % hour, "%.4f" % space)


def _first_double(text):
    """``Double.parseDouble(tps.split(" ")[0])`` (0 when there is nothing to read)."""
    try:
        return float((text or "").split(" ")[0])
    except ValueError:
        return 0.0


def _totals(kv):
    """``printClusterMoreStats``' four message totals (0 when the broker did not say)."""
    try:
        put = [int(kv[k]) for k in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning",
                                    "msgPutTotalTodayNow")]
        got = [int(kv[k]) for k in ("msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning",
                                    "msgGetTotalTodayNow")]
    except (KeyError, ValueError, TypeError):
        return 0, 0, 0, 0
    return put[1] - put[0], got[1] - got[0], put[2] - put[1], got[2] - got[1]


# -- topics ---------------------------------------------------------------------------------------

class TopicRoute(SubCommand):
    """``TopicRouteSubCommand``: the route as fastjson's pretty JSON, or ``-l`` a table."""

    name = "topicRoute"
    description = "Examine topic route info"
    options = (TOPIC, Option("l", "list", False, False, "Use list format to print data"))
    FORMAT = "%-45s %-32s %-50s %-10s %-11s %-5s%n"

    @inlineCallbacks
    def run(self, admin, args, out):
        route = yield admin.examine_topic_route_info(args.topic)
        out.data = fastjson.loads(fastjson.dumps(java_view(route, admin.version), standard=True))
        if not args.list:
            pretty = fastjson.dumps(java_view(route, admin.version), pretty=True).decode()
            out.print_layout(pretty + "\n")
            return
        queues = {q.broker_name: q for q in route.queue_datas or []}
        out.printf(self.FORMAT, "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue",
                   "#WriteQueue", "#Perm")
        total_read = total_write = 0
        for broker in sorted(route.broker_datas or [], key=lambda b: b.broker_name or ""):
            queue = queues.get(broker.broker_name)
            if queue is None:
                raise ValueError(f"the route has no queue data for broker {broker.broker_name}")
            total_read += queue.read_queue_nums
            total_write += queue.write_queue_nums
            out.printf(self.FORMAT, broker.cluster, broker.broker_name,
                       _java_map_string(broker.broker_addrs or {}), queue.read_queue_nums,
                       queue.write_queue_nums, queue.perm)
        out.printf("-" * 158 + "%n")
        out.printf(self.FORMAT, "Total:", len(queues), "", total_read, total_write, "")


class TopicList(SubCommand):
    """``TopicListSubCommand``: every topic; ``-c`` with its cluster and consumer groups (the
    groups are asked of a broker of the topic; a failure leaves them empty, as mqadmin)."""

    name = "topicList"
    description = "Fetch all topic list from name server"
    options = (Option("c", "clusterModel", False, False, "clusterModel"),)

    @inlineCallbacks
    def run(self, admin, args, out):
        if not args.clusterModel:
            topics = yield admin.fetch_all_topic_list()
            names = hashmap_order(topics.topic_list)
            out.data = names
            for topic in names:
                out.printf("%s%n", topic)
            return
        info = yield admin.examine_broker_cluster_info()
        out.printf("%-20s  %-48s  %-48s%n", "#Cluster Name", "#Topic", "#Consumer Group")
        topics = yield admin.fetch_all_topic_list()
        out.data = []
        for topic in hashmap_order(topics.topic_list):
            if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
                continue
            cluster, groups = "", None
            try:
                route = yield admin.examine_topic_route_info(topic)
                cluster = cluster_of(info, route)
                groups = yield admin.query_topic_consume_by_who(topic)
            except Exception:  # mqadmin: an empty row, no error
                pass
            groups = hashmap_order(groups) if groups else [""]
            out.data.append({"cluster": cluster, "topic": topic, "groups": [g for g in groups if g]})
            for group in groups:
                out.printf("%-20s  %-64s  %-64s%n", _front(cluster, 20), _front(topic, 64),
                           _front(group, 64))


class TopicClusterList(SubCommand):
    """``TopicClusterSubCommand``: the cluster(s) a topic is in."""

    name = "topicClusterList"
    description = "get cluster info for topic"
    options = (TOPIC,)

    @inlineCallbacks
    def run(self, admin, args, out):
        clusters = yield admin.get_topic_cluster_list(args.topic)
        out.data = clusters
        for cluster in clusters:
            out.printf("%s%n", cluster)


class DeleteTopic(SubCommand):
    """``DeleteTopicSubCommand``: from the cluster's master brokers, then from every NameServer
    of ``-n``. A cluster the NameServer does not know is an error here (mqadmin prints
    "[error]" and goes on to delete nothing)."""

    name = "deleteTopic"
    description = "Delete topic from broker and NameServer."
    options = (TOPIC, Option("c", "clusterName", True, True, "delete topic from which cluster"))

    @inlineCallbacks
    def run(self, admin, args, out):
        topic, cluster = args.topic, args.clusterName
        masters = yield admin.fetch_master_addr_by_cluster_name(cluster)
        if masters is None:
            raise LookupError(f"no cluster {cluster}: {NO_CLUSTER}")
        yield admin.delete_topic_in_broker(masters, topic)
        out.printf("delete topic [%s] from cluster [%s] success.%n", topic, cluster)
        namesrvs = hashmap_order(dict.fromkeys(admin.namesrv_addrs))
        yield admin.delete_topic_in_name_server(namesrvs, topic, cluster)
        out.printf("delete topic [%s] from NameServer success.%n", topic)
        out.data = {"topic": topic, "cluster": cluster, "brokers": masters, "nameServers": namesrvs}


class UpdateOrderConf(SubCommand):
    """``UpdateOrderConfCommand``: the ORDER_TOPIC_CONFIG entry of a topic (get, put, delete);
    like mqadmin it prints no newline after the result."""

    name = "updateOrderConf"
    description = "Create or update or delete order conf"
    options = (TOPIC,
               Option("v", "orderConf", True, False, "set order conf [eg. brokerName1:num;brokerName2:num]"),
               Option("m", "method", True, True, "option type [eg. put|get|delete"))

    @inlineCallbacks
    def run(self, admin, args, out):
        topic, method = args.topic, args.method
        if method == "get":
            conf = yield admin.get_kv_config(ORDER_TOPIC_CONFIG, topic)
            out.printf("get orderConf success. topic=[%s], orderConf=[%s] ", topic, conf)
        elif method == "put":
            conf = args.orderConf or ""
            if not conf:
                raise ValueError("please set orderConf with option -v.")
            yield admin.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
            out.printf("update orderConf success. topic=[%s], orderConf=[%s]", topic, conf)
        elif method == "delete":
            yield admin.delete_kv_config(ORDER_TOPIC_CONFIG, topic)
            out.printf("delete orderConf success. topic=[%s]", topic)
        else:
            raise ValueError(f"unknown method {method!r}: put, get or delete")
        out.data = {"topic": topic, "method": method,
                    "orderConf": conf if method != "delete" else None}


# -- NameServer configuration and KV ---------------------------------------------------------------

def _server_list(admin, args):
    """mqadmin's ``servers.trim().split(";")`` of ``-n`` (None without ``-n``)."""
    return list(admin.namesrv_addrs) if args.namesrvAddr else None


def print_configs(out, configs):
    """``{address: {key: value}}`` as mqadmin prints each server's settings: the addresses in the
    order of a ``HashMap(4)``, each one's keys in that of the ``Properties`` (a ConcurrentHashMap)
    they were read into."""
    out.data = configs
    for addr in hashmap_order(list(configs), 4):
        out.printf("============%s============\n", addr)
        props = configs[addr]
        for key in concurrent_hashmap_order(props, 8):
            out.printf("%-50s=  %s\n", key, props[key])


class GetNamesrvConfig(SubCommand):
    """``GetNamesrvConfigCommand``: each NameServer's settings, in the iteration order of the
    ``java.util.Properties`` (a ConcurrentHashMap) mqadmin reads them into."""

    name = "getNamesrvConfig"
    description = "Get configs of name server."

    @inlineCallbacks
    def run(self, admin, args, out):
        print_configs(out, (yield admin.get_name_server_config()))


class UpdateNamesrvConfig(SubCommand):
    """``UpdateNamesrvConfigCommand``: one key on every NameServer of ``-n``."""

    name = "updateNamesrvConfig"
    description = "Update configs of name server."
    options = (Option("k", "key", True, True, "config key"),
               Option("v", "value", True, True, "config value"))

    @inlineCallbacks
    def run(self, admin, args, out):
        key, value = args.key, args.value
        yield admin.update_name_server_config({key: value})
        servers = _server_list(admin, args)
        out.printf("update name server config success!%s\n%s : %s\n",
                   "" if servers is None else "[" + ", ".join(servers) + "]", key, value)
        out.data = {"key": key, "value": value, "nameServers": admin.namesrv_addrs}


class UpdateKvConfig(SubCommand):
    name = "updateKvConfig"
    description = "Create or update KV config."
    options = (NAMESPACE, KEY, Option("v", "value", True, True, "set the key value"))

    @inlineCallbacks
    def run(self, admin, args, out):
        namespace, key, value = args.namespace, args.key, args.value
        yield admin.put_kv_config(namespace, key, value)
        out.printf("create or update kv config to namespace success.%n")
        out.data = {"namespace": namespace, "key": key, "value": value}


class DeleteKvConfig(SubCommand):
    name = "deleteKvConfig"
    description = "Delete KV config."
    options = (NAMESPACE, KEY)

    @inlineCallbacks
    def run(self, admin, args, out):
        namespace, key = args.namespace, args.key
        yield admin.delete_kv_config(namespace, key)
        out.printf("delete kv config from namespace success.%n")
        out.data = {"namespace": namespace, "key": key}


class GetKvConfig(SubCommand):
    """rocketpy's (mqadmin has none): one KV value (GET_KV_CONFIG)."""

    name = "getKvConfig"
    description = "Get one KV config value."
    options = (NAMESPACE, KEY)

    @inlineCallbacks
    def run(self, admin, args, out):
        namespace, key = args.namespace, args.key
        value = yield admin.get_kv_config(namespace, key)
        out.printf("%s%n", value)
        out.data = {"namespace": namespace, "key": key, "value": value}


class GetKvListByNamespace(SubCommand):
    """rocketpy's (mqadmin has none): a whole KV namespace (GET_KVLIST_BY_NAMESPACE), in the
    layout of getNamesrvConfig."""

    name = "getKvListByNamespace"
    description = "Get all KV configs of a namespace."
    options = (NAMESPACE,)

    @inlineCallbacks
    def run(self, admin, args, out):
        namespace = args.namespace
        table = yield admin.get_kv_list_by_namespace(namespace)
        out.data = {"namespace": namespace, "table": table.table}
        for key, value in hashmap_ordered(table.table).items():
            out.printf("%-50s=  %s\n", key, value)


class _WritePerm(SubCommand):
    """wipeWritePerm/addWritePerm: each NameServer of ``-n`` in turn; a failure is printed as
    mqadmin prints it and the others are still asked."""

    options = (Option("b", "brokerName", True, True, "broker name"),)
    verb = ""

    def call(self, admin, addr, broker):
        raise NotImplementedError

    @inlineCallbacks
    def run(self, admin, args, out):
        broker = args.brokerName
        out.data = {}
        for addr in admin.namesrv_addrs:
            try:
                count = yield self.call(admin, addr, broker)
            except Exception as exc:
                out.printf(f"{self.verb} write perm of broker[%s] in name server[%s] Failed%n",
                           broker, addr)
                out.errors.append(f"{addr}: {' '.join(str(exc).split())}")
                out.data[addr] = None
                continue
            out.printf(f"{self.verb} write perm of broker[%s] in name server[%s] OK, %d%n",
                       broker, addr, count)
            out.data[addr] = count


class WipeWritePerm(_WritePerm):
    name = "wipeWritePerm"
    description = "Wipe write perm of broker in all name server you defined in the -n param"
    verb = "wipe"

    def call(self, admin, addr, broker):
        return admin.wipe_write_perm_of_broker(addr, broker)


class AddWritePerm(_WritePerm):
    name = "addWritePerm"
    description = "Add write perm of broker in all name server you defined in the -n param"
    verb = "add"

    def call(self, admin, addr, broker):
        return admin.add_write_perm_of_broker(addr, broker)


class CompareNamesrv(SubCommand):
    """rocketpy's (mqadmin has none): whether the NameServers of ``-n`` hold the same clusters,
    brokers and routes (:func:`~rocketpy.admin.consistency.compare_nameservers`): a digest
    row per NameServer, then each item that differs with its value on each; an unreadable
    NameServer or any difference fails the command."""

    name = "compareNamesrv"
    description = "Compare clusters, brokers and topic routes across the name servers of -n."
    HEAD = "%-24s %9s %9s %9s  %-12s  %-12s  %-12s%n"
    #: differences of each kind printed by default (all are counted; --json has every one)
    LIMIT = 20
    options = (Option("l", "limit", True, False,
                      f"differences of each kind printed at most (default {LIMIT}; 0: all)"),)

    @inlineCallbacks
    def run(self, admin, args, out):
        text = str(self.LIMIT) if args.limit is None else args.limit
        if not (text.isascii() and text.isdigit() and len(text) <= 9):
            raise ValueError(f"-l: {text!r} is not a number of differences (0: all)")
        limit = int(text)
        comparison = yield compare_nameservers(admin)
        out.data = comparison.to_json()
        out.printf(self.HEAD, "#NameServer", "#Clusters", "#Brokers", "#Topics", "#ClustersSum",
                   "#BrokersSum", "#TopicsSum")
        for view in comparison.views:
            if view.error is not None:
                out.printf("%-24s %s%n", view.addr, "unreadable")
                out.errors.append(f"{view.addr}: {view.error}")
                continue
            digests = view.digests()
            out.printf(self.HEAD, view.addr, *(len(getattr(view, s)) for _, s in SECTIONS),
                       *(digests[s] for _, s in SECTIONS))
        width = max(len(view.addr) for view in comparison.views)
        counts = {}
        for difference in comparison.differences:
            counts[difference.kind] = counts.get(difference.kind, 0) + 1
            if limit and counts[difference.kind] > limit:
                continue
            out.printf("%s %s differs:%n", difference.kind, difference.name)
            for addr, text in difference.values.items():
                out.printf(f"  %-{width}s  %s%n", addr, "(absent)" if text is None else text)
        hidden = {kind: n - limit for kind, n in counts.items() if limit and n > limit}
        if hidden:
            out.printf("(%s not shown: -l 0 prints every difference)%n", ", ".join(
                f"{n} more {kind}{'s' if n > 1 else ''}" for kind, n in hidden.items()))
        if counts:
            summary = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in counts.items())
            out.printf("%d NameServers diverge: %s differ.%n", len(comparison.views), summary)
            out.errors.append(f"the NameServers diverge: {summary} differ")
        elif not out.errors:
            out.printf("%d NameServers agree.%n", len(comparison.views))


#: In mqadmin's help order (rocketpy's own last).
COMMANDS = (TopicRoute(), TopicClusterList(), DeleteTopic(), ClusterList(), TopicList(),
            UpdateKvConfig(), DeleteKvConfig(), GetKvConfig(), GetKvListByNamespace(),
            WipeWritePerm(), AddWritePerm(), UpdateOrderConf(), GetNamesrvConfig(),
            UpdateNamesrvConfig(), CompareNamesrv())

