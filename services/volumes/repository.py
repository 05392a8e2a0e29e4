from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from services.records.volumes import Volume
from services.storage.refs import ImageRef, parse_image_ref

CINDER_ID = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


def get_or_create(session: Session, project_id: str, ref: ImageRef,
                  cinder_volume_id: str | None = None, name: str | None = None) -> Volume:
    """The volume's row, made on first use. `name`: the Cinder volume's name now (a
    rename in Cinder shows in jobs and restore points from the next time it is named)."""
    stmt = select(Volume).where(
        Volume.project_id == project_id,
        Volume.cluster == ref.cluster,
        Volume.pool == ref.pool,
        Volume.image == ref.image,
    )
    volume = session.scalars(stmt).one_or_none()
    if volume is not None:
        if cinder_volume_id is not None and volume.cinder_volume_id is None:
            volume.cinder_volume_id = cinder_volume_id
        if name is not None and volume.name != name:
            volume.name = name
        return volume
    volume = Volume(project_id=project_id, cluster=ref.cluster, pool=ref.pool, image=ref.image,
                    cinder_volume_id=cinder_volume_id, name=name)
    try:
        with session.begin_nested():
            session.add(volume)
    except IntegrityError:
        # Another request registered the same volume at the same moment.
        return session.scalars(stmt).one()
    return volume


def find_by_ref(session: Session, project_id: str, ref: ImageRef) -> Volume | None:
    return session.scalars(
        select(Volume).where(
            Volume.project_id == project_id,
            Volume.cluster == ref.cluster,
            Volume.pool == ref.pool,
            Volume.image == ref.image,
        )
    ).one_or_none()


def id_for_filter(session: Session, project_id: str, text: str | None) -> str | None:
    """The id to filter a list by for a `volume` query parameter: None without one, the
    registered volume's id, or an id no row has (an unknown volume has nothing to list)."""
    if text is None:
        return None
    if CINDER_ID.match(text):
        by_id = session.scalars(select(Volume.id).where(
            Volume.project_id == project_id, Volume.cinder_volume_id == text.lower())).first()
        return by_id or ""
    found = find_by_ref(session, project_id, parse_image_ref(text, field="volume"))
    return found.id if found is not None else ""
