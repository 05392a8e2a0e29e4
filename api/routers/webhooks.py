from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse

from api.deps import (
    ContextDep,
    DatabaseDep,
    NowDep,
    SessionDep,
    SettingsDep,
    allowed,
    get_policy,
)
from api.errors import error_responses
from api.idempotency import Keeping, OnceDep
from api.params import WebhookId
from services.auth.policy import Policy
from services.webhooks import service
from services.webhooks.schemas import (
    DeliveryList,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookPublic,
    WebhookSecret,
    WebhookUpdate,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])


async def url_visible(ctx: ContextDep,
                      policy: Annotated[Policy, Depends(get_policy)]) -> bool:
    """Whether the caller may read webhooks' URLs (`webhook:get_url`): a URL often carries
    a token the receiver trusts, which a reader has no use for."""
    return policy.allows("webhook:get_url", ctx)


ShowUrl = Annotated[bool, Depends(url_visible)]


@router.post("", status_code=201, response_model=WebhookCreated,
             responses=error_responses(401, 409, 422, 503), summary="Create a webhook",
             dependencies=[allowed("webhook:create")])
def create_webhook(body: WebhookCreate, session: SessionDep, db: DatabaseDep, ctx: ContextDep,
                   settings: SettingsDep, now: NowDep, show_url: ShowUrl,
                   once: OnceDep) -> WebhookCreated | JSONResponse:
    """Hear about the project's backups, restores, deletes, verifies and plans as CloudEvents
    signed with the Standard Webhooks scheme. The answer holds the signing secret: it is
    shown again only to the same caller's retry with the same `Idempotency-Key` (within
    24 h), and only while the webhook keeps that secret (409 after a rotation or delete,
    and to anyone else; rotate the secret to get a new one)."""
    return once.answer(201, lambda: service.create(session, ctx, settings, body, now, show_url),
                       Keeping(partial(service.kept_answer, ctx),
                               partial(service.replayed_answer, db, ctx, settings)))


@router.get("", response_model=WebhookList, responses=error_responses(401),
            summary="List webhooks", dependencies=[allowed("webhook:list")])
def list_webhooks(session: SessionDep, ctx: ContextDep, show_url: ShowUrl) -> WebhookList:
    """Readers see each webhook's `url_host`, not its `url` (`webhook:get_url`)."""
    return WebhookList(webhooks=service.listed(session, ctx, show_url))


@router.get("/{webhook_id}", response_model=WebhookPublic, responses=error_responses(401, 404),
            summary="Show a webhook", dependencies=[allowed("webhook:get")])
def get_webhook(webhook_id: WebhookId, session: SessionDep, ctx: ContextDep,
                show_url: ShowUrl) -> WebhookPublic:
    return service.public(service.get(session, ctx, webhook_id), show_url)


@router.patch("/{webhook_id}", response_model=WebhookPublic,
              responses=error_responses(401, 404, 422), summary="Change a webhook",
              dependencies=[allowed("webhook:update")])
def update_webhook(webhook_id: WebhookId, body: WebhookUpdate, session: SessionDep,
                   ctx: ContextDep, settings: SettingsDep, now: NowDep,
                   show_url: ShowUrl) -> WebhookPublic:
    """Change its URL, events or description; `enabled: true` enables one Cairn disabled
    after failed deliveries again."""
    return service.update(session, ctx, settings, webhook_id, body, now, show_url)


@router.delete("/{webhook_id}", status_code=204, responses=error_responses(401, 404),
               summary="Delete a webhook", dependencies=[allowed("webhook:delete")])
def delete_webhook(webhook_id: WebhookId, session: SessionDep, ctx: ContextDep) -> Response:
    service.delete(session, ctx, webhook_id)
    return Response(status_code=204)


@router.post("/{webhook_id}/rotate-secret", response_model=WebhookSecret,
             responses=error_responses(401, 404, 503), summary="Rotate a webhook's secret",
             dependencies=[allowed("webhook:rotate")])
def rotate_secret(webhook_id: WebhookId, session: SessionDep, ctx: ContextDep,
                  settings: SettingsDep, now: NowDep) -> WebhookSecret:
    """A new secret; deliveries carry a signature with the old one too until
    `previous_expires_at`, so the receiver can switch in its own time."""
    return service.rotate(session, ctx, settings, webhook_id, now)


@router.post("/{webhook_id}/test", status_code=202, response_model=DeliveryPublic,
             responses=error_responses(401, 404), summary="Send a test event",
             dependencies=[allowed("webhook:test")])
def test_webhook(webhook_id: WebhookId, session: SessionDep, ctx: ContextDep,
                 now: NowDep) -> DeliveryPublic:
    """Queue a `webhook.test` event for this webhook (disabled ones too); its delivery shows
    in the delivery log."""
    return service.send_test(session, ctx, webhook_id, now)


@router.get("/{webhook_id}/deliveries", response_model=DeliveryList,
            responses=error_responses(401, 404, 422), summary="A webhook's delivery log",
            dependencies=[allowed("webhook:get")])
def list_deliveries(webhook_id: WebhookId, session: SessionDep, ctx: ContextDep,
                    limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> DeliveryList:
    """Newest first: each event sent, its attempts, the receiver's last answer."""
    return DeliveryList(deliveries=service.deliveries(session, ctx, webhook_id, limit))
