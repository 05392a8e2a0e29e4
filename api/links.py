"""OpenAPI links between operations (what an answer's ids lead to): clients and generators
follow them, and the stateful schema tests walk them (create a plan, then read, change,
pause, run and delete it; start a backup, then follow its job to its restore point)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

Link = tuple[str, str, dict[str, str]]
"""(method, path, parameters: name -> runtime expression) of the linked operation."""

_PLAN = {"plan_id": "$response.body#/id"}
_JOB = {"job_id": "$response.body#/id"}
_RP_OF_JOB = {"restore_point_id": "$response.body#/restore_point_id"}
_RP = {"restore_point_id": "$response.body#/id"}

LINKS: dict[tuple[str, str, str], dict[str, Link]] = {
    ("post", "/v1/plans", "201"): {
        "GetPlan": ("get", "/v1/plans/{plan_id}", _PLAN),
        "UpdatePlan": ("patch", "/v1/plans/{plan_id}", _PLAN),
        "PausePlan": ("post", "/v1/plans/{plan_id}/pause", _PLAN),
        "ResumePlan": ("post", "/v1/plans/{plan_id}/resume", _PLAN),
        "RunPlan": ("post", "/v1/plans/{plan_id}/run", _PLAN),
        "NextRuns": ("get", "/v1/plans/{plan_id}/next-runs", _PLAN),
        "RetentionPreview": ("get", "/v1/plans/{plan_id}/retention-preview", _PLAN),
        "DeletePlan": ("delete", "/v1/plans/{plan_id}", _PLAN),
    },
    ("post", "/v1/backups", "202"): {
        "GetJob": ("get", "/v1/jobs/{job_id}", _JOB),
        "UpdateJob": ("patch", "/v1/jobs/{job_id}", _JOB),
        "CancelJob": ("post", "/v1/jobs/{job_id}/cancel", _JOB),
        "GetRestorePoint": ("get", "/v1/restore-points/{restore_point_id}", _RP_OF_JOB),
    },
    ("get", "/v1/restore-points/{restore_point_id}", "200"): {
        "Restore": ("post", "/v1/restore-points/{restore_point_id}/restore", _RP),
        "Verify": ("post", "/v1/restore-points/{restore_point_id}/verify", _RP),
        "Lock": ("patch", "/v1/restore-points/{restore_point_id}", _RP),
        "DeleteRestorePoint": ("delete", "/v1/restore-points/{restore_point_id}", _RP),
    },
    ("post", "/v1/restore-points/{restore_point_id}/restore", "202"): {
        "GetRestoreJob": ("get", "/v1/jobs/{job_id}", _JOB),
        "CancelRestore": ("post", "/v1/jobs/{job_id}/cancel", _JOB),
    },
}


def install(app: FastAPI) -> None:
    """Serve /openapi.json with LINKS added (once, then cached as FastAPI does)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                                 routes=app.routes)
            add_links(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def add_links(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    for (method, path, status), links in LINKS.items():
        response = paths[path][method]["responses"][status]
        response["links"] = {
            name: {"operationId": paths[to_path][to_method]["operationId"],
                   "parameters": parameters}
            for name, (to_method, to_path, parameters) in links.items()}
