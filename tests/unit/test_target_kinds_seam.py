"""The target seam holds (issue 33): outside `services/targets/` and `worker/targets/`, no
module of Cairn (api, services, worker, cli, manage) asks which kind a target is. Read from
the source (nothing checked is imported), it finds

- a comparison with a kind's name: `target.kind == "s3"`, `kind in ("s3", "directory")`,
  `case "rbd":` (the names are the registry's, `targets.kinds()`);
- a test of a kind's class: `isinstance(t, ObjectStoreTarget)`, `type(t) is
  RbdPoolTarget`, `case DirectoryTarget():`;
- an import of a kind's module (`services.targets.rbd_pool`, `from services.targets import
  object_store`, `worker.targets.rbd_pool`), or a reach into one through its package
  (`targets.directory.configured`).

A kind's modules are found, not listed: the modules of `services/targets/` whose class
declares one of the registry's kinds, and the worker's module of the same name (each
registry keeps one module per kind). A fourth kind is guarded the day it is registered.

Nothing found may stand: code only some kinds can run (the RBD data path, an instant
restore's clone, an off-site copy's read, the chunk format's data path) asks the registry
for the family that can (`targets.snapshotted`, `targets.chunked`), never for a kind.

Tests are not checked: they reach behind Cairn's back on purpose, per kind (damaging a
chunk, planting an orphan: `tests/integration/worker/test_target_kinds.py`). Nor is the
API's schema of `GET /v1/targets`, which names the kinds in a `Literal` (the API's promise
of which exist, held to the registry by tests/unit/services/targets/test_registry.py): a
type, not a comparison."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from services import targets

REPO = Path(__file__).resolve().parents[2]

CHECKED = ("api", "services", "worker", "cli", "cairnclient", "manage")
SEAM = ("services/targets", "worker/targets")

@dataclass(frozen=True)
class Seam:
    kinds: frozenset[str]
    modules: frozenset[str]
    """The kinds' modules, dotted: services.targets.rbd_pool, worker.targets.rbd_pool..."""
    classes: frozenset[str]
    """The classes those modules define."""


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    what: str


def listed(found: Iterable[Finding]) -> list[str]:
    return [f"{f.path}:{f.line}: {f.what}" for f in found]


def seam_of(root: Path, kinds: Iterable[str]) -> Seam:
    names = frozenset(kinds)
    modules: set[str] = set()
    classes: set[str] = set()
    for declared in sorted((root / SEAM[0]).glob("*.py")):
        if not _declares_a_kind(ast.parse(declared.read_text()), names):
            continue
        for seam in SEAM:
            module = root / seam / declared.name
            if module.exists():
                modules.add(f"{seam.replace('/', '.')}.{module.stem}")
                classes |= {node.name for node in ast.parse(module.read_text()).body
                            if isinstance(node, ast.ClassDef)}
    return Seam(names, frozenset(modules), frozenset(classes))


def _declares_a_kind(tree: ast.Module, kinds: frozenset[str]) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            named = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(n, ast.Name) and n.id == "kind" for n in named) \
                    and isinstance(node.value, ast.Constant) and node.value.value in kinds:
                return True
    return False


def findings(root: Path, seam: Seam) -> list[Finding]:
    found: list[Finding] = []
    for package in CHECKED:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if not relative.startswith(tuple(f"{s}/" for s in SEAM)):
                found += _Checker(relative, seam).check(ast.parse(path.read_text()))
    return sorted(found)


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, seam: Seam) -> None:
        self.path, self.seam = path, seam
        self.aliases: dict[str, str] = {}  # a local name -> the dotted module it is bound to
        self.found: list[Finding] = []

    def check(self, tree: ast.Module) -> list[Finding]:
        self.visit(tree)
        return self.found

    def _note(self, node: ast.AST, what: str) -> None:
        self.found.append(Finding(self.path, getattr(node, "lineno", 0), what))

    def _kind_module(self, dotted: str) -> str | None:
        return next((m for m in self.seam.modules
                     if dotted == m or dotted.startswith(f"{m}.")), None)

    # -- imports, and reaching into a kind's module through its package ------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            module = self._kind_module(alias.name)
            if module is not None:
                self._note(node, f"imports {module}")
            self.aliases[alias.asname or alias.name.split(".")[0]] = \
                alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = node.module or ""
        for alias in node.names:
            module = self._kind_module(source) or self._kind_module(f"{source}.{alias.name}")
            if module is not None:
                self._note(node, f"imports {module}")
            self.aliases[alias.asname or alias.name] = f"{source}.{alias.name}"

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._dotted(node)
        if dotted is not None and dotted in self.seam.modules:
            self._note(node, f"reaches into {dotted}")
            return
        self.generic_visit(node)

    def _dotted(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            inner = self._dotted(node.value)
            return f"{inner}.{node.attr}" if inner is not None else None
        return None

    # -- branches on the kind -------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare) -> None:
        for operand in (node.left, *node.comparators):
            for name in self._kind_names(operand):
                self._note(node, f"compares with the kind name {name!r}")
            for name in self._kind_classes(operand):
                self._note(node, f"compares with the kind's class {name}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") \
                and len(node.args) == 2:
            for name in self._kind_classes(node.args[1]):
                self._note(node, f"tests the kind's class {name}")
        self.generic_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> None:
        for name in self._kind_names(node.value):
            self._note(node, f"matches the kind name {name!r}")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for name in self._kind_classes(node.cls):
            self._note(node, f"matches the kind's class {name}")
        self.generic_visit(node)

    def _kind_names(self, node: ast.expr) -> Iterator[str]:
        for value in _elements(node):
            if isinstance(value, ast.Constant) and value.value in self.seam.kinds:
                yield str(value.value)

    def _kind_classes(self, node: ast.expr) -> Iterator[str]:
        for value in _elements(node):
            name = value.id if isinstance(value, ast.Name) else \
                value.attr if isinstance(value, ast.Attribute) else None
            if name in self.seam.classes:
                yield str(name)


def _elements(node: ast.expr) -> Iterator[ast.expr]:
    """The node, or the elements of a tuple, list or set written out."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        yield from node.elts
    else:
        yield node


def test_no_module_outside_the_seam_asks_a_targets_kind() -> None:
    seam = seam_of(REPO, targets.kinds())
    # The walk finds every kind's module on both sides of the line.
    assert {"services.targets.rbd_pool", "services.targets.object_store",
            "services.targets.directory", "worker.targets.rbd_pool",
            "worker.targets.object_store"} <= seam.modules
    found = listed(findings(REPO, seam))
    assert not found, (
        "a kind is asked outside the seam; ask the Target (its capabilities, its family: "
        "targets.chunked, targets.snapshotted; its data path in worker/targets) "
        "instead:\n" + "\n".join(found))


PLANTED = '''\
import services.targets.directory
from services import targets
from services.targets import object_store, rbd_pool as pools
from services.targets.rbd_pool import RbdPoolTarget
from worker.targets.rbd_pool import RbdPoolPath


def branches(target, kind, settings):
    if target.kind == "s3":
        pass
    if kind in ("rbd", "directory"):
        pass
    if isinstance(target, object_store.ObjectStoreTarget):
        pass
    if type(target) is RbdPoolTarget:
        pass
    match target.kind:
        case "s3":
            pass
    match target:
        case RbdPoolTarget():
            pass
    return targets.rbd_pool.named(settings, "local")
'''

LAWFUL = '''\
from services import targets
from services.targets import ChunkTarget, SnapshotTarget
from services.targets.scans import OrphanScan


def asks_the_target(settings, name, mode):
    target = targets.get(settings, name)
    if target.receives_copies and isinstance(target, ChunkTarget):
        pass
    if isinstance(target, SnapshotTarget):
        pool = targets.snapshotted(settings, name).pool
    if mode == "directory listing":  # a word, not a kind
        pass
    return f"{target.noun} {target.kind}", "s3", OrphanScan
'''


def test_every_way_of_asking_the_kind_is_found_and_nothing_else(tmp_path: Path) -> None:
    for package in SEAM:
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    for module, cls, kind in (("rbd_pool", "RbdPoolTarget", "rbd"),
                              ("object_store", "ObjectStoreTarget", "s3"),
                              ("directory", "DirectoryTarget", "directory")):
        (tmp_path / "services/targets" / f"{module}.py").write_text(
            f"class {cls}:\n    kind = {kind!r}\n")
    (tmp_path / "worker/targets/rbd_pool.py").write_text("class RbdPoolPath:\n    pass\n")
    (tmp_path / "worker/targets/base.py").write_text("class DataPath:\n    pass\n")
    (tmp_path / "services/planted.py").write_text(PLANTED)
    (tmp_path / "services/lawful.py").write_text(LAWFUL)
    # The seam itself may branch on its own kinds.
    (tmp_path / "services/targets/__init__.py").write_text(
        "from services.targets import rbd_pool\nKIND = rbd_pool.RbdPoolTarget.kind == 'rbd'\n")

    seam = seam_of(tmp_path, ["rbd", "s3", "directory"])

    assert seam.modules == {"services.targets.rbd_pool", "services.targets.object_store",
                            "services.targets.directory", "worker.targets.rbd_pool"}
    assert listed(findings(tmp_path, seam)) == [
        "services/planted.py:1: imports services.targets.directory",
        "services/planted.py:3: imports services.targets.object_store",
        "services/planted.py:3: imports services.targets.rbd_pool",
        "services/planted.py:4: imports services.targets.rbd_pool",
        "services/planted.py:5: imports worker.targets.rbd_pool",
        "services/planted.py:9: compares with the kind name 's3'",
        "services/planted.py:11: compares with the kind name 'directory'",
        "services/planted.py:11: compares with the kind name 'rbd'",
        "services/planted.py:13: tests the kind's class ObjectStoreTarget",
        "services/planted.py:15: compares with the kind's class RbdPoolTarget",
        "services/planted.py:18: matches the kind name 's3'",
        "services/planted.py:21: matches the kind's class RbdPoolTarget",
        "services/planted.py:23: reaches into services.targets.rbd_pool",
    ]
