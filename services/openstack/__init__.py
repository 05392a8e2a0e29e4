"""Cairn as an OpenStack citizen: Keystone sessions, the identity catalog, Cinder."""
