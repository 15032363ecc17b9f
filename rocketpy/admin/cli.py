"""``rocketpy-admin``: mqadmin's NameServer commands, in Python (Java ``MQAdminStartup``).

    rocketpy-admin                          the list of commands
    rocketpy-admin help clusterList         one command's options
    rocketpy-admin clusterList -n "127.0.0.1:9876;127.0.0.1:9877"
    rocketpy-admin topicRoute -n 127.0.0.1:9876 -t TopicA --json

Options are mqadmin's (``-n/--namesrvAddr`` on every command, then each command's own), and so
is the output. rocketpy adds, on every command:

* ``--json``: the result as JSON on stdout instead of mqadmin's layout (for scripts);
* ``--accessKey``/``--secretKey``: sign requests with these keys (RocketMQ ACL,
  ``AclClientRPCHook``); without them the keys come from ``$ROCKETMQ_HOME/conf/tools.yml`` as
  mqadmin reads them, and without that nothing is signed;
* ``--concurrency``: how many brokers ``clusterList`` asks at once (default 32), each
  connection closed once answered; ``--deadline``: the seconds it asks them for in all (default
  30), after which it prints what it got and names each broker that did not answer;
* ``--remotingVersion``: the ``version`` the requests carry (default 4.9.8's 409, mqadmin
  4.9.8's; ``5.0.0`` or ``413`` to speak like mqadmin 5.0.0, whose route output then also has
  5.x's fields).

As in Java, ``NAMESRV_ADDR`` is used when ``-n`` is not given and ``ROCKETMQ_SERIALIZE_TYPE=ROCKETMQ``
switches to binary headers. Unlike mqadmin, every error is one line on stderr
(``rocketpy-admin: clusterList: connect to 127.0.0.1:9876 failed: Connection refused``) and the
exit status is 1 after any error, 0 otherwise.
"""
import argparse
import os
import sys

__all__ = ["main", "run"]

PROG = "rocketpy-admin"
_NAMESRV_HELP = "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message):
        raise _UsageError(message)


def _parser(command):
    from .commands import Option
    parser = _Parser(prog=f"{PROG} {command.name}", add_help=False, allow_abbrev=False)
    options = (Option("h", "help", False, False, "Print help"),
               Option("n", "namesrvAddr", True, False, _NAMESRV_HELP)) + tuple(command.options)
    for option in options:
        kwargs = {"dest": option.long}
        if option.has_arg:
            kwargs["metavar"] = "<arg>"
        else:
            kwargs["action"] = "store_true"
        parser.add_argument(f"-{option.short}", f"--{option.long}", **kwargs)
    parser.add_argument("--json", action="store_true", dest="json")
    parser.add_argument("--accessKey", dest="access_key")
    parser.add_argument("--secretKey", dest="secret_key")
    parser.add_argument("--remotingVersion", dest="remoting_version")
    parser.add_argument("--concurrency", dest="concurrency")
    parser.add_argument("--deadline", dest="deadline")
    return parser, options


def _help_text(command, options):
    """commons-cli ``HelpFormatter.printHelp(app, options, true)`` (width 110)."""
    ordered = sorted(options, key=lambda o: o.short.lower())
    usage = []
    for option in ordered:
        text = f"-{option.short}" + (" <arg>" if option.has_arg else "")
        usage.append(text if option.required else f"[{text}]")
    lines = [f"usage: {PROG} {command.name} " + " ".join(usage)]
    heads = [f" -{o.short},--{o.long}" + (" <arg>" if o.has_arg else "") for o in ordered]
    width = max(len(h) for h in heads) + 3
    for head, option in zip(heads, ordered):
        lines.append(f"{head:<{width}}{option.description}")
    lines.append("rocketpy extras: --json, --accessKey <ak> --secretKey <sk>, --remotingVersion <v>,"
                 " --concurrency <n>, --deadline <seconds>")
    return "\n".join(lines) + "\n"


def _all_commands():
    """mqadmin's NameServer commands, then its 5.x controller commands (imported on first use:
    ``rocketpy-admin`` starts without them)."""
    from .commands import COMMANDS
    from .controller import CONTROLLER_COMMANDS
    return COMMANDS + CONTROLLER_COMMANDS


def find_command(name):
    """The subcommand called ``name`` (any case, as mqadmin), or None."""
    for command in _all_commands():
        if command.name.lower() == (name or "").lower():
            return command
    return None


def _command_list():
    lines = [f"The most commonly used {PROG} commands are:"]
    lines += [f"   {c.name:<20} {c.description}" for c in _all_commands()]
    lines.append(f"\nSee '{PROG} help <command>' for more information on a specific command.")
    return "\n".join(lines) + "\n"


def _namesrv_addrs(args):
    from ..transport.client import namesrv_addr_list
    try:
        return namesrv_addr_list(args.namesrvAddr if args.namesrvAddr is not None
                                 else os.environ.get("NAMESRV_ADDR"))
    except ValueError as exc:
        raise _UsageError(str(exc) if "no NameServer" in str(exc) else f"-n: {exc}") from None


def _version(text):
    from ..remoting.codes import MQVersion, release_ordinal
    if text is None:
        return MQVersion.V4_9_8
    ordinal = release_ordinal(text)
    if ordinal is None:
        raise _UsageError(f"--remotingVersion: {text.strip()!r} is neither a release (4.9.8) nor a number")
    return ordinal


def _concurrency(text):
    from .api import BROKER_CONCURRENCY
    if text is None:
        return BROKER_CONCURRENCY
    if not text.strip().isdigit() or int(text) < 1:
        raise _UsageError(f"--concurrency: {text.strip()!r} is not a positive number")
    return int(text)


def _deadline(text):
    from .api import BROKER_DEADLINE
    if text is None:
        return BROKER_DEADLINE
    try:
        seconds = float(text) if len(text) <= 20 else 0.0
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 86400:
        raise _UsageError(f"--deadline: {text.strip()[:20]!r} is not a number of seconds "
                          "(at most 86400)")
    return seconds


def _serialize_type():
    from ..remoting.codes import SerializeType
    name = os.environ.get("ROCKETMQ_SERIALIZE_TYPE", "JSON").strip().upper() or "JSON"
    if name not in SerializeType.__members__:
        raise _UsageError(f"ROCKETMQ_SERIALIZE_TYPE={name!r}: JSON or ROCKETMQ")
    return SerializeType[name]


def _hook(args):
    from .acl import AclClientRPCHook, tools_yml_credentials
    if (args.access_key is None) != (args.secret_key is None):
        raise _UsageError("--accessKey and --secretKey go together")
    keys = (args.access_key, args.secret_key) if args.access_key is not None else tools_yml_credentials()
    return AclClientRPCHook(*keys) if keys else None


def run(argv, reactor=None, stdout=None, stderr=None):
    """Run one command line; the exit status. With ``reactor`` given (tests) it must already be
    running and the result is a Deferred of the status; else the reactor is run here."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if not argv or argv[0] in ("-h", "--help", "help") and len(argv) == 1:
        stdout.write(_command_list())
        return 0
    if argv[0] == "help" and len(argv) == 2:
        command = find_command(argv[1])
        if command is None:
            stderr.write(f"{PROG}: The sub command {argv[1]} not exist.\n")
            return 1
        stdout.write(_help_text(command, _parser(command)[1]))
        return 0
    command = find_command(argv[0])
    if command is None:
        stderr.write(f"{PROG}: The sub command {argv[0]} not exist.\n")
        return 1
    parser, options = _parser(command)
    try:
        args = parser.parse_args(argv[1:])
        for option in options:  # every mqadmin command trims its option values
            value = getattr(args, option.long)
            if isinstance(value, str):
                setattr(args, option.long, value.strip())
        if args.help:
            stdout.write(_help_text(command, options))
            return 0
        missing = [o for o in options if o.required and getattr(args, o.long) is None]
        if missing:
            raise _UsageError("Missing required option" + ("s: " if len(missing) > 1 else ": ")
                              + ", ".join(o.short for o in missing))
        needs_namesrv = getattr(command, "needs_namesrv", True)
        given = args.namesrvAddr is not None or os.environ.get("NAMESRV_ADDR")
        addrs = _namesrv_addrs(args) if needs_namesrv or given else []
        version = _version(args.remoting_version)
        concurrency = _concurrency(args.concurrency), _deadline(args.deadline)
        serialize_type = _serialize_type()
        hook = _hook(args)
    except _UsageError as exc:
        stderr.write(f"{PROG} {command.name}: {exc}\n")
        return 1
    return _execute(command, args, (addrs, version, serialize_type, hook, concurrency), reactor,
                    stdout, stderr)


def _execute(command, args, settings, reactor, stdout, stderr):
    from twisted.internet.defer import maybeDeferred

    from ..transport.client import RemotingClient
    from .api import MQAdmin
    from .commands import Output, json_text, printable

    own_reactor = reactor is None
    if own_reactor:
        from twisted.internet import reactor
    addrs, version, serialize_type, hook, (concurrency, deadline) = settings
    client = RemotingClient(reactor, rpc_hook=hook)
    admin = MQAdmin(client, addrs, version=version, serialize_type=serialize_type,
                    concurrency=concurrency, deadline=deadline)
    out = Output(sink=stdout.write)
    status = []

    def done(_):
        if args.json:
            stdout.write(json_text(out.data) + "\n")
        else:
            stdout.write(out.text)
        for error in out.errors:
            stderr.write(f"{PROG} {command.name}: {printable(error)}\n")
        status.append(1 if out.errors else 0)

    def failed(failure):
        if not args.json:
            stdout.write(out.text)
        message = " ".join(failure.getErrorMessage().split())
        stderr.write(f"{PROG} {command.name}: {printable(message)}\n")
        status.append(1)

    def finish(_):
        stdout.flush()
        client.shutdown()
        return status[0]

    def start():
        d = maybeDeferred(command.run, admin, args, out)
        d.addCallbacks(done, failed)
        d.addCallback(finish)
        return d

    if not own_reactor:
        return start()
    # started once the reactor runs, so a command failing before its first request (a bad
    # option value) stops a running reactor instead of hanging
    reactor.callWhenRunning(lambda: start().addBoth(lambda _: reactor.stop()))
    reactor.run()
    return status[0] if status else 1


def main(argv=None):
    """Console entry point."""
    try:
        code = run(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
