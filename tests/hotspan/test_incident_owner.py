"""Which process runs the incident lifecycle (``hotspan.roles.runs_incidents``): ``all``, or pipeline worker 0 of N,
and none with ``HOTSPAN_ANOMALY`` off, so a split deployment judges each minute once."""

from __future__ import annotations

from pathlib import Path

import pytest

from hotspan.roles import runs_incidents
from hotspan.settings import load_settings


@pytest.mark.parametrize(
    ("role", "shard", "owns"),
    [
        ("all", "0/1", True),
        ("collector", "0/1", False),
        ("query", "0/1", False),
        ("pipeline", "0/3", True),
        ("pipeline", "2/3", False),
    ],
)
def test_one_role_and_shard_owns_the_lifecycle(tmp_path: Path, role: str, shard: str, owns: bool) -> None:
    assert runs_incidents(load_settings(data_dir=tmp_path, role=role, pipeline_shard=shard)) is owns


def test_with_anomaly_off_no_process_runs_it(tmp_path: Path) -> None:
    assert not runs_incidents(load_settings(data_dir=tmp_path, anomaly=False))
