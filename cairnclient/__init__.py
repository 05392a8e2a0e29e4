"""Cairn's REST client: the one module through which the `cairn` CLI, and an `openstack`
client plugin, call Cairn's API.

A package of its own, not part of `cli`: it is what a client plugin installs into the
system Python beside python3-openstackclient (Debian's), where `cli` would be both a
too-generic top-level name and a package that brings click with it. It needs only the
standard library, keystoneauth1 (with its requests) and PyYAML (clouds.yaml), all of which
python3-openstackclient already depends on; pyproject's import contracts keep it so.

    from cairnclient.client import Client
    from cairnclient.http import Http
    cairn = Client(Http.connect(cloud="mycloud", endpoint=None))  # clouds.yaml / OS_*
    cairn = Client(Http.over(keystone_session, region_name="RegionOne"))  # a plugin
    cairn.plans.update(plan_id, {"retention": {"keep_last": 14}})

(Nothing is imported here: each module imports on its own, as tests/unit/test_imports.py
checks.)
"""
