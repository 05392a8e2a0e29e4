"""The CLI tests reuse the OpenStack fixtures: real Keystone, Cinder, Ceph and Cairn."""

from tests.integration.openstack.conftest import cloud, os_cairn, protected

__all__ = ["cloud", "os_cairn", "protected"]
