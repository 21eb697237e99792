"""The start-up rule: a server reachable from other machines must require tokens.

Binding a non-loopback address (``0.0.0.0``, ``::``, a LAN address, a host name) without an auth file would
let anyone on the network read every tenant's traces; such a start is refused. On loopback the auth file is
optional: without one the server is single-tenant (``default``) and open to local callers.
"""

from __future__ import annotations

import ipaddress

from hotspan.auth.authenticator import Authenticator
from hotspan.settings import SettingsError


class InsecureBindError(SettingsError):
    """A non-loopback bind address without tokens configured."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address, ``[v6]`` or a name) is loopback; only ``localhost`` counts among names,
    since another name may resolve anywhere."""
    bare = host.strip().strip("[]")
    if bare.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def check_bind(host: str, authenticator: Authenticator) -> None:
    """Refuse to serve on ``host`` without tokens unless it is loopback.

    Raises:
        InsecureBindError: naming the address and the two ways out.
    """
    if authenticator.required or is_loopback(host):
        return
    raise InsecureBindError(
        f"refusing to listen on {host}: it is reachable from other machines and no tokens are configured. "
        "Set HOTSPAN_AUTH_FILE (or --auth-file) to a file of hashed tokens (`hotspan auth new-token --tenant "
        "<name> --role ingest --role query` prints one), or listen on 127.0.0.1."
    )
