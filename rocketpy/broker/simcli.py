"""``rocketpy-brokersim``: N simulated brokers x M topics against one or more NameServers
(:mod:`rocketpy.broker.sim`).

    rocketpy-brokersim -n "127.0.0.1:9876;127.0.0.1:9877" --brokers 200 --topics 10 \\
        --replicas 2 --clusters 2 --period 30 --duration 300 --churn 30 --verify

While it runs it prints a progress line every ``--progress`` seconds on stderr; at the end a
summary on stdout (``--json`` for a JSON report): per NameServer the registrations answered and
failed, latency p50/p99/max and rate, then the counts (registrations, QUERY_DATA_VERSION,
heartbeats, churn events) and errors by kind. ``--verify`` checks, after the churn, that every
NameServer's cluster table and routes match the brokers that are up. Exit status 1 when a
registration failed, when a broker could not listen on its port, when ``--verify`` found a
difference, or when an option is wrong (one line on stderr each), 0 otherwise; the same when
Ctrl-C or SIGTERM stops it early (brokers unregister first).

``--until-stdin-closes`` hands the phases to whoever drives it (a test waiting for the
NameServers' own answers, not for a clock): a line on stdin starts the churn, the end of stdin
ends the run (``--duration`` is then only a cap).
"""
import argparse
import json
import os
import sys
import threading

__all__ = ["main", "build_parser", "options_from_args", "format_report", "failure_lines"]

PROG = "rocketpy-brokersim"


def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    a = p.add_argument
    a("-n", "--namesrvAddr", help="NameServer address list, eg: '192.168.0.1:9876;192.168.0.2:9876' "
      "(default: $NAMESRV_ADDR)")
    a("--brokers", type=int, default=10, help="brokers in all, masters and slaves (default 10)")
    a("--topics", type=int, default=10, help="topics per broker group, besides the system topics")
    a("--clusters", type=int, default=1, help="clusters the broker groups are spread over")
    a("--replicas", type=int, default=1, help="brokers per group: a master and replicas-1 slaves")
    a("--zones", type=int, default=0, help="zones (a __ZONE_NAME per group; read by 5.x NameServers)")
    a("--topic-spread", type=int, default=1, help="neighbouring groups sharing each topic")
    a("--topic-prefix", default="SimTopic-", help="topic names: PREFIX0, PREFIX1, ... (default SimTopic-)")
    a("--broker-prefix", default="broker-", help="broker names: PREFIX0, PREFIX1, ... (default "
      "broker-); two simulators against one NameServer need different ones, and --base-port")
    a("--version", default="4.9.8", help="broker release to speak as: 4.9.8, 5.0.0, 5.3.3, ...")
    a("--serialize", default="JSON", choices=("JSON", "ROCKETMQ"), help="header encoding")
    a("--compressed", action="store_true", help="compressedRegister=true")
    a("--no-force", action="store_true", help="forceRegister=false: QUERY_DATA_VERSION first")
    a("--period", type=float, default=30.0, help="registerNameServerPeriod, seconds (default 30)")
    a("--jitter", type=float, default=0.1, help="random share of the period added or taken (0.1)")
    a("--ramp", type=float, help="first registrations spread over this many seconds (default: period)")
    a("--acting-master", action="store_true", help="5.x enableSlaveActingMaster: heartbeats")
    a("--broker-heartbeat", action="store_true",
      help="heartbeat with BROKER_HEARTBEAT (compatibleWithOldNameSrv=false)")
    a("--heartbeat-interval", type=float, default=1.0, help="brokerHeartbeatInterval, seconds")
    refresh = p.add_mutually_exclusive_group()
    refresh.add_argument("--refresh-metadata", dest="refresh", action="store_const", const=True,
                         help="GET_BROKER_CLUSTER_INFO every 5 s (default for 5.x)")
    refresh.add_argument("--no-refresh-metadata", dest="refresh", action="store_const", const=False)
    a("--no-system-topics", action="store_true", help="leave out a genuine broker's system topics")
    a("--churn", type=float, default=0.0, help="churn events a minute (kill, restart, new topic)")
    a("--churn-after", type=float, default=0.0, help="seconds before the churn starts")
    a("--down", type=float, default=5.0, help="seconds a killed or restarted broker stays away")
    a("--duration", type=float, default=60.0, help="seconds to run (default 60)")
    a("--until-stdin-closes", action="store_true", help="run until stdin ends (--duration is "
      "then a cap); with --churn, the churn starts at the first line read there")
    a("--progress", type=float, default=5.0, help="seconds between progress lines (0: none)")
    a("--verify", action="store_true", help="check the NameServers' routes after the churn")
    a("--settle", type=float, default=2.0, help="seconds --verify waits at most, after the "
      "churn, for the NameServers to agree (it asks again until they do)")
    a("--host", default="127.0.0.1", help="the brokers' address (brokerIP1)")
    a("--base-port", type=int, default=20911, help="listenPort of the first broker (then +2 each)")
    a("--listen", action="store_true", help="brokers listen on their addresses and answer "
      "clusterList's, deleteTopic's and topicList -c's requests")
    a("--timeout", type=float, help="registration timeout, seconds (default: the release's)")
    a("--seed", type=int, help="random seed (jitter, ramp, churn)")
    a("--controller", metavar="HOST:PORT",
      help="controller mode (5.1.1+ brokers): ids, election, heartbeats and failover through the "
           "RocketMQ 5 controller at this address; --verify also checks one master per group")
    a("--json", action="store_true", help="print the report as JSON")
    return p


class _OptionError(Exception):
    pass


def options_from_args(args):
    """A :class:`~rocketpy.broker.sim.SimOptions` from parsed arguments (errors: _OptionError)."""
    from ..remoting.codes import MQVersion, SerializeType, release_ordinal
    from ..transport.client import namesrv_addr_list
    from .sim import SimOptions
    try:
        addrs = namesrv_addr_list(args.namesrvAddr if args.namesrvAddr is not None
                                  else os.environ.get("NAMESRV_ADDR"))
    except ValueError as exc:
        raise _OptionError(str(exc) if "no NameServer" in str(exc) else f"-n: {exc}") from None
    ordinal = release_ordinal(args.version)
    if ordinal is None or ordinal < MQVersion.V4_0_0:
        raise _OptionError(f"--version: {args.version.strip()!r} is not a broker release "
                           "(4.9.8, 5.0.0, ...)")
    for name in ("brokers", "topics", "clusters", "replicas", "topic_spread"):
        if getattr(args, name) < (0 if name == "topics" else 1):
            raise _OptionError(f"--{name.replace('_', '-')} must be at least "
                               f"{0 if name == 'topics' else 1}")
    for name in ("period", "heartbeat_interval", "duration"):
        if getattr(args, name) <= 0:
            raise _OptionError(f"--{name.replace('_', '-')} must be more than 0")
    if not 0 <= args.jitter < 1:
        raise _OptionError("--jitter must be in [0, 1)")
    if min(args.churn, args.churn_after, args.down, args.zones, args.settle) < 0:
        raise _OptionError("--churn, --churn-after, --down, --zones and --settle cannot be negative")
    if not args.broker_prefix.strip() or not args.topic_prefix.strip():
        raise _OptionError("--broker-prefix and --topic-prefix cannot be empty")
    if not (0 < args.base_port and args.base_port + 2 * args.brokers <= 65536):
        raise _OptionError(f"--base-port {args.base_port}: the brokers' ports would not fit "
                           "in 1..65535")
    if (args.acting_master or args.broker_heartbeat) and ordinal < MQVersion.V5_0_0:
        raise _OptionError("--acting-master and --broker-heartbeat need a 5.x --version")
    if args.controller is not None:
        from ..transport.client import split_address
        try:
            split_address(args.controller)
        except ValueError as exc:
            raise _OptionError(f"--controller: {exc}") from None
        if ordinal < MQVersion.V5_1_1:
            raise _OptionError("--controller needs --version 5.1.1 or later (e.g. 5.3.3)")
    return SimOptions(
        namesrv_addrs=addrs, brokers=args.brokers, topics=args.topics, clusters=args.clusters,
        replicas=args.replicas, zones=args.zones, topic_spread=args.topic_spread,
        topic_prefix=args.topic_prefix, broker_prefix=args.broker_prefix.strip(),
        listen=args.listen, version=ordinal,
        serialize_type=SerializeType[args.serialize], compressed=args.compressed,
        force_register=not args.no_force, period=args.period, jitter=args.jitter, ramp=args.ramp,
        acting_master=args.acting_master or args.broker_heartbeat,
        broker_heartbeat=args.broker_heartbeat, heartbeat_interval=args.heartbeat_interval,
        refresh_metadata=args.refresh, system_topics=not args.no_system_topics, churn=args.churn,
        churn_after=None if args.until_stdin_closes else args.churn_after, down=args.down,
        broker_host=args.host, base_port=args.base_port, timeout=args.timeout,
        seed=args.seed, controller_addr=args.controller)


def _ms(value):
    return "-" if value is None else f"{value:.1f}"


def format_report(report, problems=None):
    """The summary as text."""
    lines = [f"{PROG}: {report['brokers']} brokers ({report['groups']} groups x {report['replicas']}, "
             f"{report['clusters']} cluster(s), {report['zones']} zone(s)), {report['topics_per_broker']} "
             f"topics each, {report['version']} {report['serialize_type']}"
             f"{' compressed' if report['compressed'] else ''}, period {report['period_s']:g} s, "
             f"ran {report['elapsed_s']:.1f} s, {report['live']} up at the end",
             f"{'NameServer':<24} {'ok':>9} {'failed':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'ok/s':>8}"]
    for addr, row in report["namesrv"].items():
        lines.append(f"{addr:<24} {row['ok']:>9} {row['failed']:>8} {_ms(row['p50_ms']):>8} "
                     f"{_ms(row['p99_ms']):>8} {_ms(row['max_ms']):>8} {row['rate_per_s']:>8.1f}")
    counts = report["counts"]
    lines.append("counts: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))
    errors = report["errors"]
    lines.append("errors: " + (", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"))
    if report.get("last_error"):
        lines.append(f"last error: {report['last_error']}")
    if problems is not None:
        if problems:
            lines.append(f"verify: INCONSISTENT ({len(problems)} problems)")
            lines += [f"  {p}" for p in problems[:20]]
        else:
            verified = report["verified"] or {}
            lines.append(f"verify: consistent ({verified.get('brokers_up')} brokers up, "
                         f"{verified.get('topics')} topics, on each of "
                         f"{len(report['namesrv'])} NameServer(s))")
    return "\n".join(lines) + "\n"


def failure_lines(sim, problems):
    """One line per reason to end with status 1: registrations that failed, a verify that found
    differences."""
    lines = []
    errors = sim.stats.errors
    failed = sum(n for kind, n in errors.items() if kind.startswith("registration:"))
    if failed:
        sent = sim.stats.counts["registrations"] * len(sim.options.namesrv_addrs)
        lines.append(f"{failed} of {sent} registrations failed (last error: "
                     f"{sim.stats.last_error})")
    unbound = sum(n for kind, n in errors.items() if kind.startswith(("listen:", "restart: listen")))
    if unbound:
        lines.append(f"{unbound} times a broker could not listen on its port (last error: "
                     f"{sim.stats.last_error})")
    if problems:
        lines.append(f"verify found {len(problems)} differences between the NameServers and "
                     "the brokers up")
    return lines


def _until_stdin_closes(reactor, running, on_line):
    """A Deferred that fires with ``running`` or at the end of stdin, whichever comes first;
    ``on_line`` is called (on the reactor) at the first line read before that end."""
    from twisted.internet.defer import Deferred
    done = Deferred()

    def end(_=None):
        if not done.called:
            done.callback(None)

    def read():                      # a thread: reading stdin blocks
        first = sys.stdin.readline()
        if first:
            reactor.callFromThread(on_line)
            sys.stdin.read()
        reactor.callFromThread(end)

    threading.Thread(target=read, name="brokersim-stdin", daemon=True).start()
    running.addBoth(end)
    return done


def main(argv=None):
    """Console entry point."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        options = options_from_args(args)
    except _OptionError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        sys.exit(1)

    from twisted.internet import reactor
    from twisted.internet.defer import inlineCallbacks

    from .sim import BrokerSim

    def emit(line):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    sim = BrokerSim(reactor, options, emit=emit)
    outcome = {"status": 0, "problems": None, "stopping": False, "reported": False}

    def finish(_=None):
        """The report, then one line on stderr per reason for status 1 (however the run
        ended: its time was up, or Ctrl-C / SIGTERM cut it short)."""
        if outcome["reported"]:
            return
        outcome["reported"] = True
        report = sim.report()
        if args.json:
            report["verify"] = outcome["problems"]
            sys.stdout.write(json.dumps(report, indent=2) + "\n")
        else:
            sys.stdout.write(format_report(report, outcome["problems"]))
        sys.stdout.flush()
        for line in failure_lines(sim, outcome["problems"]):
            sys.stderr.write(f"{PROG}: {line}\n")
            outcome["status"] = 1

    @inlineCallbacks
    def scenario():
        try:
            running = sim.run(args.duration, args.progress)
            if args.until_stdin_closes:
                running = _until_stdin_closes(reactor, running, sim.start_churn)
            yield running
            if args.verify:
                outcome["problems"] = yield sim.verify(args.settle)
            outcome["stopping"] = True
            yield sim.stop()
        except Exception as exc:  # a bug or an unexpected failure: one line, status 1
            sys.stderr.write(f"{PROG}: {' '.join(str(exc).split())}\n")
            outcome["status"] = 1
        finish()
        if reactor.running:
            reactor.stop()

    def interrupted():
        """Ctrl-C or SIGTERM: unregister the brokers, then report what was done so far."""
        if sim.started_at is None or outcome["stopping"]:
            return None
        outcome["stopping"] = True
        return sim.stop().addBoth(finish)

    reactor.callWhenRunning(scenario)
    reactor.addSystemEventTrigger("before", "shutdown", interrupted)
    reactor.run()
    sys.exit(outcome["status"])


if __name__ == "__main__":
    main()
