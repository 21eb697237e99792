"""Jaeger-compatible query APIs, so Jaeger UI, Grafana's Jaeger data source and Jaeger API v3 clients read
Hotspan unchanged.

- :mod:`api.jaeger.routes_v1`: ``/api/services``, ``/api/services/{service}/operations``, ``/api/operations``,
  ``/api/traces``, ``/api/traces/{id}``, ``/api/dependencies`` answering Jaeger JSON (:mod:`api.jaeger.model`);
- :mod:`api.jaeger.routes_v3`: ``/api/v3/services``, ``/api/v3/operations``, ``/api/v3/traces``,
  ``/api/v3/traces/{id}`` answering OTLP JSON (:mod:`api.jaeger.otlp`);
- :mod:`api.jaeger.params` parses both APIs' parameters (Go durations: :mod:`api.jaeger.durations`) into the
  storage layer's :class:`~storage.reader.TraceQuery`; :mod:`api.jaeger.errors` answers failures in each API's
  own error envelope.

Reads go through :class:`query.service.QueryService`'s methods only (services, operations, ``search_spans``,
``trace_page``, dependencies), each with the caller's tenant (:mod:`api.tenancy`):
a Jaeger client sees its own tenant's traces, services and dependencies, never another's.
"""
