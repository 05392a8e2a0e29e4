"""The parser child's code: partitions (`volumes`), filesystems (`filesystems/`, one module
per kind) and the operations the file service calls (`ops.Operations`) over a seekable image
of a restore point.

Everything under this package imports only the standard library and Dissect: it runs in a
process that holds no credentials and may load nothing else (no `services`, no
`worker.engine`); an import-linter contract in pyproject.toml keeps it so."""
