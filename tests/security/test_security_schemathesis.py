"""Schemathesis against the served OpenAPI description (``/openapi.json``): generated requests for every
operation, sent with a token holding every role, must get no 5xx, and every answer must match what the
description says (status code documented, content type, headers, body schema).

Bounded: a few examples per operation, derandomized (the same requests every run), well under a minute.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from security_support import EVERYTHING

from hotspan.server import RunningServer

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis (test extra) is not installed")
from schemathesis import checks  # noqa: E402

EXAMPLES_PER_OPERATION = 6
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]
"""Server errors and schema violations; not the checks that judge semantics (e.g. that any schema-valid trace
ID string be found), which Hotspan's own tests cover."""


def test_no_server_error_and_no_schema_violation(secured_server: RunningServer) -> None:
    schema = schemathesis.openapi.from_url(f"{secured_server.base_url}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def call(case: schemathesis.Case) -> None:
            case.call_and_validate(base_url=secured_server.base_url, headers=EVERYTHING.header, checks=CHECKS)

        try:
            call()
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis reports a group of distinct failures
            failures.append(f"{operation.label}: {str(exc)[:1500]}")
    assert operations >= 10
    assert not failures, "\n\n".join(failures)
