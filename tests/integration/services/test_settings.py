"""Cairn's processes fail closed, for real: cairn-api, cairn-worker and cairn-scheduler, started
as an operator would start them without configuring authentication, refuse to start and say
what to set. Before, each started with noauth (anyone is who they say, and `X-Roles: admin`
the cloud's administrator) in the development environment."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.support.redis_server import free_port
from tests.support.stack import BIN

DEADLINE = 60.0
"""Refusing takes an interpreter's start; one that has not ended by then is serving."""


def _refusals(tmp_path: Path, cases: list[tuple[list[str], dict[str, str]]]) -> list[str]:
    """Start every case at once (in an empty directory, with no CAIRN_* setting but the
    case's), wait for each to end, and return what each wrote; one still running is
    stopped and fails the test."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    started = [subprocess.Popen(argv, env={**clean, **env}, cwd=tmp_path, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
               for argv, env in cases]
    deadline = time.monotonic() + DEADLINE
    outputs, running = [], []
    for (argv, env), proc in zip(cases, started, strict=True):
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            running.append(f"{' '.join(argv)} with {env} started:\n{out[-1000:]}")
            continue
        assert proc.returncode != 0, f"{' '.join(argv)} ended well: {out[-2000:]}"
        outputs.append(out)
    assert not running, "\n".join(running)
    return outputs


def _entry_points() -> list[list[str]]:
    return [[str(BIN / "cairn-api"), "--port", str(free_port())],
            [str(BIN / "cairn-worker")], [str(BIN / "cairn-scheduler")]]


def test_an_unconfigured_process_refuses_to_start_and_says_what_to_set(tmp_path: Path) -> None:
    for out in _refusals(tmp_path, [(argv, {}) for argv in _entry_points()]):
        assert "refusing to start: CAIRN_AUTH_STRATEGY is not set: set it to keystone (with " \
               "CAIRN_KEYSTONE and CAIRN_ADMIN_PROJECTS) or, on a development machine only, " \
               "to noauth with CAIRN_ENVIRONMENT=development" in out, out
        assert "Traceback" not in out, out


def test_noauth_refuses_to_start_unless_development_is_said(tmp_path: Path) -> None:
    cases = [(argv, {"CAIRN_AUTH_STRATEGY": "noauth", **environment})
             for argv in _entry_points()
             for environment in ({}, {"CAIRN_ENVIRONMENT": "production"})]
    for out in _refusals(tmp_path, cases):
        assert "refusing to start: CAIRN_AUTH_STRATEGY=noauth trusts request headers" in out
        assert "only with CAIRN_ENVIRONMENT=development set explicitly" in out, out


def test_noauth_api_refuses_an_address_beyond_loopback(tmp_path: Path) -> None:
    development = {"CAIRN_AUTH_STRATEGY": "noauth", "CAIRN_ENVIRONMENT": "development"}
    [out] = _refusals(tmp_path, [([str(BIN / "cairn-api"), "--host", "0.0.0.0", "--port",
                                   str(free_port())], development)])
    assert "--host 0.0.0.0 is not a loopback address" in out, out
    assert "CAIRN_NOAUTH_ALLOW_REMOTE=true" in out, out


def test_keystone_admin_projects_by_name_refuse_to_start(tmp_path: Path) -> None:
    keystone = {"CAIRN_AUTH_STRATEGY": "keystone",
                "CAIRN_KEYSTONE": '{"auth_url": "http://127.0.0.1:9/v3", "username": "cairn", '
                                  '"password": "never-shown"}',
                "CAIRN_ADMIN_PROJECTS": '["admin"]'}
    for out in _refusals(tmp_path, [(argv, keystone) for argv in _entry_points()]):
        assert "CAIRN_ADMIN_PROJECTS holds Keystone project ids" in out, out
        assert "openstack project show admin -f value -c id" in out, out
        assert "never-shown" not in out, out
