"""Service layer: the periodic broker liveness scan (Java ``RouteInfoManager.scanNotActiveBroker``
scheduled by ``NamesrvController.startScheduleService``).

Every scan interval (5.x ``scanNotActiveBrokerInterval``, 4.9 10 s) a broker silent for longer
than its heartbeat timeout is expired as Java does: its channel closed, "The broker channel
expired" logged, its unregistration submitted. The close then reports ``close`` for that channel
too; the duplicate request is harmless."""
from ..transport.periodic import PeriodicService

__all__ = ["ScanNotActiveBrokerService"]


class ScanNotActiveBrokerService(PeriodicService):
    """Expire silent brokers every ``interval_ms`` (of ``clock.seconds()``).

    :param scan: ``RouteInfoManager.scan_not_active_broker(now_ms)`` -> [(request, channel_id)].
    :param close_channel: ``RemotingServerFactory.close_channel(channel_id, why)``.
    :param submit: ``BatchUnregistrationService.submit(request)`` -> bool."""

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
