"""The ``hotspan`` command: ``serve``, ``import``, ``demo``, ``migrate`` (and ``stack``, ``auth``, ``alerts``).

Importing this package makes Hotspan's rooms (``storage``, ``api``, ``query`` ... : ARCHITECTURE.md's floors)
importable by the names the code uses, ``from storage.reader import ...``, and Hotspan's own.

- **Installed** (a wheel), the rooms lie in ``hotspan/_rooms/``, a folder on no ``sys.path``: site-packages holds
  only ``hotspan`` and ``hotspan_sdk``, so a user's own ``api`` or ``storage`` package in the same environment is
  not shadowed by Hotspan's. Importing ``hotspan`` (every way in goes through it: the ``hotspan`` command,
  ``python -m``, an app factory) puts that folder **first** on this process's ``sys.path``, so in a Hotspan
  process Hotspan's rooms are not shadowed by the user's. No ``.pth`` file: other processes of the environment
  never see the folder. This is the layout of a program's private modules in the Debian Python Policy (a private
  directory, ``/usr/share/<package>``, that the program itself adds to ``sys.path``) and of calibre's launchers;
  rewriting every import at build time (pip's ``_vendor``) would also catch the imports written as strings
  (``resources.files("storage.sql")``, ``python -m instrumented_stack.service_main``) and leave the tests running
  other code than the wheel's.
- **From a checkout** (tests, ``make demo`` through the editable install) there is no ``_rooms``: the rooms are the
  checkout's folders beside ``hotspan/``, and that folder goes on ``sys.path`` if it is not there yet.

A process that already imported another package under a room's name cannot also run Hotspan's: importing
``hotspan`` then raises ``ImportError`` naming it, rather than running Hotspan on someone else's module.
Processes Hotspan starts itself (the stack's services) get the folder through ``PYTHONPATH``
(``instrumented_stack.env.module_process_env``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOMS = (
    "alerts",
    "analysis",
    "api",
    "collector",
    "dashboards",
    "diagnosis",
    "incidents",
    "instrumented_stack",
    "processors",
    "query",
    "storage",
    "units",
)
"""The packages that import by room name (all of Hotspan's server but ``hotspan`` itself and ``hotspan_sdk``);
``tests/test_packaging.py`` holds it equal to the wheel's ``package-dir`` in ``pyproject.toml``."""


def rooms_folder() -> Path:
    """The folder that holds the rooms: ``hotspan/_rooms`` where installed, else the checkout's root."""
    here = Path(__file__).resolve().parent
    private = here / "_rooms"
    return private if private.is_dir() else here.parent


def _use_own_rooms() -> None:
    folder = rooms_folder()
    installed = folder.name == "_rooms"
    entry = str(folder)
    if installed:
        # First, even when already on the path further down (a second import after a reload, say).
        sys.path[:] = [entry, *(path for path in sys.path if path != entry)]
    elif all(Path(path or ".").resolve() != folder for path in sys.path):
        sys.path.insert(0, entry)
    for name in ROOMS:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
        if module is not None and (origin is None or not Path(origin).resolve().is_relative_to(folder)):
            raise ImportError(
                f"this process already imported another package named {name!r} ({origin}); Hotspan's own "
                f"{name!r} (in {folder}) cannot load beside it: import hotspan first, or run Hotspan in its own "
                "process",
                name=name,
            )


_use_own_rooms()
