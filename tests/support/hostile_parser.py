"""A stand-in for worker/files/parser/ops.py's Operations that misbehaves on command, run
inside a real sealed parser child (`ChildConfig(factory=FACTORY)`): what a crafted
filesystem could make a parser do, or what code it took over could try.

`stat(None, "/<command>")` runs one command and answers what happened; `read` answers the
image's bytes as the child sees them (through its RemoteImage); `list` answers a
listing of `limit` made-up entries (a reply as large as asked)."""

from __future__ import annotations

import builtins
import ctypes
import json
import os
import resource
import socket
import subprocess
from typing import Any, BinaryIO

FACTORY = "tests.support.hostile_parser:Operations"
PRELOAD = ("socket", "subprocess", "ctypes", "resource")


class NotFound(Exception):
    """Named as worker/files/parser/errors.py's: the protocol sends the class's name."""


class Limit(Exception):
    pass


class Operations:
    def __init__(self, image: BinaryIO, size: int) -> None:
        self.image = image
        self.size = size

    def partitions(self) -> list[dict[str, Any]]:
        return [{"index": 0, "scheme": "disk", "offset": 0, "size": self.size, "type": None,
                 "name": None, "filesystem": None, "label": None, "readable": True,
                 "reason": None}]

    def read(self, partition: int | None, path: str, offset: int, length: int) -> bytes:
        self.image.seek(offset)
        return self.image.read(length)

    def list(self, partition: int | None, path: str, marker: str | None,
             limit: int) -> dict[str, Any]:
        entries = [_entry(f"{index:08d}" + "x" * 200) for index in range(limit)]
        return {"path": path, "partition": partition, "entries": entries, "next_marker": None}

    def stat(self, partition: int | None, path: str) -> dict[str, Any]:
        command, _, argument = path.strip("/").partition("/")
        if command == "misshapen":  # an answer of no entry's shape (a size of -1, no type)
            return {"path": path, "name": "x", "size": -1, "outcome": "took over"}
        handler = getattr(self, "_" + command.replace("-", "_"), None)
        if handler is None:
            raise NotFound(f"no such command: {command}")
        # An entry, as the session accepts no other shape; the outcome in its target.
        done = handler(argument) if argument else handler()
        return {**_entry(command or "root"), "path": path, "target": json.dumps(done)}

    # What a taken-over parser tries; each answers "refused: ..." or what it got.

    def _loop(self) -> str:
        while True:
            pass

    def _bomb(self) -> str:
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))

    def _socket(self) -> str:
        return _attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))

    def _unix_socket(self) -> str:
        return _attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))

    def _socketpair(self) -> str:
        return _attempt(socket.socketpair)

    def _exec(self) -> str:
        return _attempt(lambda: os.execv("/bin/sh", ["/bin/sh", "-c", "true"]))

    def _spawn(self) -> str:
        return _attempt(lambda: subprocess.run(["/bin/true"], check=False))

    def _fork(self) -> str:
        def fork() -> int:
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            return pid
        return _attempt(fork)

    def _ceph(self) -> str:
        home = os.path.expanduser("~root")
        return _attempt(lambda: os.listdir(os.path.join(home, ".ceph")))

    def _keyring(self) -> str:
        return _attempt(lambda: open("/etc/ceph/ceph.client.admin.keyring", "rb").read())

    def _passwd(self) -> str:
        return _attempt(lambda: open("/etc/passwd", "rb").read(10))

    def _proc_environ(self) -> str:
        return _attempt(lambda: open(f"/proc/{os.getppid()}/environ", "rb").read(10))

    def _write(self) -> str:
        return _attempt(lambda: open("/tmp/cairn-parser-was-here", "wb").write(b"x"))

    def _unlink(self) -> str:
        return _attempt(lambda: os.unlink("/tmp/cairn-parser-unlink-target"))

    def _kill_parent(self) -> str:
        return _attempt(lambda: os.kill(os.getppid(), 0))

    def _sched_idle(self, pid: str) -> str:
        # Another process of the same user (the file service, the zygote, another
        # tenant's parser) made to run only when the CPU is otherwise idle.
        return _attempt(lambda: os.sched_setscheduler(int(pid), os.SCHED_IDLE,
                                                      os.sched_param(0)))

    def _affinity(self, pid: str) -> str:
        return _attempt(lambda: os.sched_setaffinity(int(pid), {0}))

    def _sched_param(self, pid: str) -> str:
        return _attempt(lambda: os.sched_setparam(int(pid), os.sched_param(0)))

    def _ioprio(self, pid: str) -> str:
        # ioprio_set(IOPRIO_WHO_PROCESS, pid, the idle class): the service's reads starved.
        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.syscall(251, 1, int(pid), 3 << 13)  # x86_64's ioprio_set
        return f"refused: errno {ctypes.get_errno()}" if done < 0 else "done"

    def _prlimit(self, pid: str) -> str:
        return _attempt(lambda: resource.prlimit(int(pid), resource.RLIMIT_NOFILE))

    def _own_affinity(self, pid: str) -> str:
        # Its own process, by 0 or by its pid: allowed (nobody else is touched).
        target = os.getpid() if pid == "self" else int(pid)
        return _attempt(lambda: os.sched_setaffinity(target, os.sched_getaffinity(0)))

    def _sysv_sem(self) -> str:
        libc = ctypes.CDLL(None, use_errno=True)
        made = libc.semget(0, 1, 0o1000 | 0o600)
        if made < 0:
            return f"refused: errno {ctypes.get_errno()}"
        libc.semctl(made, 0, 0)
        return f"done: semaphores {made}"

    def _sysv_shm(self) -> str:
        # A System V segment outlives its maker and is charged to no rlimit of it.
        libc = ctypes.CDLL(None, use_errno=True)
        made = libc.shmget(0, 1 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if made < 0:
            return f"refused: errno {ctypes.get_errno()}"
        libc.shmctl(made, 0, None)  # IPC_RMID: the test leaves nothing behind
        return f"done: segment {made}"

    def _sysv_msg(self) -> str:
        libc = ctypes.CDLL(None, use_errno=True)
        made = libc.msgget(0, 0o1000 | 0o600)
        if made < 0:
            return f"refused: errno {ctypes.get_errno()}"
        libc.msgctl(made, 0, None)
        return f"done: queue {made}"

    def _environment(self) -> dict[str, str]:
        return dict(os.environ)

    def _fds(self) -> builtins.list[int]:  # `list` here is the operation
        found = []
        for fd in range(1024):
            try:
                os.fstat(fd)
            except OSError:
                continue
            found.append(fd)
        return found

    def _garbage(self) -> str:
        os.write(1, len(b"not json at all").to_bytes(4, "big") + b"not json at all")
        return "garbage written"

    def _huge(self) -> str:
        # A header announcing a 3 GiB payload.
        header = b'{"type":"result","value":null,"bytes":3000000000}'
        os.write(1, len(header).to_bytes(4, "big") + header)
        return "huge frame written"

    def _print(self) -> str:
        print("a stray print that must not reach the frames")
        return "printed"

    def _crash(self) -> str:
        os._exit(9)

    def _memory_error(self) -> str:
        raise MemoryError

    def _limit(self) -> str:
        raise Limit("entries: too many entries in one directory")

    def _internal(self) -> str:
        raise ValueError("a\nmultiline\ntraceback-like reason")

    def _past_end(self) -> str:
        self.image.seek(self.size - 10)
        return self.image.read(100).hex()

    def _far_past_end(self) -> str:
        self.image.seek(self.size * 4)
        return self.image.read(100).hex()


def _entry(name: str) -> dict[str, Any]:
    return {"name": name, "type": "file", "size": 0, "mode": 0o644, "uid": 0, "gid": 0,
            "mtime": None, "target": None}


def _attempt(action: Any) -> str:
    try:
        result = action()
    except OSError as error:
        return f"refused: {type(error).__name__} {error.errno}"
    return f"done: {result!r}"[:200]
