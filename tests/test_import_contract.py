"""The import contract (pyproject's ``[tool.importlinter]``) holds for the tree and catches what it forbids:
an import back up the layers, the stack importing the server, the SDK importing Hotspan, the server importing a
checkout's tools, a handler importing the store or one of the query room's reads over a store reader. Each probe
is one line added to a copy of the packages; lint-imports must fail on it and name the contract it breaks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = (
    "hotspan",
    "incidents",
    "collector",
    "processors",
    "storage",
    "api",
    "dashboards",
    "instrumented_stack",
    "analysis",
    "diagnosis",
    "alerts",
    "query",
    "units",
    "tools",
)
SDK = ("processors/sdk", "hotspan_sdk")
"""The SDK's folder and the name it is imported by (its pyproject's package-dir), where the copy puts it."""
PROBES = {
    "storage/_probe.py": ("import api.traces\n", "One direction"),
    "analysis/_probe.py": ("import query.trace_model\n", "One direction"),
    "alerts/_probe.py": ("import incidents.loop\n", "One direction"),
    "instrumented_stack/_probe.py": ("import hotspan.server\n", "instrumented_stack imports nothing"),
    "hotspan_sdk/_probe.py": ("import storage.ids\n", "hotspan_sdk imports nothing"),
    "query/_probe.py": ("import processors.sdk.policy\n", "The SDK is imported as hotspan_sdk only"),
    "hotspan/_probe.py": ("import tools.device_check\n", "Nothing imports tools"),
    "api/_probe.py": ("import storage.reader\n", "One door to the store"),
    "dashboards/_probe.py": ("import query.bounded_trace\n", "Handlers read through QueryService's methods"),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contract")
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.so", "data"))
    folder, name = SDK
    shutil.copytree(REPO / folder, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
        env={"PYTHONPATH": str(root)},
    )


def test_the_tree_keeps_the_contract(tree: Path) -> None:
    answer = lint(tree)
    assert answer.returncode == 0, answer.stdout[-3000:]
    assert "0 broken" in answer.stdout


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_forbidden_import_breaks_it(tree: Path, probe: str) -> None:
    line, contract = PROBES[probe]
    path = tree / probe
    path.write_text(line)
    try:
        answer = lint(tree)
    finally:
        path.unlink()
    assert answer.returncode != 0
    broken = answer.stdout[answer.stdout.index("Broken contracts") :]
    assert contract in broken and probe.removesuffix(".py").replace("/", ".") in broken
