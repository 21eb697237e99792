"""How the server's wheel lays Hotspan out: at site-packages' top level only ``hotspan`` and ``hotspan_sdk``; the
rooms (``storage``, ``api``, ``query`` ...) in ``hotspan/_rooms/``, on no ``sys.path`` until ``import hotspan`` puts
it first on its own process's (``hotspan/__init__.py``). ``pyproject.toml`` lists the packages (the SDK's folder
and the rooms install under other names than their folders'), so the list must still hold every package folder.

The wheel is built for real from a copy of the sources (the build leaves nothing in the checkout) and installed
without its dependencies into a fresh virtual environment that sees this interpreter's site-packages (the
dependencies) but not its editable install of the checkout; that environment also holds a user's own ``api`` and
``storage`` packages. Neither side may shadow the other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import httpx
import pytest
from setuptools import find_namespace_packages

from hotspan import ROOMS

REPO = Path(__file__).resolve().parents[1]
SDK_FOLDER = "processors/sdk"
PRIVATE = "hotspan._rooms"
OUTSIDE = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
"""The environment of a process in the test's venv: the checkout's PYTHONPATH (a test run's) left out."""
USER_PACKAGES = ("api", "storage")
"""Packages of a user's own, named as two of Hotspan's rooms, installed beside the wheel."""
SPAN = (
    '{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "shop"}}]}, '
    '"scopeSpans": [{"spans": [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", '
    '"name": "checkout", "kind": 2, "startTimeUnixNano": "1700000000000000000", '
    '"endTimeUnixNano": "1700000000250000000"}]}]}]}\n'
)


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _setuptools(pyproject: Path) -> dict:
    return tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_the_wheel_lists_every_package_folder_with_the_rooms_in_a_private_folder() -> None:
    pyproject = _pyproject()
    config = pyproject["tool"]["setuptools"]
    roots = pyproject["tool"]["importlinter"]["root_packages"]
    assert set(ROOMS) == set(roots) - {"hotspan", "tools", "hotspan_sdk"}
    patterns = [f"{root}{rest}" for root in ("hotspan", *ROOMS) for rest in ("", ".*")]
    # npm installs the Node driver's packages beside it (make system-deps): JavaScript, not Python packages.
    found = set(find_namespace_packages(REPO, include=patterns, exclude=["*.node_modules", "*.node_modules.*"]))
    sdk = SDK_FOLDER.replace("/", ".")
    installed = {name if name.split(".")[0] == "hotspan" else f"{PRIVATE}.{name}" for name in found}
    assert set(config["packages"]) == {name for name in installed if not name.startswith(f"{PRIVATE}.{sdk}")} | {
        "hotspan_sdk"
    }
    assert config["package-dir"] == {"hotspan_sdk": SDK_FOLDER} | {f"{PRIVATE}.{room}": room for room in ROOMS}
    [extension] = config["ext-modules"]
    assert extension["name"] == f"{PRIVATE}.collector._otlp_rows"


def test_the_sdk_distribution_installs_one_package_named_hotspan_sdk() -> None:
    config = _setuptools(REPO / SDK_FOLDER / "pyproject.toml")
    assert config["packages"] == ["hotspan_sdk"] and config["package-dir"] == {"hotspan_sdk": "."}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's wheel, built by pip (build isolation: the setuptools ``pyproject.toml`` asks for) from a copy
    of what the build reads, so no ``build/`` or ``*.egg-info`` lands in the checkout."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", "node_modules", "build")
    for folder in ("hotspan", *ROOMS):
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(root / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [path] = (root / "dist").glob("hotspan-*.whl")
    return path


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and a user's own ``api`` and ``storage``; its ``bin`` folder.

    The dependencies come from this interpreter's site-packages, named in a ``.pth`` file: a folder listed there
    is added to ``sys.path`` without its own ``.pth`` files being run, so the checkout's editable install (whose
    finder would serve the checkout's folders) stays out: every module Hotspan runs comes from the wheel."""
    env_dir = tmp_path_factory.mktemp("installed") / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=OUTSIDE,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True, env=OUTSIDE
        ).strip()
    )
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "hotspan_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n", encoding="utf-8")
    for name in USER_PACKAGES:
        assert not (site / name).exists(), f"the wheel installed a top-level {name!r}"
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f'MARKER = "the user\'s {name}"\n', encoding="utf-8")
    return env_dir / "bin"


def _run(command: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300, env=OUTSIDE)


def _python(installed: Path, code: str, cwd: Path) -> str:
    """What ``code`` prints, run by the test venv's Python; it must succeed."""
    probe = _run([installed / "python", "-c", code], cwd)
    assert probe.returncode == 0, probe.stderr[-3000:]
    return probe.stdout


def test_the_wheel_installs_nothing_generic_at_the_top_level(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"hotspan", "hotspan_sdk", "hotspan-0.1.0.dist-info"}
    rooms = {name.split("/")[2] for name in names if name.startswith("hotspan/_rooms/")}
    assert rooms == set(ROOMS)
    assert "hotspan/_rooms/__init__.py" not in names  # a folder for sys.path, not a package to import through
    assert any(name.startswith("hotspan/_rooms/collector/_otlp_rows.") and name.endswith(".so") for name in names)
    assert any(name.startswith("hotspan/_rooms/storage/sql/") and name.endswith(".sql") for name in names)


def test_a_users_own_packages_are_not_shadowed_by_the_wheel(installed: Path, tmp_path: Path) -> None:
    probe = _run([installed / "python", "-c", "import api, storage; print(api.MARKER, '|', storage.MARKER)"], tmp_path)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.strip() == "the user's api | the user's storage"


def test_the_hotspan_command_runs_its_own_rooms_beside_the_users(installed: Path, tmp_path: Path) -> None:
    helped = _run([installed / "hotspan", "--help"], tmp_path)
    assert helped.returncode == 0 and "import" in helped.stdout, helped.stderr[-3000:]
    trace = tmp_path / "one.otlp.json"
    trace.write_text(SPAN, encoding="utf-8")
    imported = _run(
        [installed / "hotspan", "import", "--no-progress", "--data-dir", str(tmp_path / "data"), str(trace)], tmp_path
    )
    assert imported.returncode == 0, imported.stdout[-3000:] + imported.stderr[-3000:]
    assert "spans: 1  traces: 1  services: 1  rejected spans: 0" in imported.stdout, imported.stdout + imported.stderr
    where = (
        "import hotspan, api, storage.reader, collector._otlp_rows, instrumented_stack.env\n"
        "print(hotspan.rooms_folder())\n"
        "for module in (api, storage.reader, collector._otlp_rows, instrumented_stack.env):\n"
        "    print(module.__file__)\n"
    )
    rooms, *files = map(Path, _python(installed, where, tmp_path).split())
    assert rooms.parts[-2:] == ("hotspan", "_rooms") and rooms.is_relative_to(installed.parent)
    assert all(path.is_relative_to(rooms) for path in files), files


def test_the_installed_server_answers_its_api_and_ui(installed: Path, tmp_path: Path) -> None:
    """``hotspan serve`` from the wheel: the REST API, the UI's layout and the API docs load (routes, pages, assets
    and SQL all from ``hotspan/_rooms``)."""
    command = [installed / "hotspan", "serve", "--http-port", "0", "--grpc-port", "-1", "--data-dir", tmp_path / "d"]
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path, env=OUTSIDE
    )
    try:
        assert server.stdout is not None
        base = ""
        for line in server.stdout:  # the test's timeout bounds the wait for the banner
            if line.startswith("Hotspan UI: "):
                base = line.split()[2].removesuffix("/ui/")
                break
        assert base, "the server exited before it served"
        for path in ("/api/v1/services", "/ui/_dash-layout", "/docs"):
            assert httpx.get(base + path, timeout=30).status_code == 200, path
    finally:
        server.terminate()
        server.wait(60)


def test_hotspan_refuses_to_run_on_a_users_module_already_imported(installed: Path, tmp_path: Path) -> None:
    probe = _run([installed / "python", "-c", "import storage, hotspan"], tmp_path)
    assert probe.returncode != 0
    assert "another package named 'storage'" in probe.stderr, probe.stderr[-3000:]


def test_the_stacks_child_processes_find_the_rooms(installed: Path, tmp_path: Path) -> None:
    """``python -m instrumented_stack.service_main`` (the supervisor's and the emulator's launches) runs in the
    installed layout with ``module_process_env``, and only with it."""
    child = (
        "import os, subprocess, sys, hotspan\n"
        "from instrumented_stack.env import module_process_env\n"
        "command = [sys.executable, '-m', 'instrumented_stack.service_main', '--help']\n"
        "bare = subprocess.run(command, capture_output=True)\n"
        "run = subprocess.run(command, capture_output=True, env=os.environ | module_process_env())\n"
        "print(bare.returncode, run.returncode)\n"
    )
    bare, with_env = map(int, _python(installed, child, tmp_path).split())
    assert bare != 0 and with_env == 0
