"""Service layer: Java ``BrokerHousekeepingService``, the NameServer's channel event listener.

A broker connection's close, failure or idle becomes unregistrations, as Java's
``onChannelDestroy``; connect and active are ignored. The lookup is the route table's O(1)
channel index, and each request carries the channel's identity, so a close arriving after the
broker re-registered on a new connection removes nothing."""
from twisted.logger import Logger
from zope.interface import implementer

from ..transport.interfaces import IChannelEventListener
from ..transport import logs

__all__ = ["BrokerHousekeepingService"]


@implementer(IChannelEventListener)
class BrokerHousekeepingService:
    """Turns close / exception / idle of a broker channel into unregistration requests.

    :param on_channel_destroy: ``RouteInfoManager.on_channel_destroy(channel)`` -> list of requests.
    :param submit: ``BatchUnregistrationService.submit(request)`` -> bool.
    """

    log = Logger(observer=logs.observer)

    def __init__(self, on_channel_destroy, submit):
        self._on_channel_destroy = on_channel_destroy
        self._submit = submit

    def on_channel_connect(self, remote_addr, channel):
        pass

    def on_channel_active(self, remote_addr, channel):
        pass

    def on_channel_close(self, remote_addr, channel):
        self._destroyed(remote_addr, channel)

    def on_channel_exception(self, remote_addr, channel):
        self._destroyed(remote_addr, channel)

    def on_channel_idle(self, remote_addr, channel):
        self._destroyed(remote_addr, channel)

    def _destroyed(self, remote_addr, channel):
        for request in self._on_channel_destroy(channel) or ():
            accepted = self._submit(request)
            self.log.info("the broker's channel destroyed, submit the unregister request at once, "
                          "broker info: {request}, submit result: {accepted}",
                          request=request, accepted=accepted)
