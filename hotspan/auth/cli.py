"""``hotspan auth``: make tokens and their hashes for the auth file.

- ``hotspan auth hash-token [--scheme sha256|scrypt]``: reads one token from stdin (or a hidden prompt on a
  terminal) and prints its hash. The token is never taken from the command line, where ``ps`` and shell
  history would keep it.
- ``hotspan auth new-token --tenant acme --role ingest [--role query] [--name acme-collector]``: prints a fresh
  token once (first line), then the auth-file entry holding its hash.
"""

from __future__ import annotations

import argparse
import getpass
import sys

import yaml

from hotspan.auth.config import Role
from hotspan.auth.hashing import SCHEMES, SHA256, hash_token, new_token
from storage.tenancy import check_tenant_name


def add_auth_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``auth`` and its subcommands to the ``hotspan`` parser."""
    auth = commands.add_parser("auth", help="make bearer tokens and hashes for the auth file (HOTSPAN_AUTH_FILE)")
    actions = auth.add_subparsers(dest="auth_command", required=True)
    hash_cmd = actions.add_parser("hash-token", help="print the hash of a token read from stdin")
    hash_cmd.add_argument("--scheme", choices=SCHEMES, default=SHA256, help="sha256 (default) or scrypt")
    new = actions.add_parser("new-token", help="print a new token and its auth-file entry")
    new.add_argument(
        "--tenant", required=True, type=tenant_argument, help="tenant of the token (letters, digits, . _ -)"
    )
    new.add_argument("--role", action="append", choices=[r.value for r in Role], required=True, help="repeatable")
    new.add_argument("--name", help="label for logs (default: <tenant>-<roles>)")
    new.add_argument("--scheme", choices=SCHEMES, default=SHA256, help="sha256 (default) or scrypt")


def run_auth_command(args: argparse.Namespace) -> int:
    """Run ``hotspan auth ...``; returns the exit status (2 for bad input, message on stderr)."""
    if args.auth_command == "hash-token":
        token = _read_token()
        if not token:
            print("hotspan auth hash-token: no token on stdin", file=sys.stderr)
            return 2
        print(hash_token(token, args.scheme))
        return 0
    tenant = args.tenant
    roles = sorted(set(args.role))
    token = new_token()
    entry = {
        "name": args.name or f"{tenant}-{'-'.join(roles)}",
        "hash": hash_token(token, args.scheme),
        "tenant": tenant,
        "roles": roles,
    }
    print(token)
    print("# Add to the auth file's `tokens:` list; the token above is not stored anywhere.", file=sys.stderr)
    print(yaml.safe_dump({"tokens": [entry]}, sort_keys=False), end="")
    return 0


def tenant_argument(text: str) -> str:
    """An argparse ``type`` for tenant names.

    Raises:
        argparse.ArgumentTypeError: not a valid tenant name.
    """
    try:
        return check_tenant_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _read_token() -> str:
    if sys.stdin.isatty():
        return getpass.getpass("token: ").strip()
    return sys.stdin.readline().strip()
