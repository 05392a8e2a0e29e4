"""File-level restore (issue 34): which restore points a caller may read files of, and the
shapes of the answers. The reading itself is the file service's (`worker/files/`); the API
authorises here, then hands the request on (`api/files_proxy.py`)."""
