"""What every demo part shares: its :class:`Report` of checks, honest timing and references.

A part prints detail lines, one headline (its number beside a reference) and
one line per check; :class:`Report` keeps the checks so that the runner can
say whether the part passed.  :func:`best_time` times warm calls, best of a
few rounds; :func:`central_differences` and :func:`relative_error` are the
independent references every part can fall back on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc import verify
from jacacc.bench import time_call

__all__ = ["Check", "Report", "best_time", "central_differences", "format_time", "missing_dependency",
           "relative_error"]


@dataclass(frozen=True)
class Check:
    """One check of a part: what was compared and whether it held."""

    what: str
    passed: bool


class Report:
    """The checks of one demo part, printed as they are made.

    Parameters
    ----------
    part : str
        The part's name (for messages).

    Examples
    --------
    >>> report = Report("example")
    >>> report.close("2 + 2", np.array([4.0]), np.array([4.0]), rtol=1e-12)
      check: 2 + 2: relative error 0.0e+00 (rtol 1e-12)  ok
    True
    >>> report.passed
    True
    >>> report.require("1 < 0", 1 < 0)
      check: 1 < 0  FAILED
    False
    >>> report.passed, report.summary()
    (False, '1 of 2 checks failed')
    """

    def __init__(self, part: str) -> None:
        self.part = part
        self.checks: list[Check] = []
        self.errors: list[str] = []

    # ------------------------------------------------------------------ printing
    @staticmethod
    def line(text: str = "") -> None:
        """A detail line (indented)."""
        print(f"  {text}" if text else "")

    @staticmethod
    def headline(text: str) -> None:
        """The part's headline: its number beside a reference."""
        print(f"  headline: {text}")

    @staticmethod
    def skip(what: str, reason: str) -> None:
        """A comparison left out (an optional peer not importable): not a failure."""
        print(f"  skipped: {what} ({reason})")

    # ------------------------------------------------------------------ checks
    def require(self, what: str, passed: Any) -> bool:
        """Record and print a check that holds when ``passed`` is true."""
        ok = bool(passed)
        self.checks.append(Check(what, ok))
        print(f"  check: {what}  {'ok' if ok else 'FAILED'}")
        return ok

    def close(self, what: str, got: Any, want: Any, rtol: float) -> bool:
        """Check that ``got`` equals the reference ``want`` to ``rtol`` (see :func:`relative_error`)."""
        err = relative_error(got, want)
        return self.require(f"{what}: relative error {err:.1e} (rtol {rtol:g})", err <= rtol)

    def error(self, exc: BaseException) -> None:
        """A part that raised: a failure, reported in one line."""
        if missing_dependency(exc):
            message = (f"needs a module that is not importable ({type(exc).__name__}: {exc}); "
                       "`pip install 'jacacc[all-cpu]'` installs every optional dependency")
        else:
            message = f"{type(exc).__name__}: {exc}"
        self.errors.append(message)
        print(f"  error: {message}")

    @property
    def passed(self) -> bool:
        """True when at least one check ran, every check held and nothing raised."""
        return bool(self.checks) and not self.errors and all(c.passed for c in self.checks)

    def summary(self) -> str:
        """``"4 checks passed"``, ``"1 of 4 checks failed"``, or what went wrong otherwise."""
        failed = sum(not c.passed for c in self.checks)
        if self.errors:
            return f"raised an error after {len(self.checks)} check(s)"
        if not self.checks:
            return "no check ran"
        if failed:
            return f"{failed} of {len(self.checks)} checks failed"
        return f"{len(self.checks)} check{'s' if len(self.checks) != 1 else ''} passed"


def missing_dependency(exc: BaseException) -> bool:
    """Whether ``exc`` says an optional dependency is missing (an ImportError from outside jacacc,
    or jacacc's own :class:`~jacacc.errors.MissingExtraError`), not a bug in jacacc's imports.

    Examples
    --------
    >>> missing_dependency(ModuleNotFoundError("No module named 'torch'", name="torch"))
    True
    >>> missing_dependency(ImportError("cannot import name 'x'", name="jacacc.tensor"))
    False
    """
    return isinstance(exc, ImportError) and (exc.name or "").split(".")[0] != "jacacc"


# ---------------------------------------------------------------------------- references
def relative_error(got: Any, want: Any) -> float:
    """``max|got − want| / max(max|want|, 1e-300)``; ``inf`` for a shape mismatch or a non-finite value.

    Examples
    --------
    >>> relative_error([1.0, 2.0], [1.0, 2.5])
    0.2
    >>> relative_error([1.0], [1.0, 2.0])
    inf
    """
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    if got.shape != want.shape or not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
        return float("inf")
    if want.size == 0:
        return 0.0
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-300)


def central_differences(f: Callable[[np.ndarray], Any], x: Any, step: float = 1e-6) -> np.ndarray:
    """:func:`jacacc.verify.central_differences` for arrays of any shape: the Jacobian of ``f`` at
    ``x`` with shape ``f(x).shape + x.shape``.

    Examples
    --------
    >>> np.round(central_differences(lambda v: v ** 2, np.array([1.0, 3.0])), 6).tolist()
    [[2.0, 0.0], [0.0, 6.0]]
    >>> central_differences(lambda m: m.sum(), np.ones((2, 3))).shape
    (2, 3)
    """
    x = np.asarray(x, dtype=float)
    flat = verify.central_differences(lambda v: f(v.reshape(x.shape)), x, step)
    return flat.reshape(np.shape(f(x)) + x.shape)


# ---------------------------------------------------------------------------- timing
def best_time(fn: Callable[[], Any], rounds: int = 5, min_round: float = 0.02) -> float:
    """Seconds per warm call of ``fn``: one call first (compilation, caches, first-call planning left
    out), then :func:`jacacc.bench.time_call` — the best of ``rounds`` rounds, each looping the call
    for at least ``min_round`` seconds.

    Examples
    --------
    >>> best_time(lambda: sum(range(100)), rounds=2, min_round=0.001) > 0
    True
    """
    fn()
    return time_call(fn, repeat=rounds, min_time=min_round)


def format_time(seconds: float) -> str:
    """A duration with its unit: ``"37.1 µs"``, ``"2.10 ms"``, ``"1.23 s"``.

    Examples
    --------
    >>> format_time(3.71e-5), format_time(0.0021), format_time(1.234)
    ('37.1 µs', '2.1 ms', '1.23 s')
    """
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"
