"""Two steps of a job that wait on different things (the source cluster's mon for a
snapshot, the target pool for an image and a manifest) run at the same time, so a job pays
for the slower of them rather than for both."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


def side_by_side(stack: ExitStack, here: Callable[[ExitStack], A],
                 there: Callable[[ExitStack], B]) -> tuple[A, B]:
    """Run `there` on a helper thread while `here` runs on this one. Each side opens what
    it keeps (images, handles) on its own stack, and both stacks close with `stack`: what
    one side opened is closed even when the other failed. Returns once both ended; the
    error of `here`, else of `there`, is raised."""
    here_stack, there_stack = ExitStack(), ExitStack()
    stack.enter_context(there_stack)
    stack.enter_context(here_stack)
    with ThreadPoolExecutor(1, thread_name_prefix="side") as pool:
        future = pool.submit(there, there_stack)
        try:
            mine = here(here_stack)
        except BaseException:
            future.exception()  # wait: its stack must not close under it
            raise
    return mine, future.result()
