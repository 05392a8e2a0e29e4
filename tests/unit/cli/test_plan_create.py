"""`cairn plan create` takes the volumes or one Cinder group, and says so before it calls
anything."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cli.main import cli

GROUP = "1f0e4c5a-6b1d-4a53-9c9e-0d6b2f3a7e21"


@pytest.mark.parametrize("what", [[], ["--volume", "v1", "--cinder-group", GROUP]])
def test_a_plan_needs_its_volumes_or_one_cinder_group(what: list[str]) -> None:
    done = CliRunner().invoke(cli, ["plan", "create", "--name", "app",
                                    "--incremental", "0 2 * * *", *what],
                              env={"CAIRN_URL": "http://127.0.0.1:9", "CAIRN_NOAUTH_PROJECT": "p"})
    assert done.exit_code == 2, done.output
    assert "give the volumes (--volume, repeatable) or one --cinder-group" in done.output
