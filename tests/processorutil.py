"""Test helper: a DefaultRequestProcessor on a temporary directory, and requests to it."""
import zlib

from rocketpy.namesrv.policy import as_policies
from rocketpy.namesrv import (Channel, Configuration, KVConfigManager, NamesrvConfig,
                              NettyServerConfig, RouteInfoManager)
from rocketpy.namesrv.processor import DefaultRequestProcessor
from rocketpy.namesrv.profile import PROFILE_53
from rocketpy.remoting import RemotingCommand
import brokerbody

CH = Channel(1, "127.0.0.1:50000")


def make(tmp_path, profile=PROFILE_53, accept=True, **settings_):
    namesrv = NamesrvConfig(kv_config_path=str(tmp_path / "kv.json"),
                            config_store_path=str(tmp_path / "namesrv.properties"), **settings_)
    configuration = Configuration(namesrv, NettyServerConfig(), profile=as_policies(profile))
    rim = RouteInfoManager(namesrv, profile)
    submitted = []

    def submit(request):
        if accept:
            submitted.append(request)
        return accept

    proc = DefaultRequestProcessor(rim, KVConfigManager(namesrv.kv_config_path),
                                   submit_unregistration=submit, profile=profile,
                                   configuration=configuration, startup_ms=0)
    proc.submitted = submitted
    return proc


def register_body(*topics, counter=1):
    return brokerbody.register_body(topics, counter)


def register(proc, name="broker-a", addr="127.0.0.1:10911", bid="0", topics=("T1", "T2"),
             body=None, crc=None, opaque=1, oneway=False, version=479, **ext):
    body = register_body(*topics) if body is None else body
    fields = {"brokerName": name, "brokerAddr": addr, "clusterName": "C", "haServerAddr": "ha",
              "brokerId": bid, "compressed": "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc), **ext}
    return proc.process(RemotingCommand.request(103, fields, body, opaque=opaque, version=version,
                                                oneway=oneway), CH, 1000)


def call(proc, code, ext=None, body=None, version=479, now=1000, **kw):
    return proc.process(RemotingCommand.request(code, ext, body, opaque=7, version=version, **kw), CH, now)
