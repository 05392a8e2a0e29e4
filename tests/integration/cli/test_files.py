"""`cairn restore-point files` end to end as a tenant runs it (credentials from a clouds.yaml,
the real Keystone, Cinder, Ceph and file service): a Cinder volume holding an ext4 made by
mke2fs from a source tree (tests/support/fs_images.py), backed up once; then a listing of
`/`, a file downloaded with -o and a directory as a tar (sha256 against the tree), the
file's versions, a search, and the errors a user meets: a path that does not exist, a
directory downloaded without --archive. One small volume, one backup: the other file
routes and filesystems are tests/integration/api/test_files.py's."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

from tests.integration.cli.test_cli import cairn, ok_json
from tests.support import ceph, fs_images
from tests.support.ceph import MiB
from tests.support.openstack import Cloud, OpenStackCairn, cinder_volume, image_of
from worker.files.parser.paths import display_name


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_tenant_lists_searches_and_downloads_files_with_the_cli(
        cloud: Cloud, os_cairn: OpenStackCairn, tmp_path: Path) -> None:
    tree = fs_images.source_tree(tmp_path / "src", big=MiB + 3)
    ext4 = fs_images.ext4_image(tmp_path / "ext4.img", tree)
    out = tmp_path / "out"
    out.mkdir()
    name = ceph.unique_name("cli-files")
    with cinder_volume(cloud["a-member"], name) as volume_id:
        with ceph.ioctx("ceph-a", "volumes") as io:
            ceph.write_file(io, image_of(volume_id), ext4.path)
        job = ok_json(cloud, "a-member", "backup", "create", name, "--wait")
        assert job["status"] == "succeeded", job
        rp = job["restore_point_id"]

        listed = ok_json(cloud, "a-member", "restore-point", "files", "ls", rp, "/", "--all")
        # A name that is not UTF-8 is shown escaped (docs/files.md).
        assert {e["name"] for e in listed["entries"]} - {"lost+found"} == {
            display_name(path.split("/")[1])
            for path in (*tree.files, *tree.dirs, *tree.symlinks)}
        assert listed["next_marker"] is None

        got = cairn(cloud, "a-member", "restore-point", "files", "get", rp, "/big.bin",
                    "-o", str(out / "big.bin"))
        assert got.returncode == 0, got.stderr
        assert _sha(out / "big.bin") == tree.files["/big.bin"]
        assert f"big.bin: {tree.sizes['/big.bin']} bytes" in got.stderr

        tarred = cairn(cloud, "a-member", "restore-point", "files", "get", rp, "/docs",
                       "--archive", "tar", "-o", str(out / "docs.tar"))
        assert tarred.returncode == 0, tarred.stderr
        with tarfile.open(out / "docs.tar") as tar:
            held = {"/" + m.name: hashlib.sha256(
                        tar.extractfile(m).read()).hexdigest()  # type: ignore[union-attr]
                    for m in tar.getmembers() if m.isfile()}
        assert held == {p: sha for p, sha in tree.files.items() if p.startswith("/docs/")}

        versions = ok_json(cloud, "a-member", "restore-point", "files", "versions",
                           "/hello.txt", "--volume", name)
        assert [(v["restore_point_id"], v["present"], v["size"], v["sha256"])
                for v in versions["versions"]] == [
            (rp, True, tree.sizes["/hello.txt"], tree.files["/hello.txt"])]

        found = ok_json(cloud, "a-member", "restore-point", "files", "search", rp,
                        "file-0?.txt", "--path", "/many")
        assert [e["path"] for e in found["entries"]] == [
            f"/many/file-0{i}.txt" for i in range(10)]
        assert not found["truncated"]

        missing = cairn(cloud, "a-member", "restore-point", "files", "get", rp,
                        "/no-such-file", "-o", str(out / "no-such-file"))
        assert missing.returncode == 1
        assert "cairn: /no-such-file does not exist" in missing.stderr
        directory = cairn(cloud, "a-member", "restore-point", "files", "get", rp, "/docs",
                          "-o", str(out / "docs"))
        assert directory.returncode == 1
        assert "/docs is a directory" in directory.stderr
        assert "add --archive tar or --archive zip" in directory.stderr
        # Neither failure left a file, nor a half one (the .part a download writes first).
        assert sorted(p.name for p in out.iterdir()) == ["big.bin", "docs.tar"]
