"""hotspan_sdk runs inside users' services: it may import only the OTel API/SDK and the stdlib."""

import ast
import sys
from pathlib import Path

import hotspan_sdk

PACKAGE_DIR = Path(hotspan_sdk.__file__).parent
OPTIONAL = {"yaml"}  # imported lazily, only when a YAML config is given


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_imports_only_opentelemetry_stdlib_and_itself() -> None:
    sources = sorted(PACKAGE_DIR.glob("*.py"))
    assert sources
    for path in sources:
        for module in imported_modules(path):
            top = module.split(".")[0]
            allowed = (
                top in sys.stdlib_module_names
                or top == "opentelemetry"
                or module.startswith("hotspan_sdk")
                or module in OPTIONAL
            )
            assert allowed, f"{path.name} imports {module}"
    assert not any(module.startswith("opentelemetry.exporter") for p in sources for module in imported_modules(p))
