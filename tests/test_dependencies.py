"""Every package the tests and examples import is one the project names: a dependency, or
a package of the ``test`` extra (``pip install -e '.[test]'`` is all a checkout needs)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The folders whose imports are checked; each imports its own modules too.
CHECKED = ("tests", "examples")


def _normal(name: str) -> str:
    """A distribution name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions ``pyproject.toml`` names as dependencies or in the test extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    names = {re.match(r"[A-Za-z0-9._-]+", requirement) for requirement in requirements}
    return {_normal(name.group()) for name in names if name is not None}


#: An import statement at a line's start (ruff's import sorting puts one module a line),
#: also in the code a test hands a child process as text.


def _imported_names(path: Path) -> list[str]:
    """The absolute module names ``path``'s import statements name (docstrings and comments,
    which may say "import", are not read)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


@cache
def imported_modules() -> dict[str, str]:
    """Every absolute module imported in the checked folders that is neither the standard
    library's nor the project's own, with one file that imports it."""
    own = {"vmstack", *CHECKED}
    own |= {path.stem for folder in CHECKED for path in (ROOT / folder).glob("*.py")}
    found: dict[str, str] = {}
    for folder in CHECKED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in _imported_names(path):
                top = name.partition(".")[0]
                if top not in own and top not in sys.stdlib_module_names:
                    found.setdefault(name, str(path.relative_to(ROOT)))
    return found


@cache
def _top_level_providers() -> Mapping[str, list[str]]:
    """Installed distributions by the top-level names they provide."""
    return packages_distributions()


def providers(module: str) -> set[str]:
    """The installed distributions that hold ``module`` (for a namespace package that
    several share, such as ``opentelemetry``, the ones that hold the part imported); read
    from the distributions' file lists, importing nothing."""
    top, _, rest = module.partition(".")
    candidates = _top_level_providers().get(top, [])
    part = rest.partition(".")[0]
    if len(candidates) <= 1 or not part:
        return {_normal(name) for name in candidates}
    held = {(top, part), (top, f"{part}.py")}
    return {
        _normal(name)
        for name in candidates
        if any(tuple(file.parts[:2]) in held for file in distribution(name).files or [])
    }


def test_the_test_extra_names_every_package_the_tests_and_examples_import() -> None:
    """A package that arrives only with another (numpy with Ray) is named in its own right."""
    names = declared()
    unnamed = {
        module: (place, sorted(providers(module)))
        for module, place in imported_modules().items()
        if not providers(module) & names
    }
    assert not unnamed, f"imported but named by no dependency or test extra: {unnamed}"


def test_the_check_sees_a_package_that_only_another_brings() -> None:
    """numpy is installed (Ray needs it) and imported by a test: it counts only because the
    test extra names it, and a namespace package is told apart by the part imported."""
    assert "numpy" in providers("numpy")
    assert providers("opentelemetry.sdk.trace") == {"opentelemetry-sdk"}
    assert "numpy" in {module.partition(".")[0] for module in imported_modules()}
    assert "numpy" in declared()
