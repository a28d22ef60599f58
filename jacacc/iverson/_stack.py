"""Recursive traversals without deep Python recursion: generators driven by an explicit stack.

Programs of the tensor language can nest thousands of nodes deep (a chain of
1000 ``tanh(e) + x[1]`` steps, the ``let`` chain of its gradient), far past
Python's recursion limit.  The traversals stay written as recursions — they
mirror the paper's rules — but as *generators*: where a function would call
itself it yields the sub-call, ``value = yield step(child)``, and
:func:`drive` runs the calls on a list instead of the Python stack.

Examples
--------
>>> @iterative
... def depth(n):
...     return 0 if n == 0 else 1 + (yield depth.step(n - 1))
>>> depth(100_000)
100000
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator
from typing import Any

__all__ = ["drive", "iterative"]

Step = Generator[Any, Any, Any]


def drive(root: Step) -> Any:
    """Run ``root`` and every generator it yields (a sub-call) to completion; return its value.

    A sub-call's return value is sent back into its caller, and an exception it
    raises is thrown into its caller at the ``yield`` (so ``try`` / ``finally``
    in a step behaves as in a recursive function).
    """
    stack: list[Step] = [root]
    value: Any = None
    error: BaseException | None = None
    while True:
        top = stack[-1]
        try:
            if error is not None:
                pending, error = error, None
                call = top.throw(pending)
            else:
                call = top.send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            value = stop.value
            continue
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's frame
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        stack.append(call)
        value = None


def iterative(step: Callable[..., Step]) -> Callable[..., Any]:
    """Turn a generator function into a plain function run by :func:`drive`.

    The generator function stays available as ``.step``: inside a step, a
    sub-call is ``(yield f.step(args))``.
    """

    @functools.wraps(step)
    def run(*args: Any, **kwargs: Any) -> Any:
        return drive(step(*args, **kwargs))

    run.step = step  # type: ignore[attr-defined]
    return run
