"""Bearer tokens → principals: who is calling, for which tenant, with which roles.

Tokens travel as ``Authorization: Bearer <token>`` (RFC 6750 §2.1) on HTTP and as gRPC metadata
``authorization: Bearer <token>``. An :class:`Authenticator` without an auth file is *open*: every caller is
:data:`OPEN_PRINCIPAL` (tenant ``default``, every role), which ``hotspan.auth.binding`` allows on loopback only.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from hotspan.auth.config import AuthFile, Role, TokenEntry, load_auth_file
from hotspan.auth.hashing import SHA256
from storage.tenancy import DEFAULT_TENANT, Tenancy

MAX_TOKEN_CHARS = 1024
"""Longest token considered; longer credentials are rejected unhashed."""

_B64TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
"""RFC 6750 §2.1 ``b64token``."""

_CACHE_LIMIT = 1024


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    Attributes:
        name: the token's ``name`` in the auth file (``anonymous`` when open); safe to log.
        tenant: its tenant.
        roles: its roles.
        entry_id: :attr:`hotspan.auth.config.TokenEntry.entry_id` (empty when open).
    """

    name: str
    tenant: str
    roles: frozenset[Role]
    entry_id: str = ""

    def allows(self, role: Role) -> bool:
        """Whether this caller has ``role`` (``admin`` implies ``query``)."""
        return role in self.roles or (role is Role.QUERY and Role.ADMIN in self.roles)

    @property
    def tenancy(self) -> Tenancy:
        """What its requests read and write: its tenant; every tenant's reads for an admin."""
        return Tenancy(self.tenant, all_tenants=Role.ADMIN in self.roles)


OPEN_PRINCIPAL = Principal("anonymous", DEFAULT_TENANT, frozenset(Role))
"""Every caller of a server without an auth file: the default tenant, every role."""


class CredentialError(Exception):
    """A request's credentials are missing or unusable.

    Attributes:
        error: RFC 6750 §3.1 error code for ``WWW-Authenticate``: ``""`` when no credentials were sent,
            ``invalid_request`` for a malformed header, ``invalid_token`` for an unknown token.
        message: a reason safe to show and log (never contains the token).
    """

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def bearer_token(values: list[str]) -> str:
    """The token of the ``Authorization`` header values of one request.

    Raises:
        CredentialError: no header (``error=""``), several, another scheme, or a value that is not an
            RFC 6750 ``b64token`` of at most :data:`MAX_TOKEN_CHARS` characters.
    """
    if not values:
        raise CredentialError("", "a bearer token is required (Authorization: Bearer <token>)")
    if len(values) > 1:
        raise CredentialError("invalid_request", "more than one Authorization header")
    scheme, _, token = values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer":
        raise CredentialError("invalid_request", "the Authorization scheme must be Bearer")
    if not token or len(token) > MAX_TOKEN_CHARS or not _B64TOKEN.match(token):
        raise CredentialError("invalid_token", "the bearer token is malformed")
    return token


class Authenticator:
    """Checks tokens against the auth file's hashes. Thread-safe.

    Every sha256 entry is compared (:func:`hmac.compare_digest`) whatever matches first, so the time a check
    takes does not tell which entry, if any, was close. scrypt entries are tried only when no sha256 entry
    matched; a token that passed one is remembered by its SHA-256 (in memory only) so the next request
    skips the slow hash.

    Args:
        auth_file: the validated file; ``None`` for an open server (no auth).
    """

    def __init__(self, auth_file: AuthFile | None) -> None:
        self._file = auth_file
        entries = auth_file.tokens if auth_file else ()
        self._fast = [(entry, entry.parsed_hash) for entry in entries if entry.parsed_hash.scheme == SHA256]
        self._slow = [(entry, entry.parsed_hash) for entry in entries if entry.parsed_hash.scheme != SHA256]
        self._by_id = {entry.entry_id: entry for entry in entries}
        self._verified: dict[bytes, TokenEntry] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_path(cls, path: Path | None) -> Authenticator:
        """An authenticator over the auth file at ``path``; open when ``path`` is ``None``.

        Raises:
            hotspan.auth.config.AuthFileError: the file is missing or invalid.
        """
        return cls(load_auth_file(path) if path is not None else None)

    @property
    def required(self) -> bool:
        """Whether callers must present a token (an auth file is configured)."""
        return self._file is not None

    @property
    def token_count(self) -> int:
        """Tokens configured."""
        return len(self._file.tokens) if self._file else 0

    def authenticate(self, token: str) -> Principal:
        """The principal of ``token``; :data:`OPEN_PRINCIPAL` for any token when open.

        Raises:
            CredentialError: ``invalid_token`` when no entry matches.
        """
        if self._file is None:
            return OPEN_PRINCIPAL
        if len(token) > MAX_TOKEN_CHARS:
            raise CredentialError("invalid_token", "the bearer token is malformed")
        digest = hashlib.sha256(token.encode()).digest()
        found: TokenEntry | None = None
        for entry, stored in self._fast:
            if stored.matches(token):
                found = entry
        if found is None and self._slow:
            found = self._slow_match(token, digest)
        if found is None:
            raise CredentialError("invalid_token", "the bearer token is not valid")
        return _principal(found)

    def principal_for_entry(self, entry_id: str) -> Principal | None:
        """The principal of the entry with ``entry_id`` (from a UI session), ``None`` if no longer configured."""
        entry = self._by_id.get(entry_id)
        return _principal(entry) if entry is not None else None

    def _slow_match(self, token: str, digest: bytes) -> TokenEntry | None:
        with self._lock:
            cached = self._verified.get(digest)
        if cached is not None:
            return cached
        for entry, stored in self._slow:
            if stored.matches(token):
                with self._lock:
                    if len(self._verified) >= _CACHE_LIMIT:
                        self._verified.clear()
                    self._verified[digest] = entry
                return entry
        return None


def _principal(entry: TokenEntry) -> Principal:
    return Principal(entry.name, entry.tenant, frozenset(entry.roles), entry.entry_id)
