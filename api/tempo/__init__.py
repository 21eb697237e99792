"""Grafana Tempo's HTTP API, so Grafana's Tempo data source (search, TraceQL editor, trace view) reads Hotspan.

Served under ``/tempo`` (Grafana's data-source URL is ``http://<hotspan>/tempo``): Tempo's own paths start with
``/api``, and ``/api/traces/{id}`` is already Jaeger's (:mod:`api.jaeger`).

- :mod:`api.tempo.routes`: ``/api/echo``, ``/api/status/buildinfo``, ``/api/traces/{id}``, ``/api/v2/traces/{id}``,
  ``/api/search``, ``/api/v2/search/tags``, ``/api/v2/search/tag/{tag}/values`` (and v1's unscoped
  ``/api/search/tags``, ``/api/search/tag/{tag}/values``);
- :mod:`api.tempo.traceql` parses the TraceQL subset (:mod:`storage.traceql`, compiled to SQL by
  :mod:`storage.traceql_sql`); :mod:`api.tempo.search` reads the other search parameters and writes Tempo's
  search answer; :mod:`api.tempo.proto` the protobuf of a trace; :mod:`api.tempo.errors` Tempo's plain-text errors.

Reads go through :class:`query.service.QueryService`'s methods (``trace_page``, ``span_sets``, ``tag_names``,
``tag_values``) on the read pool, each with the caller's tenant (:mod:`api.tenancy`), as the Jaeger APIs' do;
traces are the OTLP JSON of :mod:`api.jaeger.otlp`.
"""
