"""Imports each module of Cairn's packages as if it were the first thing a fresh interpreter
imported. An import cycle among our modules can fail only when it is entered from one side,
and so hide as long as every process happens to enter it from the other:
`import services.restore_points.service` alone raised ImportError, unseen because every
process imported `services.restore_points.copies` before it.

A fresh interpreter per module would take minutes; even a child forked per module after
the libraries are imported took 20 s of CPU here, since nearly every module of ours builds
on the models and the settings and each child built them again. So one process does it:

1. It reads every module's imports from its source, those that run when the module is
   imported (not inside a function, not under `if TYPE_CHECKING`).
2. It imports the third-party modules ours import, then ours in dependency order as far as
   that order goes: a module whose imports of ours are all loaded already is on no cycle
   and enters none, so nothing about it depends on who imports it first. Modules on a
   cycle, and every module above one, are left out, and each import is checked to have
   loaded none of them (through a package's `__init__`, or an import the source does not
   show).
3. For each module left out it forks a child that imports just that module and exits: the
   child starts from a state with none of the cycle's modules loaded, as a fresh
   interpreter would. A few children run at once.

    python -m tests.support.import_alone [--root DIR] PACKAGE...

prints a line per module that fails to import, naming it, the error and the line of our
code that raised it, and exits 1 if any did."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD_SECONDS = 30
MESSAGE_LIMIT = 4000
"""Bytes of a failure's message a child writes: less than a pipe holds, so a child never
blocks on a parent that waits for it to exit."""


@dataclass
class Imports:
    ours: dict[str, set[str]] = field(default_factory=dict)
    """Module -> the modules of ours it imports when it is imported."""
    others: set[str] = field(default_factory=set)
    """The modules outside ours (the standard library's too) that ours import when they
    are imported."""


ELSEWHERE = ("cairnclient.osc",)
"""Packages that run in another Python: the `openstack` plugin in Debian's system Python,
beside osc-lib and cliff, which the virtualenv does not have. tests/tools/osc imports every
module of it there, through its entry points."""


def modules_of(root: Path, packages: Iterable[str]) -> list[str]:
    """Every module of these packages (directories under `root`), by its files, but those
    of ELSEWHERE: nothing is imported to find them."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if not module.startswith(ELSEWHERE):
                found.append(module)
    return found


def read_imports(root: Path, modules: list[str]) -> Imports:
    known = set(modules)
    tops = {module.split(".")[0] for module in modules}
    found = Imports()
    for module in modules:
        path = _path_of(root, module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found.ours[module] = set()
        for name, at_import in _named(ast.parse(path.read_text()), package, at_import=True):
            if not at_import:
                continue
            if name.split(".")[0] not in tops:
                found.others.add(name)
            elif (target := _ours(name, known)) not in (None, module):
                found.ours[module].add(target)
    return found


def _named(node: ast.AST, package: str, *, at_import: bool) -> Iterable[tuple[str, bool]]:
    """(module name, imported when the module is) for each name an import statement under
    `node` imports; `from a import b` names `a` and `a.b` (b may be a module)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            yield from _named(ast.Module(body=child.orelse, type_ignores=[]), package,
                              at_import=at_import)
            continue
        if isinstance(child, ast.Import):
            yield from ((alias.name, at_import) for alias in child.names)
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                parts = package.split(".")[:len(package.split(".")) - child.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base, at_import
            yield from ((f"{base}.{alias.name}", at_import) for alias in child.names)
        deferred = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _named(child, package, at_import=at_import and not deferred)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _ours(name: str, known: set[str]) -> str | None:
    """The module of ours a dotted name is, or is inside (`a.b.Name` is `a.b`)."""
    parts = name.split(".")
    while parts:
        if (candidate := ".".join(parts)) in known:
            return candidate
        parts.pop()
    return None


def _path_of(root: Path, module: str) -> Path:
    base = root.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def in_dependency_order(ours: dict[str, set[str]]) -> list[str]:
    """The modules on no import cycle and above none, each after what it imports."""
    order: list[str] = []
    done: set[str] = set()
    left = dict(ours)
    while ready := sorted(module for module, needs in left.items() if needs <= done):
        for module in ready:
            order.append(module)
            done.add(module)
            del left[module]
    return order


def preload(names: Iterable[str]) -> None:
    for name in names:
        # An optional module (under try/except ImportError) may be missing; a module of
        # ours that needs it fails on its own.
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def import_each(modules: list[str], parallel: int) -> dict[str, str]:
    """Each module imported alone in a child of this process: module -> why it failed."""
    failed: dict[str, str] = {}
    running: dict[int, tuple[str, int]] = {}
    pending = list(reversed(modules))
    while pending or running:
        while pending and len(running) < parallel:
            module = pending.pop()
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                _import_in_child(module, write)
            os.close(write)
            running[pid] = (module, read)
        pid, status = os.wait()
        module, read = running.pop(pid)
        with os.fdopen(read, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            failed[module] = message or (f"killed by signal {-code}" if code < 0
                                         else f"exit status {code}")
    return failed


def _import_in_child(module: str, report: int) -> None:
    signal.alarm(CHILD_SECONDS)  # its default action ends a child whose import hangs
    try:
        importlib.import_module(module)
    except BaseException as exc:  # a child reports whatever ended its import
        os.write(report, _describe(exc).encode()[:MESSAGE_LIMIT])
        os._exit(1)
    os._exit(0)


def _describe(exc: BaseException) -> str:
    """The error, and the innermost line of ours on its way."""
    where = ""
    here = Path.cwd()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = Path(frame.filename)
        if path.is_absolute() and path.is_relative_to(here) \
                and not {"site-packages", ".venv"} & set(path.parts):
            where = f" (at {path.relative_to(here)}:{frame.lineno})"
            break
    return "".join(traceback.format_exception_only(exc)).strip() + where


def check(root: Path, packages: list[str], parallel: int) -> dict[str, str]:
    """Every module of `packages` that fails to import alone: module -> why."""
    modules = modules_of(root, packages)
    imports = read_imports(root, modules)
    preload(sorted(imports.others))
    failed: dict[str, str] = {}
    acyclic = in_dependency_order(imports.ours)
    alone = [module for module in modules if module not in set(acyclic)]
    for module in acyclic:
        try:
            importlib.import_module(module)
        except Exception as exc:
            failed[module] = _describe(exc)
        for early in sorted(set(alone).intersection(sys.modules).difference(failed)):
            failed[early] = (f"loaded by importing {module} (through a package's __init__, "
                             "or an import the source does not show), so it could not be "
                             "imported alone: import it alone by hand")
    failed.update(import_each([m for m in alone if m not in failed], parallel))
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description="Import each module as if it came first.")
    parser.add_argument("--root", type=Path, default=REPO)
    parser.add_argument("packages", nargs="+")
    args = parser.parse_args()
    os.chdir(args.root)
    sys.path.insert(0, str(args.root))
    parallel = max(2, min(4, len(os.sched_getaffinity(0))))
    failed = check(args.root, args.packages, parallel)
    for module, why in sorted(failed.items()):
        print(f"{module}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
