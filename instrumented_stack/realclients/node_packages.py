"""The Node drivers' npm packages: ``npm ci`` into ``node/node_modules`` (ignored by git) when the lock file changed.

``npm ci`` installs exactly what ``node/package-lock.json`` pins (about 60 MB, a few seconds from the npm
registry) and replaces ``node_modules`` whole; a stamp holding the lock file's sha256 makes later calls free.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess

from instrumented_stack.realclients.common import NODE_DIR

STAMP_NAME = ".hotspan-lock-sha256"
"""File in ``node_modules`` holding the sha256 of the lock file it was installed from."""


class NodeUnavailable(RuntimeError):
    """``node`` or ``npm`` is not on the PATH, or ``npm ci`` failed (the message quotes its output)."""


def node_available() -> bool:
    """Whether ``node`` and ``npm`` are on the PATH."""
    return shutil.which("node") is not None and shutil.which("npm") is not None


def ensure_installed(timeout_s: float = 300.0) -> None:
    """Run ``npm ci`` in :data:`NODE_DIR` unless ``node_modules`` was installed from the current lock file.

    Raises:
        NodeUnavailable: no ``node``/``npm``, or ``npm ci`` failed or took longer than ``timeout_s`` seconds.
    """
    if not node_available():
        raise NodeUnavailable("node and npm are needed for the Node drivers (Debian: apt-get install nodejs npm)")
    # Test processes running side by side (pytest-xdist) must not run two `npm ci` in one directory.
    with (NODE_DIR / ".npm-ci.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        _install(timeout_s)


def _install(timeout_s: float) -> None:
    lock = hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()
    stamp = NODE_DIR / "node_modules" / STAMP_NAME
    if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == lock:
        return
    command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(command, cwd=NODE_DIR, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as error:
        raise NodeUnavailable(f"npm ci did not finish within {timeout_s} s") from error
    if done.returncode != 0:
        raise NodeUnavailable(f"npm ci exited {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")
    stamp.write_text(lock + "\n", encoding="utf-8")
