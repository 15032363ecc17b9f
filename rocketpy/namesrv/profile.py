"""NameServer state layer: which Java NameServer version rocketpy answers like (the facts).

rocketpy answers like 5.3.3 by default; each difference among 4.9.8, 5.0.0 and 5.3.3 is a field
of :class:`BehaviourProfile`, so a 4.9.8 capture replays with :data:`PROFILE_49`. The 4.9/5.0
differences are proven by the captures; 5.3.3's, without captures, come from the Java source
(tag rocketmq-all-5.3.3), listed with file, line and test in ``docs/java-5.3-changes.md``. A
profile is data only: :func:`rocketpy.namesrv.policy.policies_for` is its one reader. The codes
a release serves and the config keys it has are not facts of the profile: they follow from its
:class:`~rocketpy.remoting.catalogue.Release` (the protocol catalogue, the config keys'
releases), so a new release is a ``Release`` and what differs (:meth:`BehaviourProfile.but`)."""
from dataclasses import dataclass, replace

from rocketpy.remoting.catalogue import Release
from rocketpy.remoting.codes import version_ordinal

__all__ = ["BehaviourProfile", "PROFILE_49", "PROFILE_50", "PROFILE_53", "DEFAULT_PROFILE",
           "PROFILES", "profile_for", "profile_names"]


@dataclass(frozen=True)
class BehaviourProfile:
    """One release's facts, each named once. :data:`PROFILE_49` states them all; each later
    release is the one before it with what changed (:meth:`but`)."""

    #: the Java release imitated (its answers' ``version``: 4.9.8=409, 5.0.0=413, 5.3.3=479; the
    #: codes it serves; the config keys it has)
    release: Release
    #: 4.9 answers in the request's header serialisation; 5.x always in its own (JSON).
    reply_in_request_serialize_type: bool
    #: 4.9's processor returns null for an unknown code, so no answer at all; 5.x answers
    #: REQUEST_CODE_NOT_SUPPORTED.
    answer_unknown_code: bool
    #: 5.x: ``ZoneRouteRPCHook`` filters a route query by ``__ZONE_NAME`` in zone mode.
    zone_route_hook: bool
    #: 4.9 unregisters synchronously; 5.x queues (BatchUnregistrationService).
    queued_unregistration: bool
    #: 5.x registration: per-topic change detection, prime slave, rejection paths, zone,
    #: acting master, per-broker heartbeat timeout, live table keyed by (cluster, address).
    v5_registration: bool
    #: BrokerData carries ``enableActingMaster`` and ``zoneName`` (5.x).
    broker_fields_5x: bool
    #: 5.0.0 wipes a prime slave's write perm even without acting master; 5.1+ only with it.
    prime_slave_wipe_needs_acting_master: bool
    #: 5.0.0 removes an unregistered broker's address by id; 5.1+ by address.
    unregister_by_address: bool
    #: QUERY_DATA_VERSION refreshes liveness: 4.9 only when unchanged, 5.x always.
    query_data_version_always_refreshes: bool
    #: 5.x: GET_ALL_TOPIC_LIST honours enableAllTopicList, the other lists enableTopicList.
    topic_list_switches: bool
    #: 5.3: GET_ROUTEINFO_BY_TOPIC answers "name server not ready" while needWaitForService.
    wait_for_service: bool
    #: Java collection behind TopicList.topicList: "hashset" (4.9), "insertion"
    #: (CopyOnWriteArraySet, 5.0), "chm" (ConcurrentHashMap key set, 5.1+).
    topic_list_set: str
    #: the route tables are HashMap in 4.9 and ConcurrentHashMap in 5.x (their iteration order
    #: differs because the initial capacities differ).
    concurrent_tables: bool
    #: DataVersion carries stateVersion in 5.x.
    data_version_state: bool
    #: GET_NAMESRV_CONFIG sorts keys in 5.x; 4.9 writes Properties order.
    sorted_config_text: bool
    #: liveness without a per-broker timeout (4.9: fixed 120 s).
    fixed_broker_timeout_ms: "int | None"
    #: REGISTER_TOPIC_IN_NAMESRV for a topic that exists: 5.0 ignores it, 5.1+ merges.
    register_topic_merges: bool
    #: where Java's processor dereferences a RegisterBrokerBody it read as null (its
    #: NullPointerException remark): the body class's package, the method and its line.
    register_npe_site: "tuple[str, str, int]"
    #: the lines where Java's processor unboxes a null ``brokerId`` (the header's ``Long`` for
    #: ``long``): REGISTER_BROKER's, and UNREGISTER_BROKER's when it is applied at once (4.9);
    #: 5.x queues the header and answers SUCCESS (None).
    broker_id_unboxing_lines: "tuple[int, int | None]"
    #: the stack frame of ``BrokerAddrInfo.hashCode``'s first line that reads its fields (5.x
    #: looks live brokers up by cluster and address; a null one throws there); None for 4.9,
    #: which looks them up by address in a HashMap.
    broker_addr_hash_site: "str | None"
    #: the FAQ page TOPIC_NOT_EXIST's remark points to (``FAQUrl.APPLY_TOPIC_URL``, new in 5.1).
    topic_not_exist_faq_url: str
    #: QUERY_DATA_VERSION without a body: 4.9.8 and 5.0.0 fail decoding the null DataVersion
    #: (SYSTEM_ERROR); 5.1+ reads it as null (``RemotingSerializable.decode`` checks).
    query_data_version_needs_body: bool
    #: the broker version a compressed REGISTER_BROKER body is read as: 4.9.8 reads every body
    #: as a 4.9 one (no queue-mapping part), 5.0.0 as a 5.0 one (so a 4.9 broker's compressed
    #: body fails), 5.1+ by the request's version (None).
    compressed_body_broker_version: "int | None"
    #: the fastjson release that reads JSON headers: 4.9.8 and 5.0.0 ship 1.2.69, whose bean
    #: properties match a key in any case; 5.3.3 ships 1.2.83, which also ignores ``_``/``-``.
    fastjson: str

    @property
    def name(self):
        """``"5.3"``: the release line (``--profile``'s name for it)."""
        return self.release.line

    @property
    def server_version(self):
        """``version`` of every answer: the release's ``MQVersion`` ordinal."""
        return version_ordinal(self.release.version_name)

    def but(self, **changes):
        """This release's facts with ``changes``: the next release, stated by its differences
        (``release=`` at least; a fact the class does not have is a TypeError)."""
        return replace(self, **changes)

#: ``FAQUrl.APPLY_TOPIC_URL`` up to 5.0.x.
_OLD_FAQ_URL = "http://rocketmq.apache.org/docs/faq/"

PROFILE_49 = BehaviourProfile(
    release=Release.V4_9_8, reply_in_request_serialize_type=True, answer_unknown_code=False,
    zone_route_hook=False, queued_unregistration=False, v5_registration=False,
    broker_fields_5x=False, prime_slave_wipe_needs_acting_master=True,
    unregister_by_address=False, query_data_version_always_refreshes=False,
    topic_list_switches=False, wait_for_service=False, topic_list_set="hashset",
    concurrent_tables=False, data_version_state=False, sorted_config_text=False,
    fixed_broker_timeout_ms=120_000, register_topic_merges=True,
    register_npe_site=("common.protocol", "registerBrokerWithFilterServer", 254),
    broker_id_unboxing_lines=(252, 359),
    broker_addr_hash_site=None,
    topic_not_exist_faq_url=_OLD_FAQ_URL, query_data_version_needs_body=True,
    compressed_body_broker_version=409, fastjson="1.2.69")

PROFILE_50 = PROFILE_49.but(
    release=Release.V5_0_0, reply_in_request_serialize_type=False, answer_unknown_code=True,
    zone_route_hook=True, queued_unregistration=True, v5_registration=True,
    broker_fields_5x=True, prime_slave_wipe_needs_acting_master=False,
    query_data_version_always_refreshes=True, topic_list_switches=True,
    topic_list_set="insertion", concurrent_tables=True, data_version_state=True,
    sorted_config_text=True, fixed_broker_timeout_ms=None, register_topic_merges=False,
    register_npe_site=("common.protocol", "registerBroker", 228),
    broker_id_unboxing_lines=(239, None),
    broker_addr_hash_site=("org.apache.rocketmq.common.BrokerAddrInfo.hashCode"
                           "(BrokerAddrInfo.java:61)"),
    compressed_body_broker_version=413)

PROFILE_53 = PROFILE_50.but(
    release=Release.V5_3_3,
    prime_slave_wipe_needs_acting_master=True, unregister_by_address=True, wait_for_service=True,
    topic_list_set="chm", register_topic_merges=True,
    register_npe_site=("remoting.protocol", "registerBroker", 242),
    broker_id_unboxing_lines=(253, None),
    broker_addr_hash_site=("org.apache.rocketmq.namesrv.routeinfo.BrokerAddrInfo.hashCode"
                           "(RouteInfoManager.java:1161)"),
    topic_not_exist_faq_url="https://rocketmq.apache.org/docs/bestPractice/06FAQ",
    query_data_version_needs_body=False, compressed_body_broker_version=None,
    fastjson="1.2.83")

DEFAULT_PROFILE = PROFILE_53
#: every profile, oldest first: ``--profile``'s choices
PROFILES = (PROFILE_49, PROFILE_50, PROFILE_53)

_BY_NAME = {key: p for p in PROFILES for key in (p.name, p.release.value)}


def profile_names():
    """``--profile``'s names: each profile's release line."""
    return [p.name for p in PROFILES]


def profile_for(name):
    """The profile for ``"4.9"``, ``"5.0"`` or ``"5.3"`` (full versions accepted too)."""
    try:
        return _BY_NAME[str(name)]
    except KeyError:
        raise ValueError(f"unknown NameServer profile {name!r}; known: "
                         f"{', '.join(profile_names())}") from None
