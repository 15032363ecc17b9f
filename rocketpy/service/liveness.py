"""Service layer: the periodic broker liveness scan (Java ``RouteInfoManager.scanNotActiveBroker``
scheduled by ``NamesrvController.startScheduleService``).

Every ``scanNotActiveBrokerInterval`` ms (5 s in 5.x; 4.9 scans every 10 s) every broker whose
last REGISTER_BROKER / QUERY_DATA_VERSION / BROKER_HEARTBEAT is older than its
``heartbeatTimeoutMillis`` (120 s unless the broker said otherwise) is expired: Java closes its
channel, logs "The broker channel expired" and submits its unregistration to the batch service.
This service does the same with the route table's answer, a list of ``(request, channel_id)``.
The close then also reports ``close`` for that channel; the duplicate request is harmless.
"""
from .periodic import PeriodicService

__all__ = ["ScanNotActiveBrokerService"]


class ScanNotActiveBrokerService(PeriodicService):
    """Expire silent brokers every ``interval_ms``.

    :param scan: ``RouteInfoManager.scan_not_active_broker(now_ms)`` -> [(request, channel_id)].
    :param close_channel: ``RemotingServerFactory.close_channel(channel_id, why)``.
    :param submit: ``BatchUnregistrationService.submit(request)`` -> bool.
    :param clock: an ``IReactorTime``; its ``seconds()`` is the scan's notion of now.
    """

    name = "scan-not-active-broker"

    def __init__(self, scan, close_channel, submit, clock, interval_ms=5000):
        super().__init__(interval_ms / 1000.0, clock)
        self._scan = scan
        self._close_channel = close_channel
        self._submit = submit

    def run_once(self):
        """One scan; returns the number of brokers expired."""
        expired = self._scan(int(self.clock.seconds() * 1000)) or ()
        for request, channel_id in expired:
            if channel_id is not None:
                self._close_channel(channel_id, "broker expired")
            self.log.warn("The broker channel expired, {request}", request=request,
                          rocketpy_event="broker.expired", peer=getattr(request, "broker_addr", ""),
                          reason="no heartbeat")
            self._submit(request)
        return len(expired)
