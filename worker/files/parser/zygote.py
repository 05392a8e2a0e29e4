"""The fork server (zygote) of parser children: imports once what a child needs, then forks
a child per request, which seals itself exactly as a spawned one does (main.py).

Why: a spawned child spends most of its ~0.2-0.6 s importing Python and the Dissect
packages; versions of a file across 30 restore points open 30 sessions, one child each
(a child never reads two restore points). A fork of this warm process costs a few ms.

What it is: one long-lived, single-threaded process per child configuration, started by
the file service as a child is (worker/files/zygote.py: `python -I -c`, LANG only, cwd /,
a session of its own, no fd but its control socket), that

- sets the child's rlimits on itself except those a fork server cannot live with: no
  RLIMIT_NPROC (it forks) and no RLIMIT_CPU (it lives as long as the service; each child
  sets its own, and a child's CPU time starts at 0), and a few more fds;
- enters a user, network and IPC namespace (its children are born in the first two: no
  network; each forked child enters an IPC namespace of its own);
- imports the operations' module, its PRELOAD, the codecs, pyseccomp; then gc.freeze(),
  so that a child's collections do not touch (and copy) the zygote's objects;
- is not sealed: it must fork, and it never sees a byte of a tenant's image. It holds no
  credential (it was started as a child is), reads only its control socket, and exits
  when that ends (the service went away).

Control (a SOCK_SEQPACKET socketpair with the service, one JSON object per message):
    zygote -> service  {"type": "ready", "pid": p, "namespaces": bool}   once, at start
    service -> zygote  {"op": "fork"}
    zygote -> service  {"type": "forked", "pid": c} + fds [child's stdin (write end),
                       child's stdout (read end), a pidfd of the child] (SCM_RIGHTS)
    service -> zygote  {"op": "status", "pid": c}    once the pidfd says the child exited
    zygote -> service  {"type": "status", "pid": c, "status": s | null}

The pidfd is opened by the zygote while the child is its unreaped child, so it names that
child and no later process with the same pid: the service signals and waits on it without
a pid reuse race, though the child is not its own child. The zygote reaps its children
(WNOHANG, at every message and every second) and keeps their exit statuses until asked
(a bounded number). A forked child calls setsid(): its process group is its own, and it
can create no other process (RLIMIT_NPROC 0, seccomp), so killing it by its pidfd kills
its group. A zygote that dies takes no child with it: they are reparented to init, the
service still holds their pipes and pidfds; only their exit statuses are lost (a session
then reads a death as "memory" rather than "cpu").

The forked child, before anything else: setsid, its pipes on fds 0 and 1 (fd 2 is the
zygote's /dev/null), every other fd closed (the control socket, the other children's
pipe ends), its rlimits, then main.run: the same seal as a spawned child. Children share
the zygote's namespaces (they cannot reach each other: seccomp refuses ptrace, signals to
others and every open), its address space layout and its hash seed."""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import select
import socket
import sys
import threading
from collections import OrderedDict
from typing import Any, Final

from worker.files.parser import main as child

ZYGOTE_NOFILE: Final = 64
"""The zygote's fd limit: its control socket, and for a moment a child's pipes and pidfd."""

KEPT_STATUSES: Final = 1024
"""Exit statuses kept until the service asks (it asks for every child it reaps)."""

REAP_SECONDS: Final = 1.0

EXIT_FORKED_CHILD_FAILED: Final = 4
"""A forked child that failed before it served (its limits, its seal)."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="cairn-parser-zygote")
    parser.add_argument("--control", type=int, required=True)
    arguments, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    options = child.parse_options(rest)
    # Its lowest free fd (3): a forked child closes every fd below ZYGOTE_NOFILE.
    control = socket.socket(fileno=os.dup(arguments.control))
    os.close(arguments.control)
    limit_zygote(options.memory)
    isolated = child.enter_namespaces()
    sys.stdout = sys.stderr
    child.load_factory(options.factory)
    import pyseccomp  # noqa: F401  (the child's seal imports it: no open() then)

    if threading.active_count() != 1:
        raise SystemExit("a thread was started by an import: forking is not safe")
    gc.freeze()
    Zygote(control, options, isolated).serve()


def limit_zygote(memory: int) -> None:
    """The child's limits, but for those a fork server needs (NPROC, CPU, NOFILE)."""
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (ZYGOTE_NOFILE, ZYGOTE_NOFILE))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))


class Zygote:
    def __init__(self, control: socket.socket, options: argparse.Namespace,
                 isolated: bool) -> None:
        self.control = control
        self.options = options
        self.isolated = isolated
        self.statuses: OrderedDict[int, int] = OrderedDict()

    def serve(self) -> None:
        self.send({"type": "ready", "pid": os.getpid(), "namespaces": self.isolated})
        poller = select.poll()
        poller.register(self.control, select.POLLIN)
        while True:
            ready = poller.poll(int(REAP_SECONDS * 1000))
            self.reap()
            if not ready:
                continue
            message = self.control.recv(1 << 16)
            if not message:
                return  # the service closed its end
            request = json.loads(message)
            if request.get("op") == "fork":
                self.fork()
            elif request.get("op") == "status":
                pid = int(request["pid"])
                self.send({"type": "status", "pid": pid, "status": self.statuses.pop(pid, None)})
            else:
                raise SystemExit(f"unknown request {request!r}")

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        data = json.dumps(message).encode()
        if fds:
            socket.send_fds(self.control, [data], fds)
        else:
            self.control.send(data)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = os.waitstatus_to_exitcode(status)
            while len(self.statuses) > KEPT_STATUSES:
                self.statuses.popitem(last=False)

    def fork(self) -> None:
        to_child, from_parent = os.pipe()
        from_child, to_parent = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = EXIT_FORKED_CHILD_FAILED
            try:
                self.become_child(to_child, to_parent)
                code = 0
            except SystemExit as leaving:
                code = leaving.code if isinstance(leaving.code, int) else code
            finally:
                os._exit(code)
        os.close(to_child)
        os.close(to_parent)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = -1
        try:
            if pidfd < 0:
                self.send({"type": "failed", "pid": pid})
            else:
                self.send({"type": "forked", "pid": pid}, [from_parent, from_child, pidfd])
        finally:
            for fd in (from_parent, from_child, pidfd):
                if fd >= 0:
                    os.close(fd)

    def become_child(self, stdin: int, stdout: int) -> None:
        """In the forked child: its own session, its pipes only, its limits, then the seal
        and the calls of a spawned child (main.run). Never returns into the zygote."""
        os.setsid()
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.closerange(3, ZYGOTE_NOFILE)
        options = self.options
        child.limit_resources(options.memory, options.cpu, options.nofile)
        # The zygote's user and network namespaces already hold it; its IPC namespace is
        # its own (no System V object shared with another tenant's parser), which the
        # zygote's user namespace allows. Where the kernel refused the zygote they are
        # refused here as well, but it costs nothing to ask.
        isolated = (child.unshare(child.CLONE_NEWIPC) if self.isolated
                    else child.enter_namespaces())
        child.run(options, isolated)
