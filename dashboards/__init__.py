"""Hotspan's web UI: a Dash app (``dashboards.app.build_dash_app``) mounted under ``/ui``, its pages, and the
pure figure builders they use. Reads only through :class:`query.service.QueryService`'s methods and query
services (``tests/query/test_one_door.py``); no SQL here."""
