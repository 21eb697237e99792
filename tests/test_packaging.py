"""The server's wheel lists its packages (``pyproject.toml`` ``[tool.setuptools] packages``) because the SDK's folder
installs under another name; the list must still hold every package folder, and the SDK must install as
``hotspan_sdk`` from both pyprojects."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

REPO = Path(__file__).resolve().parents[1]
SDK_FOLDER = "processors/sdk"


def _setuptools(pyproject: Path) -> dict:
    return tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_the_wheel_lists_every_package_folder_and_the_sdk_under_its_own_name() -> None:
    config = _setuptools(REPO / "pyproject.toml")
    roots = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    server_roots = [name for name in roots["root_packages"] if name not in ("tools", "hotspan_sdk")]
    patterns = [f"{root}{rest}" for root in server_roots for rest in ("", ".*")]
    # npm installs the Node driver's packages beside it (make system-deps): JavaScript, not Python packages.
    found = set(find_namespace_packages(REPO, include=patterns, exclude=["*.node_modules", "*.node_modules.*"]))
    sdk = SDK_FOLDER.replace("/", ".")
    assert set(config["packages"]) == {name for name in found if not name.startswith(sdk)} | {"hotspan_sdk"}
    assert config["package-dir"] == {"hotspan_sdk": SDK_FOLDER}


def test_the_sdk_distribution_installs_one_package_named_hotspan_sdk() -> None:
    config = _setuptools(REPO / SDK_FOLDER / "pyproject.toml")
    assert config["packages"] == ["hotspan_sdk"] and config["package-dir"] == {"hotspan_sdk": "."}
