"""UI sessions: an HttpOnly cookie naming the token entry that signed in, signed with the server secret.

Value: ``v1.<entry id>.<expiry, s since epoch>.<HMAC-SHA256, base64url>``. It holds no token and no tenant:
each request looks the entry up in the current auth file (:meth:`Authenticator.principal_for_entry`), so
removing a token from the file ends its sessions at the next restart. The MAC is checked with
:func:`hmac.compare_digest`.

Cookie attributes: ``HttpOnly`` (no script reads it), ``SameSite=Lax`` (not sent with cross-site POSTs, which
keeps other sites from driving Dash callbacks), ``Path=/ui`` (never sent to the REST API, which takes bearer
tokens only), ``Secure`` when the request came over HTTPS.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time

COOKIE_NAME = "hotspan_session"

DEFAULT_TTL_S = 8 * 3600
"""Session lifetime, s."""

_VALUE = re.compile(r"^v1\.([0-9a-f]{16})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$")


class SessionCodec:
    """Signs and checks session cookie values.

    Args:
        secret: the server secret (at least 32 bytes); the same on every instance behind one load balancer.
        ttl_s: lifetime of a new session, s.

    Raises:
        ValueError: ``secret`` is shorter than 32 bytes.
    """

    def __init__(self, secret: bytes, ttl_s: int = DEFAULT_TTL_S) -> None:
        if len(secret) < 32:
            raise ValueError("the session secret must be at least 32 bytes")
        self._secret = secret
        self.ttl_s = ttl_s

    def issue(self, entry_id: str, now_s: float | None = None) -> str:
        """A cookie value for a session of token entry ``entry_id``, valid :attr:`ttl_s` from now."""
        expires = int(now_s if now_s is not None else time.time()) + self.ttl_s
        payload = f"v1.{entry_id}.{expires}"
        return f"{payload}.{self._mac(payload)}"

    def entry_id(self, value: str, now_s: float | None = None) -> str | None:
        """The entry ID of a valid, unexpired cookie value; ``None`` otherwise."""
        found = _VALUE.match(value)
        if not found:
            return None
        entry_id, expires, mac = found.groups()
        if not hmac.compare_digest(mac, self._mac(f"v1.{entry_id}.{expires}")):
            return None
        if int(expires) <= (now_s if now_s is not None else time.time()):
            return None
        return entry_id

    def _mac(self, payload: str) -> str:
        digest = hmac.new(self._secret, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def set_cookie_header(value: str, max_age_s: int, secure: bool) -> str:
    """The ``Set-Cookie`` header value of a session (``max_age_s`` 0 deletes it)."""
    parts = [f"{COOKIE_NAME}={value}", "Path=/ui", f"Max-Age={max_age_s}", "HttpOnly", "SameSite=Lax"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)
