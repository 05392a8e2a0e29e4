"""File-level restore end to end (issue 34), on every kind of target the stacks configure:
an ext4 filesystem made by the real mke2fs from a tree of files (an odd size, a sparse file,
a symlink, nested directories, an empty file, a name beyond ASCII), written into an RBD
volume and backed up; then, through the public API and the stack's file service, every
route a tenant has: the partitions, listings page by page, stat, every file's bytes against
the tree's (sha256), ranges, tar and zip archives read back, search. Files changed and
backed up again: the new restore point holds the new bytes, the old one still the old;
a file's versions across both. Another project reads nothing (404 on every route), and an
encrypted or unreadable volume answers 422 with its reason.

Every other filesystem and partition table, made by the real tools (tests/support/fs_images.py)
and backed up once: a GPT disk of XFS, NTFS, FAT32 and Btrfs partitions and an MBR disk (an
ext4 primary, a FAT32 logical partition) on the RBD target, a whole-disk XFS on the object
target; in each filesystem, listings, stat, downloads, a tar archive, search and versions
against the tool's source tree (sha256). The reader is the target's, the parser the
filesystem's: the other kinds on one target are enough, the object target gets one."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import struct
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import rados
import rbd

from services import targets
from tests.support import ceph, fs_images
from tests.support.ceph import MiB
from tests.support.flows import backup, restore_point
from tests.support.fs_images import Image
from tests.support.stack import HEADERS, Stack
from worker.files.parser.paths import display_name

pytestmark = pytest.mark.ceph

KINDS = ("local", "s3", "dir")
"""One target of each kind every stack configures: rbd, s3, directory."""
IMAGE_BYTES = 16 * MiB
"""The filesystem's size, and the volume's: room for the tree, little for memstore."""
OTHER_PROJECT = {"X-Project-Id": "project-files-stranger", "X-Roles": "admin"}
"""Another project's administrator: administers that project only."""
ODD = MiB + 7


def _tree(root: Path) -> None:
    """The first version of the tenant's files."""
    rng = ceph._Random(3401)
    (root / "etc" / "nginx").mkdir(parents=True)
    (root / "etc" / "nginx" / "nginx.conf").write_text("worker_processes 1;\n")
    (root / "deep" / "a" / "b" / "c").mkdir(parents=True)
    (root / "deep" / "a" / "b" / "c" / "note.txt").write_text("at the bottom\n")
    (root / "hello.txt").write_text("hello, world\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "résumé.txt").write_text("beyond ASCII\n")
    (root / "odd.bin").write_bytes(rng.bytes(ODD))
    with (root / "sparse.img").open("wb") as sparse:  # data, a 3 MiB hole, data
        sparse.write(rng.bytes(4096))
        sparse.seek(3 * MiB + 4096)
        sparse.write(rng.bytes(5000))
    (root / "link").symlink_to("odd.bin")


def _change(root: Path) -> None:
    """What the tenant did between the two backups."""
    (root / "etc" / "nginx" / "nginx.conf").write_text("worker_processes 4;\nevents {}\n")
    (root / "hello.txt").unlink()
    (root / "new.txt").write_text("made after the first backup\n")


def _mke2fs(tree: Path, image: Path) -> Path:
    """An ext4 filesystem holding `tree`, made rootless by the real tool."""
    tool = shutil.which("mke2fs", path=f"/usr/sbin:/sbin:{os.environ.get('PATH', '')}")
    assert tool is not None, "mke2fs (Debian's e2fsprogs) is not installed"
    image.unlink(missing_ok=True)
    subprocess.run([tool, "-q", "-F", "-t", "ext4", "-L", "tenant-data", "-d", str(tree),
                    str(image), f"{IMAGE_BYTES // 1024}k"], check=True, capture_output=True)
    assert image.stat().st_size == IMAGE_BYTES
    return image


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files_of(root: Path) -> dict[str, bytes]:
    """Every regular file under `root`: its absolute path in the filesystem -> its bytes."""
    return {"/" + str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def _configured(stack: Stack, target: str) -> str:
    if targets.find(stack.settings, target) is None:
        pytest.fail(f"the stack has no target {target!r}: the object target needs "
                    "the local RGW (make up RGW=1)")
    return target


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest, stack: Stack) -> str:
    return _configured(stack, str(request.param))


@pytest.fixture
def files_service(stack: Stack) -> None:
    if not stack.settings.files_url:
        pytest.fail("the stack runs no file service: tests/support/stack.py starts "
                    "cairn-files beside the worker, with CAIRN_FILES_URL and "
                    "CAIRN_FILES_TOKEN in service_env")


@pytest.fixture
def source(volumes_pool: rados.Ioctx, images: list[str]) -> str:
    name = ceph.unique_name("files")
    images.append(name)
    rbd.RBD().create(volumes_pool, name, IMAGE_BYTES)
    return name


class Files:
    """The public file routes of one restore point, as a tenant calls them."""

    def __init__(self, stack: Stack, rp_id: str, headers: dict[str, str] | None = None,
                 partition: int | None = None) -> None:
        self.stack, self.base = stack, f"/v1/restore-points/{rp_id}"
        self.headers = headers or HEADERS
        self.partition = partition
        """The partition every call reads (`?partition=`); None: the first readable."""

    def _in(self) -> list[tuple[str, Any]]:
        return [] if self.partition is None else [("partition", self.partition)]

    def get(self, what: str, params: dict[str, Any] | None = None,
            extra: dict[str, str] | None = None) -> Any:
        return self.stack.client.get(self.base + what,
                                     params=[*self._in(), *(params or {}).items()],
                                     headers={**self.headers, **(extra or {})})

    def ok(self, what: str, **params: Any) -> Any:
        response = self.get(what, params)
        assert response.status_code == 200, (what, params, response.text)
        return response

    def listing(self, path: str, limit: int = 1000) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        marker = None
        while True:
            params: dict[str, Any] = {"path": path, "limit": limit}
            if marker is not None:
                params["marker"] = marker
            page = self.ok("/files", **params).json()
            assert page["path"] == path
            entries += page["entries"]
            marker = page["next_marker"]
            if marker is None:
                return entries

    def content(self, path: str) -> bytes:
        response = self.ok("/files/content", path=path)
        assert int(response.headers["content-length"]) == len(response.content)
        name = path.rsplit("/", 1)[-1]
        assert f"filename*=UTF-8''{quote(name)}" in response.headers["content-disposition"]
        return bytes(response.content)

    def archive(self, paths: list[str], kind: str) -> bytes:
        response = self.stack.client.get(self.base + "/files/archive",
                                         params=[("path", p) for p in paths] + [
                                             ("format", kind), *self._in()],
                                         headers=self.headers)
        assert response.status_code == 200, response.text
        return bytes(response.content)


def _back_up(stack: Stack, volume: str, target: str) -> dict[str, Any]:
    rp = restore_point(stack, backup(stack, volume, target=target)["restore_point_id"])
    assert (rp["target"], rp["status"]) == (target, "available"), rp
    return rp


def _versions(stack: Stack, volume_id: str, headers: dict[str, str], **params: Any) -> Any:
    return stack.client.get(f"/v1/volumes/{volume_id}/file-versions", params=params,
                            headers=headers)


def _every_file_reads_as_the_tree(files: Files, tree: Path) -> None:
    expected = _files_of(tree)
    for path, data in expected.items():
        got = files.content(path)
        assert (len(got), _sha(got)) == (len(data), _sha(data)), path


def _archives_hold_the_tree(files: Files, tree: Path) -> None:
    expected = _files_of(tree)
    wanted = ["/etc", "/odd.bin", "/sparse.img", "/link"]
    with tarfile.open(fileobj=io.BytesIO(files.archive(wanted, "tar"))) as tar:
        members = tar.getmembers()
        for member in members:
            assert not member.name.startswith("/")
            assert ".." not in member.name.split("/")
        held = {m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in members if m.isfile()}
        links = {m.name: m.linkname for m in members if m.issym()}
    assert {f"/{n}": _sha(d) for n, d in held.items()} == {
        p: _sha(d) for p, d in expected.items()
        if p.startswith("/etc/") or p in ("/odd.bin", "/sparse.img")}
    assert links == {"link": "odd.bin"}
    with zipfile.ZipFile(io.BytesIO(files.archive(["/deep", "/hello.txt", "/link"],
                                                  "zip"))) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        assert not [n for n in names if n.startswith("/") or ".." in n.split("/")]
        zipped = {f"/{n}": _sha(archive.read(n)) for n in names}
    # Symlinks are left out of a zip.
    assert zipped == {p: _sha(d) for p, d in expected.items()
                      if p.startswith("/deep/") or p == "/hello.txt"}


def test_a_tenant_reads_every_file_of_a_restore_point_and_of_the_next(
        stack: Stack, target: str, files_service: None, source: str,
        volumes_pool: rados.Ioctx, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    _tree(tree)
    ceph.write_file(volumes_pool, source, _mke2fs(tree, tmp_path / "fs.img"))
    first = _back_up(stack, source, target)
    old = _files_of(tree)
    files = Files(stack, first["id"])

    [partition] = files.ok("/partitions").json()["partitions"]
    assert (partition["scheme"], partition["filesystem"], partition["label"],
            partition["readable"]) == ("disk", "ext4", "tenant-data", True), partition

    root = files.listing("/")
    names = [e["name"] for e in root]
    assert names == sorted(names, key=lambda n: n.encode())
    assert set(names) == {"deep", "empty.txt", "etc", "hello.txt", "link", "lost+found",
                          "odd.bin", "résumé.txt", "sparse.img"}
    assert files.listing("/", limit=2) == root  # page by page, the same
    by_name = {e["name"]: e for e in root}
    assert (by_name["odd.bin"]["type"], by_name["odd.bin"]["size"]) == ("file", ODD)
    assert by_name["etc"]["type"] == "dir"
    assert (by_name["link"]["type"], by_name["link"]["target"]) == ("symlink", "odd.bin")
    assert [e["name"] for e in files.listing("/deep/a/b/c")] == ["note.txt"]

    stat = files.ok("/files/stat", path="/sparse.img").json()
    assert (stat["path"], stat["type"], stat["size"]) == ("/sparse.img", "file",
                                                          3 * MiB + 4096 + 5000)
    _every_file_reads_as_the_tree(files, tree)

    # Ranges: the last bytes of the odd file, a suffix, and beyond its end.
    data = old["/odd.bin"]
    part = files.get("/files/content", {"path": "/odd.bin"},
                     {"Range": f"bytes={MiB - 5}-{MiB + 6}"})
    assert part.status_code == 206, part.text
    assert part.content == data[MiB - 5:]
    assert part.headers["content-range"] == f"bytes {MiB - 5}-{MiB + 6}/{ODD}"
    suffix = files.get("/files/content", {"path": "/odd.bin"}, {"Range": "bytes=-7"})
    assert (suffix.status_code, suffix.content) == (206, data[-7:])
    beyond = files.get("/files/content", {"path": "/odd.bin"}, {"Range": f"bytes={ODD}-"})
    assert beyond.status_code == 416, beyond.text
    etag = files.get("/files/content", {"path": "/odd.bin"}).headers["etag"]
    resumed = files.get("/files/content", {"path": "/odd.bin"},
                        {"Range": "bytes=10-19", "If-Range": etag})
    assert (resumed.status_code, resumed.content) == (206, data[10:20])

    _archives_hold_the_tree(files, tree)

    found = files.ok("/files/search", pattern="*.conf").json()
    assert [e["path"] for e in found["entries"]] == ["/etc/nginx/nginx.conf"]
    assert not found["truncated"]
    deep = files.ok("/files/search", pattern="note.*", path="/deep").json()
    assert [e["path"] for e in deep["entries"]] == ["/deep/a/b/c/note.txt"]

    missing = files.get("/files/stat", {"path": "/no/such/file"})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "path_not_found")
    directory = files.get("/files/content", {"path": "/etc"})
    assert (directory.status_code, directory.json()["error"]["code"]) == (
        422, "is_a_directory")

    # The tenant changes files; the next backup is an incremental.
    _change(tree)
    ceph.write_file(volumes_pool, source, _mke2fs(tree, tmp_path / "fs.img"))
    second = _back_up(stack, source, target)
    newer = Files(stack, second["id"])
    _every_file_reads_as_the_tree(newer, tree)
    gone = newer.get("/files/stat", {"path": "/hello.txt"})
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "path_not_found")
    # The first restore point still holds the first bytes.
    assert files.content("/etc/nginx/nginx.conf") == old["/etc/nginx/nginx.conf"]
    assert files.content("/hello.txt") == old["/hello.txt"]

    versions = _versions(stack, first["volume_id"], HEADERS, path="/etc/nginx/nginx.conf")
    assert versions.status_code == 200, versions.text
    assert [(v["restore_point_id"], v["present"], v["type"], v["size"], v["sha256"])
            for v in versions.json()["versions"]] == [
        (second["id"], True, "file", len(_files_of(tree)["/etc/nginx/nginx.conf"]),
         _sha(_files_of(tree)["/etc/nginx/nginx.conf"])),
        (first["id"], True, "file", len(old["/etc/nginx/nginx.conf"]),
         _sha(old["/etc/nginx/nginx.conf"]))]
    hello = _versions(stack, first["volume_id"], HEADERS, path="/hello.txt",
                      limit=1).json()["versions"]
    assert [(v["restore_point_id"], v["present"]) for v in hello] == [(second["id"], False)]

    # Another project reads nothing of it, on any route: 404, as if it did not exist.
    stranger = Files(stack, first["id"], OTHER_PROJECT)
    routes: list[tuple[str, dict[str, Any]]] = [("/partitions", {}), ("/files", {"path": "/"}),
                         ("/files/stat", {"path": "/odd.bin"}),
                         ("/files/content", {"path": "/odd.bin"}),
                         ("/files/archive", {"path": "/etc"}),
                         ("/files/search", {"pattern": "*"})]
    for what, params in routes:
        refused = stranger.get(what, params)
        assert (refused.status_code, refused.json()["error"]["code"]) == (
            404, "restore_point_not_found"), what
    refused = _versions(stack, first["volume_id"], OTHER_PROJECT, path="/hello.txt")
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "volume_not_found")


GPT_KINDS = ("xfs", "ntfs", "fat32", "btrfs")
"""The GPT disk's partitions, 1 to 4: every filesystem but ext4 (the whole-disk test's)."""
MBR_KINDS = ("ext4", "fat32")
"""The MBR disk's: a primary partition (1), a logical one in an extended partition (5)."""
BIG = MiB + 3
"""The source tree's big file here: over the object target's 1 MiB chunks, and little data
for the memstore OSDs (seven filesystems of the tree)."""
LABELS = {"ext4": "cairn-ext4", "xfs": "cairn-xfs", "ntfs": "cairn-ntfs", "fat32": "CAIRNFAT",
          "btrfs": "cairn-btrfs"}


def _shown(path: str) -> str:
    """A tree's path as listings show it (a name that is not UTF-8 escaped: docs/files.md)."""
    return "/".join(display_name(part) for part in path.split("/"))


def _volume_of(io_: rados.Ioctx, images: list[str], image: Path) -> str:
    """A new volume holding `image`, of its size exactly (a GPT's backup header is in the
    disk's last sectors)."""
    name = ceph.unique_name("files")
    images.append(name)
    rbd.RBD().create(io_, name, image.stat().st_size)
    ceph.write_file(io_, name, image)
    return name


def _disk_bytes(members: list[Image]) -> int:
    """Room for the members, their alignment, the tables and EBRs between them."""
    return sum(member.path.stat().st_size for member in members) + 8 * MiB


def _reads_as_its_image(files: Files, image: Image, rp: dict[str, Any]) -> None:
    """One filesystem of a restore point, through every file route, holds what the tool
    made it from: the names of `/` and of a directory paged through, each file's type, size
    and bytes (sha256) downloaded, every file, directory and symlink in a tar archive of
    `/`, a search by pattern, and a file's version in the restore point."""
    tree, kind = image.tree, image.filesystem
    paths = [*tree.files, *tree.dirs, *tree.symlinks]
    root = {e["name"]: e for e in files.listing("/")}
    # ext's lost+found is the filesystem's own: every other name is the tree's.
    assert set(root) - {"lost+found"} == {_shown(p).split("/")[1] for p in paths}, kind
    for path, target in tree.symlinks.items():  # the tree's one symlink is in /
        assert (root[path[1:]]["type"], root[path[1:]]["target"]) == ("symlink", target)
    if "/many" in tree.dirs:
        assert [e["name"] for e in files.listing("/many", limit=10)] == sorted(
            p.rsplit("/", 1)[1] for p in tree.files if p.startswith("/many/")), kind

    for path, sha in tree.files.items():
        if path.startswith("/many/"):  # in the archive below: one request, not 25
            continue
        stat = files.ok("/files/stat", path=_shown(path)).json()
        assert (stat["type"], stat["size"]) == ("file", tree.sizes[path]), (kind, path)
        data = files.content(_shown(path))
        assert (len(data), _sha(data)) == (tree.sizes[path], sha), (kind, path)

    with tarfile.open(fileobj=io.BytesIO(files.archive(["/"], "tar"))) as tar:
        members = tar.getmembers()
        held = {"/" + m.name: _sha(tar.extractfile(m).read())  # type: ignore[union-attr]
                for m in members if m.isfile()}
        dirs = {"/" + m.name for m in members if m.isdir()}
        links = {"/" + m.name: m.linkname for m in members if m.issym()}
    assert held == {_shown(p): sha for p, sha in tree.files.items()}, kind
    assert dirs - {"/lost+found"} == {_shown(p) for p in tree.dirs}, kind
    assert links == tree.symlinks, kind

    found = files.ok("/files/search", pattern="*.txt", limit=1000).json()
    assert {e["path"] for e in found["entries"]} == {
        _shown(p) for p in tree.files if p.endswith(".txt")}, kind
    assert not found["truncated"]

    versions = _versions(files.stack, rp["volume_id"], HEADERS, path="/hello.txt",
                         **({} if files.partition is None else {"partition": files.partition}))
    assert versions.status_code == 200, versions.text
    assert [(v["restore_point_id"], v["present"], v["type"], v["size"], v["sha256"])
            for v in versions.json()["versions"]] == [
        (rp["id"], True, "file", tree.sizes["/hello.txt"], tree.files["/hello.txt"])], kind


def test_every_filesystem_in_gpt_and_mbr_partitions_reads_as_its_source(
        stack: Stack, files_service: None, volumes_pool: rados.Ioctx, images: list[str],
        tmp_path: Path) -> None:
    tree = fs_images.source_tree(tmp_path / "src", big=BIG)
    made = {"ext4": fs_images.ext4_image(tmp_path / "ext4.img", tree),
            "xfs": fs_images.xfs_image(tmp_path / "xfs.img", tree),
            "ntfs": fs_images.ntfs_image(tmp_path / "ntfs.img", tree),
            "fat32": fs_images.fat32_image(tmp_path / "fat32.img", tree),
            "btrfs": fs_images.btrfs_image(tmp_path / "btrfs.img", tree)}
    gpt_members = [made[kind] for kind in GPT_KINDS]
    mbr_members = [made[kind] for kind in MBR_KINDS]
    disks = [
        ("gpt", fs_images.gpt_disk(tmp_path / "gpt.img", gpt_members,
                                   size=_disk_bytes(gpt_members)), [1, 2, 3, 4], GPT_KINDS),
        ("mbr", fs_images.mbr_disk(tmp_path / "mbr.img", mbr_members,
                                   size=_disk_bytes(mbr_members)), [1, 5], MBR_KINDS)]
    for scheme, disk, indexes, kinds in disks:
        rp = _back_up(stack, _volume_of(volumes_pool, images, disk.path), "local")
        listed = Files(stack, rp["id"]).ok("/partitions").json()["partitions"]
        assert [(p["index"], p["scheme"], p["offset"], p["size"], p["filesystem"],
                 p["label"], p["name"], p["readable"]) for p in listed] == [
            (index, scheme, offset, size, kind, LABELS[kind],
             f"part {index}" if scheme == "gpt" else None, True)
            for index, (offset, size, kind) in zip(indexes, disk.partitions, strict=True)]
        for index, kind in zip(indexes, kinds, strict=True):
            _reads_as_its_image(Files(stack, rp["id"], partition=index), made[kind], rp)


def test_a_whole_disk_xfs_reads_as_its_source_from_the_object_target(
        stack: Stack, files_service: None, volumes_pool: rados.Ioctx, images: list[str],
        tmp_path: Path) -> None:
    tree = fs_images.source_tree(tmp_path / "src", big=BIG)
    xfs = fs_images.xfs_image(tmp_path / "xfs.img", tree)
    rp = _back_up(stack, _volume_of(volumes_pool, images, xfs.path),
                  _configured(stack, "s3"))
    files = Files(stack, rp["id"])  # no partition: the first readable, the disk's own
    [partition] = files.ok("/partitions").json()["partitions"]
    assert (partition["index"], partition["scheme"], partition["filesystem"],
            partition["label"], partition["readable"]) == (1, "disk", "xfs", "cairn-xfs",
                                                            True), partition
    _reads_as_its_image(files, xfs, rp)
    with zipfile.ZipFile(io.BytesIO(files.archive(["/docs", "/many"], "zip"))) as archive:
        zipped = {"/" + n: _sha(archive.read(n)) for n in archive.namelist()
                  if not n.endswith("/")}
    assert zipped == {p: sha for p, sha in xfs.tree.files.items()
                      if p.startswith(("/docs/", "/many/"))}


def _luks_header() -> bytes:
    """The first sector of a LUKS1 volume (cryptsetup's on-disk format): its magic, version,
    cipher, mode, hash, payload offset, key size; key slots disabled."""
    header = bytearray(4096)
    struct.pack_into(">6sH32s32s32sII", header, 0, b"LUKS\xba\xbe", 1, b"aes",
                     b"xts-plain64", b"sha256", 4096, 64)
    for slot in range(8):
        struct.pack_into(">II", header, 208 + slot * 48, 0x0000DEAD, 1000)
    return bytes(header)


@pytest.mark.parametrize(("content", "code", "reason"), [
    ("luks", "files_encrypted", "encrypted"),
    ("garbage", "files_unreadable", ""),
])
def test_a_volume_without_a_readable_filesystem_answers_422_with_its_reason(
        stack: Stack, files_service: None, source: str, volumes_pool: rados.Ioctx,
        content: str, code: str, reason: str) -> None:
    data = (_luks_header() + ceph._Random(3402).bytes(2 * MiB) if content == "luks"
            else ceph._Random(3403).bytes(2 * MiB))
    with rbd.Image(volumes_pool, source) as image:
        image.write(data, 0)
    rp = _back_up(stack, source, "local")
    files = Files(stack, rp["id"])
    listing = files.get("/files", {"path": "/"})
    assert listing.status_code == 422, listing.text
    error = listing.json()["error"]
    assert error["code"] == code
    assert reason in error["message"]
    partitions = files.get("/partitions")
    if partitions.status_code == 200:  # what is there, each unreadable with its reason
        found = partitions.json()["partitions"]
        assert all(not p["readable"] and p["reason"] for p in found), found
        assert all(reason in p["reason"] for p in found), found
    else:
        assert (partitions.status_code, partitions.json()["error"]["code"]) == (422, code)
