"""The parser child: a tenant's partitions and filesystems, parsed in a sealed process
(stdlib and Dissect only: it imports no services/ module, and holds no credentials)."""
