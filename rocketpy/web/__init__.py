"""Web layer: the optional HTTP endpoint of ``twistd rocketnamesrv --web ENDPOINT`` (a rocketpy
addition; the Java NameServer has no web interface -- operators use ``mqadmin`` and, for
metrics, the broker-side exporter).

* :mod:`rocketpy.web.state`: a read-only view of the route tables, the KV store and the
  connections, as plain JSON-ready data (the one place that reads the state for the web);
* :mod:`rocketpy.web.metrics`: Prometheus collectors over that view and the transport's
  :class:`~rocketpy.transport.metrics.ServerMetrics`, a per-server ``CollectorRegistry``, and the
  ``/metrics`` resource (``prometheus_client``'s Twisted resource);
* :mod:`rocketpy.web.page`: the server-rendered status page (no framework, nothing fetched from
  anywhere: inline CSS and a little vanilla JavaScript, usable without it);
* :mod:`rocketpy.web.resource`: the ``twisted.web`` resources (``/``, ``/metrics``, ``/api/...``)
  and the site, which honours the ``adminAllowNetworks`` allow-list;
* :mod:`rocketpy.web.service`: the service that listens on the endpoint.

Everything is read-only: the endpoint answers GET and HEAD only.
"""
