"""Web layer: the optional, read-only (GET and HEAD) HTTP endpoint of ``twistd rocketnamesrv --web
ENDPOINT`` (a rocketpy addition; Java operators use ``mqadmin`` and the broker-side exporter):
:mod:`~rocketpy.web.state` (the one reader of the state for the web), :mod:`~rocketpy.web.metrics`
(Prometheus ``/metrics``, a per-server registry), :mod:`~rocketpy.web.page` (the status page),
:mod:`~rocketpy.web.resource` (the resources and the site, honouring ``adminAllowNetworks``),
:mod:`~rocketpy.web.nsaddr` (the address server, ``--nsaddr``), :mod:`~rocketpy.web.peers`
(divergence from other NameServers, ``--peers``) and :mod:`~rocketpy.web.service` (listening
on the endpoint)."""
