"""The incident lifecycle, in a room of its own above the edges: one process (the role that owns it,
:mod:`hotspan.roles`) turns the query room's anomaly scores (:mod:`query.anomaly`, read only) into incidents.

- :mod:`incidents.lifecycle`: :class:`~incidents.lifecycle.AnomalyDetector` opens, follows and resolves incidents
  from a window's scores and writes the changed ones (:mod:`storage.incident_store`);
- :mod:`incidents.loop`: :class:`~incidents.loop.AnomalyLoop` runs it every few seconds and sends opened and
  resolved incidents to Alertmanager and webhooks through the SLO alerts' notifiers (:mod:`alerts.notify`).

Imports point down only: ``incidents`` reads through ``query``, notifies through ``alerts`` and writes through
``storage``; only ``hotspan`` imports it.
"""
