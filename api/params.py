"""Path and query parameters with their formats, checked before anything reaches SQL and
declared in the OpenAPI document: a NUL byte or a 10 kB string in an id answers 422, not a
database error."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query
from pydantic import AfterValidator, StringConstraints
from starlette.convertors import Convertor, register_url_convertor

from api.errors import VOLUME_FILTER
from services.files import bounds
from services.formats import PROJECT, UUID, VOLUME_REF

PlanId = Annotated[str, Path(pattern=UUID, description="The plan's id (a UUID)")]
WebhookId = Annotated[str, Path(pattern=UUID, description="The webhook's id (a UUID)")]
JobId = Annotated[str, Path(pattern=UUID, description="The job's id (a UUID)")]
RestorePointId = Annotated[str, Path(pattern=UUID,
                                     description="The restore point's id (a UUID)")]
VOLUME_ID = (r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
             r"|[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}(/[A-Za-z0-9][A-Za-z0-9_.\-]{0,254}){2})$")
"""What GET /v1/volumes lists a volume as: a Cinder volume's id, or an RBD image's
cluster/pool/image (its `/` encoded as %2F or not)."""


class VolumeIdConvertor(Convertor[str]):
    """The route's `{volume_id:volume}`: a Cinder id or `cluster/pool/image`, slashes
    included, and nothing longer, so `/v1/volumes/<id>/file-versions` stays another route's."""

    regex = VOLUME_ID[1:-1]

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("volume", VolumeIdConvertor())

ListedVolumeId = Annotated[str, Path(pattern=VOLUME_ID, description=(
    "The volume's `id` as GET /v1/volumes lists it: its Cinder id, or without Cinder the "
    "RBD image as cluster/pool/image"))]
VolumeMarker = Annotated[str | None, Query(pattern=VOLUME_ID,
                                           description="`next_marker` of the previous page")]
ProjectId = Annotated[str, Path(pattern=PROJECT, description="The project's id")]
Marker = Annotated[str | None, Query(pattern=UUID,
                                     description="`next_marker` of the previous page")]
PlanFilter = Annotated[str | None, Query(pattern=UUID, description="Only what this plan made")]
VolumeFilter = Annotated[str | None, Query(pattern=VOLUME_REF, description=VOLUME_FILTER)]
VolumeId = Annotated[str, Path(pattern=UUID, description="The volume's id: a restore "
                                                      "point's `volume_id`, or its Cinder "
                                                      "volume's id")]

MAX_FILE_PATH_BYTES = bounds.MAX_PATH_BYTES


def _path_bytes(path: str) -> str:
    if len(path.encode("utf-8", "surrogatepass")) > MAX_FILE_PATH_BYTES:
        raise ValueError(f"a path is at most {MAX_FILE_PATH_BYTES} bytes in UTF-8")
    return path


FilePathText = Annotated[str, StringConstraints(pattern=r"^/[^\x00]*$",
                                                max_length=MAX_FILE_PATH_BYTES),
                         AfterValidator(_path_bytes)]
"""An absolute path in a restore point's filesystem: `/`-separated, at most 4096 bytes, no
NUL. `..` is refused by the parser, never resolved."""
FilePath = Annotated[FilePathText, Query(
    description="An absolute path in the filesystem (`/`-separated, at most 4096 bytes "
                "in UTF-8, no NUL)")]
Partition = Annotated[int | None, Query(
    ge=0, le=bounds.MAX_PARTITION,
    description="The partition's `index` (GET .../partitions); the first "
                "readable filesystem when omitted")]
FilesPage = Annotated[int, Query(ge=1, le=bounds.MAX_PAGE, description="Page size")]
FileMarker = Annotated[str | None, Query(
    min_length=1, max_length=1024, pattern=r"^[^\x00]*$",
    description="`next_marker` of the previous page (the last name it listed)")]
NamePattern = Annotated[str, Query(
    min_length=1, max_length=bounds.MAX_PATTERN_CHARS, pattern=r"^[^\x00]*$",
    description="A shell pattern matched against each name, not the path (`*.conf`, "
                "`nginx.conf`, `report-202?-*`; `*`, `?`, `[...]`), case-sensitive")]
ArchiveFormat = Annotated[Literal["tar", "zip"], Query(
    alias="format",
    description="`tar` (POSIX pax: symlinks kept as symlinks) or `zip` (symlinks left out)")]
