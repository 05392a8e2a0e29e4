"""OpenStack notifications through oslo.messaging, in Cinder's shape: publisher
`cairn.<host>`, event types `backup.create.end`..., priority INFO or ERROR. They ride the
same outbox as webhooks (a delivery row without a webhook), so a notification is sent only
for what was committed and a bus that is away is tried again later.

oslo.messaging is imported on first use only: it costs ~0.3 s and pulls in eventlet, which
processes that never notify (the default `noop`) need not carry."""

from __future__ import annotations

import socket
import threading
from typing import Any

from services.settings import Settings

_lock = threading.Lock()
_notifiers: dict[str, Any] = {}


def enabled(settings: Settings) -> bool:
    return settings.notification_driver != "noop"


def send(settings: Settings, event_type: str, priority: str, payload: dict[str, Any]) -> None:
    """Hand one notification to oslo.messaging. Its messaging driver retries a few times,
    then logs and drops what it could not send (it raises nothing)."""
    notifier = _notifier(settings)
    getattr(notifier, priority)({}, event_type, payload)


def _notifier(settings: Settings) -> Any:
    url = settings.notification_transport_url
    key = f"{settings.notification_driver} {url.get_secret_value() if url else ''}"
    with _lock:
        if key not in _notifiers:
            import oslo_messaging
            from oslo_config import cfg

            conf = cfg.ConfigOpts()
            conf([], project="cairn", default_config_files=[], default_config_dirs=[])
            transport = oslo_messaging.get_notification_transport(
                conf, url=url.get_secret_value() if url else None)
            _notifiers[key] = oslo_messaging.Notifier(
                transport, publisher_id=f"cairn.{socket.gethostname()}",
                driver=settings.notification_driver, topics=settings.notification_topics,
                retry=3)
        return _notifiers[key]
