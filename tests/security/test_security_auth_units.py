"""The auth package's pure parts: hashes, the auth file, bearer parsing (RFC 6750), roles, sessions, the path
policy, the loopback rule, log redaction and the ``hotspan auth`` commands."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import yaml

from hotspan.auth.authenticator import OPEN_PRINCIPAL, Authenticator, CredentialError, bearer_token
from hotspan.auth.binding import InsecureBindError, check_bind, is_loopback
from hotspan.auth.cli import run_auth_command
from hotspan.auth.config import EXAMPLE, AuthFileError, Role, load_auth_file
from hotspan.auth.hashing import HashFormatError, hash_token, new_token, parse_hash
from hotspan.auth.logs import RedactTokens, redact
from hotspan.auth.policy import required_role
from hotspan.auth.session import SessionCodec, set_cookie_header
from hotspan.cli import build_parser
from hotspan.settings import SettingsError
from storage.tenancy import DEFAULT_TENANT, Tenancy, tenancy_of, tenant_parameters

SECRET = "hsp_unit-test-token-0123456789abcdefghijklmnopq"


def _auth_file(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "auth.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}), encoding="utf-8")
    return path


def _entry(name: str, token: str, tenant: str, *roles: str, scheme: str = "sha256") -> dict:
    return {"name": name, "hash": hash_token(token, scheme), "tenant": tenant, "roles": list(roles)}


@pytest.mark.parametrize("scheme", ["sha256", "scrypt"])
def test_hash_round_trip_and_a_wrong_token_fails(scheme: str) -> None:
    stored = parse_hash(hash_token(SECRET, scheme))
    assert stored.matches(SECRET)
    assert not stored.matches(SECRET + "x")
    assert not stored.matches(SECRET[:-1])


def test_scrypt_hashes_are_salted() -> None:
    assert hash_token(SECRET, "scrypt") != hash_token(SECRET, "scrypt")


@pytest.mark.parametrize(
    "text",
    [
        "sha256:" + "A" * 64,  # upper case hex
        "sha256:" + "a" * 63,
        "md5:" + "a" * 32,
        SECRET,  # a token pasted where its hash belongs
        "scrypt:1024:8:1:" + "00" * 16 + ":" + "00" * 32,  # n too small
        "scrypt:16383:8:1:" + "00" * 16 + ":" + "00" * 32,  # n not a power of two
    ],
)
def test_malformed_hashes_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(HashFormatError) as caught:
        parse_hash(text)
    assert text not in str(caught.value)


def test_new_tokens_are_long_random_b64tokens() -> None:
    first, second = new_token(), new_token()
    assert first != second and first.startswith("hsp_") and len(first) >= 40
    assert bearer_token([f"Bearer {first}"]) == first


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ([], ""),
        (["Basic dXNlcjpwYXNz"], "invalid_request"),
        (["Bearer"], "invalid_token"),
        (["Bearer "], "invalid_token"),
        (["Bearer a b"], "invalid_token"),
        (['Bearer tok"en'], "invalid_token"),
        (["Bearer " + "a" * 2000], "invalid_token"),
        (["Bearer one", "Bearer two"], "invalid_request"),
    ],
)
def test_bearer_header_parsing_follows_rfc_6750(values: list[str], error: str) -> None:
    with pytest.raises(CredentialError) as caught:
        bearer_token(values)
    assert caught.value.error == error


def test_bearer_scheme_is_case_insensitive() -> None:
    assert bearer_token(["bearer abc-._~+/=="]) == "abc-._~+/=="
    assert bearer_token(["BEARER abc"]) == "abc"


def test_authenticator_maps_tokens_to_tenants_and_roles(tmp_path: Path) -> None:
    path = _auth_file(
        tmp_path,
        [
            _entry("ingest", "tok-ingest", "acme", "ingest"),
            _entry("viewer", "tok-viewer", "acme", "query", scheme="scrypt"),
            _entry("admin", "tok-admin", "ops", "admin"),
        ],
    )
    auth = Authenticator.from_path(path)
    assert auth.required and auth.token_count == 3
    ingest = auth.authenticate("tok-ingest")
    assert (ingest.name, ingest.tenant, ingest.allows(Role.INGEST), ingest.allows(Role.QUERY)) == (
        "ingest",
        "acme",
        True,
        False,
    )
    viewer = auth.authenticate("tok-viewer")
    assert viewer.allows(Role.QUERY) and not viewer.allows(Role.INGEST) and not viewer.allows(Role.ADMIN)
    assert viewer.tenancy == Tenancy("acme") and viewer.tenancy.read_tenant == "acme"
    assert auth.authenticate("tok-viewer") == viewer  # the cached scrypt result
    admin = auth.authenticate("tok-admin")
    assert admin.allows(Role.QUERY) and not admin.allows(Role.INGEST)
    assert admin.tenancy.read_tenant is None
    for wrong in ("tok-ingest ", "tok-viewe", "", "x" * 5000):
        with pytest.raises(CredentialError):
            auth.authenticate(wrong)
    assert auth.principal_for_entry(viewer.entry_id) == viewer
    assert auth.principal_for_entry("0" * 16) is None


def test_without_an_auth_file_everyone_is_the_open_default_tenant() -> None:
    auth = Authenticator(None)
    assert not auth.required
    assert auth.authenticate("anything") is OPEN_PRINCIPAL
    assert OPEN_PRINCIPAL.tenant == DEFAULT_TENANT and all(OPEN_PRINCIPAL.allows(role) for role in Role)


def test_auth_file_errors_name_every_bad_key_at_once_and_echo_no_value(tmp_path: Path) -> None:
    leaked = "hsp_pasted-token-instead-of-its-hash-0123456789"
    path = _auth_file(
        tmp_path,
        [
            {"name": "a", "hash": leaked, "tenant": "acme", "roles": ["query"]},
            {"name": "b", "hash": hash_token("x"), "tenant": "bad tenant!", "roles": ["query"]},
            {"name": "c", "hash": hash_token("y"), "tenant": "acme", "roles": ["superuser"]},
            {"name": "d", "hash": hash_token("z"), "tenant": "acme", "roles": []},
            {"name": "e", "hash": hash_token("w"), "tenant": "acme", "roles": ["query"], "token": leaked},
        ],
    )
    with pytest.raises(AuthFileError) as caught:
        load_auth_file(path)
    message = str(caught.value)
    for key in ("tokens.0.hash", "tokens.1.tenant", "tokens.2.roles", "tokens.3.roles", "tokens.4.token"):
        assert key in message
    assert leaked not in message
    assert isinstance(caught.value, SettingsError)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("tokens: []", "tokens"),
        ("tokens: [\n  {name: a", "not YAML or JSON"),
        (json.dumps({"tokens": [_entry("a", "t1", "x", "query"), _entry("a", "t2", "x", "query")]}), "unique"),
        (json.dumps({"tokens": [_entry("a", "t1", "x", "query"), _entry("b", "t1", "x", "query")]}), "unique"),
    ],
)
def test_auth_file_shape_errors(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(AuthFileError, match=fragment):
        load_auth_file(path)


def test_the_packaged_example_auth_file_loads() -> None:
    tokens = load_auth_file(EXAMPLE).tokens
    assert {t.tenant for t in tokens} == {"acme", "beta", "ops"}
    assert {t.parsed_hash.scheme for t in tokens} == {"sha256", "scrypt"}


def test_missing_auth_file_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(AuthFileError, match="cannot read"):
        Authenticator.from_path(tmp_path / "absent.yaml")


def test_sessions_are_signed_expire_and_bind_to_the_secret() -> None:
    codec = SessionCodec(b"k" * 32, ttl_s=60)
    value = codec.issue("0123456789abcdef", now_s=1_000)
    assert codec.entry_id(value, now_s=1_059) == "0123456789abcdef"
    assert codec.entry_id(value, now_s=1_060) is None  # expired
    assert SessionCodec(b"j" * 32).entry_id(value, now_s=1_000) is None  # another server's secret
    prefix, entry, expires, mac = value.split(".")
    assert codec.entry_id(".".join([prefix, "fedcba9876543210", expires, mac]), now_s=1_000) is None
    assert codec.entry_id(".".join([prefix, entry, str(int(expires) + 3600), mac]), now_s=1_000) is None
    assert codec.entry_id(value + "x", now_s=1_000) is None
    with pytest.raises(ValueError):
        SessionCodec(b"short")


def test_session_cookie_attributes() -> None:
    header = set_cookie_header("v", 60, secure=True)
    for attribute in ("HttpOnly", "SameSite=Lax", "Path=/ui", "Max-Age=60", "Secure"):
        assert attribute in header
    assert "Secure" not in set_cookie_header("v", 60, secure=False)


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("/v1/traces", Role.INGEST),
        ("/api/v1/traces", Role.QUERY),
        ("/api/traces/abc", Role.QUERY),
        ("/api/v3/services", Role.QUERY),
        ("/api/v1/payloads/traces/abc", Role.ADMIN),  # a deletion changes the store
        ("/mcp", Role.QUERY),
        ("/mcpx", Role.ADMIN),
        ("/ui/", Role.QUERY),
        ("/ui/_dash-update-component", Role.QUERY),
        ("/metrics", Role.ADMIN),
        ("/apix", Role.ADMIN),  # segments, not string prefixes
        ("/v1/tracesx", Role.ADMIN),
        ("/something-added-later", Role.ADMIN),
        ("/healthz", None),
        ("/openapi.json", None),
        ("/docs/assets/swagger-ui-bundle.js", None),
        ("/docs/assetsx", Role.ADMIN),
        ("/auth/login", None),
    ],
)
def test_path_policy(path: str, role: Role | None) -> None:
    assert required_role(path) == role


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.com", False),
    ],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_binding_beyond_loopback_needs_tokens(tmp_path: Path) -> None:
    check_bind("127.0.0.1", Authenticator(None))
    with pytest.raises(InsecureBindError, match="HOTSPAN_AUTH_FILE"):
        check_bind("0.0.0.0", Authenticator(None))
    check_bind("0.0.0.0", Authenticator.from_path(_auth_file(tmp_path, [_entry("a", "t", "x", "query")])))


def test_tenancy_vocabulary() -> None:
    assert tenancy_of({}) == Tenancy(DEFAULT_TENANT)  # no middleware: the default tenant, never all
    assert tenancy_of({"hotspan.tenancy": "admin"}) == Tenancy(DEFAULT_TENANT)  # only a real Tenancy counts
    assert tenant_parameters(None) == {"tenant": "", "all_tenants": True}
    assert tenant_parameters("acme") == {"tenant": "acme", "all_tenants": False}
    for bad in ("", " acme", "a'b", "-x", "x" * 65, "acme\x00"):
        with pytest.raises(ValueError):
            tenant_parameters(bad)


def test_redaction_of_request_lines() -> None:
    line = '127.0.0.1:5 - "GET /ui/?x=1&token=hsp_secret&access_token=s2 HTTP/1.1" 303'
    assert redact(line) == '127.0.0.1:5 - "GET /ui/?x=1&token=[redacted]&access_token=[redacted] HTTP/1.1" 303'
    assert redact("Authorization: Bearer hsp_abc.def") == "Authorization: Bearer [redacted]"
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s "%s %s"', ("c", "GET", "/ui?token=t"), None)
    assert RedactTokens().filter(record)
    assert record.getMessage() == 'c "GET /ui?token=[redacted]"'


def test_hash_token_command_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert run_auth_command(build_parser().parse_args(["auth", "hash-token"])) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == hash_token(SECRET) and SECRET not in printed


def test_new_token_command_prints_a_token_and_its_entry(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    args = build_parser().parse_args(["auth", "new-token", "--tenant", "acme", "--role", "ingest", "--role", "query"])
    assert run_auth_command(args) == 0
    token, entry = capsys.readouterr().out.split("\n", 1)
    path = tmp_path / "auth.yaml"
    path.write_text(entry, encoding="utf-8")
    principal = Authenticator.from_path(path).authenticate(token)
    assert (principal.tenant, principal.roles) == ("acme", frozenset({Role.INGEST, Role.QUERY}))


def test_new_token_refuses_a_bad_tenant_name() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["auth", "new-token", "--tenant", "no spaces", "--role", "query"])
