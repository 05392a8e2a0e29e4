"""File-level restore (issue 34): a restore point's files, read from its bytes."""
