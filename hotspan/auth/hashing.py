"""Token hashes as the auth file stores them, and constant-time verification.

Two schemes:

- ``sha256:<64 hex>``: SHA-256 of the UTF-8 token. Right for tokens Hotspan generates (:func:`new_token`,
  256 random bits): no guessing attack on such a token is helped by a slow hash, and a check costs
  microseconds, which matters on the ingest path.
- ``scrypt:<n>:<r>:<p>:<salt hex>:<key hex>``: ``hashlib.scrypt`` (RFC 7914) with a per-token salt, for
  tokens a person chose. A check costs tens of milliseconds and ~16 MiB at the default cost; successful
  checks are cached by the authenticator, failed ones are not.

Comparisons use :func:`hmac.compare_digest`, so their time does not depend on where the values differ.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

SHA256 = "sha256"
SCRYPT = "scrypt"
SCHEMES = (SHA256, SCRYPT)

TOKEN_PREFIX = "hsp_"
"""Prefix of generated tokens, so secret scanners and people recognise one."""

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
"""Default scrypt cost: CPU/memory cost ``n`` (power of two), block size ``r``, parallelism ``p``
(RFC 7914 §2's interactive-login recommendation; ~16 MiB of memory per check)."""

_SCRYPT_MIN_N = 2**14
_SCRYPT_MAX_N = 2**20
_SCRYPT_MAXMEM = 1024 * 1024 * 1024
_SHA256_TEXT = re.compile(r"^sha256:([0-9a-f]{64})$")
_SCRYPT_TEXT = re.compile(r"^scrypt:(\d+):(\d+):(\d+):([0-9a-f]{32,128}):([0-9a-f]{32,128})$")


class HashFormatError(ValueError):
    """A stored hash is not ``sha256:<hex>`` or ``scrypt:<n>:<r>:<p>:<salt>:<key>`` with sane parameters."""


@dataclass(frozen=True)
class TokenHash:
    """A parsed stored hash.

    Attributes:
        scheme: :data:`SHA256` or :data:`SCRYPT`.
        key: the digest (sha256) or derived key (scrypt).
        salt: the scrypt salt; empty for sha256.
        n, r, p: scrypt cost parameters; 0 for sha256.
    """

    scheme: str
    key: bytes
    salt: bytes = b""
    n: int = 0
    r: int = 0
    p: int = 0

    def matches(self, token: str) -> bool:
        """Whether ``token`` hashes to this; constant time in where the digests differ."""
        return hmac.compare_digest(self.derive(token), self.key)

    def derive(self, token: str) -> bytes:
        """The digest or derived key of ``token`` under this hash's scheme and parameters."""
        if self.scheme == SHA256:
            return hashlib.sha256(token.encode()).digest()
        return hashlib.scrypt(
            token.encode(), salt=self.salt, n=self.n, r=self.r, p=self.p, maxmem=_SCRYPT_MAXMEM, dklen=len(self.key)
        )


def parse_hash(text: str) -> TokenHash:
    """Parse a stored hash.

    Raises:
        HashFormatError: naming the expected forms (never echoing ``text``: a mistaken entry may be a token).
    """
    if found := _SHA256_TEXT.match(text):
        return TokenHash(SHA256, bytes.fromhex(found.group(1)))
    if found := _SCRYPT_TEXT.match(text):
        n, r, p = (int(found.group(i)) for i in (1, 2, 3))
        if n < _SCRYPT_MIN_N or n > _SCRYPT_MAX_N or n & (n - 1) or not 1 <= r <= 32 or not 1 <= p <= 16:
            raise HashFormatError(
                f"scrypt parameters out of range: n a power of two in [{_SCRYPT_MIN_N}, {_SCRYPT_MAX_N}], "
                "r in [1, 32], p in [1, 16]"
            )
        return TokenHash(SCRYPT, bytes.fromhex(found.group(5)), bytes.fromhex(found.group(4)), n, r, p)
    raise HashFormatError(
        "expected 'sha256:<64 lowercase hex>' or 'scrypt:<n>:<r>:<p>:<salt hex>:<key hex>' "
        "(make one with `hotspan auth hash-token`)"
    )


def hash_token(token: str, scheme: str = SHA256) -> str:
    """The stored form of ``token`` under ``scheme`` (a fresh 16-byte salt for scrypt).

    Raises:
        ValueError: an unknown scheme, or an empty token.
    """
    if not token:
        raise ValueError("the token is empty")
    if scheme == SHA256:
        return f"{SHA256}:{hashlib.sha256(token.encode()).hexdigest()}"
    if scheme == SCRYPT:
        salt = secrets.token_bytes(16)
        key = TokenHash(SCRYPT, b"\0" * 32, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P).derive(token)
        return f"{SCRYPT}:{SCRYPT_N}:{SCRYPT_R}:{SCRYPT_P}:{salt.hex()}:{key.hex()}"
    raise ValueError(f"unknown hash scheme {scheme!r}; one of {', '.join(SCHEMES)}")


def new_token() -> str:
    """A fresh token: :data:`TOKEN_PREFIX` and 256 random bits, URL-safe base64 (RFC 6750 ``b64token`` chars)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)
