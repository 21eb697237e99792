"""Can real vLLM run here? The ``vllm`` package and a visible CUDA GPU, found with the standard library only.

Kept apart from ``engine.vllm_backend`` (which needs pydantic, tokenizers and the emulator's web stack) so
that ``python -m tools.device_check`` can answer "vllm missing" on a bare Python, such as a GPU
machine's image that has none of Hotspan's dependencies. ``engine.vllm_backend`` re-exports these names.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass

VLLM_EXTRA = "pip install 'hotspan[vllm]'"
"""How to install vLLM for the stack (pyproject's optional extra)."""


@dataclass(frozen=True, slots=True)
class VllmAvailability:
    """What :func:`probe_vllm` found.

    Attributes:
        vllm_version: the installed ``vllm`` distribution's version, ``None`` when it is not importable.
        gpus: visible CUDA GPUs, one description each (``nvidia-smi -L`` lines); empty when none.
    """

    vllm_version: str | None
    gpus: tuple[str, ...]

    @property
    def missing(self) -> list[str]:
        """Human-readable reasons vLLM cannot run here; empty when it can."""
        reasons = []
        if self.vllm_version is None:
            reasons.append(f"the vllm package is not installed ({VLLM_EXTRA})")
        if not self.gpus:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            where = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
            reasons.append(f"no CUDA GPU is visible (nvidia-smi lists none{where})")
        return reasons

    @property
    def usable(self) -> bool:
        """vLLM is installed and a GPU is visible."""
        return not self.missing


def cuda_gpus(timeout_s: float = 10.0) -> tuple[str, ...]:
    """Visible CUDA GPUs: ``nvidia-smi -L`` lines (``GPU 0: NVIDIA H200 (UUID: ...)``), or, without
    ``nvidia-smi``, ``torch.cuda`` device names when PyTorch is installed; empty when none or unknown.

    ``CUDA_VISIBLE_DEVICES`` set to an empty string or ``-1`` hides every GPU. Blocks at most ``timeout_s``
    **seconds** (``nvidia-smi``); importing PyTorch, the fallback, takes a few seconds.
    """
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return ()
    if executable := shutil.which("nvidia-smi"):
        try:
            listing = subprocess.run([executable, "-L"], capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ()
        return tuple(line.strip() for line in listing.stdout.splitlines() if line.startswith("GPU "))
    if importlib.util.find_spec("torch") is None:
        return ()
    import torch  # only here: importing PyTorch costs seconds

    return tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))


def probe_vllm() -> VllmAvailability:
    """Whether vLLM can run here: the ``vllm`` package (found without importing it) and a CUDA GPU."""
    version = None
    if importlib.util.find_spec("vllm") is not None:
        try:
            version = importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
    return VllmAvailability(vllm_version=version, gpus=cuda_gpus())
