"""The type stubs for python-rados and python-rbd (`stubs/`) describe the modules Debian
installs: every class, constant, method and exception they declare exists in the real
module, so mypy never approves a call that would fail at run time with AttributeError."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

STUBS = Path(__file__).resolve().parents[3] / "stubs"


def declared(module: str) -> list[tuple[str, str | None]]:
    """(name, member) for every top-level name and every method of a stubbed class."""
    tree = ast.parse((STUBS / f"{module}.pyi").read_text())
    names: list[tuple[str, str | None]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            is_typed_dict = any(isinstance(b, ast.Name) and b.id == "TypedDict"
                                for b in node.bases)
            if is_typed_dict:
                continue  # describes the dicts librbd returns; no such class exists
            names.append((node.name, None))
            names += [(node.name, item.name) for item in node.body
                      if isinstance(item, ast.FunctionDef)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append((node.target.id, None))
        elif isinstance(node, ast.FunctionDef):
            names.append((node.name, None))
    return names


@pytest.mark.parametrize("module", ["rados", "rbd"])
def test_every_stubbed_name_exists_in_the_installed_module(module: str) -> None:
    real = importlib.import_module(module)
    names = declared(module)
    assert len(names) > 40, names
    missing = [f"{cls}.{member}" if member else cls for cls, member in names
               if not hasattr(real, cls)
               or (member is not None and not hasattr(getattr(real, cls), member))]
    assert not missing, f"stubs/{module}.pyi declares what {module} lacks: {missing}"


@pytest.mark.parametrize("module", ["rados", "rbd"])
def test_stubbed_exceptions_keep_the_real_hierarchy(module: str) -> None:
    real = importlib.import_module(module)
    tree = ast.parse((STUBS / f"{module}.pyi").read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.bases and \
                isinstance(node.bases[0], ast.Name) and node.bases[0].id in (
                    "Error", "OSError"):
            assert issubclass(getattr(real, node.name), getattr(real, node.bases[0].id)), \
                node.name
