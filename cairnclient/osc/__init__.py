"""Cairn as a plugin of the unified `openstack` client (python-openstackclient, osc-lib,
cliff): `openstack protection plan list`, `openstack protection restore point restore`, ...

Why `protection`: python-openstackclient's plugins name what a command acts on, not a
project's code name (`loadbalancer`, `baremetal`, `secret`), and Karbor's `data protection`
is the precedent for backups. But Debian still ships python3-karborclient, and its
`openstack-clients` metapackage (what an operator installs to get every client) depends on
it: `data protection plan list`, `... restore list`, `... quota show` and the client name
`data_protection` would collide with Karbor's, and which one ran would depend on the order
stevedore found them. `backup` is Freezer's client's, and `volume backup` Cinder's (which
Cairn also serves, through its Cinder backup driver). `protection` keeps Karbor's word,
collides with nothing, and reads as what the commands do (`protection plan create`,
`protection restore point verify`).

Here, not in a package of its own: the plugin is a thin layer over `cairnclient` (every
command calls one method of `cairnclient.client.Client`, the REST client the `cairn` CLI
uses), shipped with it as OpenStack's clients ship theirs (`ironicclient/osc/`). It runs in
Debian's system Python beside python3-openstackclient, which has osc-lib and cliff; the
project's virtualenv has neither, so `tests/tools/osc` runs these modules there."""
