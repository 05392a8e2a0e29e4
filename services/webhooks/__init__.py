"""Webhooks: a project's HTTPS endpoints that hear about its backups, restores and plans as
signed CloudEvents (docs/operations.md, "Notifications")."""
