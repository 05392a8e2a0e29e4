"""Small modules with one job (CONTRIBUTING.md): a module of Cairn (api, services, worker,
cli, manage) longer than LIMIT lines says why in its docstring, in a sentence with the
marker "over 400 lines because", or is split by concern. Read from the source: nothing
checked is imported."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKED = ("api", "services", "worker", "cli", "cairnclient", "manage")
LIMIT = 400
MARKER = f"over {LIMIT} lines because"


def too_long(root: Path) -> list[str]:
    """The modules over LIMIT lines whose docstring does not say why (MARKER)."""
    found = []
    for package in CHECKED:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text()
            lines = len(text.splitlines())
            if lines > LIMIT and MARKER not in (ast.get_docstring(ast.parse(text)) or ""):
                found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_a_module_over_400_lines_says_why_or_is_split() -> None:
    found = too_long(REPO)
    assert not found, (
        f"split these by concern, or say why not in the docstring (\"{MARKER} ...\"):\n"
        + "\n".join(found))


def test_only_a_long_module_without_the_reason_is_found(tmp_path: Path) -> None:
    (tmp_path / "services").mkdir()
    body = "x = 1\n" * LIMIT
    (tmp_path / "services/short.py").write_text('"""Short."""\n' + "x = 1\n" * (LIMIT - 1))
    (tmp_path / "services/long.py").write_text('"""Long."""\n' + body)
    (tmp_path / "services/why.py").write_text(
        f'"""Long, and {MARKER} its table is one."""\n' + body)
    (tmp_path / "services/comment.py").write_text(f"# {MARKER} (a comment)\n" + body)
    assert too_long(tmp_path) == ["services/comment.py: 401 lines",
                                  "services/long.py: 401 lines"]
