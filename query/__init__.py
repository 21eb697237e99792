"""The query room between storage and its readers (the REST API, the Dash UI, the alerts): it turns storage reads
into the answers they show, so two readers never disagree about the same data.

- :mod:`query.trace_model`: one trace as every reader shows it, built from one read of its spans and one
  :class:`analysis.TraceAnalysis` (display tree, critical path, stage pieces, self time, model calls);
- :mod:`query.trace_rows`: the rows of a trace view a reader can see (collapsed subtrees, repeated siblings
  aggregated), a window of them at a time, as compact columns;
- :mod:`query.trace_view_cache`: trace views read once and kept, bounded, per (tenant, trace);
- :mod:`query.trace_compare` and :mod:`query.window_compare`: two traces side by side, and a window's slow
  requests against its baseline.

Imports point down only: ``query`` reads ``storage`` and computes with ``analysis`` (and the pipeline's
helpers); ``api`` and ``dashboards`` call it.
"""
