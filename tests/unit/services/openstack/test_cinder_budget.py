"""One API request makes a bounded number of calls to Cinder for its caller, whatever it
lists; cleaning up after it is never refused for want of budget."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from services.context import RequestContext
from services.errors import InvalidInput
from services.openstack.cinder import CallBudget, CinderApi, CinderGateway
from services.settings import CinderSettings, KeystoneSettings


class _Session:
    """Stands in for keystoneauth's session: answers every GET with one volume."""

    def __init__(self) -> None:
        self.calls = 0

    def request(self, path: str, method: str, **_: Any) -> requests.Response:
        self.calls += 1
        response = requests.Response()
        response.status_code = 200
        response._content = (b'{"volume": {"id": "v", "size": 1, "status": "available"}}')
        return response


def test_the_call_past_the_budget_is_refused_before_it_is_made() -> None:
    session = _Session()
    api = CinderApi(session, {}, CallBudget(3))  # type: ignore[arg-type]
    for _ in range(3):
        api.get("v")
    with pytest.raises(InvalidInput, match="more than 3 calls to Cinder"):
        api.get("v")
    assert session.calls == 3
    # Clean-up after a refused request still reaches Cinder.
    api.unbudgeted().get("v")
    assert session.calls == 4


def test_each_request_has_a_budget_of_its_own() -> None:
    gateway = CinderGateway(KeystoneSettings(auth_url="http://keystone.invalid/v3",
                                             username="cairn", password="x"),
                            CinderSettings(cluster="ceph-a", calls_per_request=10))
    ctx = RequestContext(project_id="p", token="t", endpoints={"volumev3": "http://c"})
    first, second = gateway.for_request(), gateway.for_request()
    assert first.budget is not None
    assert second.budget is not None
    assert first.budget is not second.budget
    assert first.budget.limit == 10
    assert first.for_user(ctx).budget is first.budget
    assert gateway.budget is None  # the workers' and the scheduler's: no request's budget
