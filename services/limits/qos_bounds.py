"""The QoS limits a caller may set on a job or plan. Below the floor a copy would take days
for a small volume and hold its slot all that time; above the ceilings the numbers no longer
fit the columns (BIGINT bytes, INTEGER ops) and mean nothing for a Ceph cluster."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

MIN_BYTES_PER_SECOND = 1024 * 1024
MAX_BYTES_PER_SECOND = 10**15
MIN_OPS_PER_SECOND = 1
MAX_OPS_PER_SECOND = 1_000_000

BytesPerSecond = Annotated[int, Field(ge=MIN_BYTES_PER_SECOND, le=MAX_BYTES_PER_SECOND)]
OpsPerSecond = Annotated[int, Field(ge=MIN_OPS_PER_SECOND, le=MAX_OPS_PER_SECOND)]
