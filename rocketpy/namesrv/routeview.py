"""NameServer state layer: what a policy may read of the route tables (a rocketpy addition:
Java's policies are methods of ``RouteInfoManager`` and change its maps in place).

:class:`RouteView` is the read-only face of
:class:`~rocketpy.namesrv.route_info_manager.RouteInfoManager` that the policies are typed
against (the release's registration rules in :mod:`rocketpy.namesrv.brokers`, the route
bounds): read methods and the tables as read-only views, never the writer's dicts. A policy
records what should change as ops in a :class:`~rocketpy.namesrv.delta.RouteDelta`; only
``RouteInfoManager.apply`` writes. ``tests/test_namesrv_route_delta.py`` holds the policies to
this protocol and walks every module for writes to the tables.

The tables' views (:class:`TableView`) are live and read-only to any depth: a table of sets or
maps hands out read-only views of them too, and every record a table holds is frozen."""
from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

__all__ = ["RouteView", "TableView", "TABLES"]

#: the route tables, as a RouteView names them (each a read-only view)
TABLES = ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
          "filter_server_table", "topic_queue_mapping_info_table", "provisional")


class TableView(Mapping):
    """A read-only view of a dict whose values are dicts (or lists): each value is handed out as
    a read-only view (a ``MappingProxyType``, or a tuple) of what the table holds now."""

    __slots__ = ("_table",)

    def __init__(self, table):
        self._table = table

    @staticmethod
    def _view(value):
        return MappingProxyType(value) if type(value) is dict else tuple(value)

    def __getitem__(self, key):
        return self._view(self._table[key])

    def get(self, key, default=None):
        value = self._table.get(key)
        return default if value is None else self._view(value)

    def __contains__(self, key):
        return key in self._table

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)

    # keys(), items() and values() are Mapping's views: lazy, over the dict's own iterator (a
    # dict changed under a walk raises, as the dict would)

    def __repr__(self):
        return f"TableView({self._table!r})"


class RouteView(Protocol):
    """The route tables, read-only. Tables (live views; every record frozen):

    * ``topic_queue_table``: topic -> its :class:`~rocketpy.namesrv.shapes.RouteShape`;
    * ``broker_addr_table``: broker name -> :class:`~rocketpy.namesrv.model.BrokerData`;
    * ``cluster_addr_table``: cluster -> its broker names (an ordered set);
    * ``broker_live_table``: live key -> :class:`~rocketpy.namesrv.model.BrokerLiveInfo`;
    * ``filter_server_table``: live key -> filter server addresses;
    * ``topic_queue_mapping_info_table``: topic -> {broker name:
      :class:`~rocketpy.namesrv.model.MappingInfo`};
    * ``provisional``: live key -> the host of an entry a warm restart loaded."""

    topic_queue_table: Mapping
    broker_addr_table: Mapping
    cluster_addr_table: Mapping
    broker_live_table: Mapping
    filter_server_table: Mapping
    topic_queue_mapping_info_table: Mapping
    provisional: Mapping
    #: topic-broker pairs in ``topic_queue_table``; static mappings and their queues
    queue_data_count: int
    mapping_count: int
    #: the run-time NamesrvConfig and the release's registration policy
    config: object
    registration: object

    def live_key(self, cluster_name, broker_addr):
        """The live-table key of an address, as the release keys it."""

    def broker_live_info(self, cluster_name, broker_addr):
        """The live entry of ``broker_addr``, or None."""

    def live_timeout(self, requested_ms):
        """The heartbeat timeout a registration asking for ``requested_ms`` gets."""

    def topics_of_broker(self, broker_name):
        """The topics whose queue layout names ``broker_name`` (a new list)."""

    def applied_digest(self, broker_name):
        """The content digest of the topic table the group applied last, or None."""

    def mapping_owner(self, topic, broker_name):
        """The group that registered ``topic``'s mapping for ``broker_name``, or None."""

    def is_broker_topic_config_changed(self, cluster_name, broker_addr, data_version):
        """Whether ``data_version`` differs from the live entry's (or there is none)."""

    def master_result(self, cluster_name, broker_id, addrs):
        """A registration's result: the live master of a slave's group, if any."""
