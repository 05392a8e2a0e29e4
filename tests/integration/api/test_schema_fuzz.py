"""Schemathesis against a real `cairn-api` process (uvicorn, the stack's database, Redis and
Ceph): requests generated from /openapi.json, valid and invalid, for every operation. No
answer may be a server error, every status must be one the operation declares, and every
answer must match its declared schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import rbd
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support import ceph
from tests.support.ceph import MiB
from tests.support.stack import ADMIN_PROJECT, Stack, api_process

# The answers it checks are the API's, whichever database holds the rows; PostgreSQL is
# production's (and the stricter about integer ranges). Two minutes saved per run.
pytestmark = [pytest.mark.ceph, pytest.mark.production_database_only]

FULL = os.environ.get("CAIRN_FUZZ_FULL") == "1"
"""`make fuzz`: the full size. `make test` runs half the examples and three quarters of
the walks it ran before (60 and 40), which find the same deliberate breakages
(CONTRIBUTING.md has them)."""

EXAMPLES = int(os.environ.get("CAIRN_FUZZ_EXAMPLES", "120" if FULL else "30"))
"""Per operation, half valid and half invalid input: with the API's 28 operations, over
500 requests in `make test`, over 2000 in `make fuzz`."""

AS_ADMIN = {"X-Project-Id": ADMIN_PROJECT, "X-Roles": "admin,member,reader"}
"""Most cases run as the (noauth) cloud administrator, so they get past the policy and
into the code; the rest keep the headers Schemathesis generated (missing, malformed or
other projects' credentials)."""

WALKS = int(os.environ.get("CAIRN_FUZZ_WALKS", "80" if FULL else "30"))
"""Stateful walks of up to 10 steps each, one seed per walk."""

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def api_url(stack: Stack) -> Iterator[str]:
    with api_process(stack.env, stack.log_dir / "api-fuzz.log") as address:
        yield f"http://{address}"


def test_generated_requests_get_declared_answers(api_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json")
    failures: list[str] = []
    sent = 0
    for found in schema.get_all_operations():
        operation = found.ok()
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            count, failure = fuzz(operation, mode, api_url)
            sent += count
            if failure is not None:
                failures.append(f"{operation.label} ({mode.value}): {failure}"[:3000])
    print(f"schemathesis sent {sent} requests")
    assert not failures, "\n\n".join(failures)
    assert sent >= EXAMPLES * 1000 // 60, sent  # most operations took every example


def fuzz(operation: schemathesis.APIOperation, mode: schemathesis.GenerationMode,
         api_url: str) -> tuple[int, str | None]:
    """Requests generated for one operation: how many were sent, and the first failure."""
    count = 0

    @settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case) -> None:
        nonlocal count
        count += 1
        generated = {k.lower() for k in (case.headers or {})}
        own = count % 4 == 0 and generated & {"x-project-id", "x-auth-token"}
        # Schemathesis gives up on an answer after 10 s; GET /v1/orphans lists every pool
        # and bucket of the shared clusters, which takes longer on a loaded machine. The
        # fuzz is about what is answered, not how fast.
        case.call_and_validate(base_url=api_url, headers=None if own else AS_ADMIN,
                               checks=CHECKS, timeout=120)

    try:
        run()
    except Unsatisfiable:
        return count, None  # nothing invalid to send (GET /healthz takes no input)
    except (Exception, BaseExceptionGroup) as exc:  # every operation is tried; all reported
        return count, str(exc)
    return count, None


@pytest.fixture(scope="module")
def fuzz_volume(stack: Stack) -> Iterator[str]:
    name = ceph.unique_name("fuzz")
    with ceph.ioctx("ceph-a", "volumes") as io:
        rbd.RBD().create(io, name, 4 * MiB)
        yield f"ceph-a/volumes/{name}"
        ceph.remove_image(io, name, wait=120)


def test_stateful_walks_along_the_links(api_url: str, stack: Stack, fuzz_volume: str) -> None:
    """Sequences along the schema's links: a plan made, then read, changed, paused, run and
    deleted in any order; a backup, its job and restore point restored, verified, locked
    and deleted; with generated (often invalid) input at every step."""
    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json")
    steps = 0
    creations: dict[str, int] = {}
    reached: set[str] = set()

    class Walk(schema.as_state_machine()):  # type: ignore[misc]
        headers: ClassVar[dict[str, str]] = {}

        def setup(self) -> None:
            # A project of its own for each walk (as a member: it sees only that project),
            # so what one walk finds does not depend on what the walks before it left.
            Walk.headers = {"X-Project-Id": f"walk-{uuid.uuid4().hex[:12]}",
                            "X-Roles": "member,reader"}

        def before_call(self, case: schemathesis.Case) -> None:
            nonlocal steps
            steps += 1
            # Generated volume names never exist; half the creations of each kind are valid
            # ones, so the walk reaches what follows a creation. Each kind is counted on its
            # own: one shared count (or the step count) can fall so that every creation of
            # one kind is invalid.
            if case.method != "POST" or case.path not in ("/v1/plans", "/v1/backups"):
                return
            creations[case.path] = creations.get(case.path, 0) + 1
            if creations[case.path] % 2 == 1:
                case.body = ({"name": f"walk-{steps}", "volumes": [fuzz_volume],
                              "rules": [{"cron": "0 3 * * *"}]} if case.path == "/v1/plans"
                             else {"volume": fuzz_volume})

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"base_url": api_url, "headers": Walk.headers}

        def validate_response(self, response: Any, case: schemathesis.Case,
                              additional_checks: Any = None, **kwargs: Any) -> None:
            if response.status_code < 300:
                reached.add(f"{case.method} {case.path}")
            case.validate_response(response, checks=CHECKS)

    # One walk per run, generated only: the server's state moves on (jobs run), so
    # Hypothesis can neither replay nor shrink a walk, and within one run it would take
    # the moved state for flaky generation. The failing walk is printed as it ran.
    # Each walk has a seed of its own: the same walks on every machine, and not one walk
    # forty times over, which is what Hypothesis's CI profile (derandomize, loaded when
    # the environment says CI) would make of them.
    for number in range(WALKS):
        seed(number)(Walk)
        Walk.run(settings=settings(max_examples=1, stateful_step_count=10, deadline=None,
                                   database=None, phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    print(f"stateful walk: {steps} requests; succeeded on {sorted(reached)}")
    assert steps >= WALKS * 100 // 40, steps  # walks went past their first steps
    # The walks went past the creations, along the links, to what they made.
    assert {"POST /v1/plans", "POST /v1/backups"} <= reached, reached
    assert len([op for op in reached if "{" in op]) >= 3, reached
