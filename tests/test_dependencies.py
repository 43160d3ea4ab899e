"""Every third-party package the code imports is declared, and only through its public names (issue 11).

The imports are read with ``ast`` (no module is executed), mapped to distributions with the installed
metadata, and compared with ``pyproject.toml``'s requirements, extras included: a package that only
arrives as somebody else's dependency can vanish with that dependency's next release.
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "sqale_desktop"


def _imports(root: Path) -> Iterator[tuple[Path, int, str]]:
    """(file, line, dotted module) for every absolute import under ``root``."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, node.lineno, alias.name
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield path, node.lineno, node.module


def _third_party(module: str) -> bool:
    top = module.partition(".")[0]
    return top not in sys.stdlib_module_names and top not in ("sqale_desktop", "__future__")


def _declared() -> set[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def test_every_imported_package_is_declared() -> None:
    owners = importlib.metadata.packages_distributions()
    declared = _declared()
    missing: dict[str, list[str]] = {}
    for path, line, module in _imports(PACKAGE):
        if not _third_party(module):
            continue
        top = module.partition(".")[0]
        distributions = {canonicalize_name(d) for d in owners.get(top, [])}
        assert distributions, f"{path.relative_to(REPO_ROOT)}:{line}: {top} is imported but not installed"
        if not distributions & declared:
            missing.setdefault(top, []).append(f"{path.relative_to(REPO_ROOT)}:{line}")
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


def test_no_private_modules_of_other_libraries() -> None:
    private = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {module}"
        for path, line, module in _imports(PACKAGE)
        if _third_party(module) and any(part.startswith("_") for part in module.split(".")[1:])
    ]
    assert private == []


def test_the_walk_sees_the_imports_it_checks() -> None:
    """The checks above can fail: the walk finds known imports, private and undeclared ones included."""
    found = {module for _, _, module in _imports(PACKAGE)}
    assert {"sqlparse", "platformdirs", "keyring"} <= found
    assert _third_party("huggingface_hub.utils._fixes")
    assert not _third_party("sqale_desktop.core.db") and not _third_party("json")
    assert "sqlparse" in _declared() and "not-a-real-dist" not in _declared()
