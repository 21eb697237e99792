"""Collector-side processing of whole traces, once they have gone quiet.

- :mod:`.pipeline`: :class:`~.pipeline.TracePipeline`, the poller that picks quiet traces from ClickHouse
  (``hotspan_trace_arrivals``), analyses them in batches (:mod:`analysis`) and stores per-span and per-trace
  rows (``hotspan_span_analysis``, ``hotspan_trace_summary``); :mod:`.config` its settings.
- :mod:`.base`: :class:`~.base.TraceProcessor`, the extension point every batch is handed to, and its
  contract; processors such as :mod:`.service_graph` implement it.
- :mod:`.tail_sampling`, :mod:`.tail_sampling_policies`: keeping or dropping each trace once analysed, by
  policies as data (``HOTSPAN_TAIL_SAMPLING``), and the decision cache late spans follow.
- :mod:`.derive`, :mod:`.hotspots`, :mod:`.hotspot_rules`, :mod:`.flame`: the rows, the hotspot flags and
  their rule table, the flame-graph paths.
- :mod:`.queries`: :class:`~.queries.AnalysisService`, the service functions the REST API, the UI and the
  diagnosis rules call (per trace on the fly, per window from the derived tables).
"""
