"""One API request makes a bounded number of calls to Cinder for its caller, within a bounded
time, whatever it lists; cleaning up after it is never refused for want of budget."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from services.context import RequestContext
from services.errors import InvalidInput, ServiceUnavailable
from services.openstack.call_budget import CallBudget
from services.openstack.cinder import CinderApi
from services.openstack.cinder_gateway import CinderGateway
from services.settings import CinderSettings, KeystoneSettings


class _Session:
    """Stands in for keystoneauth's session: answers every GET with one volume."""

    def __init__(self) -> None:
        self.calls = 0
        self.timeouts: list[float | None] = []
        self.retries: list[int | None] = []

    def request(self, path: str, method: str, **kwargs: Any) -> requests.Response:
        self.calls += 1
        self.timeouts.append(kwargs.get("timeout"))
        self.retries.append(kwargs.get("connect_retries"))
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


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_each_call_gets_what_is_left_of_the_requests_time_and_none_past_it() -> None:
    session, clock = _Session(), _Clock()
    api = CinderApi(session, {}, CallBudget(100, 45.0, clock))  # type: ignore[arg-type]
    api.get("v")
    clock.now += 40.0
    api.get("v")
    # The session's own timeout (30 s) for the first; the 5 s left for the second; and
    # no connection retries of keystoneauth's, which would each take the timeout again.
    assert session.timeouts == [30.0, 5.0]
    assert session.retries == [0, 0]
    clock.now += 5.0
    with pytest.raises(ServiceUnavailable, match="waited on Cinder for 45 s"):
        api.get("v")
    assert session.calls == 2
    api.unbudgeted().get("v")  # clean-up still reaches Cinder, on the session's own terms
    assert session.timeouts[-1] is None


def test_the_service_users_calls_for_a_request_count_against_its_budget() -> None:
    gateway = CinderGateway(KeystoneSettings(auth_url="http://keystone.invalid/v3",
                                             username="cairn", password="x"),
                            CinderSettings(cluster="ceph-a", calls_per_request=10,
                                           seconds_per_request=7.0))
    request = gateway.for_request()
    assert request.budget is not None
    assert request.budget.seconds == 7.0
    assert request.as_service().budget is request.budget
    assert gateway.as_service().budget is None
