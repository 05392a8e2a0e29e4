"""A resolver a test scripts, for a real process: each name answers its scripted address
lists in turn (the last one again and again), so the first lookup can say a public
address and the next one loopback, as a rebinding attacker's DNS server does. Addresses
listed under `refuse` stand for the internet: connecting to one is refused at once, so no
packet leaves the machine.

A process gets it through `scripted_dns_site/sitecustomize.py` on its PYTHONPATH and the
script's path in CAIRN_TEST_DNS_SCRIPT; the test's own process through `install`. Only
socket.getaddrinfo and socket.socket.connect change: whatever the code under test does
with them is real (Python's own socket.create_connection resolves through the first)."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

SCRIPT_ENV = "CAIRN_TEST_DNS_SCRIPT"
SITE = Path(__file__).resolve().parent / "scripted_dns_site"
"""A directory to put first on a process's PYTHONPATH."""


def install(script: dict[str, Any]) -> None:
    """{"names": {"hooks.test": [["8.8.8.8"], ["127.0.0.1"]]}, "refuse": ["8.8.8.8"]}"""
    socket.getaddrinfo, socket.socket.connect = scripted(script)  # type: ignore[assignment]


def scripted(script: dict[str, Any]) -> tuple[Any, Any]:
    """The scripted (getaddrinfo, socket.connect): a test's own process sets them with
    monkeypatch, so they end with the test."""
    names: dict[str, list[list[str]]] = script.get("names", {})
    refuse = set(script.get("refuse", []))
    asked: dict[str, int] = {}
    lock = threading.Lock()
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in names:
            return real_getaddrinfo(host, port, *args, **kwargs)
        with lock:
            turn = asked.get(name, 0)
            asked[name] = turn + 1
        answer = names[name][min(turn, len(names[name]) - 1)]
        number = int(port or 0)
        return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 (address, number, 0, 0)) if ":" in address else
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, number))
                for address in answer]

    def connect(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and address[0] in refuse:
            raise ConnectionRefusedError(111, "Connection refused (scripted)")
        real_connect(self, address)

    return getaddrinfo, connect


def install_from_env() -> None:
    path = os.environ.get(SCRIPT_ENV)
    if path:
        install(json.loads(Path(path).read_text()))
