"""A real Prometheus server (Debian's `prometheus`) on loopback, scraping the given targets
every second, with Cairn's alert rules loaded; and its HTTP query API."""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.redis_server import free_port
from tests.support.stack import REPO, Process

RULES = REPO / "deploy" / "prometheus" / "alerts.yml"


class Prometheus:
    def __init__(self, workdir: Path, targets: dict[str, str]) -> None:
        """`targets`: job name -> host:port serving /metrics."""
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed: run `make test`, whose bootstrap "
                               "installs Debian's prometheus package")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [address]}]}
                               for job, address in targets.items()],
        }))
        self.process = Process("prometheus", [
            binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}"], {}, workdir / "prometheus.log")

    def start(self) -> None:
        self.process.start("Server is ready to receive web requests", timeout=60)

    def stop(self) -> None:
        self.process.stop()

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def targets(self) -> list[dict[str, Any]]:
        """The scrape targets with their health and last error, for failure messages."""
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as answer:
            return [{key: target.get(key) for key in ("scrapeUrl", "health", "lastError")}
                    for target in json.load(answer)["data"]["activeTargets"]]

    def wait_for(self, expr: str, timeout: float = 30) -> list[dict[str, Any]]:
        """The query's result once it is not empty (Prometheus scrapes every second)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.query(expr)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.5)
