"""Progress of long work on stderr, through tqdm: quiet when stderr is not a terminal.

Two shapes of long work occur in jacacc:

* a known number of steps — the kernel benchmark's (implementation, size)
  jobs, an experiment's problems × methods: :func:`progress_bar`, a
  ``tqdm`` bar;
* a search against a time limit — ``anneal``, ``cpsat``, ``optimal`` —
  reporting :class:`~jacacc.orders.local_search.Progress` records (best
  cost, bound, elapsed) to a ``progress`` callback: :class:`SearchProgress`,
  a bar over the time limit with the best cost and bound beside it.

Both follow one rule for when to show anything: ``enabled=None`` (the
default) shows the bar only when stderr is a terminal, so logs, pipes and CI
stay clean; ``True`` forces it, ``False`` silences it.  Lines an experiment
prints while a bar is open go through :func:`note`, which keeps the bar
intact.  tqdm is imported on first use, so ``import jacacc`` stays light.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> with progress_bar(total=3, desc="demo", enabled=True, file=out) as bar:
...     for _ in range(3):
...         bar.update()
>>> "3/3" in out.getvalue()
True
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["SLOW_WORK_DELAY", "SearchProgress", "SlowWork", "note", "progress_bar", "shows_progress", "slow_work"]


def _tqdm() -> Any:
    # a dependency of jacacc, imported on first use only: `import jacacc` stays light
    import tqdm

    return tqdm.tqdm


def shows_progress(enabled: bool | None, stream: Any = None) -> bool:
    """Whether a bar is drawn: ``enabled``, or when it is None, whether ``stream``
    (default stderr) is a terminal.

    Examples
    --------
    >>> import io
    >>> shows_progress(None, io.StringIO()), shows_progress(True, io.StringIO())
    (False, True)
    """
    if enabled is not None:
        return bool(enabled)
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str | None = None,
    unit: str = "it",
    enabled: bool | None = None,
    file: Any = None,
    **options: Any,
) -> Any:
    """A tqdm progress bar on stderr (or ``file``), drawn only where
    :func:`shows_progress` says so.

    Parameters
    ----------
    iterable : iterable, optional
        Wrapped as ``tqdm(iterable)``: iterating the bar advances it.
    total : int, optional
        Number of steps when there is no iterable (advance with ``bar.update()``).
    desc, unit : str
        tqdm's label and unit.
    enabled : bool or None
        None: draw only when the stream is a terminal.
    file : file-like, optional
        Where to draw (default stderr).
    **options
        Any other tqdm option (``leave``, ``postfix``, ...).

    Returns
    -------
    tqdm.tqdm
        Also when silent (tqdm's ``disable=True``), so callers never branch.

    Examples
    --------
    >>> [x * x for x in progress_bar(range(3), enabled=False)]
    [0, 1, 4]
    """
    stream = sys.stderr if file is None else file
    return _tqdm()(iterable, total=total, desc=desc, unit=unit, file=stream,
                   disable=not shows_progress(enabled, stream), dynamic_ncols=True, **options)


def note(message: str, *, file: Any = None) -> None:
    """Print a line (to stdout by default) without breaking an open progress bar.

    Examples
    --------
    >>> note("3 problems done")
    3 problems done
    """
    _tqdm().write(message, file=sys.stdout if file is None else file)


#: seconds a piece of work runs before :func:`slow_work` says what it is doing
SLOW_WORK_DELAY = 2.0


class SlowWork:
    """What :func:`slow_work` yields: :meth:`stage` names the step now running; once the work has run
    ``delay`` seconds, each stage is announced on the stream as it begins (``jacacc: compiling …``)
    and the end with the seconds taken."""

    def __init__(self, what: str, delay: float, shown: bool, stream: Any) -> None:
        self.what, self.delay, self.shown, self.stream = what, delay, shown, stream
        self.current = what
        self.announced = False
        self.start = time.perf_counter()
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if shown and delay <= 0:  # at once, on this thread: nothing to wait for
            self._announce()
        elif shown:
            self._timer = threading.Timer(delay, self._announce)
            self._timer.daemon = True
            self._timer.start()

    def _announce(self) -> None:
        with self._lock:
            self.announced = True
            self._write(f"jacacc: {self.what}: {self.current} …" if self.current != self.what
                        else f"jacacc: {self.what} …")

    def _write(self, line: str) -> None:
        try:
            print(line, file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed stream: progress is never worth an error
            pass

    def stage(self, text: str) -> None:
        """The step now running (``tracing``, ``planning``, ``compiling 3 kernels``)."""
        with self._lock:
            self.current = text
            if self.announced:
                self._write(f"jacacc: {self.what}: {text} …")

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self.announced:
                self._write(f"jacacc: {self.what}: done in {time.perf_counter() - self.start:.1f} s")


class _SlowWorkContext:
    def __init__(self, work: SlowWork) -> None:
        self.work = work

    def __enter__(self) -> SlowWork:
        return self.work

    def __exit__(self, *exc: Any) -> None:
        self.work.close()


def slow_work(what: str, *, delay: float | None = None, enabled: bool | None = None,
              file: Any = None) -> _SlowWorkContext:
    """A context for work that may take seconds (a first call's tracing, planning and compiling, a
    kernel's compilation): silent when it ends within ``delay`` seconds (default
    :data:`SLOW_WORK_DELAY`), else it says on stderr (or ``file``) what it is doing, stage by stage,
    and how long it took — only where :func:`shows_progress` says so (a terminal).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> with slow_work("hessian of f", delay=0.0, enabled=True, file=out) as work:
    ...     time.sleep(0.05)
    ...     work.stage("compiling 2 kernels")
    >>> print(out.getvalue().splitlines()[1])
    jacacc: hessian of f: compiling 2 kernels …
    >>> with slow_work("quiet", enabled=False) as work:
    ...     work.stage("nothing is printed")
    """
    stream = sys.stderr if file is None else file
    return _SlowWorkContext(SlowWork(what, SLOW_WORK_DELAY if delay is None else delay,
                                     shows_progress(enabled, stream), stream))


class SearchProgress:
    """A ``progress`` callback for the searches: a bar over the time limit, with
    the best cost found and the proven bound as its postfix.

    Parameters
    ----------
    time_limit : float, optional
        The search's limit in seconds: the bar's length.  None: an open-ended
        search (``optimal`` without a limit), shown as elapsed time only.
    enabled : bool or None
        As in :func:`progress_bar`.
    file : file-like, optional
        Where to draw (default stderr).

    Examples
    --------
    >>> import io
    >>> from jacacc.orders.local_search import Progress
    >>> out = io.StringIO()
    >>> bar = SearchProgress(2.0, enabled=True, file=out)
    >>> bar(Progress("cpsat", 12, 9, 0.5)); bar(Progress("cpsat", 10, 10, 1.0)); bar.close()
    >>> "best=10" in out.getvalue() and "bound=10" in out.getvalue()
    True
    """

    def __init__(self, time_limit: float | None = None, *, enabled: bool | None = None, file: Any = None) -> None:
        self.best: int | None = None
        self.bound: int | None = None
        total = None if time_limit is None or time_limit <= 0 else float(time_limit)
        self.bar = progress_bar(total=total, desc="search", unit="s", enabled=enabled, file=file,
                                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s {postfix}"
                                if total is not None else "{desc}: {n:.1f} s {postfix}")

    def __call__(self, report: Any) -> None:
        """Take one :class:`~jacacc.orders.local_search.Progress` report."""
        if report.best is not None:
            self.best = report.best
        if report.bound is not None:
            self.bound = report.bound
        self.bar.set_description(str(report.method), refresh=False)
        self.bar.set_postfix(best=self.best, bound="-" if self.bound is None else self.bound, refresh=False)
        total = self.bar.total
        self.bar.n = report.elapsed if total is None else min(report.elapsed, total)
        self.bar.refresh()

    def close(self) -> None:
        """Finish the bar (leaves its last state on screen)."""
        self.bar.close()

    def __enter__(self) -> SearchProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
