"""The parser child: parses a tenant's partitions and filesystems, sealed.

The bytes it parses are the tenant's, so this process is the one a crafted filesystem
attacks. It starts with nothing worth taking (an empty environment, no fds but its pipes:
worker/files/sandbox.py; or forked by the fork server, zygote.py, which imported step 3
once for all) and, before it reads its first call, it locks itself down:

1. rlimits: address space (the session's memory limit), CPU time for its whole life,
   FSIZE 0 (it writes no file), no core dumps, few fds, no new processes;
2. a new user, network and IPC namespace when the kernel allows it (no network at all,
   no System V object shared with any other process; the parent is told when it could
   not, and logs it once), and an OOM score of 1000: when the host runs short of
   memory, a parser goes first, never the file service or the API;
3. it imports everything it will use (the operations' module, the codecs filesystems decode
   names with), because next
4. a seccomp filter refuses what a parser never needs: sockets, exec, fork and clone,
   ptrace and other processes' memory, namespaces and mounts, keyrings, bpf, io_uring,
   changes to files (unlink, rename, chmod...), System V IPC and POSIX message queues,
   I/O and CPU priorities, signals, scheduling, CPU affinity and rlimits aimed at any
   other process, executable mappings, and every open() at all: after the warm-up nothing is
   read from the filesystem of the host, so neither a keyring nor /proc/self can be.

Then it serves calls on stdin/stdout (worker/files/protocol.py). The image it parses is a
RemoteImage: each read it makes is asked of the parent, whole aligned blocks at a time,
kept in a small cache, since a filesystem reads its metadata in many small pieces.
Only frames go to stdout; print() and logging go to stderr (/dev/null by default)."""

from __future__ import annotations

import argparse
import errno
import importlib
import io
import os
import resource
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, BinaryIO, Final

from worker.files import protocol
from worker.files.parser.errors import ImageReadFailed
from worker.files.parser.seal import seal

PRODUCTION_FACTORY: Final = "worker.files.parser.ops:Operations"

BLOCK_SIZE: Final = 256 << 10
CACHE_BLOCKS: Final = 32
"""8 MiB of 256 KiB blocks: superblocks, inode tables and directories of one filesystem
near each other; one round trip to the parent fetches a whole block."""

CACHED_READ_BYTES: Final = 1 << 20
"""Reads larger than this (a file's contents) bypass the cache rather than flush it."""

WARM_MODULES: Final = (
    # Codecs are imported on their first use: a filesystem's names (UTF-16 on NTFS and
    # FAT's long names, code pages on FAT's short ones) would fail once open() is refused.
    "encodings.utf_8", "encodings.utf_16", "encodings.utf_16_le", "encodings.utf_16_be",
    "encodings.utf_32", "encodings.latin_1", "encodings.ascii", "encodings.cp437",
    "encodings.cp850", "encodings.cp1252", "unicodedata", "datetime", "fnmatch", "stat",
    "posixpath", "zlib", "lzma", "json", "traceback",
)

CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWNET: Final = 0x40000000
CLONE_NEWIPC: Final = 0x08000000

OOM_SCORE_ADJ: Final = b"1000"
"""The child is the first process the kernel's OOM killer takes (the most it may say)."""

EXIT_PROTOCOL: Final = 3


class ImageUnavailable(ImageReadFailed, OSError):
    """The parent could not read these bytes of the restore point (a damaged block): an
    I/O error to the filesystem parser, and the parent fails the call whatever it says."""


Fetch = Callable[[int, int], bytes]


class RemoteImage(io.RawIOBase):
    """A restore point's bytes, read through the parent: seekable, read-only, `size` long.

    Small reads are served from whole aligned BLOCK_SIZE blocks kept in an LRU cache of
    CACHE_BLOCKS; the blocks one read lacks are asked for in one request per run."""

    def __init__(self, fetch: Fetch, size: int, *, block_size: int = BLOCK_SIZE,
                 cache_blocks: int = CACHE_BLOCKS) -> None:
        super().__init__()
        self._fetch = fetch
        self.size = size
        self._block = block_size
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._cache_blocks = cache_blocks
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence {whence}")
        if base + offset < 0:
            raise OSError(errno.EINVAL, "negative seek position")
        self._position = base + offset
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            size = max(0, self.size - self._position)
        data = self.pread(self._position, size)
        self._position += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def pread(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of the image, clipped at its end."""
        end = min(offset + max(0, length), self.size)
        if offset >= end:
            return b""
        if end - offset > CACHED_READ_BYTES:
            return self._fetch_all(offset, end - offset)
        first, last = offset // self._block, (end - 1) // self._block
        self._load(first, last)
        data = b"".join(self._cache[index] for index in range(first, last + 1))
        start = offset - first * self._block
        return data[start:start + end - offset]

    def _load(self, first: int, last: int) -> None:
        missing = [index for index in range(first, last + 1) if index not in self._cache]
        for index in range(first, last + 1):
            if index in self._cache:
                self._cache.move_to_end(index)
        while missing:
            run = 1
            while run < len(missing) and missing[run] == missing[0] + run:
                run += 1
            start = missing[0] * self._block
            data = self._fetch_all(start, min(run * self._block, self.size - start))
            for step in range(run):
                self._cache[missing[step]] = data[step * self._block:(step + 1) * self._block]
            missing = missing[run:]
        while len(self._cache) > max(self._cache_blocks, last - first + 1):
            self._cache.popitem(last=False)

    def _fetch_all(self, offset: int, length: int) -> bytes:
        parts: list[bytes] = []
        while length > 0:
            part = self._fetch(offset, min(length, protocol.MAX_READ_BYTES))
            if not part:
                break
            parts.append(part)
            offset += len(part)
            length -= len(part)
        return b"".join(parts)


OperationsFactory = Callable[[RemoteImage, int], Any]
"""Operations(image, size): worker/files/parser/ops.py's, or a test's stand-in."""


class Channel:
    """The child's end of the pipes: frames in from the parent, frames out to it."""

    def __init__(self, incoming: BinaryIO, outgoing: BinaryIO, max_reply: int,
                 max_header: int | None = None) -> None:
        self._in = incoming
        self._out = outgoing
        self.max_reply = max_reply
        self.max_header = max_reply if max_header is None else max_header

    def receive(self) -> protocol.Frame | None:
        return protocol.read_frame(self._in, protocol.CHILD_READS)

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        frame = protocol.encode(header, payload)
        if header.get("type") == protocol.RESULT and (
                len(frame) > self.max_reply or len(frame) - len(payload) > self.max_header):
            frame = protocol.encode({"type": protocol.ERROR, "error": protocol.LIMIT,
                                     "message": "reply size: the answer is too large"})
        view = memoryview(frame)
        while view:
            written = self._out.write(view)
            view = view[written or 0:]
        self._out.flush()

    def fetch(self, offset: int, length: int) -> bytes:
        """Asks the parent for image bytes; ImageUnavailable when it could not read them."""
        self.send({"type": protocol.READ, "offset": offset, "length": length})
        frame = self.receive()
        if frame is None:
            raise SystemExit(EXIT_PROTOCOL)
        if frame.type == protocol.DATA and len(frame.payload) <= length:
            return frame.payload
        if frame.type == protocol.FAIL:
            raise ImageUnavailable(errno.EIO, str(frame.header.get("message", "read failed")))
        raise SystemExit(EXIT_PROTOCOL)


def main(argv: list[str] | None = None) -> None:
    options = parse_options(sys.argv[1:] if argv is None else argv)
    limit_resources(options.memory, options.cpu, options.nofile)
    run(options, enter_namespaces())


def run(options: argparse.Namespace, isolated: bool) -> None:
    """Steps 3 and 4, then the calls: for a child spawned (main) or forked by the fork
    server (worker/files/parser/zygote.py), its limits set and namespaces entered."""
    incoming = open(0, "rb", closefd=False)  # noqa: SIM115 (fd 0, for life)
    outgoing = open(1, "wb", buffering=0, closefd=False)  # noqa: SIM115 (fd 1, for life)
    # Nothing but frames may reach fd 1: anything printed goes where stderr goes.
    sys.stdout = sys.stderr
    give_way_to_oom()
    factory = load_factory(options.factory)
    seal()
    channel = Channel(incoming, outgoing, options.max_reply, options.max_header)
    channel.send({"type": protocol.READY, "pid": os.getpid(), "namespaces": isolated})
    serve(channel, factory)


def parse_options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cairn-parser")
    parser.add_argument("--factory", default=PRODUCTION_FACTORY)
    parser.add_argument("--memory", type=int, default=512 << 20)
    parser.add_argument("--cpu", type=int, default=300)
    parser.add_argument("--nofile", type=int, default=16)
    parser.add_argument("--max-reply", type=int, default=16 << 20)
    parser.add_argument("--max-header", type=int, default=4 << 20)
    return parser.parse_args(argv)


def limit_resources(memory: int, cpu: int, nofile: int) -> None:
    """The child's own rlimits, set before any byte of the image is read (hard and soft:
    it cannot raise them again). CPU's hard limit is a second later: SIGXCPU, then KILL."""
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))


def enter_namespaces() -> bool:
    """A user namespace (holding no capability outside it), a network namespace with no
    interface but a down loopback and an IPC namespace of its own; False where the kernel
    refuses (then seccomp's refusal of socket() and of System V IPC keeps them out)."""
    return unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC)


def unshare(flags: int) -> bool:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.unshare(flags)) == 0


def give_way_to_oom() -> None:
    """OOM score 1000 (raising one's own needs no privilege); where /proc is not there to
    say it, the child carries on: its RLIMIT_AS bounds it all the same."""
    try:
        with open("/proc/self/oom_score_adj", "wb", buffering=0) as adjust:
            adjust.write(OOM_SCORE_ADJ)
    except OSError:
        pass


def load_factory(spec: str) -> OperationsFactory:
    """The operations class named "module:attribute", imported with everything it says it
    needs (a module's PRELOAD: names of modules its code imports late) and WARM_MODULES."""
    module_name, _, attribute = spec.partition(":")
    module = importlib.import_module(module_name)
    for name in (*WARM_MODULES, *getattr(module, "PRELOAD", ())):
        importlib.import_module(name)
    factory: OperationsFactory = getattr(module, attribute or "Operations")
    return factory


def serve(channel: Channel, factory: OperationsFactory) -> None:
    """Answers calls until the parent closes stdin."""
    operations: Any = None
    while (frame := channel.receive()) is not None:
        if frame.type != protocol.CALL or frame.header.get("op") not in protocol.OPS:
            raise SystemExit(EXIT_PROTOCOL)
        op = str(frame.header["op"])
        arguments = frame.header.get("args") or {}
        payload = b""
        try:
            if not isinstance(arguments, dict):
                raise TypeError("a call's arguments are not an object")
            if op == protocol.OPEN:
                size = int(arguments["size"])
                operations = factory(RemoteImage(channel.fetch, size), size)
                value: Any = None
            elif operations is None:
                raise RuntimeError("no image is open")
            elif op == "read":
                payload = bytes(operations.read(**arguments))
                value = None
            else:
                value = getattr(operations, op)(**arguments)
            channel.send({"type": protocol.RESULT, "value": value}, payload)
        except MemoryError:
            payload = b""
            channel.send({"type": protocol.ERROR, "error": protocol.LIMIT,
                          "message": "memory: the parser ran out of its memory limit"})
        except RecursionError:
            channel.send({"type": protocol.ERROR, "error": protocol.LIMIT,
                          "message": "depth: the filesystem nests too deep to parse"})
        except Exception as error:
            channel.send({"type": protocol.ERROR, "error": error_name(error),
                          "message": protocol.message_of(error)})


def error_name(error: BaseException) -> str:
    """The protocol's name for a parser error: the nearest class in its MRO named as one
    of worker/files/parser/errors.py's (NotFound, ...); anything else is Internal."""
    for kind in type(error).__mro__:
        if kind.__name__ in protocol.PARSER_ERRORS:
            return kind.__name__
    return protocol.INTERNAL
