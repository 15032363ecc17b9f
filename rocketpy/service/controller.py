"""Service layer: the RocketMQ 5 controller a NameServer hosts with
``enableControllerInNamesrv=true`` (Java ``NamesrvStartup.createAndStartControllerManager``,
``ControllerManager`` and ``DLedgerController`` start-up and scheduling).

The controller listens on its own port, the ``controllerDLegerPeers`` address of
``controllerDLegerSelfId`` (bound to ``bindAddress``, as Java's DLedger server), with the same
transport as the NameServer: brokers send it every controller request and their oneway
heartbeats there. Around the pure :class:`~rocketpy.controller.ControllerRequestProcessor`:

* a channel listener: a closed, failed or idle connection makes its brokers inactive at once
  (a dead master's group elects a new one within the reactor turn: the captures show Java
  doing it ~40 ms after the close);
* the heartbeat scan every ``scanNotActiveBrokerInterval``, closing
  the channels of expired brokers, and the dead-master scan every ``scanInactiveMasterInterval``;
* NOTIFY_BROKER_ROLE_CHANGED pushed oneway over connections the controller opens to the
  brokers' listen addresses (:class:`~rocketpy.transport.client.OnewayNotifier`: 32 at once,
  each closed once its push is written);
* the snapshot in ``controllerStorePath`` (:mod:`rocketpy.controller.store`), loaded at start
  and written through the writer thread before a change is acknowledged; or, with
  ``controllerType=etcd``, the state of a controller group kept in etcd
  (:mod:`rocketpy.service.controllergroup`): only the group's leader answers as leader.
"""
import os

from twisted.application.service import MultiService
from twisted.logger import Logger
from zope.interface import implementer

from ..controller import ControllerConfiguration, ControllerRequestProcessor
from ..controller.access import ControllerBrokerAccess
from ..controller.processor import ADMIN_CODES
from ..controller.replicated import ETCD_TYPE, EtcdSettings, Leadership
from ..controller.store import SNAPSHOT_NAME, Journal, SnapshotError, load_state
from ..namesrv.acl import AccessControl, AclConfigError
from ..transport.client import OnewayNotifier
from ..transport.factory import RemotingServerFactory
from ..transport.interfaces import IChannelEventListener
from ..transport.periodic import PeriodicService
from ..transport.protocol import format_address
from .controllergroup import ControllerGroup
from .fileio import AppendLog, read_text, write_atomic, write_file_java
from .propcheck import value_problem
from .server import RemotingServerService
from ..transport import logs

__all__ = ["ControllerHousekeeping", "ControllerScanService", "ControllerServerService",
           "make_controller_service", "controller_configuration", "controller_listen",
           "CONTROLLER_BOOT_LINE_PREFIX"]

#: Java's boot line of the controller (``createAndStartControllerManager``)
CONTROLLER_BOOT_LINE_PREFIX = "The ControllerManager boot success."


@implementer(IChannelEventListener)
class ControllerHousekeeping:
    """``IChannelEventListener`` of the controller port (Java's ``BrokerHousekeepingService``
    of the controller): close, exception and idle make the channel's brokers inactive, until
    the controller stops (``active`` false): the connections it closes itself then are not
    deaths, and must not depose masters in the durable state a restart loads."""

    def __init__(self, processor, clock):
        self._processor = processor
        self._clock = clock
        self.active = True

    def on_channel_connect(self, remote_addr, channel):
        pass

    def on_channel_active(self, remote_addr, channel):
        pass

    def on_channel_close(self, remote_addr, channel):
        if self.active:
            self._processor.on_channel_close(channel, int(self._clock.seconds() * 1000))

    on_channel_exception = on_channel_idle = on_channel_close


class ControllerScanService(PeriodicService):
    """``scan(now_ms)`` every ``interval_ms``; the channels it returns (expired brokers) are
    closed. (Java runs the heartbeat scan first after 2 s, then every interval; here the first
    run is after one interval, 5 s by default, while the brokers' timeout is 10 s.)"""

    def __init__(self, name, scan, clock, interval_ms, close_channel=None):
        super().__init__(interval_ms / 1000.0, clock)
        self.name = name
        self._scan = scan
        self._close_channel = close_channel

    def run_once(self):
        channels = self._scan(int(self.clock.seconds() * 1000)) or ()
        for channel in channels:
            if self._close_channel is not None:
                self._close_channel(channel.channel_id, "broker expired")
            self.log.warn("The broker channel {channel} expired", channel=channel)


class ControllerServerService(RemotingServerService):
    """The controller port; logs Java's boot line of the controller once listening."""

    name = "controller-server"

    def _listening(self, port):
        self.port = port
        self.address = format_address(port.getHost())
        self.log.info("{prefix} serializeType=JSON, address {address}",
                      prefix=CONTROLLER_BOOT_LINE_PREFIX, address=self.address)
        return port


def controller_configuration(props):
    """The controller's configuration from the NameServer's properties; ValueError names what
    is missing (the peers, the self id) or refused: without ``controllerType=etcd``, peers
    besides this controller, which rocketpy cannot join (it has no DLedger), and answering as
    leader beside them would be a second leader."""
    configuration = ControllerConfiguration.from_properties(props, store=write_file_java)
    config = configuration.controller_config
    others = sorted(set(config.peers()) - {config.controller_d_leger_self_id})
    if others and config.controller_type.lower() != ETCD_TYPE:
        raise ValueError(f"controllerDLegerPeers lists other controllers ({', '.join(others)}): "
                         "rocketpy runs them as a group only with controllerType=etcd; list only "
                         f"{config.controller_d_leger_self_id}")
    return configuration


def controller_listen(configuration):
    """Endpoint string of the controller port: ``bindAddress`` and the self peer's port."""
    netty = configuration.netty_server_config
    interface = netty.bind_address or "0.0.0.0"
    interface = interface.replace(":", "\\:")
    return (f"tcp:{netty.listen_port}:interface={interface}"
            f":backlog={netty.server_socket_backlog}")


class _Store:
    """The snapshot and its log segments in ``controllerStorePath``
    (:mod:`rocketpy.controller.store`): loaded at start, written by the writer thread (or here,
    without one)."""

    def __init__(self, directory):
        self.snapshot_path = os.path.join(directory, SNAPSHOT_NAME)
        self.log = AppendLog(self.snapshot_path)

    def load(self, manager):
        """Load the state; a :class:`Journal` appending to a new segment, and whether anything
        was there."""
        snapshot = read_text(self.snapshot_path)
        numbers = self.log.segments()
        texts = [self.log.read(n).decode("utf-8", errors="replace") for n in numbers]
        seq = load_state(manager, snapshot, texts)
        journal = Journal(manager, self.log, self._replace, self.snapshot_path, seq,
                          segment=(numbers[-1] + 1) if numbers else 1)
        return journal, snapshot is not None or bool(numbers)

    def _replace(self, data):
        write_atomic(self.snapshot_path, data)


def make_controller_service(configuration, reactor, *, write_pool=None, decode_pool=None,
                            listen=None, max_frame_length=None, tls_mode=None,
                            tls_context_factory=None, limits=None):
    """The controller's service tree; ``StartError``-worthy problems raise ValueError with one
    line naming them (an unreadable snapshot, an access-control file that cannot be read).
    ``decode_pool`` (the NameServer's: one pool, fair across the hosts of both ports) decodes
    request bodies past a few hundred bytes.
    ``adminAllowNetworks`` / ``aclEnable`` guard the controller's administrative requests as
    they guard the NameServer's, ``brokerAllowNetworks`` / ``brokerIdentityBinding`` its broker
    requests."""
    config = configuration.controller_config
    try:
        access = AccessControl.from_properties(configuration.all_configs, admin_codes=ADMIN_CODES)
    except AclConfigError as exc:
        raise ValueError(str(exc)) from None
    notifier = OnewayNotifier(reactor)
    group = leadership = None
    if config.controller_type.lower() == ETCD_TYPE:
        settings = EtcdSettings.from_properties(configuration.all_configs)
        leadership = Leadership(config.controller_d_leger_self_id, config.self_address())
    store = _Store(config.store_path)
    journal = None

    def run(pending):
        if write_pool is None:
            return pending.run()
        d = write_pool.submit(pending.work)
        d.addCallbacks(pending.finish, lambda failure: pending.fail(failure.value))
        return d

    processor = ControllerRequestProcessor(
        configuration, notify=notifier.send_oneway, run=run,
        persist=lambda events: (group or journal).record(events),
        access_control=access if access.enabled else None, leadership=leadership,
        value_check=value_problem)
    try:
        broker_access = ControllerBrokerAccess.from_properties(
            configuration.all_configs, processor.heartbeats, processor.replicas)
    except AclConfigError as exc:
        raise ValueError(str(exc)) from None
    if broker_access.enabled:
        processor.broker_access = broker_access
    if leadership is not None:   # the state lives in etcd: the group takes the DISK lane
        group = write_pool = ControllerGroup(reactor, processor.replicas, leadership, settings,
                                             config.controller_d_leger_group, write_pool)
        processor.entry_refusal = group.entry_refusal
        loaded = False
    else:
        try:
            journal, loaded = store.load(processor.replicas)
        except (SnapshotError, OSError) as exc:
            raise ValueError(f"cannot load the controller state in {config.store_path}: "
                             f"{exc}") from None
    log = Logger(namespace="rocketpy.controller", observer=logs.observer)
    if loaded:
        log.info("controller state loaded from {path}: {groups} broker groups, event {seq}",
                 path=config.store_path, groups=len(processor.replicas.sync_state_info_table),
                 seq=journal.seq)
    netty = configuration.netty_server_config
    kwargs = {} if max_frame_length is None else {"max_frame_length": max_frame_length}
    if tls_mode is not None:
        kwargs.update(tls_mode=tls_mode, tls_context_factory=tls_context_factory)
    housekeeping = ControllerHousekeeping(processor, reactor)
    factory = RemotingServerFactory(
        processor, housekeeping, clock=reactor,
        idle_seconds=netty.server_channel_max_idle_time_seconds, limits=limits,
        write_pool=write_pool, decode_pool=decode_pool, **kwargs)
    top = _ControllerService(housekeeping)
    if group is not None:
        group.setServiceParent(top)
    ControllerScanService("controller-scan-not-active-broker", processor.scan_not_active_broker,
                          reactor, config.scan_not_active_broker_interval,
                          close_channel=factory.close_channel).setServiceParent(top)
    ControllerScanService("controller-scan-inactive-master", processor.scan_inactive_master,
                          reactor, config.scan_inactive_master_interval).setServiceParent(top)
    server = ControllerServerService(listen or controller_listen(configuration), factory,
                                     reactor, description="the controller port")
    server.setServiceParent(top)
    _Closing(notifier).setServiceParent(top)
    top.processor = processor
    top.factory = factory
    top.server = server
    top.notifier = notifier
    top.group = group
    return top


class _ControllerService(MultiService):
    """The controller's services; stopping, it first stops treating closes as deaths."""

    def __init__(self, housekeeping):
        super().__init__()
        self.setName("controller")
        self._housekeeping = housekeeping

    def stopService(self):
        self._housekeeping.active = False
        return super().stopService()


class _Closing(MultiService):
    """Closes the push connections when the controller stops."""

    def __init__(self, notifier):
        super().__init__()
        self.setName("controller-notifier")
        self._notifier = notifier

    def stopService(self):
        super().stopService()
        self._notifier.close()
