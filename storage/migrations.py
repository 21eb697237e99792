"""Versioned, idempotent schema migrations applied at start.

Each migration is a ``.sql`` file under ``storage/sql/`` named ``NNNN_name.sql``; the applied
versions are recorded in ``hotspan_schema_migrations``, those of one run together at its end (also when a statement
fails: the ones before it). Every statement is written with ``IF NOT EXISTS`` so re-running one after a crash
between apply and record is harmless.

On a cluster (``storage.layout``) each file is rendered into its ``ON CLUSTER`` statements and the ledger is one
replicated table that every node shares. A node that is down while a migration runs makes the statement wait
(``distributed_ddl_task_timeout``, 180 s by default) and then fail: the migration is not recorded and the next start
applies it again; ClickHouse keeps the statement in its distributed DDL queue, and the node runs it when it returns.
A node rebuilt from nothing, or away longer than the queue keeps entries (``task_max_lifetime``, 7 days), is caught
up by :func:`apply_migrations` with ``reapply`` (``hotspan migrate --reapply``): every migration again, each
statement idempotent.
"""

from __future__ import annotations

from importlib import resources

from storage.clickhouse import ClickHouse
from storage.layout import ledger_statement, render_statement

LEDGER = "hotspan_schema_migrations"

LEDGER_DDL = f"""
CREATE TABLE IF NOT EXISTS {LEDGER} (
    version UInt32,
    name String,
    applied_at DateTime64(3) DEFAULT now64(3)
) ENGINE = ReplacingMergeTree ORDER BY version
"""


def migration_files() -> list[tuple[int, str, str]]:
    """Return ``(version, name, sql)`` for every packaged migration, in version order."""
    found = []
    for entry in resources.files("storage.sql").iterdir():
        if entry.name.endswith(".sql") and entry.name[:4].isdigit():
            found.append((int(entry.name[:4]), entry.name[5:-4], entry.read_text(encoding="utf-8")))
    return sorted(found)


def render(sql: str, ttl_days: int) -> str:
    """Fill the TTL placeholders of a migration; ``ttl_days`` 0 means keep forever."""
    ttl = f"TTL toDateTime(Timestamp) + toIntervalDay({int(ttl_days)})" if ttl_days > 0 else ""
    ttl_lookup = f"TTL toDateTime(Start) + toIntervalDay({int(ttl_days)})" if ttl_days > 0 else ""
    return sql.replace("{ttl}", ttl).replace("{ttl_lookup}", ttl_lookup)


def migration_statements(ch: ClickHouse, sql: str, ttl_days: int) -> list[str]:
    """The statements that apply migration ``sql`` to ``ch``'s database on ``ch``'s layout, in order."""
    return render_statement(render(sql, ttl_days), ch.layout, ch.database)


def applied_versions(ch: ClickHouse) -> set[int]:
    """The migration versions recorded in ``ch``'s ledger (none when it does not exist yet)."""
    if not ch.query_rows(f"EXISTS TABLE {LEDGER}")[0][0]:
        return set()
    return {row[0] for row in ch.query_rows(f"SELECT version FROM {LEDGER} FINAL")}


def pending_migrations(ch: ClickHouse) -> list[int]:
    """The packaged migration versions ``ch``'s ledger does not record, in order."""
    done = applied_versions(ch)
    return [version for version, _, _ in migration_files() if version not in done]


def apply_migrations(
    ch: ClickHouse, ttl_days: int = 0, up_to: int | None = None, *, reapply: bool = False
) -> list[int]:
    """Apply every migration not yet recorded (those numbered at most ``up_to`` when given: the schema of an
    earlier release, as upgrade tests start from); return the versions applied now. ``reapply`` applies every
    migration again, recorded or not (the catch-up of a node that lost its tables: module docstring).

    The ledger is created when missing only, so a start with nothing to apply runs no DDL (on a cluster DDL waits
    for every node).

    Raises:
        clickhouse_connect.driver.exceptions.DatabaseError: a statement failed; earlier
        migrations stay applied and are recorded, so a fixed retry resumes where this one stopped.
        storage.layout.UnrenderableMigration: a migration has no rule for the cluster layout.
    """
    done = set() if reapply else applied_versions(ch)
    if reapply or not ch.query_rows(f"EXISTS TABLE {LEDGER}")[0][0]:
        ch.command(ledger_statement(LEDGER_DDL, ch.layout))
    applied: list[tuple[int, str]] = []
    try:
        for version, name, sql in migration_files():
            if version in done or (up_to is not None and version > up_to):
                continue
            for statement in migration_statements(ch, sql, ttl_days):
                ch.command(statement)
            applied.append((version, name))
    finally:
        _record(ch, applied)
    return [version for version, _ in applied]


def _record(ch: ClickHouse, applied: list[tuple[int, str]]) -> None:
    """Record ``(version, name)`` of each migration applied, in one insert: an insert is a part of its own, about
    7 ms on the embedded engine, so one per migration was a third of a fresh store's migration time."""
    if not applied:
        return
    values = ", ".join(f"({{v{i}:UInt32}}, {{n{i}:String}})" for i in range(len(applied)))
    parameters = {f"{key}{i}": value for i, row in enumerate(applied) for key, value in zip("vn", row, strict=True)}
    ch.command(f"INSERT INTO {LEDGER} (version, name) VALUES {values}", parameters)
