"""File-level restore: the files of a restore point, listed, searched, downloaded one by one
or as an archive, and one file's versions across a volume's restore points.

Each route authorises here, in its request slot (policy; the restore point is the
caller's project's and `available`, `services/files/access.py`; one short read-only
database session), then answers with the file service's answer, relayed outside the slot
(`api/files_proxy.py`): a download of an hour holds no slot and no database connection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from api.deps import ContextDep, DatabaseDep, allowed
from api.errors import ErrorResponse, error_responses
from api.files_proxy import FileService
from api.params import (
    ArchiveFormat,
    FileMarker,
    FilePath,
    FilePathText,
    FilesPage,
    NamePattern,
    Partition,
    RestorePointId,
    VolumeId,
)
from services.context import RequestContext
from services.db import Database
from services.files import access, bounds
from services.files.schemas import (
    FileListing,
    FilePartitionList,
    FilePathEntry,
    FileSearchResult,
    FileVersions,
)

router = APIRouter(tags=["files"])

T = TypeVar("T")
INTERNAL = "/internal/v1"


async def get_files(request: Request) -> FileService:
    files: FileService = request.app.state.files
    return files


FilesDep = Annotated[FileService, Depends(get_files)]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    found = error_responses(401, 404, 409, 429, 503, *statuses)
    found[404]["description"] = ("No such restore point in your project (or volume, or "
                                 "path in its filesystem)")
    found[409]["description"] = "The restore point is not available, or is damaged"
    found[429]["description"] = ("Your project's file requests are at their bound; "
                                 "Retry-After says when to try again")
    found[503]["description"] = "The file service is unreachable or at its capacity"
    return found


_UNREADABLE = ("Invalid input; or the restore point's filesystem cannot be read (encrypted, "
               "unknown, damaged), the path is not what the request needs (a directory, a "
               "file), or the parser reached one of its limits: the message says which")
_RANGE_HEADERS = {
    "Content-Length": {"schema": {"type": "integer"}},
    "Content-Disposition": {"schema": {"type": "string"},
                            "description": "attachment; filename*=UTF-8''<the file's name>"},
    "ETag": {"schema": {"type": "string"},
             "description": "Changes with the file's size and mtime; for If-Range"},
    "Accept-Ranges": {"schema": {"type": "string"}, "description": "bytes"},
}
_BINARY = {"schema": {"type": "string", "format": "binary"}}


def _with_unreadable(found: dict[int | str, dict[str, Any]]) -> dict[int | str, dict[str, Any]]:
    found[422] = {"model": ErrorResponse, "description": _UNREADABLE}
    return found


async def _authorised(db: Database, check: Callable[[Any], T]) -> T:
    """`check(session)` in a short read-only session on the thread pool, closed before the
    answer starts: a download never holds a database connection."""

    def run() -> T:
        with db.reading() as session:
            return check(session)

    return await run_in_threadpool(run)


async def _readable(db: Database, ctx: RequestContext, rp_id: str) -> None:
    await _authorised(db, lambda session: access.readable(session, ctx, rp_id))


def _partition(partition: int | None) -> list[tuple[str, str]]:
    return [] if partition is None else [("partition", str(partition))]


def _files_of(rp_id: str, what: str = "") -> str:
    return f"{INTERNAL}/restore-points/{rp_id}/files{what}"


@router.get("/v1/restore-points/{restore_point_id}/partitions", response_model=FilePartitionList,
            responses=_with_unreadable(_errors()),
            summary="The partitions and filesystems of a restore point",
            dependencies=[allowed("file:list")])
async def partitions(restore_point_id: RestorePointId, request: Request, db: DatabaseDep,
                     ctx: ContextDep, files: FilesDep) -> Response:
    """The partitions of the volume at the restore point (GPT, MBR, LVM2 logical volumes,
    or the whole volume when it holds a filesystem without a table), each with the
    filesystem found on it and whether its files can be read (an encrypted one cannot:
    `reason`)."""
    await _readable(db, ctx, restore_point_id)
    return files.answer(ctx.project_id,
                        f"{INTERNAL}/restore-points/{restore_point_id}/partitions", [],
                        request.headers)


@router.get("/v1/restore-points/{restore_point_id}/files", response_model=FileListing,
            responses=_with_unreadable(_errors()), summary="List a directory",
            dependencies=[allowed("file:list")])
async def list_directory(restore_point_id: RestorePointId, request: Request,
                         db: DatabaseDep, ctx: ContextDep, files: FilesDep,
                         path: FilePath = "/", partition: Partition = None,
                         limit: FilesPage = 100, marker: FileMarker = None) -> Response:
    """A directory of the restore point's filesystem, a page at a time, sorted by name:
    each entry's type, size, mode, owner, mtime and a symlink's target (symlinks are
    never followed)."""
    await _readable(db, ctx, restore_point_id)
    params = [("path", path), *_partition(partition), ("limit", str(limit))]
    if marker is not None:
        params.append(("marker", marker))
    return files.answer(ctx.project_id, _files_of(restore_point_id), params, request.headers)


@router.get("/v1/restore-points/{restore_point_id}/files/stat", response_model=FilePathEntry,
            responses=_with_unreadable(_errors()), summary="Describe one path",
            dependencies=[allowed("file:list")])
async def stat(restore_point_id: RestorePointId, request: Request, db: DatabaseDep,
               ctx: ContextDep, files: FilesDep, path: FilePath,
               partition: Partition = None) -> Response:
    """What a listing says of one entry, by its path."""
    await _readable(db, ctx, restore_point_id)
    return files.answer(ctx.project_id, _files_of(restore_point_id, "/stat"),
                        [("path", path), *_partition(partition)], request.headers)


@router.get("/v1/restore-points/{restore_point_id}/files/content",
            response_class=Response,
            responses={
                200: {"description": "The file's bytes", "headers": _RANGE_HEADERS,
                      "content": {"application/octet-stream": _BINARY}},
                206: {"description": "The range asked for (Range)",
                      "headers": {**_RANGE_HEADERS,
                                  "Content-Range": {"schema": {"type": "string"},
                                                    "description": "bytes a-b/size"}},
                      "content": {"application/octet-stream": _BINARY}},
                416: {"model": ErrorResponse,
                      "description": "The range lies beyond the file's end (Content-Range: "
                                     "bytes */size)"},
                **_with_unreadable(_errors()),
            },
            summary="Download a file", dependencies=[allowed("file:get")])
async def content(
    restore_point_id: RestorePointId, request: Request, db: DatabaseDep, ctx: ContextDep,
    files: FilesDep, path: FilePath, partition: Partition = None,
    byte_range: Annotated[str | None, Header(
        alias="Range", max_length=1024,
        description="bytes=a-b, bytes=a- or bytes=-n: one range")] = None,
    if_range: Annotated[str | None, Header(
        alias="If-Range", max_length=1024,
        description="An ETag: the range only if the file is still that one, the whole file "
                    "otherwise")] = None,
) -> Response:
    """The file's bytes, streamed as they are read from the restore point, with its
    Content-Length and a Content-Disposition naming it. A Range asks for part of it (206),
    to resume a download."""
    await _readable(db, ctx, restore_point_id)
    return files.answer(ctx.project_id, _files_of(restore_point_id, "/content"),
                        [("path", path), *_partition(partition)], request.headers)


@router.get("/v1/restore-points/{restore_point_id}/files/archive",
            response_class=Response,
            responses={
                200: {"description": "The archive, streamed (no Content-Length)",
                      "headers": {"Content-Disposition": {"schema": {"type": "string"}}},
                      "content": {"application/x-tar": _BINARY,
                                  "application/zip": _BINARY}},
                **_with_unreadable(_errors(431)),
            },
            summary="Download directories and files as one archive",
            dependencies=[allowed("file:get")])
async def archive(
    restore_point_id: RestorePointId, request: Request, db: DatabaseDep, ctx: ContextDep,
    files: FilesDep,
    path: Annotated[list[FilePathText], Query(
        min_length=1, max_length=bounds.MAX_ARCHIVE_PATHS,
        description="A file or directory to include (everything under it); repeat for "
                    f"several, at most {bounds.MAX_ARCHIVE_PATHS}")],
    partition: Partition = None, archive_format: ArchiveFormat = "tar",
) -> Response:
    """The paths and everything under them as one `tar` or `zip`, streamed as it is made.
    Names in it are relative (no leading `/`, no `..`); devices, FIFOs and sockets are left
    out. The paths travel in the request's line, which the API bounds as it bounds every
    request's head (`api_max_header_bytes`, 16 KiB by default): past it, 431; ask for a
    directory above them, or for fewer at a time."""
    await _readable(db, ctx, restore_point_id)
    params = [*(("path", p) for p in path), *_partition(partition),
              ("format", archive_format)]
    return files.answer(ctx.project_id, _files_of(restore_point_id, "/archive"), params,
                        request.headers)


@router.get("/v1/restore-points/{restore_point_id}/files/search", response_model=FileSearchResult,
            responses=_with_unreadable(_errors()), summary="Find files by name",
            dependencies=[allowed("file:search")])
async def search(restore_point_id: RestorePointId, request: Request, db: DatabaseDep,
                 ctx: ContextDep, files: FilesDep, pattern: NamePattern,
                 path: FilePath = "/", partition: Partition = None,
                 limit: FilesPage = 100) -> Response:
    """Entries under `path` whose name matches `pattern`, bounded in matches, entries
    visited and time (`truncated` says when it stopped early)."""
    await _readable(db, ctx, restore_point_id)
    params = [("pattern", pattern), ("path", path), *_partition(partition),
              ("limit", str(limit))]
    return files.answer(ctx.project_id, _files_of(restore_point_id, "/search"), params,
                        request.headers)


@router.get("/v1/volumes/{volume_id}/file-versions", response_model=FileVersions,
            responses=_with_unreadable(_errors()),
            summary="One file across a volume's restore points",
            dependencies=[allowed("file:versions")])
async def file_versions(
    volume_id: VolumeId, request: Request, db: DatabaseDep, ctx: ContextDep,
    files: FilesDep, path: FilePath, partition: Partition = None,
    limit: Annotated[int, Query(ge=1, le=access.MAX_VERSIONS,
                                description="How many restore points, newest first")] = 30,
) -> Response:
    """The file at `path` in each of the volume's last `limit` available restore points,
    newest first: present or not, its size, mtime and a SHA-256 of its bytes, to find the
    last good copy in one call."""
    sources = await _authorised(
        db, lambda session: access.version_sources(session, ctx, volume_id, limit))
    if not sources:
        return Response(FileVersions(path=path, versions=[]).model_dump_json(),
                        media_type="application/json")
    params = [("path", path), *_partition(partition),
              *(("restore_point", rp_id) for rp_id in sources)]
    return files.answer(ctx.project_id, f"{INTERNAL}/file-versions", params, request.headers)
