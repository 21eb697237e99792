"""Workload loading from the shared data directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from instrumented_stack.env import ENV_SHARED_DATA
from instrumented_stack.workload import (
    AZURE_CONV_FILE,
    WorkloadRequest,
    load_azure_trace,
    load_mooncake_trace,
    load_workload,
    shared_data_dir,
)


def test_azure_conversation_trace_loads_every_row() -> None:
    rows = load_azure_trace()
    assert len(rows) == 19366
    assert rows[0] == WorkloadRequest(index=0, arrival_offset_s=0.0, prompt_tokens=374, output_tokens=44)
    # Second row: 2023-11-16 18:15:50.9951690 is 4.314579 s after the first.
    assert rows[1].arrival_offset_s == pytest.approx(4.314579, abs=1e-6)
    assert (rows[1].prompt_tokens, rows[1].output_tokens) == (396, 109)
    offsets = [row.arrival_offset_s for row in rows]
    assert offsets == sorted(offsets)


def test_limit_and_offset_keep_file_positions() -> None:
    rows = load_azure_trace(limit=2, offset=2)
    assert [row.index for row in rows] == [2, 3]
    assert (rows[0].prompt_tokens, rows[0].output_tokens) == (879, 55)
    assert rows[0].arrival_offset_s > 0


def test_env_overrides_default_and_argument_overrides_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = tmp_path / "env"
    (env_dir / "workloads").mkdir(parents=True)
    (env_dir / AZURE_CONV_FILE).write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0000000,10,2\n2023-11-16 18:00:01.5000000,20,3\n"
    )
    monkeypatch.setenv(ENV_SHARED_DATA, str(env_dir))
    assert shared_data_dir() == env_dir
    assert [(r.arrival_offset_s, r.prompt_tokens, r.output_tokens) for r in load_azure_trace()] == [
        (0.0, 10, 2),
        (1.5, 20, 3),
    ]
    argument_dir = tmp_path / "argument"
    argument_dir.mkdir()
    assert shared_data_dir(argument_dir) == argument_dir


def test_missing_directory_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SHARED_DATA, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=ENV_SHARED_DATA):
        load_azure_trace()


def test_bad_rows_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,0,5\n")
    with pytest.raises(ValueError, match="row 0"):
        load_azure_trace(path)
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00.0,3\n")
    with pytest.raises(ValueError, match="GeneratedTokens"):
        load_azure_trace(path)


def test_mooncake_trace_keeps_timestamps_lengths_and_hash_ids() -> None:
    rows = load_mooncake_trace()
    assert len(rows) == 12031
    assert rows[0] == WorkloadRequest(0, 0.0, 6758, 500, tuple(range(14)))
    assert rows[10].arrival_offset_s == 3.0, "timestamps are milliseconds"
    assert all(len(row.hash_ids) * 512 >= row.prompt_tokens for row in rows[:100])
    assert load_mooncake_trace(limit=2, offset=10)[0].index == 10


def test_workloads_by_name() -> None:
    assert len(load_workload("azure-code")) == 8819
    assert load_workload("azure-conv", limit=1)[0].prompt_tokens == 374
    assert load_workload("mooncake", limit=1)[0].hash_ids[0] == 0
    with pytest.raises(ValueError, match="azure-conv, azure-code, mooncake"):
        load_workload("sharegpt")


def test_bad_mooncake_lines_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 1000, "output_length": 2, "hash_ids": [1]}\n')
    with pytest.raises(ValueError, match="too few hash_ids"):
        load_mooncake_trace(path)
    path.write_text('{"timestamp": 0}\n')
    with pytest.raises(ValueError, match="line 1"):
        load_mooncake_trace(path)
