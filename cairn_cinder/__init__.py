"""Cairn's code that runs inside OpenStack Cinder's own processes (Debian's python3 and
python3-cinder), never in Cairn's virtualenv: it imports nothing of Cairn's packages nor of
Cairn's dependencies, and Cairn's packages never import it (pyproject.toml's import
contracts). `cairn_cinder.backup.CairnBackupDriver` is a cinder-backup driver."""
