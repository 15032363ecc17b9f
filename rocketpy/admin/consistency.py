"""Admin layer: whether several NameServers agree, read over the wire (``rocketpy-admin
compareNamesrv``). :func:`namesrv_view` reads what one NameServer holds -- its cluster table,
its broker table and the route of every topic it lists -- as the canonical
:class:`~rocketpy.namesrv.consistency.NamesrvView`; :func:`compare_nameservers` does it for
every address of an :class:`~rocketpy.admin.api.MQAdmin` and compares them
(:func:`~rocketpy.namesrv.consistency.compare_views`, which the status page runs on its peers'
views too)."""
from twisted.internet.defer import DeferredList, DeferredSemaphore, inlineCallbacks

from ..namesrv.consistency import NamesrvView, compare_views, view_of
from ..remoting.codes import ResponseCode
from ..transport.client import RemotingCommandError

__all__ = ["namesrv_view", "compare_nameservers"]


def _one_line(exc):
    return " ".join(str(exc).split())


@inlineCallbacks
def namesrv_view(admin, addr):
    """Read the NameServer ``addr``: cluster info, the topic list, then every listed topic's
    route (``admin.concurrency`` at a time, on the one connection)."""
    try:
        info = yield admin.examine_broker_cluster_info(at=addr)
        listed = yield admin.fetch_all_topic_list(at=addr)
    except Exception as exc:  # any failure: this NameServer could not be read
        return NamesrvView(addr, error=_one_line(exc))
    topics = list(dict.fromkeys(listed.topic_list or ()))
    semaphore = DeferredSemaphore(admin.concurrency)
    results = yield DeferredList([semaphore.run(admin.examine_topic_route_info, topic, at=addr)
                                  for topic in topics], consumeErrors=True)
    routes, error = {}, None
    for topic, (ok, result) in zip(topics, results):
        if ok:
            routes[topic] = result
        elif (result.check(RemotingCommandError)
              and result.value.code == ResponseCode.TOPIC_NOT_EXIST):
            routes[topic] = None  # listed, but no route (no queue data left)
        elif error is None:
            error = f"route of {topic}: {_one_line(result.value)}"
    view = view_of(addr, info, routes)
    view.error = error
    return view


@inlineCallbacks
def compare_nameservers(admin):
    """Read every NameServer of ``admin.namesrv_addrs`` at once and compare them."""
    addrs = list(dict.fromkeys(admin.namesrv_addrs))
    views = yield DeferredList([namesrv_view(admin, addr) for addr in addrs])
    return compare_views([view for _, view in views])
