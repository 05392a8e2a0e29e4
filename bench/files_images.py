"""The filesystems `bench/files.py` reads back through Cairn, made rootless with the real
tools and no Ceph: a generated tree of small files in nested directories plus one big file
of incompressible data, written into sparse image files by `mke2fs -d` (ext4) and
`mkfs.xfs -p protofile` (XFS); where a file's bytes lie in an image (`debugfs`,
`xfs_db`), checked by reading them back; and a small ext4 image whose one file changes
now and then, step by step (`debugfs -w`), for the versions across restore points."""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
FILES_PER_DIR = 50
DIRS_PER_TOP = 20
BIG = "/big.bin"
LABEL = "cairn-bench"


@dataclass
class Tree:
    """A generated tree on the local disk and what every file in it holds."""

    root: Path
    sha256: dict[str, str] = field(default_factory=dict)
    """Absolute path in the filesystem ("/d000/s00/f0000.txt") -> sha256 of its bytes."""
    sizes: dict[str, int] = field(default_factory=dict)
    top: list[str] = field(default_factory=list)
    """The names `/` holds (lost+found aside)."""
    deepest: str = ""
    """The last small file, three levels down: what "time to first file" fetches."""

    @property
    def big_size(self) -> int:
        return self.sizes[BIG]

    @property
    def data_bytes(self) -> int:
        return sum(self.sizes.values())


def small_file(seed: int, path: str) -> bytes:
    """64 B to 4 KiB of hex text, the same for the same path: compresses about 2:1."""
    head = hashlib.sha256(f"{seed}:{path}".encode()).digest()
    size = 64 + int.from_bytes(head[:2], "little") % (4 * KiB - 64)
    return hashlib.shake_256(head).hexdigest((size + 1) // 2).encode()[:size]


def make_tree(root: Path, files: int, big_bytes: int, *, seed: int = 34,
              filler_bytes: int = 0) -> Tree:
    """`files` small files as /dNNN/sNN/fNNNN.txt (50 a directory, 20 directories under
    each top one), /hello.txt, /big.bin: `big_bytes` of random data, and `filler_bytes` of
    random data in /filler/partNNN.bin (256 MiB each) that the bench never downloads."""
    tree = Tree(root)
    root.mkdir(parents=True, exist_ok=True)
    leaves = max(1, math.ceil(files / FILES_PER_DIR))
    made = 0
    for leaf in range(leaves):
        top, sub = f"d{leaf // DIRS_PER_TOP:03d}", f"s{leaf % DIRS_PER_TOP:02d}"
        if sub == "s00":
            tree.top.append(top)
        directory = root / top / sub
        directory.mkdir(parents=True, exist_ok=True)
        for _ in range(min(FILES_PER_DIR, files - made)):
            path = f"/{top}/{sub}/f{made:05d}.txt"
            _write(tree, path, small_file(seed, path))
            tree.deepest = path
            made += 1
    _write(tree, "/hello.txt", b"hello from a cairn restore point\n")
    tree.top.append("hello.txt")
    digest = hashlib.sha256()
    with (root / BIG.lstrip("/")).open("wb") as out:
        left = big_bytes
        while left:
            piece = os.urandom(min(16 * MiB, left))
            digest.update(piece)
            out.write(piece)
            left -= len(piece)
    tree.sha256[BIG], tree.sizes[BIG] = digest.hexdigest(), big_bytes
    tree.top.append(BIG.lstrip("/"))
    if filler_bytes:
        (root / "filler").mkdir()
        tree.top.append("filler")
        for part in range(math.ceil(filler_bytes / FILLER_PART)):
            size = min(FILLER_PART, filler_bytes - part * FILLER_PART)
            _write(tree, f"/filler/part{part:03d}.bin", os.urandom(size))
    return tree


FILLER_PART = 256 * MiB


def _write(tree: Tree, path: str, data: bytes) -> None:
    (tree.root / path.lstrip("/")).write_bytes(data)
    tree.sha256[path], tree.sizes[path] = hashlib.sha256(data).hexdigest(), len(data)


def protofile(tree: Tree, out: Path) -> Path:
    """mkfs.xfs's description of the tree (xfs_mkfs(8), "-p protofile"): every directory
    and file, the files' bytes taken from the tree. Names have no spaces (make_tree's)."""
    lines = ["/dev/null", "0 0", "d--755 0 0"]

    def walk(directory: Path) -> None:
        for entry in sorted(directory.iterdir()):
            if entry.is_dir():
                lines.append(f"{entry.name} d--755 0 0")
                walk(entry)
                lines.append("$")
            else:
                lines.append(f"{entry.name} ---644 0 0 {entry.resolve()}")

    walk(tree.root)
    lines.append("$")
    out.write_text("\n".join(lines) + "\n")
    return out


def run(*argv: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} ... exited {done.returncode}: "
                           f"{done.stderr.strip()[-2000:]}")
    return done.stdout


def make_ext4(tree: Tree, image: Path, size: int) -> None:
    """A sparse image file of `size` bytes holding the tree. Lazy inode tables and journal,
    no discard: mke2fs writes only what it fills, so the image stays sparse."""
    image.unlink(missing_ok=True)
    os.truncate(_touch(image), size)
    run("mke2fs", "-q", "-F", "-t", "ext4", "-L", LABEL,
        "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", "-d", str(tree.root),
        str(image))


def make_xfs(tree: Tree, image: Path, size: int, proto: Path) -> None:
    """A sparse image file of `size` bytes holding the tree. mkfs.xfs (6.1) gives a
    protofile's file one extent, in one allocation group: a file larger than an AG's free
    space comes out cut short (its end reads as zeros; `file_runs` finds the gap). So the
    AGs are made at least four times the largest file: 4 of 25 GiB at 100 GiB, as mkfs.xfs
    would anyway; 2 (its least) at the dry run's sizes."""
    image.unlink(missing_ok=True)
    os.truncate(_touch(image), size)
    agcount = max(2, min(4, size // (4 * max(tree.sizes.values()))))
    run("mkfs.xfs", "-q", "-f", "-K", "-L", LABEL, "-d", f"agcount={agcount}",
        "-p", str(protofile(tree, proto)), str(image))


def _touch(path: Path) -> Path:
    path.touch()
    return path


def allocated(path: Path) -> int:
    """Bytes the local filesystem holds for a (sparse) file."""
    return path.stat().st_blocks * 512


Runs = list[tuple[int, int]]
"""Where a file's bytes lie in its filesystem's image: (byte offset, length) in file order,
the last run cut at the file's size."""


def file_runs(kind: str, image: Path, path: str, size: int) -> Runs:
    blocks = _ext4_blocks(image, path) if kind == "ext4" else _xfs_blocks(image, path)
    runs: Runs = []
    left = size
    for offset, length in blocks:
        if left <= 0:
            break
        take = min(length, left)
        if runs and runs[-1][0] + runs[-1][1] == offset:
            runs[-1] = (runs[-1][0], runs[-1][1] + take)
        else:
            runs.append((offset, take))
        left -= take
    if left > 0:
        raise RuntimeError(f"{path} in {image.name}: {left} of its {size} bytes are in no "
                           "extent (for XFS: larger than an allocation group's free space?)")
    return runs


def _ext4_blocks(image: Path, path: str) -> Runs:
    """The file's data blocks from debugfs's `stat` (its EXTENTS list): not `blocks`, which
    also names the extent tree's own blocks (ETB) of a file in more than four extents."""
    block = int(re.search(r"Block size:\s+(\d+)", run("dumpe2fs", "-h", str(image)))[1])
    listing = run("debugfs", "-R", f"stat {path}", str(image)).split("EXTENTS:", 1)[1]
    extents = []
    for match in re.finditer(r"\((\d+)(?:-(\d+))?\):(\d+)(?:-(\d+))?", listing):
        first, last, start, end = match.groups()
        count = int(last or first) - int(first) + 1
        if int(end or start) - int(start) + 1 != count:
            raise RuntimeError(f"{path} in {image.name}: unreadable extent {match[0]}")
        extents.append((int(first), int(start) * block, count * block))
    extents.sort()
    return [(offset, length) for _, offset, length in extents]


def _xfs_blocks(image: Path, path: str) -> Runs:
    sb = run("xfs_db", "-r", "-c", "sb 0", "-c", "print agblocks blocksize", str(image))
    agblocks = int(re.search(r"agblocks = (\d+)", sb)[1])
    block = int(re.search(r"blocksize = (\d+)", sb)[1])
    bmap = run("xfs_db", "-r", "-c", f"path {path}", "-c", "bmap", str(image))
    extents = []
    for match in re.finditer(r"data offset (\d+) startblock \d+ \((\d+)/(\d+)\) count (\d+)",
                             bmap):
        file_block, ag, ag_block, count = (int(g) for g in match.groups())
        extents.append((file_block, (ag * agblocks + ag_block) * block, count * block))
    extents.sort()
    expected = 0
    for file_block, _, length in extents:
        if file_block * block != expected:
            raise RuntimeError(f"{path} in {image.name} has a hole at {expected}")
        expected += length
    return [(offset, length) for _, offset, length in extents]


def read_runs(image: Path, runs: Runs) -> Iterator[bytes]:
    with image.open("rb") as source:
        for offset, length in runs:
            for start in range(offset, offset + length, 16 * MiB):
                yield os.pread(source.fileno(), min(16 * MiB, offset + length - start), start)


def check_runs(image: Path, runs: Runs, sha256: str) -> None:
    """The runs hold the file: their bytes read from the image hash to the source's."""
    digest = hashlib.sha256()
    for piece in read_runs(image, runs):
        digest.update(piece)
    if digest.hexdigest() != sha256:
        raise RuntimeError(f"the runs found in {image.name} do not hold the file's bytes")


def dissect_check(kind: str, image: Path, tree: Tree) -> int:
    """Every file of the tree read back from the image by the parsers Cairn's file service
    uses (Dissect), compared by sha256; returns how many. For the dry run's small sizes."""
    from dissect.extfs import ExtFS
    from dissect.xfs import XFS

    with image.open("rb") as handle:
        fs = ExtFS(handle) if kind == "ext4" else XFS(handle)
        names = {n for n in fs.get("/").listdir() if n not in (".", "..", "lost+found")}
        if names != set(tree.top):
            raise RuntimeError(f"{kind}: / lists {sorted(names)}, the tree {sorted(tree.top)}")
        for path, sha in tree.sha256.items():
            digest = hashlib.sha256()
            with fs.get(path).open() as stream:
                while piece := stream.read(16 * MiB):
                    digest.update(piece)
            if digest.hexdigest() != sha:
                raise RuntimeError(f"{kind}: {path} reads back other bytes")
    return len(tree.sha256)


VERSIONED = "/etc/app.conf"


class VersionedImage:
    """A small ext4 image holding /etc/app.conf and a few other files; `step(n)` changes
    it to the n-th version in place (`debugfs -w`): new content every fifth step, absent at
    the middle step, otherwise untouched. `changes()` gives the 64 KiB pieces that differ
    from what it held at the last call: what to write into the volume before its next
    incremental backup."""

    PIECE = 64 * KiB

    def __init__(self, scratch: Path, size: int, versions: int, seed: int = 340) -> None:
        self.scratch, self.size, self.seed = scratch, size, seed
        self.absent_at = versions // 2 if versions >= 3 else -1
        self.image = scratch / "versions.img"
        self._source = scratch / "app.conf"
        # The volume starts as zeros: only what the image holds besides is written first.
        zeros = hashlib.blake2b(bytes(self.PIECE), digest_size=16).digest()
        self._digests = [zeros] * math.ceil(size / self.PIECE)
        tree = Tree(scratch / "versions-tree")
        (tree.root / "etc").mkdir(parents=True, exist_ok=True)
        (tree.root / "var").mkdir(exist_ok=True)
        _write(tree, "/etc/hostname", b"bench\n")
        _write(tree, "/var/notes.txt", small_file(seed, "/var/notes.txt"))
        _write(tree, VERSIONED, self.content(0))
        make_ext4(tree, self.image, size)

    def content(self, step: int) -> bytes:
        return (f"# app.conf, edition {step // 5}\n".encode()
                + small_file(self.seed + step // 5, VERSIONED))

    def expected(self, step: int) -> str | None:
        """sha256 of /etc/app.conf at step `step`, None where it is absent."""
        return None if step == self.absent_at else hashlib.sha256(self.content(step)).hexdigest()

    def step(self, n: int) -> None:
        if n == 0:
            return
        present_before = n - 1 != self.absent_at
        commands = ["cd /etc"]
        if n == self.absent_at or (n % 5 == 0 or not present_before):
            if present_before:
                commands.append("rm app.conf")
            if n != self.absent_at:
                self._source.write_bytes(self.content(n))
                commands.append(f"write {self._source} app.conf")
        if len(commands) == 1:
            return
        script = self.scratch / "debugfs.cmds"
        script.write_text("\n".join(commands) + "\n")
        done = subprocess.run(["debugfs", "-w", "-f", str(script), str(self.image)],
                              capture_output=True, text=True, check=False)
        # debugfs exits 0 whatever a command did; each failure is a line on stderr.
        complaints = [line for line in done.stderr.splitlines()
                      if line and not line.startswith("debugfs ")]
        if done.returncode != 0 or complaints:
            raise RuntimeError(f"debugfs at step {n}: {complaints or done.returncode}")

    def changes(self) -> list[tuple[int, bytes]]:
        changed = []
        with self.image.open("rb") as source:
            for index in range(len(self._digests)):
                piece = os.pread(source.fileno(), self.PIECE, index * self.PIECE)
                digest = hashlib.blake2b(piece, digest_size=16).digest()
                if digest != self._digests[index]:
                    self._digests[index] = digest
                    changed.append((index * self.PIECE, piece))
        return changed

    def read_back(self) -> str | None:
        """sha256 of /etc/app.conf as Dissect reads the image now (None: absent)."""
        from dissect.extfs import ExtFS
        from dissect.extfs.exceptions import FileNotFoundError as Missing

        with self.image.open("rb") as handle:
            try:
                return hashlib.sha256(ExtFS(handle).get(VERSIONED).open().read()).hexdigest()
            except Missing:
                return None
