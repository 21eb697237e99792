"""The auth file (setting ``HOTSPAN_AUTH_FILE``): hashed bearer tokens, each with a tenant and roles.

YAML or JSON (JSON is YAML), validated at load with every error reported at once, each naming its key.
``hotspan/auth/example_auth.yaml`` is a complete example (a test loads it)::

    tokens:
      - name: acme-collector         # a label for logs and sessions; never the token
        hash: "sha256:<64 hex>"      # `hotspan auth hash-token` (or `hotspan auth new-token`)
        tenant: acme                 # the tenant its spans are stored under and that it reads
        roles: [ingest]              # ingest: /v1/traces and OTLP/gRPC; query: REST, Jaeger APIs, UI
      - name: ops
        hash: "scrypt:16384:8:1:<salt hex>:<key hex>"
        tenant: ops
        roles: [query, admin]        # admin: reads every tenant (and /metrics)

Only hashes are stored (:mod:`hotspan.auth.hashing`), so the file discloses no token. Names and hashes are
unique; every token has at least one role; tenants follow :data:`storage.tenancy.TENANT_NAME`.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hotspan.auth.hashing import HashFormatError, TokenHash, parse_hash
from hotspan.settings import SettingsError
from storage.tenancy import check_tenant_name

EXAMPLE = Path(__file__).with_name("example_auth.yaml")
"""The packaged example auth file."""


class Role(StrEnum):
    """What a token may do.

    - ``ingest``: send spans (``POST /v1/traces``, OTLP/gRPC ``Export``), stored under its tenant;
    - ``query``: read its tenant's traces (``/api/...``, Jaeger APIs, the UI);
    - ``admin``: read every tenant's traces and the service's own ``/metrics``; implies ``query``.
    """

    INGEST = "ingest"
    QUERY = "query"
    ADMIN = "admin"


class AuthFileError(SettingsError):
    """The auth file is missing, unreadable or invalid; the message names the file and every bad key."""


class TokenEntry(BaseModel):
    """One token of the auth file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")
    hash: str = Field(description="`sha256:<hex>` or `scrypt:<n>:<r>:<p>:<salt hex>:<key hex>`.")
    tenant: str
    roles: frozenset[Role] = Field(min_length=1)

    @field_validator("hash")
    @classmethod
    def _hash(cls, value: str) -> str:
        try:
            parse_hash(value)
        except HashFormatError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str) -> str:
        return check_tenant_name(value)

    @property
    def parsed_hash(self) -> TokenHash:
        """The parsed :attr:`hash`."""
        return parse_hash(self.hash)

    @property
    def entry_id(self) -> str:
        """A stable, non-secret ID of this entry (16 hex of SHA-256 of its stored hash), kept in UI sessions so
        a session ends when its token is removed from the file."""
        return hashlib.sha256(self.hash.encode()).hexdigest()[:16]


class AuthFile(BaseModel):
    """The whole auth file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: tuple[TokenEntry, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> AuthFile:
        for key in ("name", "hash"):
            values = [getattr(entry, key) for entry in self.tokens]
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                shown = ", ".join(repeated) if key == "name" else f"{len(repeated)} hash(es)"
                raise ValueError(f"tokens: each {key} must be unique; repeated: {shown}")
        return self


def load_auth_file(path: Path) -> AuthFile:
    """Read and validate the auth file at ``path``.

    Raises:
        AuthFileError: the file cannot be read, is not YAML/JSON, or is invalid; every problem named by key
            (``tokens.1.tenant: ...``). Values are never echoed: a mistaken entry may hold a token.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthFileError(f"auth file {path}: cannot read it: {exc.__class__.__name__}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise AuthFileError(f"auth file {path}: not YAML or JSON{line}") from None
    try:
        return AuthFile.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        ]
        raise AuthFileError(f"auth file {path}: " + "; ".join(problems)) from None
