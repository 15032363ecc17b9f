"""Web layer: the service that serves the web endpoint (``--web ENDPOINT``) and the one function
``tap.makeService`` calls to build it. It fails loudly like the remoting server
(:mod:`rocketpy.transport.listening`) and logs ``rocketpy web endpoint on http://HOST:PORT/`` with
the address actually bound (tests wait for that line)."""
from twisted.internet import defer, task

from ..transport.listening import ListeningService
from .health import ReactorPulse, Readiness
from .metrics import build_registry
from .rates import SAMPLE_SECONDS, MergedMetrics, TrafficRates
from .resource import WebRoot, WebSite
from .state import NameServerView

__all__ = ["WebService", "make_web_service", "WEB_LINE_PREFIX"]

#: The log line once listening; scripts and tests wait for it.
WEB_LINE_PREFIX = "rocketpy web endpoint on"


class WebService(ListeningService):
    """Listen with ``site`` on ``endpoint`` (an ``IStreamServerEndpoint`` or its string)."""

    name = "web"

    def __init__(self, endpoint, site, reactor, description=None, rates=None, peer_watch=None,
                 pulse=None):
        super().__init__(endpoint, site, reactor, description)
        self.site = site
        self.url = None
        self.rates = rates
        self.peer_watch = peer_watch
        self.pulse = pulse
        self._sampling = None

    def startService(self):
        super().startService()
        if self.pulse is not None:      # /healthz: the reactor turns
            self.pulse.start()
        if self.peer_watch is not None:
            self.peer_watch.startService()
        if self.rates is not None:      # the status page's rates of the last minute
            self._sampling = task.LoopingCall(self.rates.sample)
            self._sampling.clock = self.reactor
            self._sampling.start(SAMPLE_SECONDS, now=False)

    def _listening(self, port):
        self.port = port
        host = port.getHost()
        address = getattr(host, "host", None)
        if address is not None:
            shown = f"[{address}]" if ":" in address else address
            self.url = f"http://{shown}:{host.port}/"
        else:
            self.url = f"unix:{getattr(host, 'name', '?')}"
        self.log.info("{prefix} {url} (status page /, Prometheus /metrics, JSON /api/, probes "
                      "/healthz /readyz)",
                      prefix=WEB_LINE_PREFIX, url=self.url)
        return port

    def stopService(self):
        super().stopService()
        if self.peer_watch is not None and self.peer_watch.running:
            self.peer_watch.stopService()
        if self._sampling is not None and self._sampling.running:
            self._sampling.stop()
        if self.pulse is not None:
            self.pulse.stop()
        view = getattr(self, "view", None)
        if view is not None:
            view.search.stop()
        port, self.port = self.port, None
        if port is not None:
            return defer.maybeDeferred(port.stopListening)
        return None


def make_web_service(endpoint, *, route_info_manager, kv_config_manager, factory, unregistration,
                     processor, policies, reactor, listen=None, nsaddr=None, peers=None,
                     decode_pool=None, readiness=None, snapshot_stream=None, workers=None):
    """The web service for ``--web endpoint``, reading the given components (tap.makeService);
    ``nsaddr``: the address server's lists (:mod:`rocketpy.web.nsaddr`); ``peers``: the other
    NameServers to compare with (:mod:`rocketpy.web.peers`), compared on ``decode_pool`` (a
    :class:`~rocketpy.transport.offload.DecodePool`; None: on the reactor); ``readiness``: the
    :class:`~rocketpy.web.health.Readiness` ``/readyz`` reports; ``snapshot_stream()``: a
    Deferred of the route snapshot ``/api/route-snapshot`` serves; ``workers``: the
    :class:`~rocketpy.service.workers.WorkerSupervisor` of a server of several processes."""
    peer_watch = None
    if peers:
        from ..transport.client import RemotingClient
        from .peers import PeerWatch
        peer_watch = PeerWatch(peers, route_info_manager, RemotingClient(reactor), reactor,
                               offload=None if decode_pool is None else decode_pool.submit)
    access = getattr(processor, "access_control", None)
    metrics = factory.metrics
    if metrics is not None and workers is not None:   # the rates of every process
        metrics = MergedMetrics(lambda: workers.metrics_sources(factory.metrics))
    rates = TrafficRates(metrics, reactor) if metrics is not None else None
    view = NameServerView(
        route_info_manager, kv_config_manager, clock=reactor, connections=factory.connections,
        unregistration=unregistration, metrics=factory.metrics, policies=policies,
        access_control=access, answer_cache=factory.answer_cache, listen=listen, rates=rates,
        peer_watch=peer_watch, workers=workers)
    registry = build_registry(view)
    pulse = ReactorPulse(reactor)
    site = WebSite(WebRoot(view, registry, reactor, nsaddr=nsaddr, pulse=pulse,
                           readiness=readiness if readiness is not None else Readiness(),
                           snapshot_stream=snapshot_stream),
                   allow_networks=getattr(access, "allow_networks", ()) or ())
    service = WebService(endpoint, site, reactor, rates=rates, peer_watch=peer_watch, pulse=pulse)
    service.view = view
    service.registry = registry
    return service
