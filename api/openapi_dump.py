"""`python -m api.openapi_dump FILE`: the API's OpenAPI document, from which the portal's
typed client is generated (`npm run types`). No server is needed: the app is built, not
started."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from api.main import create_app
from services.settings import Settings


def document() -> str:
    # The app is only described, never serves a session: its key does not matter here.
    logging.getLogger("services.auth.portal_sessions").setLevel(logging.ERROR)
    app = create_app(Settings(database_url="sqlite://", portal_dir=None,
                              auth_strategy="noauth", environment="development"))
    return json.dumps(app.openapi(), indent=1, sort_keys=True) + "\n"


def main() -> None:
    Path(sys.argv[1]).write_text(document())


if __name__ == "__main__":
    main()
