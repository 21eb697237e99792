"""Versioned, idempotent schema migrations applied at start.

Each migration is a ``.sql`` file under ``storage/sql/`` named ``NNNN_name.sql``; the applied
versions are recorded in ``hotspan_schema_migrations``. Every statement is written with
``IF NOT EXISTS`` so re-running one after a crash between apply and record is harmless.
"""

from __future__ import annotations

from importlib import resources

from storage.clickhouse import ClickHouse

_LEDGER = """
CREATE TABLE IF NOT EXISTS hotspan_schema_migrations (
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


def apply_migrations(ch: ClickHouse, ttl_days: int = 0, up_to: int | None = None) -> list[int]:
    """Apply every migration not yet recorded (those numbered at most ``up_to`` when given: the schema of an
    earlier release, as upgrade tests start from); return the versions applied now.

    Raises:
        clickhouse_connect.driver.exceptions.DatabaseError: a statement failed; earlier
        migrations stay applied and recorded, so a fixed retry resumes where this one stopped.
    """
    ch.command(_LEDGER)
    done = {row[0] for row in ch.query_rows("SELECT version FROM hotspan_schema_migrations FINAL")}
    applied = []
    for version, name, sql in migration_files():
        if version in done or (up_to is not None and version > up_to):
            continue
        ch.command(render(sql, ttl_days))
        ch.command(
            "INSERT INTO hotspan_schema_migrations (version, name) VALUES ({v:UInt32}, {n:String})",
            {"v": version, "n": name},
        )
        applied.append(version)
    return applied
