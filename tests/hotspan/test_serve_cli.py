"""``hotspan serve`` refusing to start says why in one line and exits non-zero (issue 31, item 3): a second
instance on a served data directory, and a port another process listens on (HTTP, and gRPC, which would otherwise
bind beside it with ``SO_REUSEPORT`` and take half its senders).

Real processes: one ``hotspan serve`` on free loopback ports, then second ones started against it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import REPO, ServedHotspan, free_port, serve

REFUSAL_TIMEOUT_S = 120
"""Longest a refused start may take (it refuses before opening the store: seconds)."""


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedHotspan]:
    served = serve(tmp_path_factory.mktemp("first") / "data")
    yield served
    served.stop()


def second(data_dir: Path, http_port: int, grpc_port: int) -> subprocess.CompletedProcess[str]:
    """``hotspan serve`` on ``data_dir`` and the given ports, run to its exit (a refusal exits at once)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HOTSPAN_")}
    command = [sys.executable, "-m", "hotspan.cli", "serve", "--data-dir", str(data_dir)]
    return subprocess.run(
        [*command, "--http-port", str(http_port), "--grpc-port", str(grpc_port)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=REFUSAL_TIMEOUT_S,
    )


def test_a_second_instance_on_the_same_data_dir_says_so_in_one_line(first: ServedHotspan) -> None:
    run = second(first.data_dir, free_port(), free_port())
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"hotspan serve: another Hotspan is using data dir {first.data_dir} (stop it, or pass another --data-dir)"
    ]


def test_an_http_port_in_use_is_one_line_naming_the_setting(first: ServedHotspan, tmp_path: Path) -> None:
    run = second(tmp_path / "data", first.http_port, free_port())
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"hotspan serve: OTLP/HTTP, API and UI port {first.http_port} on 127.0.0.1 is in use: stop what listens "
        "there, or set another with --http-port or HOTSPAN_HTTP_PORT"
    ]
    # Refused before the store opened: the data directory holds nothing.
    assert not (tmp_path / "data" / "clickhouse").exists()


def test_a_grpc_port_in_use_is_refused_not_shared(first: ServedHotspan, tmp_path: Path) -> None:
    run = second(tmp_path / "data", free_port(), first.grpc_port)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"hotspan serve: OTLP/gRPC port {first.grpc_port} on 127.0.0.1 is in use: stop what listens there, or set "
        "another with --grpc-port or HOTSPAN_GRPC_PORT"
    ]
