"""The security tests' served Hotspan: tokens of three tenants and an admin, seeded data (``security_support``);
one instance for the whole folder, which only reads it (tests that write use their own tenant-free checks)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from security_support import seed, write_auth_file

from hotspan.server import RunningServer
from testkit import serve_in_process


@pytest.fixture(scope="package")
def secured_server(chdb_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A served Hotspan on loopback with an auth file, holding :func:`security_support.seed`'s data."""
    directory = tmp_path_factory.mktemp("secured")
    server = serve_in_process(chdb_dsn, directory, "sec", auth_file=write_auth_file(directory), session_secret="s" * 40)
    seed(server.storage.writer)
    yield server
    server.stop()
