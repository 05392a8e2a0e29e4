"""The CLI is a REST client: it runs where only its own dependencies are installed, and
says what to fix when credentials are missing or wrong."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cairnclient import config as cloud_config

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[3]

SERVER_ONLY = ["services", "api", "worker", "manage", "migrations", "fastapi", "starlette",
               "uvicorn", "sqlalchemy", "alembic", "psycopg", "celery", "kombu", "redis",
               "rados", "rbd", "pydantic", "pydantic_settings", "xxhash"]

# Runs `cairn` with every server-side package made unimportable, as on a laptop where only
# the CLI's dependencies are installed.
WITHOUT_SERVER = textwrap.dedent(f"""
    import sys
    from importlib.abc import MetaPathFinder

    class Absent(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {SERVER_ONLY!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (not installed)")
            return None

    sys.meta_path.insert(0, Absent())
    from cli.main import main
    sys.argv[0] = "cairn"
    sys.exit(main())
""")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "CAIRN_"))}
    env.update(extra)
    return env


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cairn_without_server(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_SERVER, *args], env=env, cwd="/",
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_cli_needs_no_server_package() -> None:
    helped = cairn_without_server("--help", env=clean_env())
    assert helped.returncode == 0, helped.stderr
    assert "plan" in helped.stdout

    # A whole command runs up to the network: nothing on the way imports server code.
    env = clean_env(CAIRN_URL=f"http://127.0.0.1:{closed_port()}", CAIRN_NOAUTH_PROJECT="p")
    done = cairn_without_server("plan", "list", env=env)
    assert done.returncode == 1, done.stderr
    assert "cannot reach Cairn" in done.stderr
    assert "ModuleNotFoundError" not in done.stderr


def test_cli_without_credentials_says_what_to_set() -> None:
    done = subprocess.run([str(BIN / "cairn"), "volume", "list"], env=clean_env(), cwd="/",
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "no OpenStack credentials: set OS_CLOUD" in done.stderr


def test_clouds_yaml_problems_name_the_file_and_the_fix(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("clouds: [unclosed\n")
    with pytest.raises(cloud_config.CloudConfigError, match=r"broken.yaml is not valid YAML"):
        cloud_config.load("c", {"OS_CLIENT_CONFIG_FILE": str(broken)})

    good = tmp_path / "clouds.yaml"
    good.write_text("clouds:\n  c:\n    auth: {auth_url: 'http://k/v3', username: u}\n")
    with pytest.raises(cloud_config.CloudConfigError, match=r"cloud 'other' is not in any "):
        cloud_config.load("other", {"OS_CLIENT_CONFIG_FILE": str(good)})
    with pytest.raises(cloud_config.CloudConfigError, match=r"unknown auth type 'nope'"):
        cloud_config.load(None, {"OS_AUTH_URL": "http://k/v3", "OS_AUTH_TYPE": "nope"})


def test_a_password_from_the_environment_completes_a_clouds_yaml_entry(
        tmp_path: Path) -> None:
    path = tmp_path / "clouds.yaml"
    path.write_text("clouds:\n  c:\n    region_name: R1\n    interface: internal\n"
                    "    auth: {auth_url: 'http://k/v3', username: u, project_name: p,\n"
                    "           user_domain_name: D, project_domain_name: D}\n")
    config = cloud_config.load("c", {"OS_CLIENT_CONFIG_FILE": str(path), "OS_PASSWORD": "s"})
    assert (config.region_name, config.interface, config.verify) == ("R1", "internal", True)
    # keystoneauth's generic password plugin keeps the options as it was given them.
    assert (config.auth._username, config.auth._password) == ("u", "s")


def test_the_rest_client_needs_neither_click_nor_a_server_package() -> None:
    """What an `openstack` plugin imports in Debian's system Python: keystoneauth1,
    requests and PyYAML are there (python3-openstackclient's own), click need not be."""
    absent = [*SERVER_ONLY, "click", "cli"]
    script = WITHOUT_SERVER.split("sys.meta_path.insert")[0].replace(
        repr(SERVER_ONLY), repr(absent)) + textwrap.dedent("""
        sys.meta_path.insert(0, Absent())
        from cairnclient import units
        from cairnclient.client import Client
        from cairnclient.http import Http
        client = Client(Http.over(None, endpoint="http://127.0.0.1:9"))
        print(sorted(vars(client)))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=clean_env(), cwd=str(REPO),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "'plans'" in done.stdout
