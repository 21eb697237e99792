"""Extreme values through every input (issue 28 item 6): every query parameter of every ``/api`` GET route with
huge, negative, non-numeric and 10k-times repeated values, reversed windows, malformed Dash callback bodies and an
oversized ``/ui`` body. Each answer is a 4xx or a 2xx, never a 5xx; the oversized body is refused before it is read.

Extends ``test_security_every_input.py`` (injection payloads and foreign identifiers through the same routes and
callbacks) with the values that break parsing and arithmetic rather than SQL.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
from security_support import ACME_QUERY, ACME_TRACE
from test_security_every_input import answers, parameters

from hotspan.server import RunningServer

EXTREMES = (
    "1e30",
    str(10**30),
    str(-(10**30)),
    "-1",
    "0",
    str(2**63),
    str(2**64),
    "nan",
    "inf",
    "-inf",
    "abc",
    "",
    "0x10",
    "1" * 5000,
)
"""Values of every query parameter: huge, negative, non-numeric, empty, long."""

REPEATS = 10_000
"""Times one parameter is repeated in one query string."""


def test_extreme_values_through_every_query_parameter_of_every_route(secured_server: RunningServer) -> None:
    problems, checked = [], 0
    for path, name, value, answer in answers(secured_server, EXTREMES):
        checked += 1
        if answer.status_code >= 500:
            problems.append(f"{path}?{name}={value[:30]}: {answer.status_code} {answer.text[:120]}")
    for path, name in parameters(secured_server):
        status = _raw_status(secured_server, f"{path}?{'&'.join([f'{name}=7'] * REPEATS)}")
        checked += 1
        if status >= 500:
            problems.append(f"{path}?{name}=7 x{REPEATS}: {status}")
    assert checked > 500, f"only {checked} requests: the routes were not found"
    assert not problems, "\n".join(problems[:40])


def _raw_status(server: RunningServer, target: str, head: str = "") -> int:
    """The status code of ``GET target`` sent on a socket of its own (httpx refuses URLs over 64 KiB)."""
    address = urlsplit(server.base_url)
    assert address.hostname is not None and address.port is not None
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{head}"
    request += f"Authorization: Bearer {ACME_QUERY.secret}\r\n\r\n"
    with socket.create_connection((address.hostname, address.port), timeout=60) as sock:
        sock.sendall(request.encode())
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    return int(status_line.split()[1])


def test_huge_toggles_and_reversed_windows_are_4xx(secured_server: RunningServer) -> None:
    """The cases the adversarial run found, by name: ``/view?toggle=1e30`` and friends, and windows whose start is
    after their end."""
    now = time.time_ns()
    cases = [
        (f"/api/v1/traces/{ACME_TRACE}/view", {"toggle": "1e30"}),
        (f"/api/v1/traces/{ACME_TRACE}/view", {"toggle": str(10**30)}),
        (f"/api/v1/traces/{ACME_TRACE}/view", {"toggle": str(-(10**30))}),
        (f"/api/v1/traces/{ACME_TRACE}/view", {"opened": str(2**64)}),
        (f"/api/v1/traces/{ACME_TRACE}/view", {"depth": str(10**30)}),
        (f"/api/v1/traces/{ACME_TRACE}/view", {"offset": str(10**30)}),
        ("/api/v1/red", {"start_ns": now, "end_ns": now - 10**12}),
        ("/api/v1/red", {"step_s": str(10**30)}),
        ("/api/v1/topology", {"start_ns": now, "end_ns": now - 10**12}),
    ]
    with httpx.Client(base_url=secured_server.base_url, headers=ACME_QUERY.header, timeout=60) as client:
        answers = {f"{path}?{params}": client.get(path, params=params).status_code for path, params in cases}
    assert all(400 <= status < 500 for status in answers.values()), answers


MALFORMED_CALLBACKS: dict[str, bytes] = {
    "not json": b"{not json",
    "empty": b"",
    "a list": b"[1, 2, 3]",
    "a string": b'"output"',
    "no output": json.dumps({"inputs": [], "changedPropIds": []}).encode(),
    "output not a string": json.dumps({"output": 7, "outputs": {}, "inputs": []}).encode(),
    "unknown output": json.dumps(
        {
            "output": "nope.children",
            "outputs": {"id": "nope", "property": "children"},
            "inputs": [],
            "state": [],
            "changedPropIds": [],
        }
    ).encode(),
    "inputs not a list": json.dumps({"output": "search-results.rowData", "outputs": {}, "inputs": 5}).encode(),
    "inputs of numbers": json.dumps(
        {"output": "search-results.rowData", "outputs": {}, "inputs": [1, 2], "state": [3]}
    ).encode(),
    "deep nesting": b'{"output": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "invalid utf-8": b'{"output": "\xff\xfe"}',
}
"""Callback bodies a browser never sends (the adversarial run's 11 variants)."""


def test_malformed_dash_callback_bodies_are_4xx(secured_server: RunningServer) -> None:
    with httpx.Client(base_url=secured_server.base_url, timeout=60) as client:
        assert client.get("/ui/", params={"token": ACME_QUERY.secret}).status_code == 303
        answers = {
            name: client.post(
                "/ui/_dash-update-component", content=body, headers={"content-type": "application/json"}
            ).status_code
            for name, body in MALFORMED_CALLBACKS.items()
        }
    assert all(400 <= status < 500 for status in answers.values()), answers


def test_an_oversized_ui_body_is_refused_before_it_is_read(secured_server: RunningServer) -> None:
    """A callback POST announcing 256 MiB gets 413 at once, with only its headers sent: the server does not wait
    for (or buffer) the body. A chunked body without a length is cut off at the limit the same way."""
    address = urlsplit(secured_server.base_url)
    assert address.hostname is not None and address.port is not None
    with httpx.Client(base_url=secured_server.base_url, timeout=30) as client:
        assert client.get("/ui/", params={"token": ACME_QUERY.secret}).status_code == 303
        cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    with socket.create_connection((address.hostname, address.port), timeout=15) as sock:
        sock.sendall(
            b"POST /ui/_dash-update-component HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Cookie: {cookie}\r\nContent-Length: {256 * 2**20}\r\n\r\n".encode()
            + b'{"output": "'
        )
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 413"), status_line

    def chunks() -> object:
        for _ in range(64):  # 64 MiB if the server read it all
            yield b"x" * 2**20

    with httpx.Client(base_url=secured_server.base_url, timeout=60, headers={"cookie": cookie}) as client:
        answer = client.post("/ui/_dash-update-component", content=chunks())  # type: ignore[arg-type]
    assert answer.status_code == 413, answer.text[:200]
