"""Broker layer: what a broker says to the NameServers (Java ``BrokerOuterAPI``), over the
transport's :class:`~rocketpy.transport.client.RemotingClient`.

* :meth:`BrokerOuterAPI.register_broker_all`: REGISTER_BROKER to every NameServer, the body
  encoded once (JSON, or zlib) with its ``bodyCrc32``; one result per NameServer (Java keeps only
  the successes; here the caller sees each).
* :meth:`BrokerOuterAPI.need_register`: QUERY_DATA_VERSION to each; True where that copy differs
  or could not be asked (Java's rule).
* :meth:`BrokerOuterAPI.unregister_broker_all`: UNREGISTER_BROKER to each (3 s timeout).
* :meth:`BrokerOuterAPI.send_heartbeat` (BROKER_HEARTBEAT) and
  :meth:`BrokerOuterAPI.send_heartbeat_via_data_version` (QUERY_DATA_VERSION, the 5.x default),
  oneway, for acting-master brokers.

A :class:`BrokerRelease` holds what differs between broker releases: the ``version``, whether the
header has ``enableActingMaster`` (5.x), and whether it tells the truth about ``compressed`` (a
5.x broker compresses but writes ``compressed=false``, and a 5.x NameServer then answers
SYSTEM_ERROR). Both are reproduced, so frames are byte-identical to a genuine 4.9.8 or 5.0.0
broker's (``tests/test_broker_outer_api.py`` checks them against the captures)."""
import dataclasses

from twisted.internet.defer import DeferredList

from ..remoting.bodies import (ClusterInfo, DataVersion, KVTable, RegisterBrokerBody,
                               RegisterBrokerResult, body_crc32)
from ..remoting.codes import MQVersion, RequestCode, ResponseCode, SerializeType
from ..remoting.command import RemotingCommand
from ..remoting.headers import (BrokerHeartbeatRequestHeader, QueryDataVersionRequestHeader,
                                QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
                                RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader)
from ..transport.client import check_response

__all__ = ["BrokerOuterAPI", "BrokerConfig", "BrokerRelease", "UNREGISTER_TIMEOUT"]

#: ``unregisterBroker`` waits 3000 ms.
UNREGISTER_TIMEOUT = 3.0


@dataclasses.dataclass(frozen=True)
class BrokerRelease:
    """The registration traits of one broker release (see the module docstring)."""

    version: int
    #: the header has enableActingMaster (and heartbeatTimeoutMillis when acting master)
    acting_master_fields: bool
    #: the header's ``compressed`` says whether the body is compressed (4.x); 5.x says false
    says_compressed: bool
    #: BrokerConfig.registerBrokerTimeoutMills default, seconds
    register_timeout: float

    @classmethod
    def of(cls, version):
        """The traits of the broker release whose ``MQVersion`` ordinal is ``version``."""
        five = version >= MQVersion.V5_0_0
        return cls(version=int(version), acting_master_fields=five, says_compressed=not five,
                   register_timeout=24.0 if five else 6.0)


@dataclasses.dataclass
class BrokerConfig:
    """The ``BrokerConfig`` keys registration reads (Java names in snake case)."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    broker_ip2: "str | None" = None          # None: brokerIP1
    ha_listen_port: "int | None" = None      # None: listenPort + 1
    enable_slave_acting_master: bool = False
    broker_not_active_timeout_millis: int = 10_000
    compressed_register: bool = False
    force_register: bool = True
    register_name_server_period: int = 30_000
    compatible_with_old_name_srv: bool = True
    broker_heartbeat_interval: int = 1_000

    @property
    def broker_addr(self):
        """``brokerIP1:listenPort``, what the NameServer routes clients to."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self):
        """``brokerIP2:haListenPort``, where slaves replicate from."""
        port = self.ha_listen_port if self.ha_listen_port is not None else self.listen_port + 1
        return f"{self.broker_ip2 or self.broker_ip1}:{port}"


class BrokerOuterAPI:
    """A broker's requests to its NameServers, through its one
    :class:`~rocketpy.transport.client.RemotingClient` (one connection per NameServer), as
    ``release`` (a :class:`BrokerRelease`, default 5.3.3's) writes them, in ``serialize_type``
    headers (Java ``rocketmq.serialize.type``)."""

    def __init__(self, client, release=None, serialize_type=SerializeType.JSON):
        self.client = client
        self.release = release if release is not None else BrokerRelease.of(MQVersion.V5_3_3)
        self.serialize_type = int(serialize_type)

    def _request(self, code, header, body=None):
        return RemotingCommand.request(int(code), header.to_ext_fields(), body,
                                       version=self.release.version,
                                       serialize_type=self.serialize_type)

    # -- registration --------------------------------------------------------------------------

    def registration(self, config, wrapper, filter_server_list=(), compressed=None):
        """The REGISTER_BROKER request (opaque 0) ``register_broker_all`` sends for ``config``
        and ``wrapper`` (what :meth:`~rocketpy.broker.topics.TopicConfigManager.wrapper` gives)."""
        release = self.release
        compressed = config.compressed_register if compressed is None else compressed
        body = RegisterBrokerBody(filter_server_list=list(filter_server_list),
                                  topic_config_serialize_wrapper=wrapper)
        if release.version < MQVersion.V5_0_0:
            body = body.for_version(release.version)
        data = body.encode(compressed, release.version)
        acting = release.acting_master_fields
        header = RegisterBrokerRequestHeader(
            broker_name=config.broker_name, broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name, ha_server_addr=config.ha_server_addr,
            broker_id=config.broker_id,
            enable_acting_master=config.enable_slave_acting_master if acting else None,
            heartbeat_timeout_millis=(config.broker_not_active_timeout_millis
                                      if acting and config.enable_slave_acting_master else None),
            compressed=compressed and release.says_compressed,
            body_crc32=body_crc32(data))
        return self._request(RequestCode.REGISTER_BROKER, header, data)

    def register_broker_all(self, namesrv_addrs, config, wrapper, filter_server_list=(), *,
                            oneway=False, timeout=None, compressed=None):
        """Register with every NameServer in parallel; a ``DeferredList`` (in the order of
        ``namesrv_addrs``) of ``(True, RegisterBrokerResult or None)`` or ``(False, Failure)``."""
        request = self.registration(config, wrapper, filter_server_list, compressed)
        return DeferredList([self.register_broker(addr, request, oneway=oneway, timeout=timeout)
                             for addr in namesrv_addrs], consumeErrors=True)

    def register_broker(self, addr, request, *, oneway=False, timeout=None):
        """One NameServer's part of :meth:`register_broker_all` (Java ``registerBroker``): send
        the :meth:`registration` request; a Deferred of the RegisterBrokerResult (None when
        oneway)."""
        timeout = self.release.register_timeout if timeout is None else timeout
        if oneway:
            return self.client.invoke_oneway(addr, request, timeout)
        return self.client.invoke(addr, request, timeout).addCallback(_register_result, addr)

    def need_register(self, namesrv_addrs, config, data_version, timeout=None):
        """QUERY_DATA_VERSION to each NameServer: a Deferred of one bool per NameServer, True
        when it has another DataVersion for this broker, or said ``changed``, or failed."""
        header = QueryDataVersionRequestHeader(
            broker_name=config.broker_name, broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name, broker_id=config.broker_id)
        request = self._request(RequestCode.QUERY_DATA_VERSION, header,
                                self._data_version_body(data_version))
        timeout = self.release.register_timeout if timeout is None else timeout
        calls = [self.client.invoke(addr, request, timeout).addCallback(_changed, data_version)
                 for addr in namesrv_addrs]
        d = DeferredList(calls, consumeErrors=True)
        d.addCallback(lambda results: [not ok or changed for ok, changed in results])
        return d

    def unregister_broker_all(self, namesrv_addrs, config):
        """UNREGISTER_BROKER to every NameServer (graceful shutdown); a ``DeferredList``."""
        header = UnRegisterBrokerRequestHeader(
            broker_name=config.broker_name, broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name, broker_id=config.broker_id)
        request = self._request(RequestCode.UNREGISTER_BROKER, header)
        calls = [self.client.invoke(addr, request, UNREGISTER_TIMEOUT).addCallback(check_response, addr)
                 .addCallback(lambda _: None) for addr in namesrv_addrs]
        return DeferredList(calls, consumeErrors=True)

    # -- 5.x heartbeats ------------------------------------------------------------------------

    def send_heartbeat(self, namesrv_addrs, config, timeout=None):
        """BROKER_HEARTBEAT, oneway, to every NameServer (``compatibleWithOldNameSrv=false``)."""
        header = BrokerHeartbeatRequestHeader(
            cluster_name=config.broker_cluster_name, broker_addr=config.broker_addr,
            broker_name=config.broker_name)
        return self._oneway_all(namesrv_addrs, self._request(RequestCode.BROKER_HEARTBEAT, header),
                                timeout)

    def send_heartbeat_via_data_version(self, namesrv_addrs, config, data_version, timeout=None):
        """QUERY_DATA_VERSION, oneway, as a heartbeat (the 5.x default for acting masters)."""
        header = QueryDataVersionRequestHeader(
            broker_name=config.broker_name, broker_addr=config.broker_addr,
            cluster_name=config.broker_cluster_name, broker_id=config.broker_id)
        request = self._request(RequestCode.QUERY_DATA_VERSION, header,
                                self._data_version_body(data_version))
        return self._oneway_all(namesrv_addrs, request, timeout)

    def get_broker_cluster_info(self, namesrv_addrs, timeout=3.0):
        """GET_BROKER_CLUSTER_INFO to one NameServer (``refreshMetadata``: a 5.x broker asks
        every 5 s); a Deferred of the :class:`~rocketpy.remoting.bodies.ClusterInfo`."""
        request = RemotingCommand.request(int(RequestCode.GET_BROKER_CLUSTER_INFO),
                                          version=self.release.version,
                                          serialize_type=self.serialize_type)
        d = self.client.invoke_any(namesrv_addrs, request, timeout)
        d.addCallback(lambda answer: ClusterInfo.from_json(
            check_response(answer[1], answer[0]).body))
        return d

    def _data_version_body(self, data_version):
        """A DataVersion as this release writes it (4.x: no ``stateVersion``)."""
        if self.release.version < MQVersion.V5_0_0:
            data_version = data_version.for_version(self.release.version)
        return data_version.to_json()

    def _oneway_all(self, namesrv_addrs, request, timeout):
        timeout = self.release.register_timeout if timeout is None else timeout
        return DeferredList([self.client.invoke_oneway(addr, request, timeout)
                             for addr in namesrv_addrs], consumeErrors=True)


def _register_result(response, addr):
    """``registerBroker``'s reading of the answer (Java ``MQBrokerException`` on an error)."""
    check_response(response, addr)
    header = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields, strict=False)
    return RegisterBrokerResult(
        ha_server_addr=header.ha_server_addr, master_addr=header.master_addr,
        kv_table=KVTable.from_json(response.body) if response.body else None)


def _changed(response, data_version):
    """``needRegister``'s reading of one answer: changed, or the NameServer's copy differs."""
    if response.code != int(ResponseCode.SUCCESS):
        return False  # Java: any other code counts as "not changed"
    changed = QueryDataVersionResponseHeader.from_ext_fields(response.ext_fields, strict=False).changed
    if response.body and _version_key(DataVersion.from_json(response.body)) != _version_key(data_version):
        changed = True
    return changed is None or bool(changed)


def _version_key(data_version):
    """What ``DataVersion.equals`` compares (a 4.x DataVersion has no stateVersion: 0)."""
    return (data_version.counter, data_version.timestamp, data_version.state_version or 0)
