"""File-level restore (issue 34): browse, search and download the files of a restore point
without restoring it. The file service (`cairn-files`) reads the restore point; a sealed
parser child (`parser/`) parses its partitions and filesystems. docs/files.md has the whole
picture.

Kept free of imports: the parser child imports `worker.files.parser` through this package,
and it may load nothing but the standard library and Dissect."""
