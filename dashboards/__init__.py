"""Hotspan's web UI: a Dash app (``dashboards.app.build_dash_app``) mounted under ``/ui``, its pages, and the
pure figure builders they use. Reads traces only through ``storage.reader.TraceReader``; no SQL here."""
