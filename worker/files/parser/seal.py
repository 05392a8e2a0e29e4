"""The parser child's seccomp filter (step 4 of worker/files/parser/main.py): loaded once
the child has imported all it will use, before it reads its first call."""

from __future__ import annotations

import errno
import os
import resource
from typing import Final

DENIED: Final = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "execve", "execveat", "fork", "vfork", "clone",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "process_madvise",
    "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "fsopen", "fsmount",
    "fspick", "move_mount", "open_tree", "mount_setattr",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "memfd_create",
    "open_by_handle_at", "name_to_handle_at",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink",
    "symlinkat", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat", "chmod", "fchmod",
    "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "ftruncate",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "utime", "utimes", "utimensat", "futimesat", "setrlimit", "setpriority", "personality",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid", "ioprio_set",
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget",
    "semop", "semtimedop", "semctl", "mq_open", "mq_timedsend", "mq_timedreceive",
    "mq_unlink", "mq_notify", "mq_getsetattr",
)
"""What a filesystem parser never does, refused with EPERM."""

OPENS: Final = ("open", "openat", "openat2", "creat")
"""Refused with EACCES after the warm-up: the child reads the image through its pipe only."""

SIGNALS: Final = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
"""Allowed only towards the child itself (a same-user process could otherwise be hit)."""

OWN_PROCESS_ONLY: Final = ("sched_setscheduler", "sched_setparam", "sched_setattr",
                           "sched_setaffinity", "prlimit64", "migrate_pages", "move_pages")
"""Allowed only with the pid 0 or the child's own (first argument): another process of
the same user (the file service, another tenant's parser) is never rescheduled to
SCHED_IDLE, pinned to one CPU, its rlimits read or its pages moved."""


def other_pids(own: int) -> list[tuple[int, int, int]]:
    """Comparisons of a 64-bit argument, (op, mask or value, value), one per seccomp rule,
    that together match every pid but 0 and `own`: above `own`, and the aligned blocks
    of 1..own-1 (a rule may compare an argument once, so a range is a few masked ones)."""
    import pyseccomp as seccomp

    found: list[tuple[int, int, int]] = [(seccomp.GT, own, 0)]
    low, high = 1, own - 1
    while low <= high:
        size = low & -low  # the largest aligned block starting at low...
        while size > high - low + 1:
            size >>= 1  # ... that stays within the range
        found.append((seccomp.MASKED_EQ, ((1 << 64) - 1) ^ (size - 1), low))
        low += size
    return found


def seal() -> None:
    """Loads the seccomp filter: from here on, the refusals in the module's docstring."""
    import pyseccomp as seccomp

    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    deny = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        rules.add_rule(deny, name)
    for name in OPENS:
        rules.add_rule(seccomp.ERRNO(errno.EACCES), name)
    # glibc falls back from clone3 to clone on ENOSYS, which is refused too.
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    own = os.getpid()
    for name in SIGNALS:
        rules.add_rule(deny, name, seccomp.Arg(0, seccomp.NE, own))
    rules.add_rule(deny, "prlimit64", seccomp.Arg(2, seccomp.NE, 0))
    for name in OWN_PROCESS_ONLY:
        for op, first, second in other_pids(own):
            rules.add_rule(deny, name, seccomp.Arg(0, op, first, second))
    for name in ("mmap", "mprotect", "pkey_mprotect"):
        rules.add_rule(deny, name, seccomp.Arg(2, seccomp.MASKED_EQ, 0x4, 0x4))  # PROT_EXEC
    rules.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.EQ, 0x5412))  # TIOCSTI
    rules.load()
