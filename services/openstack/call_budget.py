"""What one API request may spend on Cinder: a number of calls and a time, counted from the
request's start (`CAIRN_CINDER`'s `calls_per_request` and `seconds_per_request`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from services.errors import InvalidInput, ServiceUnavailable
from services.openstack.sessions import TIMEOUT_SECONDS as CALL_TIMEOUT_SECONDS


class CallBudget:
    """What one API request may spend on Cinder (`CAIRN_CINDER`'s `calls_per_request` and
    `seconds_per_request`), counted from the request's start: whatever a tenant lists (a
    plan's volumes, a group's, a group restore's members), one request never holds a
    thread for more Cinder calls, or longer, than this. The calls Cairn's service user
    makes on the request's behalf count too."""

    def __init__(self, limit: int, seconds: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.seconds = seconds
        self.spent = 0
        self._clock = clock
        self._deadline = clock() + seconds

    def spend(self) -> float:
        """Count one call; the seconds it may take."""
        if self.spent >= self.limit:
            raise InvalidInput(
                f"this request would make more than {self.limit} calls to Cinder "
                "(CAIRN_CINDER's calls_per_request); name fewer volumes in one request")
        left = self._deadline - self._clock()
        if left <= 0:
            raise ServiceUnavailable(
                f"this request waited on Cinder for {self.seconds:.0f} s (CAIRN_CINDER's "
                "seconds_per_request) and gave up: Cinder is slow, or the request names "
                "many volumes; try again, or name fewer in one request")
        self.spent += 1
        return min(left, CALL_TIMEOUT_SECONDS)
