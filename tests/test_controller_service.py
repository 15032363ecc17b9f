"""The controller in the service layer: ``twistd rocketnamesrv`` options (a missing or wrong
peer setting stops the start with one line, ``-p`` prints ControllerConfig), the channel
listener (a closed, failed or idle connection is a broker's death until the controller stops),
the scans, and a snapshot that cannot be read."""
import io
import os
import sys

import pytest
from twisted.internet.task import Clock
from zope.interface.verify import verifyObject

from rocketpy.namesrv import Channel
from rocketpy.service.controller import ControllerHousekeeping, ControllerScanService
from rocketpy.service.startup import StartError
from rocketpy.service.tap import Options, makeService
from rocketpy.transport.interfaces import IChannelEventListener

PEERS = ["-D", "enableControllerInNamesrv=true", "-D", "controllerDLegerGroup=g",
         "-D", "controllerDLegerPeers=n0-127.0.0.1:19878", "-D", "controllerDLegerSelfId=n0"]


def _options(tmp_path, *args):
    options = Options()
    options.parseOptions(["--kvConfigPath", str(tmp_path / "kv.json"), "--listen", "tcp:0",
                          "-D", f"configStorePath={tmp_path}/ns.properties",
                          "-D", f"controllerStorePath={tmp_path}/ctl", *args])
    return options


@pytest.mark.parametrize("args, says", [
    (["-D", "enableControllerInNamesrv=true"], "controllerDLegerPeers is null or empty"),
    (PEERS[:6], "controllerDLegerSelfId is null or empty"),
    (PEERS[:6] + ["-D", "controllerDLegerSelfId=n9"], "is not one of controllerDLegerPeers"),
    (PEERS[:4] + ["-D", "controllerDLegerPeers=n0-127.0.0.1:19878;n1-127.0.0.1:19879"]
     + PEERS[6:], "rocketpy runs them as a group only with controllerType=etcd"),
])
def test_missing_controller_settings_stop_the_start_in_one_line(tmp_path, args, says):
    with pytest.raises(StartError) as caught:
        _options(tmp_path, *args)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_bad_peer_list_refused_before_anything_listens(tmp_path):
    with pytest.raises(StartError) as caught:
        _options(tmp_path, "-D", "controllerDLegerPeers=n0:127.0.0.1")
    assert "controllerDLegerPeers" in str(caught.value)


def test_print_config_adds_the_controller_settings(tmp_path, monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with pytest.raises(SystemExit):
        _options(tmp_path, *PEERS, "-p")
    lines = out.getvalue().splitlines()
    assert "enableControllerInNamesrv=true" in lines
    assert "controllerDLegerPeers=n0-127.0.0.1:19878" in lines
    assert "enableElectUncleanMaster=false" in lines


def test_unreadable_state_stops_the_start(tmp_path):
    options = _options(tmp_path, *PEERS)
    os.makedirs(tmp_path / "ctl")
    (tmp_path / "ctl" / "replicas.json").write_text("{not json")
    with pytest.raises(StartError) as caught:
        makeService(options, reactor=Clock())
    assert "cannot load the controller state" in str(caught.value)


class _Processor:
    def __init__(self):
        self.closed, self.scans = [], []

    def on_channel_close(self, channel, now_ms):
        self.closed.append((channel, now_ms))

    def scan(self, now_ms):
        self.scans.append(now_ms)
        return {Channel(7, "127.0.0.1:7")}


def test_housekeeping_until_stopped():
    processor, clock = _Processor(), Clock()
    clock.advance(5)
    listener = ControllerHousekeeping(processor, clock)
    verifyObject(IChannelEventListener, listener)
    listener.on_channel_connect("a", Channel(1))
    listener.on_channel_active("a", Channel(1))
    for event in (listener.on_channel_close, listener.on_channel_exception,
                  listener.on_channel_idle):
        event("a", Channel(1))
    assert processor.closed == [(Channel(1), 5000)] * 3
    listener.active = False                # the controller is stopping: its own closes
    listener.on_channel_close("a", Channel(2))
    assert len(processor.closed) == 3


def test_scan_closes_expired_channels_every_interval():
    processor, clock, closed = _Processor(), Clock(), []
    scan = ControllerScanService("s", processor.scan, clock, 5000,
                                 close_channel=lambda cid, why: closed.append(cid))
    scan.startService()
    clock.advance(4.9)
    assert processor.scans == []
    clock.advance(0.1)
    assert (processor.scans, closed) == ([5000], [7])
    scan.stopService()


def test_the_service_tree_holds_a_request_processor(tmp_path):
    from rocketpy.transport import IRequestProcessor
    top = makeService(_options(tmp_path, *PEERS), reactor=Clock())
    verifyObject(IRequestProcessor, top.controller.factory.processor, tentative=True)
    assert top.controller.factory.listener is not None
