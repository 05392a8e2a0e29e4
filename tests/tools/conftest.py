"""The tools tier: tests that run a tool of the project on its files, and need no server
of the stack: helm on the chart, promtool on the alert rules, buildah on the Containerfile,
and the test run's guards (tests/support/watchdog.py, deploy/local/limited.sh), whose tests
wait on real clocks for seconds and would make the unit tier miss its 30 s, and the
file-level restore's parser over filesystems the real mkfs tools make (mke2fs, mkfs.xfs,
mkntfs, mkfs.fat, mkfs.btrfs, sgdisk, cryptsetup: tests/support/fs_images.py), and the
`openstack` client plugin in Debian's system Python (tests/tools/osc/: osc's import costs a
second a module).
`make test` runs it while the stack's servers start; `make test-tools` runs it alone. The
tools come from `make bootstrap` with CAIRN_HELM=1, CAIRN_PROMETHEUS=1 and CAIRN_IMAGE=1
(`make test` installs all three)."""
