"""Environment variables the instrumented stack reads, each with its default and unit.

Precedence everywhere: an explicit argument, then the variable, then the default.

- ``HOTSPAN_SHARED_DATA``: directory holding ``workloads/`` (path; default ``<repo>/../shared/data``).
- ``HOTSPAN_STACK_CACHE``: where built artefacts are cached, e.g. the trained tokenizer (path; default
  ``<HOTSPAN_DATA_DIR>/instrumented_stack``).
- ``HOTSPAN_DATA_DIR``: Hotspan's data directory, used only to place the default cache (path; default
  ``./.hotspan``, as ``hotspan.settings`` has it).
- ``HOTSPAN_STACK_ENGINE``: the LLM engine ``hotspan stack run`` starts: ``auto``, ``emulator`` or ``vllm``
  (default ``auto``: real vLLM when it is installed and a CUDA GPU is visible, else the emulator;
  ``engine.vllm_backend.resolve_engine``). ``--engine`` wins over it.
- ``PYTHONPATH``: set, never read, for the stack's own child processes (:func:`module_process_env`).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_SHARED_DATA = "HOTSPAN_SHARED_DATA"
ENV_STACK_CACHE = "HOTSPAN_STACK_CACHE"
ENV_DATA_DIR = "HOTSPAN_DATA_DIR"
ENV_STACK_ENGINE = "HOTSPAN_STACK_ENGINE"

DEFAULT_STACK_ENGINE = "auto"

DEFAULT_DATA_DIR = Path(".hotspan")

ROOMS_FOLDER = Path(__file__).resolve().parents[1]
"""The folder that holds ``instrumented_stack`` and the other rooms: the checkout's root, or an installed wheel's
``hotspan/_rooms``, which is on no ``sys.path`` by itself (``hotspan/__init__.py`` says why)."""


def stack_cache_dir(cache_dir: Path | None = None) -> Path:
    """The cache directory (created if missing): ``cache_dir``, ``$HOTSPAN_STACK_CACHE``, or the default."""
    from_env = os.environ.get(ENV_STACK_CACHE)
    data_dir = Path(os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR)
    chosen = cache_dir or (Path(from_env) if from_env else data_dir / "instrumented_stack")
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


def stack_engine_choice(choice: str | None = None) -> str:
    """The engine asked for: ``choice``, else ``$HOTSPAN_STACK_ENGINE``, else ``auto`` (validated later)."""
    return choice or os.environ.get(ENV_STACK_ENGINE) or DEFAULT_STACK_ENGINE


def module_process_env() -> dict[str, str]:
    """The variables a child ``python -m instrumented_stack...`` needs added to this process's environment to find
    the stack's modules: ``PYTHONPATH`` with :data:`ROOMS_FOLDER` first, then this process's ``PYTHONPATH``. A
    child does not inherit the ``sys.path`` that ``import hotspan`` set, and another interpreter (a side
    virtualenv's) does not have the stack installed at all."""
    inherited = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([str(ROOMS_FOLDER), *([inherited] if inherited else [])])}
