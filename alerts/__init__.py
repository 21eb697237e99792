"""Alerting on SLOs: SLO files (:mod:`alerts.config`), Prometheus multi-window burn-rate rules generated from them
(:mod:`alerts.rules`, ``hotspan alerts rules``), and a built-in evaluator over ClickHouse that notifies
Alertmanager and webhooks (:mod:`alerts.evaluator`, :mod:`alerts.notify`; started by ``hotspan serve`` when an
SLO file is configured)."""
