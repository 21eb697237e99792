"""hotspan_sdk is its own distribution (``processors/sdk/pyproject.toml``, ``hotspan-sdk``): installed alone
into a fresh virtual environment, with nothing of Hotspan's server, its tests pass there, and it imports beside a
service's own ``processors`` package (a common name the SDK's folder has, but its import name has not).

The environment gets the SDK with its YAML extra (from a copy of its folder, so the build leaves nothing in the
checkout) and the tests' own needs (pytest, hypothesis, httpx for the two-service test, the OTLP/HTTP exporter
the README's example uses); the SDK's tests run from a copy outside the checkout, so nothing of the repository
is importable. The one test that starts a Hotspan server is left out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SDK = REPO / "processors" / "sdk"
TESTS = Path(__file__).resolve().parent
NEEDS_HOTSPAN = ("test_sdk_to_hotspan.py", "test_sdk_standalone.py")
OUTSIDE = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
"""The environment of a process in the SDK's venv: the checkout's PYTHONPATH (a test run's) left out, so only what
the venv installed imports."""
TEST_NEEDS = ("pytest>=8,<10", "hypothesis>=6.100,<7", "httpx>=0.27,<1", "opentelemetry-exporter-otlp-proto-http")
SERVER_PACKAGES = (
    "polars",
    "clickhouse_connect",
    "chdb",
    "dash",
    "fastapi",
    "hotspan",
    "collector",
    "storage",
    "processors",
)


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sdk_standalone")
    source = root / "sdk"
    shutil.copytree(SDK, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{source}[yaml]", *TEST_NEEDS],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-4000:]
    return python


def test_the_sdk_installs_alone_without_the_server(sdk_venv: Path, tmp_path: Path) -> None:
    probe = "import hotspan_sdk, sys; print(sorted({m.split('.')[0] for m in sys.modules}))"
    answer = subprocess.run(
        [sdk_venv, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=OUTSIDE
    )
    assert answer.returncode == 0, answer.stderr
    loaded = answer.stdout
    assert "opentelemetry" in loaded
    assert not [name for name in SERVER_PACKAGES if f"'{name}'" in loaded]
    for name in SERVER_PACKAGES:
        missing = subprocess.run(
            [sdk_venv, "-c", f"import {name}"], capture_output=True, cwd=tmp_path, timeout=60, env=OUTSIDE
        )
        assert missing.returncode != 0, f"{name} is installed beside the SDK"


def test_the_sdk_tests_pass_in_its_own_environment(sdk_venv: Path, tmp_path: Path) -> None:
    copied = tmp_path / "sdk_tests"
    shutil.copytree(TESTS, copied, ignore=shutil.ignore_patterns("__pycache__", *NEEDS_HOTSPAN))
    run = subprocess.run(
        [sdk_venv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(copied), str(copied)],
        capture_output=True,
        text=True,
        cwd=copied,
        timeout=900,
        env={"PATH": str(sdk_venv.parent), "PYTHONPATH": str(copied), "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary


def test_the_sdk_imports_beside_a_services_own_processors_package(sdk_venv: Path, tmp_path: Path) -> None:
    """A service whose source tree has a ``processors`` package of its own (the shape that broke the SDK while it
    was imported as ``processors.sdk``) uses both."""
    own = tmp_path / "processors"
    own.mkdir()
    (own / "__init__.py").write_text('OWNER = "the service"\n', encoding="utf-8")
    (own / "orders.py").write_text("def handle() -> str:\n    return 'handled'\n", encoding="utf-8")
    service = (
        "import processors, processors.orders\n"
        "from hotspan_sdk import BaggageSampler, BaggageSpanProcessor, HotspotSpanProcessor\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "provider = TracerProvider(sampler=BaggageSampler.from_env())\n"
        "provider.add_span_processor(BaggageSpanProcessor(['tenant_id']))\n"
        "with provider.get_tracer('service').start_as_current_span('order'):\n"
        "    print(processors.OWNER, processors.orders.handle(), HotspotSpanProcessor.__module__)\n"
    )
    run = subprocess.run(
        [sdk_venv, "-c", service], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=OUTSIDE
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["the", "service", "handled", "hotspan_sdk.hotspot"]
