"""Admin layer: mqadmin 5.3.3's controller subcommands (``tools.command.controller`` and
``ha.GetSyncStateSetSubCommand``; names, options, requests and printed layout) and the
``MQClientAPIImpl`` calls behind them.

They talk to a controller (``-a host:port``), not to NameServers (``getBrokerEpoch`` finds the
brokers in the NameServer's cluster table and asks them). As in Java, the commands that
change or read a group's state first ask the given controller for its metadata
(CONTROLLER_GET_METADATA_INFO) and send the real request to the leader it names;
get/updateControllerConfig go to each address of ``-a`` directly. Requests carry 5.3.3's version
(479) whatever ``--remotingVersion`` says: mqadmin 4.9 has no controller commands.
"""
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater

from ..namesrv.javaprops import body_to_properties, format_properties
from ..remoting.bodies import (BrokerMemberGroup, BrokerReplicasInfo, EpochEntryCache,
                               encode_broker_name_list)
from ..remoting.codes import MQVersion, RequestCode, ResponseCode
from ..remoting.command import RemotingCommand
from ..remoting.headers import (CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
                                ElectMasterResponseHeader, GetMetaDataResponseHeader)
from ..remoting.javahash import hashmap_order
from ..transport.client import RemotingCommandError, check_response
from .commands import Option, SubCommand, print_configs

__all__ = ["ControllerAdmin", "CONTROLLER_COMMANDS"]

#: the timeout ``MQClientAPIImpl`` uses for the controller calls
CONTROLLER_TIMEOUT = 3.0
#: what every controller request carries (mqadmin 5.3.3)
VERSION = int(MQVersion.V5_3_3)

_ADDRESS = Option("a", "controllerAddress", True, True, "the address of controller")
_ADDRESS_LIST = Option("a", "controllerAddress", True, True,
                       "Controller address list, eg: 192.168.0.1:9878;192.168.0.2:9878")


_INTERVAL = Option("i", "interval", True, False, "the interval(second) of get info")


@inlineCallbacks
def _repeat(admin, args, out, once):
    """mqadmin's ``-i SECONDS``: run ``once`` again every interval (3 when empty), until
    interrupted; without ``-i`` once."""
    if args.interval is None:
        yield once()
        return
    text = args.interval.strip()
    if text and (not text.isdigit() or int(text) < 1):
        raise ValueError(f"-i: {args.interval!r} is not a number of seconds")
    seconds = int(text) if text else 3
    while True:
        yield once()
        out.flush()
        yield deferLater(admin.client.clock, seconds, lambda: None)


def _failed(answer, addr):
    raise RemotingCommandError(addr, answer.code, answer.remark)


class ControllerAdmin:
    """The controller half of ``DefaultMQAdminExt``, over ``admin``'s client and serialisation."""

    def __init__(self, admin):
        self.client = admin.client
        self.serialize_type = admin.serialize_type

    def _request(self, code, header=None, body=None):
        return RemotingCommand.request(int(code), None if header is None else header.to_ext_fields(),
                                       body, version=VERSION, serialize_type=self.serialize_type)

    @inlineCallbacks
    def _call(self, addr, request):
        answer = yield self.client.invoke(addr, request, CONTROLLER_TIMEOUT)
        return check_response(answer, addr)

    @inlineCallbacks
    def get_controller_metadata(self, addr):
        answer = yield self._call(addr, self._request(RequestCode.CONTROLLER_GET_METADATA_INFO))
        return GetMetaDataResponseHeader.from_ext_fields(answer.ext_fields, strict=False)

    @inlineCallbacks
    def _leader(self, addr):
        meta = yield self.get_controller_metadata(addr)
        if not meta.controller_leader_address:
            raise RemotingCommandError(addr, ResponseCode.CONTROLLER_NOT_LEADER,
                                       "the controller names no leader")
        return meta.controller_leader_address

    @inlineCallbacks
    def get_in_sync_state_data(self, addr, broker_names):
        leader = yield self._leader(addr)
        answer = yield self._call(leader, self._request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                                        body=encode_broker_name_list(broker_names)))
        return BrokerReplicasInfo.from_json(answer.body)

    @inlineCallbacks
    def get_controller_config(self, addrs):
        configs = {}
        for addr in addrs:
            answer = yield self._call(addr, self._request(RequestCode.GET_CONTROLLER_CONFIG))
            configs[addr] = body_to_properties(answer.body or b"")
        return configs

    @inlineCallbacks
    def update_controller_config(self, props, addrs):
        text = format_properties(props.items())
        if not text or not addrs:
            return
        error = None
        for addr in addrs:
            answer = yield self.client.invoke(
                addr, self._request(RequestCode.UPDATE_CONTROLLER_CONFIG, body=text.encode("utf-8")),
                CONTROLLER_TIMEOUT)
            if answer.code != ResponseCode.SUCCESS:
                error = (answer, addr)
        if error is not None:
            _failed(*error)

    @inlineCallbacks
    def elect_master(self, addr, cluster_name, broker_name, broker_id):
        leader = yield self._leader(addr)
        header = ElectMasterRequestHeader(cluster_name=cluster_name, broker_name=broker_name,
                                          broker_id=broker_id, designate_elect=True,
                                          invoke_time=_now_ms(self.client))
        answer = yield self._call(leader, self._request(RequestCode.CONTROLLER_ELECT_MASTER, header))
        # Java reads the body (an ElectMasterResponseBody) as a BrokerMemberGroup: its fields
        # are not at the top level, so mqadmin's member list is always empty
        group = BrokerMemberGroup.from_json(answer.body) if answer.body else None
        return ElectMasterResponseHeader.from_ext_fields(answer.ext_fields, strict=False), group

    @inlineCallbacks
    def clean_controller_broker_data(self, addr, cluster_name, broker_name, ids, clean_living):
        leader = yield self._leader(addr)
        header = CleanControllerBrokerDataRequestHeader(
            cluster_name=cluster_name, broker_name=broker_name,
            broker_controller_ids_to_clean=ids, is_clean_living_broker=clean_living,
            invoke_time=_now_ms(self.client))
        yield self._call(leader, self._request(RequestCode.CLEAN_BROKER_DATA, header))


def _now_ms(client):
    """``invokeTime``: the header's ``System.currentTimeMillis()`` default (the client's clock)."""
    return int(client.clock.seconds() * 1000)


def _addresses(text):
    return [a for a in text.split(";")] if text else None


class _ControllerCommand(SubCommand):
    """A controller subcommand: ``-a``, no NameServer needed (``-n`` only for ``-c``)."""

    needs_namesrv = False


class GetControllerMetaData(_ControllerCommand):
    name = "getControllerMetaData"
    description = "Get controller cluster's metadata."
    options = (_ADDRESS,)

    @inlineCallbacks
    def run(self, admin, args, out):
        meta = yield ControllerAdmin(admin).get_controller_metadata(args.controllerAddress)
        out.printf("\n#ControllerGroup\t%s", meta.group)
        out.printf("\n#ControllerLeaderId\t%s", meta.controller_leader_id)
        out.printf("\n#ControllerLeaderAddress\t%s", meta.controller_leader_address)
        peers = [p for p in (meta.peers or "").split(";")] if meta.peers else []
        for peer in (p for p in peers if p):   # String.split drops trailing empty strings
            out.printf("\n#Peer:\t%s", peer)
        out.printf("\n")
        out.data = {"group": meta.group, "controllerLeaderId": meta.controller_leader_id,
                    "controllerLeaderAddress": meta.controller_leader_address,
                    "isLeader": meta.is_leader, "peers": [p for p in peers if p]}


class GetControllerConfig(_ControllerCommand):
    name = "getControllerConfig"
    description = "Get controller config."
    options = (_ADDRESS_LIST,)

    @inlineCallbacks
    def run(self, admin, args, out):
        print_configs(out, (yield ControllerAdmin(admin).get_controller_config(
            _addresses(args.controllerAddress))))


class UpdateControllerConfig(_ControllerCommand):
    name = "updateControllerConfig"
    description = "Update controller config."
    options = (_ADDRESS_LIST, Option("k", "key", True, True, "config key"),
               Option("v", "value", True, True, "config value"))

    @inlineCallbacks
    def run(self, admin, args, out):
        servers = _addresses(args.controllerAddress)
        yield ControllerAdmin(admin).update_controller_config({args.key: args.value}, servers)
        out.printf("update controller config success!%s\n%s : %s\n",
                   "[" + ", ".join(servers) + "]", args.key, args.value)
        out.data = {"key": args.key, "value": args.value, "controllers": servers}


class GetSyncStateSet(_ControllerCommand):
    name = "getSyncStateSet"
    description = "Fetch syncStateSet for target brokers."
    options = (_ADDRESS, Option("c", "clusterName", True, False, "which cluster"),
               Option("b", "brokerName", True, False, "which broker to fetch"), _INTERVAL)

    def run(self, admin, args, out):
        return _repeat(admin, args, out, lambda: self._once(admin, args, out))

    @inlineCallbacks
    def _once(self, admin, args, out):
        addr = args.controllerAddress.split(";")[0]
        if args.brokerName:
            names = [args.brokerName]
        elif args.clusterName:
            info = yield admin.examine_broker_cluster_info()
            names = hashmap_order(list(info.cluster_addr_table.get(args.clusterName) or ()))
            if not names:
                raise ValueError(f"cluster {args.clusterName} has no brokers")
        else:
            raise ValueError("give -b brokerName or -c clusterName")
        data = yield ControllerAdmin(admin).get_in_sync_state_data(addr, names)
        out.data = data.to_obj()
        # the controller leaves out the groups it does not know (Java's mqadmin then prints
        # nothing at all for them): one error line each, and exit status 1
        for name in names:
            if name not in (data.replicas_info_table or {}):
                out.errors.append(f"no broker group {name} at the controller {addr}")
        for name, info in data.replicas_info_table.items():
            in_sync, not_in_sync = info.in_sync_replicas or [], info.not_in_sync_replicas or []
            out.printf("\n#brokerName\t%s\n#MasterBrokerId\t%s\n#MasterAddr\t%s\n#MasterEpoch\t%s"
                       "\n#SyncStateSetEpoch\t%s\n#SyncStateSetNums\t%s\n", name,
                       info.master_broker_id, info.master_address, info.master_epoch,
                       info.sync_state_set_epoch, len(in_sync))
            for member in in_sync:
                out.printf("\nInSyncReplica:\t%s\n", _identity(member))
            for member in not_in_sync:
                out.printf("\nNotInSyncReplica:\t%s\n", _identity(member))


def _identity(replica):
    """``ReplicaIdentity.toString()``."""
    alive = "null" if replica.alive is None else str(replica.alive).lower()
    return (f"ReplicaIdentity{{brokerName='{replica.broker_name}', brokerId={replica.broker_id}, "
            f"brokerAddress='{replica.broker_address}', alive={alive}}}")


class ElectMaster(_ControllerCommand):
    name = "electMaster"
    description = "Re-elect the specified broker as master."
    options = (Option("a", "controllerAddress", True, True, "The address of controller"),
               Option("b", "brokerId", True, True,
                      "The id of the broker which requires to become master"),
               Option("bn", "brokerName", True, True,
                      "The broker name of the replicas that require to be manipulated"),
               Option("c", "clusterName", True, True, "the clusterName of broker"))

    @inlineCallbacks
    def run(self, admin, args, out):
        try:
            broker_id = int(args.brokerId)
        except ValueError:
            raise ValueError(f"-b: {args.brokerId!r} is not a broker id") from None
        header, group = yield ControllerAdmin(admin).elect_master(
            args.controllerAddress, args.clusterName, args.brokerName, broker_id)
        out.printf("\n#ClusterName\t%s", args.clusterName)
        out.printf("\n#BrokerName\t%s", args.brokerName)
        out.printf("\n#BrokerMasterAddr\t%s", header.master_address)
        out.printf("\n#MasterEpoch\t%s", header.master_epoch)
        out.printf("\n#SyncStateSetEpoch\t%s\n", header.sync_state_set_epoch)
        for key, value in (group.broker_addrs if group is not None else {}).items():
            out.printf("\t#Broker\t%d\t%s\n", key, value)
        out.data = {"masterBrokerId": header.master_broker_id,
                    "masterAddress": header.master_address, "masterEpoch": header.master_epoch,
                    "syncStateSetEpoch": header.sync_state_set_epoch}


class CleanBrokerMetadata(_ControllerCommand):
    name = "cleanBrokerMetadata"
    description = "Clean metadata of broker on controller."
    options = (Option("a", "controllerAddress", True, True, "The address of controller"),
               Option("b", "brokerControllerIdsToClean", True, False,
                      "The brokerController id list which requires to clean metadata. eg: 1;2;3, "
                      "means that clean broker-1, broker-2 and broker-3"),
               Option("bn", "brokerName", True, True,
                      "The broker name of the replicas that require to be manipulated"),
               Option("c", "clusterName", True, False, "The clusterName of broker"),
               Option("l", "cleanLivingBroker", False, False,
                      "Whether clean up living brokers,default value is false"))

    @inlineCallbacks
    def run(self, admin, args, out):
        living = bool(args.cleanLivingBroker)
        if not living and not args.clusterName:
            raise ValueError("cleanLivingBroker option is false, clusterName option can not be empty.")
        yield ControllerAdmin(admin).clean_controller_broker_data(
            args.controllerAddress, args.clusterName, args.brokerName,
            args.brokerControllerIdsToClean, living)
        out.printf("clear broker %s metadata from controller success! \n", args.brokerName)
        out.data = {"brokerName": args.brokerName}


class GetBrokerEpoch(SubCommand):
    """``GetBrokerEpochSubCommand``: the epoch entries of every broker of a group (``-b``) or
    cluster (``-c``), found in the NameServer's cluster table, asked of each broker
    (GET_BROKER_EPOCH_CACHE), the last entry ending at the broker's max offset."""

    name = "getBrokerEpoch"
    description = "Fetch broker epoch entries."
    options = (Option("c", "clusterName", True, False, "which cluster"),
               Option("b", "brokerName", True, False, "which broker to fetch"), _INTERVAL)

    def run(self, admin, args, out):
        return _repeat(admin, args, out, lambda: self._once(admin, args, out))

    @inlineCallbacks
    def _once(self, admin, args, out):
        from .api import MQAdmin
        lookup = MQAdmin(admin.client, admin.namesrv_addrs, version=VERSION,
                         serialize_type=admin.serialize_type, timeout=admin.timeout)
        info = yield lookup.examine_broker_cluster_info()
        table = info.broker_addr_table or {}
        if args.brokerName:
            names = [args.brokerName]
        elif args.clusterName:
            names = (info.cluster_addr_table or {}).get(args.clusterName) or []
        else:
            raise ValueError("give -b brokerName or -c clusterName")
        addrs = set()
        for name in names:
            if table.get(name) is not None:
                addrs.update((table[name].broker_addrs or {}).values())
        controller = ControllerAdmin(admin)
        out.data = []
        for addr in hashmap_order(list(addrs)):
            answer = yield controller._call(addr, controller._request(RequestCode.GET_BROKER_EPOCH_CACHE))
            cache = EpochEntryCache.from_json(answer.body)
            out.printf("\n#clusterName\t%s\n#brokerName\t%s\n#brokerAddr\t%s\n#brokerId\t%d",
                       cache.cluster_name, cache.broker_name, addr, cache.broker_id)
            entries = cache.epoch_list or []
            for i, entry in enumerate(entries):
                end = cache.max_offset if i == len(entries) - 1 else entry.end_offset
                out.printf("\n#Epoch: %s", f"EpochEntry{{epoch={entry.epoch}, startOffset="
                                             f"{entry.start_offset}, endOffset={end}}}")
            out.printf("\n")
            out.data.append({"brokerAddr": addr, **cache.to_obj()})


#: In mqadmin's help order; only getBrokerEpoch (and getSyncStateSet -c) need ``-n``.
CONTROLLER_COMMANDS = (GetSyncStateSet(), GetBrokerEpoch(), GetControllerMetaData(),
                       GetControllerConfig(), UpdateControllerConfig(), ElectMaster(),
                       CleanBrokerMetadata())
