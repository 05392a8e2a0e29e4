"""Test-only: a process started with this directory first on its PYTHONPATH resolves the
names of the script in CAIRN_TEST_DNS_SCRIPT as `tests/support/scripted_dns.py` says."""

from tests.support.scripted_dns import install_from_env

install_from_env()
