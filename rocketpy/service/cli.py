"""Service layer: the ``rocketnamesrv`` console script (``mqnamesrv`` for people who don't know twistd).

``rocketnamesrv [options]`` is ``twistd --nodaemon --pidfile= rocketnamesrv [options]``: the
server runs in the foreground and logs to stdout, as ``mqnamesrv`` does. The ``rocketnamesrv``
sub-command is handed to twistd directly instead of being looked up through Twisted's plugin
discovery, so the script works however the package was installed (a plain or an editable
install, with or without a writable ``dropin.cache``). Options before ``--`` that twistd knows
(``--logfile``, ``--reactor``, ``--umask`` ...) may be given as ``rocketnamesrv --twistd=--logfile=x``.
"""
import sys

from twisted.application.service import ServiceMaker
from twisted.python import usage
from twisted.scripts import twistd

from .startup import StartError

__all__ = ["main", "SERVICE_MAKER"]

SERVICE_MAKER = ServiceMaker(
    "rocketpy NameServer", "rocketpy.service.tap",
    "Apache RocketMQ NameServer (remoting protocol), configured like mqnamesrv", "rocketnamesrv")


class _ServerOptions(twistd.ServerOptions):
    """twistd's options with exactly one sub-command, ours, and no plugin scan."""

    def _getPlugins(self, interface):
        return [SERVICE_MAKER]


def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    twistd_args = [a.split("=", 1)[1] for a in args if a.startswith("--twistd=")]
    own = [a for a in args if not a.startswith("--twistd=")]
    sys.argv = ["rocketnamesrv", "--nodaemon", "--pidfile=", *twistd_args, "rocketnamesrv", *own]
    config = _ServerOptions()
    try:   # twistd's app.run, but a bad twistd option is one line (rocketnamesrv's own are too)
        config.parseOptions(sys.argv[1:])
    except usage.UsageError as exc:
        raise StartError.of_usage(exc) from None
    twistd.runApp(config)


if __name__ == "__main__":  # python -m rocketpy.service.cli
    main()
