"""Real filesystem images for the file-level restore's tests (issue 34), made rootless by
the real tools from a source tree this module writes, with the sha256 of every file of that
tree to compare what the parser reads with.

    tree = source_tree(tmp / "src")         # the files, their sha256, their symlinks
    image = ext4_image(tmp / "ext4.img", tree)
    gpt = gpt_disk(tmp / "gpt.img", [ext4, fat32])   # Image with its partitions' offsets

Each image is a sparse file of 16-64 MiB. XFS refuses less than 300 MB unless it believes it
runs under fstests (TEST_DIR, TEST_DEV, QA_CHECK_FS set: xfsprogs' own escape for small test
filesystems). NTFS gets only the tree's top-level files: ntfscp copies a file into an
existing directory and nothing rootless makes one. FAT gets no symlinks. Tools: mke2fs,
mkfs.xfs, mkntfs + ntfscp (ntfs-3g), mkfs.fat + mmd/mcopy (mtools), mkfs.btrfs, sgdisk,
cryptsetup (a LUKS2 header on a plain file needs no root)."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1 << 20
SECTOR = 512

SPACED = "with space é ü.txt"
DEEP = "docs/deep/a/b/c/d/e/f/g/leaf.txt"
PAGED_FILES = 25
LATIN1 = b"caf\xe9.txt"  # "café.txt" in Latin-1: not UTF-8


@dataclass(frozen=True)
class Tree:
    root: Path
    files: dict[str, str]          # "/path" -> sha256 hex
    sizes: dict[str, int]
    dirs: frozenset[str]
    symlinks: dict[str, str]       # "/path" -> target

    def only(self, keep: set[str]) -> Tree:
        """The part of the tree an image kind holds (paths in `keep`)."""
        return Tree(self.root, {p: h for p, h in self.files.items() if p in keep},
                    {p: s for p, s in self.sizes.items() if p in keep},
                    frozenset(d for d in self.dirs if d in keep),
                    {p: t for p, t in self.symlinks.items() if p in keep})


@dataclass(frozen=True)
class Image:
    path: Path
    tree: Tree
    filesystem: str                            # "ext4", "xfs", ... or "" for a disk
    partitions: list[tuple[int, int, str]] = field(default_factory=list)
    # (offset, size, filesystem) of each partition of a disk image, in index order


def source_tree(root: Path, *, big: int = 5 * MiB + 3) -> Tree:
    """Nested directories, a deep path, a sparse file, a file of `big` bytes, an empty
    file, a symlink, a name with spaces and non-ASCII letters, a directory to page through.
    (The stack's tests write seven filesystems of it into memstore OSDs: they make `big`
    smaller.)"""
    rng = random.Random(34)
    root.mkdir(parents=True, exist_ok=True)
    contents: dict[str, bytes | None] = {
        "hello.txt": b"hello, file-level restore\n",
        "empty": b"",
        "big.bin": rng.randbytes(big),
        SPACED: "grüße\n".encode() * 100,
        "docs/readme.md": b"# readme\n" * 50,
        DEEP: b"deep leaf\n",
        "sparse.img": None,
    }
    for i in range(PAGED_FILES):
        contents[f"many/file-{i:02d}.txt"] = f"file {i}\n".encode() * (i + 1)
    for relative, data in contents.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if data is None:  # 3 MiB, data only in its second MiB: holes before and after
            with target.open("wb") as out:
                out.truncate(3 * MiB)
                out.seek(MiB)
                out.write(rng.randbytes(MiB))
        else:
            target.write_bytes(data)
    (root / "link-to-hello").symlink_to("hello.txt")
    (root / os.fsdecode(LATIN1)).write_bytes(b"a name that is not UTF-8\n")
    files, sizes, dirs, links = {}, {}, set(), {}
    for path in sorted(root.rglob("*")):
        name = "/" + path.relative_to(root).as_posix()
        if path.is_symlink():
            links[name] = os.readlink(path)
        elif path.is_dir():
            dirs.add(name)
        else:
            data = path.read_bytes()
            files[name] = hashlib.sha256(data).hexdigest()
            sizes[name] = len(data)
    return Tree(root, files, sizes, frozenset(dirs), links)


def _unicode(name: str) -> bool:
    """Whether a tree's name is valid UTF-8 (NTFS and FAT store UTF-16: no other name)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _run(*command: str | Path, env: dict[str, str] | None = None) -> None:
    subprocess.run([str(part) for part in command], check=True, capture_output=True,
                   env={**os.environ, **(env or {})})


def _blank(path: Path, size: int) -> None:
    path.unlink(missing_ok=True)
    with path.open("wb") as out:
        out.truncate(size)


def ext4_image(path: Path, tree: Tree, size: int = 24 * MiB) -> Image:
    _blank(path, size)
    _run("mke2fs", "-q", "-F", "-t", "ext4", "-L", "cairn-ext4", "-d", tree.root, path)
    return Image(path, tree, "ext4")


def xfs_image(path: Path, tree: Tree, size: int = 64 * MiB) -> Image:
    proto = path.with_suffix(".proto")
    lines = ["cairn", "0 0", "d--755 0 0"]
    _proto_dir(tree.root, lines, 1)
    lines.append("$")
    proto.write_bytes(os.fsencode("\n".join(lines) + "\n"))
    _blank(path, size)
    _run("mkfs.xfs", "-q", "-f", "-L", "cairn-xfs", "-p", proto, path,
         env={"TEST_DIR": "1", "TEST_DEV": "1", "QA_CHECK_FS": "1"})
    keep = {p for p in (*tree.files, *tree.dirs, *tree.symlinks) if " " not in p}
    return Image(path, tree.only(keep), "xfs")


def _proto_dir(directory: Path, lines: list[str], depth: int) -> None:
    # mkfs.xfs(8) protofile: "name type+mode uid gid [source]", split on white space: a
    # name with a space cannot be written (xfs_image leaves it out of the image's tree).
    indent = " " * depth
    for entry in sorted(directory.iterdir()):
        if " " in entry.name:
            continue
        if entry.is_symlink():
            lines.append(f"{indent}{entry.name} l--777 0 0 {os.readlink(entry)}")
        elif entry.is_dir():
            lines.append(f"{indent}{entry.name} d--755 0 0")
            _proto_dir(entry, lines, depth + 1)
            lines.append(f"{indent}$")
        else:
            lines.append(f"{indent}{entry.name} ---644 0 0 {entry}")


def ntfs_image(path: Path, tree: Tree, size: int = 24 * MiB) -> Image:
    _blank(path, size)
    _run("mkntfs", "-q", "-F", "-Q", "-L", "cairn-ntfs", path)
    keep = set()
    for name in sorted(tree.files):
        if name.count("/") == 1 and _unicode(name):
            _run("ntfscp", "-f", path, tree.root / name[1:], name[1:])
            keep.add(name)
    return Image(path, tree.only(keep), "ntfs")


def fat32_image(path: Path, tree: Tree, size: int = 48 * MiB) -> Image:
    _blank(path, size)
    _run("mkfs.fat", "-F", "32", "-n", "CAIRNFAT", path)
    for directory in sorted(tree.dirs):
        _run("mmd", "-i", path, f"::{directory}")
    keep = {name for name in tree.files if _unicode(name)}
    for name in sorted(keep):
        _run("mcopy", "-i", path, tree.root / name[1:], f"::{name}")
    return Image(path, tree.only(keep | set(tree.dirs)), "fat32")


def btrfs_image(path: Path, tree: Tree, size: int = 128 * MiB) -> Image:
    _blank(path, size)
    _run("mkfs.btrfs", "-q", "-f", "-L", "cairn-btrfs", "--rootdir", tree.root, path)
    return Image(path, tree, "btrfs")


def luks_image(path: Path, size: int = 16 * MiB) -> Image:
    _blank(path, size)
    if shutil.which("cryptsetup"):
        subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf",
                        "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", "-",
                        str(path)], input=b"not-a-secret", check=True, capture_output=True)
    else:  # the LUKS magic and version, what a reader recognises a LUKS volume by
        with path.open("r+b") as out:
            out.write(b"LUKS\xba\xbe\x00\x02")
    return Image(path, Tree(path.parent, {}, {}, frozenset(), {}), "")


def gpt_disk(path: Path, members: list[Image], size: int = 128 * MiB) -> Image:
    """A GPT disk (sgdisk) with one partition per member, each member's bytes copied in."""
    _blank(path, size)
    command: list[str | Path] = ["sgdisk"]
    for number, member in enumerate(members, 1):
        sectors = member.path.stat().st_size // SECTOR
        command += ["-n", f"{number}:0:+{sectors}", "-t", f"{number}:8300",
                    "-c", f"{number}:part {number}"]
    _run(*command, path)
    offsets = _gpt_offsets(path, len(members))
    return _fill(path, members, offsets)


def mbr_disk(path: Path, members: list[Image], size: int = 128 * MiB) -> Image:
    """An MBR disk: the first member a primary partition, the others logical partitions in
    an extended one (sgdisk makes the table as GPT and converts it, then the extended
    partition and its EBR chain are written by hand: sfdisk is not installed)."""
    _blank(path, size)
    first = members[0].path.stat().st_size // SECTOR
    _run("sgdisk", "-n", f"1:2048:+{first}", "-t", "1:8300", path)
    _run("sgdisk", "--gpttombr=1", path)
    extended_start = 2048 + first + 2048
    offsets = [2048 * SECTOR]
    with path.open("r+b") as disk:
        ebr = extended_start
        chain = []
        for i, member in enumerate(members[1:]):
            sectors = member.path.stat().st_size // SECTOR
            chain.append((ebr, ebr + 2048, sectors))
            offsets.append((ebr + 2048) * SECTOR)
            ebr = ebr + 2048 + sectors + (2048 if i < len(members) - 2 else 0)
        extended_end = chain[-1][1] + chain[-1][2]
        disk.seek(446 + 16)
        disk.write(_mbr_entry(0x05, extended_start, extended_end - extended_start))
        for i, (at, start, sectors) in enumerate(chain):
            entry = _mbr_entry(0x83, start - at, sectors)
            following = (_mbr_entry(0x05, chain[i + 1][0] - extended_start,
                                    chain[i + 1][1] + chain[i + 1][2] - chain[i + 1][0])
                         if i + 1 < len(chain) else bytes(16))
            disk.seek(at * SECTOR + 446)
            disk.write(entry + following + bytes(32) + b"\x55\xaa")
    return _fill(path, members, offsets)


def _mbr_entry(kind: int, start: int, sectors: int) -> bytes:
    return struct.pack("<B3sB3sII", 0, b"\xff\xff\xff", kind, b"\xff\xff\xff", start, sectors)


def _gpt_offsets(path: Path, count: int) -> list[int]:
    with path.open("rb") as disk:
        disk.seek(2 * SECTOR)
        table = disk.read(128 * count)
    return [struct.unpack_from("<Q", table, 128 * i + 32)[0] * SECTOR for i in range(count)]


def _fill(path: Path, members: list[Image], offsets: list[int]) -> Image:
    for member, offset in zip(members, offsets, strict=True):
        _run("dd", f"if={member.path}", f"of={path}", "bs=1M", f"seek={offset}",
             "oflag=seek_bytes", "conv=sparse,notrunc", "status=none")
    partitions = [(offset, member.path.stat().st_size, member.filesystem)
                  for member, offset in zip(members, offsets, strict=True)]
    return Image(path, members[0].tree, "", partitions)
