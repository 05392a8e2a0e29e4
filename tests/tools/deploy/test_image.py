"""The one image every component runs, built from Containerfile on this machine (buildah on
a debootstrap base, no registry), then run as the chart runs it: as uid 42424, it migrates a
database and every entry point starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.stack import REPO

TAG = "localhost/cairn:test"
ENV = {**os.environ, "STORAGE_DRIVER": "vfs", "BUILDAH_ISOLATION": "chroot"}
# Upper bounds only, far above a quiet machine's seconds: `make test` runs this tier beside
# the integration tier on CI's two loaded cores, where vfs copies every layer for each
# container and a cold interpreter in the chroot takes tens of seconds to start.
BUILDAH_SECONDS = 600
START_SECONDS = 240


def _buildah(*args: str, timeout: float = BUILDAH_SECONDS) -> str:
    done = subprocess.run(["buildah", *args], env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def image() -> str:
    assert shutil.which("buildah"), "buildah is missing: `make test` installs it"
    before = _tagged()
    done = subprocess.run(["bash", str(REPO / "deploy" / "image" / "build.sh"), TAG], env=ENV,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # A rebuild leaves no copy behind (about 1 GB each with vfs): what the tag named before
    # is gone.
    stored = [i.removeprefix("sha256:") for i in _buildah("images", "-q", "--no-trunc").split()]
    assert before is None or before == _tagged() or before not in stored, before
    return TAG


def _tagged() -> str | None:
    """The id of the image TAG names, None when there is none."""
    done = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                           "{{.FromImageID}}", TAG], env=ENV, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


@pytest.fixture
def container(image: str) -> Iterator[str]:
    name = _buildah("from", "--pull-never", image).strip()
    yield name
    _buildah("rm", name)


def _run(container: str, *command: str, timeout: float = BUILDAH_SECONDS
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", "run", "--user", "42424:42424", container, "--",
                           *command], env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_image_runs_as_the_chart_expects(image: str) -> None:
    config = json.loads(_buildah("inspect", "--type", "image", image))["OCIv1"]["config"]
    assert config["User"] == "42424"
    assert config["Cmd"][0] == "cairn-api"
    assert {"8787/tcp", "8790/tcp", "9101/tcp", "9102/tcp"} <= set(config["ExposedPorts"])


def test_every_entry_point_starts_and_migrations_run(container: str) -> None:
    migrated = _run(container, "sh", "-c",
                    "CAIRN_DATABASE_URL=sqlite:////tmp/cairn.db cairn-manage db upgrade")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "0009" in migrated.stdout + migrated.stderr
    for entry in ("cairn-api", "cairn-manage", "cairn"):
        shown = _run(container, entry, "--help")
        assert shown.returncode == 0, f"{entry}: {shown.stdout}{shown.stderr}"
    # Debian's librbd, seen by the venv's interpreter, and the worker's tasks importable.
    found = _run(container, "env", "CAIRN_ENVIRONMENT=development", "CAIRN_AUTH_STRATEGY=noauth",
                 "python", "-c", "import rbd, rados, worker.celery_app, services.scheduler.main, "
                 "worker.files.main; "
                 "print(rbd.RBD().version())")
    assert found.returncode == 0, found.stdout + found.stderr
    assert found.stdout.strip().startswith("(")


def test_the_image_fails_closed(image: str, container: str) -> None:
    """Its command (cairn-api on every address) and the other entry points, with nothing
    configured: each refuses to start and says what to set. noauth is refused outside an
    explicit development environment, and on every address even in one. Before, the image
    served noauth on 0.0.0.0, where `X-Roles: admin` was the cloud's administrator."""
    command = json.loads(_buildah("inspect", "--type", "image", image))["OCIv1"]["config"]["Cmd"]
    cases = [((), command, "CAIRN_AUTH_STRATEGY is not set"),
             ((), ["cairn-worker"], "CAIRN_AUTH_STRATEGY is not set"),
             ((), ["cairn-scheduler"], "CAIRN_AUTH_STRATEGY is not set"),
             ((), ["cairn-files"], "CAIRN_AUTH_STRATEGY is not set"),
             (("CAIRN_AUTH_STRATEGY=noauth", "CAIRN_ENVIRONMENT=development"),
              ["cairn-files"], "CAIRN_FILES_TOKEN is not set"),
             (("CAIRN_AUTH_STRATEGY=noauth",), command,
              "only with CAIRN_ENVIRONMENT=development set explicitly"),
             (("CAIRN_AUTH_STRATEGY=noauth", "CAIRN_ENVIRONMENT=development"), command,
              "--host 0.0.0.0 is not a loopback address")]
    for env, argv, refusal in cases:
        try:
            done = _run(container, "env", *env, *argv, timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{' '.join((*env, *argv))} still ran after {START_SECONDS} s:"
                                 " it started and served") from None
        assert done.returncode != 0, (env, argv, done.stdout + done.stderr)
        assert "refusing to start" in done.stderr, done.stderr
        assert refusal in done.stderr, done.stderr


def test_the_image_serves_the_portal(container: str) -> None:
    found = _run(container, "python", "-c",
                 "from services.settings import Settings; "
                 "d = Settings(database_url='sqlite://', auth_strategy='keystone', keystone="
                 "{'auth_url': 'http://k/v3', 'username': 'u', 'password': 'p'}).portal_dir; "
                 "print(d, (d / 'index.html').is_file())")
    assert found.returncode == 0, found.stdout + found.stderr
    assert found.stdout.split() == ["/opt/cairn/portal", "True"]
