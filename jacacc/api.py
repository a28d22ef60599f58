"""``jacacc.optimize``: find an elimination order and turn it into a Schedule.

The one entry point users need: graph in (any form :func:`~jacacc.graph.as_graph`
accepts), :class:`Plan` out — order, schedule, cost, optimality, bound.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacacc.bounds import structural_lower_bound
from jacacc.eliminate import get_engine
from jacacc.errors import OrderError
from jacacc.graph import CompGraph, as_graph, real_array
from jacacc.orders import OrderResult, find_order, methods
from jacacc.orders.heuristics import forward_reverse_costs
from jacacc.orders.registry import SearchInfo, explicit_order, modes_of
from jacacc.schedule import Schedule

__all__ = ["Plan", "optimize"]

Node = Hashable


@dataclass
class Plan:
    """The result of :func:`optimize`: an order, its schedule and what is known about it.

    Attributes
    ----------
    graph : CompGraph
    mode, method : str
    order : tuple
        Intermediates (vertex mode) or :class:`~jacacc.eliminate.EdgeStep` s (edge mode).
    schedule : Schedule
    optimal : bool or None
        True when proven optimal for the mode, False when known not to be,
        None when unknown.
    lower_bound : int or None
        A proven lower bound on the multiplications of any order of the mode.
    search : SearchInfo or None
        For search methods: status, objective, best bound and wall time.
    baseline : {"forward", "reverse"} or None
        Set when the method's own order cost more than forward or reverse mode
        and that mode's order was kept instead (see :func:`optimize`'s
        ``baselines``); ``method_mults`` is then what the method's order costs.
    method_mults : int or None
    """

    graph: CompGraph
    mode: str
    method: str
    order: tuple
    schedule: Schedule
    optimal: bool | None = None
    lower_bound: int | None = None
    seed: int | None = None
    options: dict = field(default_factory=dict)
    search: SearchInfo | None = None
    baseline: str | None = None
    method_mults: int | None = None

    @property
    def mults(self) -> int:
        """Multiplications, counted from the schedule's ops."""
        return self.schedule.mults

    @property
    def adds(self) -> int:
        """Additions, counted from the schedule's accumulating ops."""
        return self.schedule.adds

    def jacobian(self, partials: Any = None) -> np.ndarray:
        """Evaluate the schedule: on the graph's own partials, or on ``partials``
        of shape ``(..., n_edges)``; returns ``(..., len(outputs), len(inputs))``."""
        # values at points follow IEEE arithmetic (NaN propagates); complex and text are refused
        values = self.graph.partial_array() if partials is None else real_array(partials, "partials")
        return self.schedule.evaluate(values)

    def order_strings(self) -> list[str]:
        return [str(x) for x in self.order]

    def to_record(self) -> dict[str, Any]:
        """A JSON-serialisable summary (the CLI's ``--json`` record)."""
        if self.mode == "edge":
            order = [[_plain(s.edge[0]), _plain(s.edge[1]), s.direction] for s in self.order]
        elif self.mode == "face":
            order = [{"path": [_plain(v) for v in s.path], "face": str(s)} for s in self.order]
        elif self.mode == "vertex":
            order = [_plain(x) for x in self.order]
        else:
            order = [str(x) for x in self.order]
        record = {
            "mode": self.mode,
            "method": self.method,
            "mults": self.mults,
            "adds": self.adds,
            "fill_ins": self.schedule.fill_ins,
            "optimal": self.optimal,
            "lower_bound": self.lower_bound,
            "seed": self.seed,
            "order": order,
        }
        if self.baseline is not None:
            record["baseline"] = self.baseline
            record["method_mults"] = self.method_mults
        if self.search is not None:
            record["search"] = {
                "status": self.search.status,
                "objective": self.search.objective,
                "best_bound": self.search.best_bound,
                "wall_time": self.search.wall_time,
                "solver": self.search.solver,
            }
        return record

    def __repr__(self) -> str:
        optimal = {True: "yes", False: "no", None: "unknown"}[self.optimal]
        rows = [
            ("mode", self.mode),
            ("method", self.method if self.baseline is None else
             f"{self.method} (its order: {self.method_mults} mults; {self.baseline} mode's kept)"),
            ("mults", self.mults),
            ("adds", self.adds),
            ("optimal", optimal),
            ("lower bound", "unknown" if self.lower_bound is None else self.lower_bound),
            ("graph", f"{len(self.graph.inputs)} in, {len(self.graph.intermediates)} mid, "
                      f"{len(self.graph.outputs)} out, {self.graph.n_edges} edges"),
            ("order", _abbreviate(self.order_strings())),
        ]
        if self.search is not None:
            info = self.search
            rows.insert(5, ("search", f"{info.status}, objective {info.objective}, bound {info.best_bound}, "
                                      f"{info.wall_time:.2f} s" + (f" ({info.solver})" if info.solver else "")))
        return "Plan\n" + "\n".join(f"  {k:<12} {v}" for k, v in rows)


def _plain(x: Any) -> Any:
    return int(x) if isinstance(x, np.integer) else x


def _abbreviate(items: list[str], limit: int = 12) -> str:
    if len(items) <= limit:
        return " ".join(items)
    return " ".join(items[:limit]) + f" ... ({len(items)} steps)"


def resolve_mode(mode: str | None, method: Any) -> str:
    """The mode ``optimize`` runs in: ``mode`` when given; otherwise ``"vertex"``,
    unless ``method`` names a method registered only outside vertex mode (the
    structure strategies ``dstar``, ``blocks``, ``levels`` pick their own
    granularity), in which case that method's mode.

    Examples
    --------
    >>> resolve_mode(None, "markowitz"), resolve_mode("edge", "markowitz")
    ('vertex', 'edge')
    """
    if mode is not None:
        return mode
    if isinstance(method, str):
        found = modes_of(method)
        if found and "vertex" not in found and len(found) == 1:
            return found[0]
    return "vertex"


def _check_seed(seed: Any) -> None:
    """A seed is None or an integer ≥ 0 (what NumPy's generators and CP-SAT take), refused
    here rather than deep inside a method's random number generator."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise OrderError(f"seed must be a non-negative integer or None, got {seed!r}")


def _accepted(fn: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``options`` that ``fn`` takes as keyword arguments."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(options)
    return {k: v for k, v in options.items() if k in params and k not in ("graph", "order", "sequence")}


def optimize(
    graph: Any,
    mode: str | None = None,
    method: str | Callable[..., Any] | Sequence[Any] = "markowitz",
    seed: int | None = None,
    baselines: bool = True,
    **options: Any,
) -> Plan:
    """Find an elimination order for ``graph`` and build its Schedule.

    Parameters
    ----------
    graph : CompGraph, networkx.DiGraph, dict or path
        The graph (see :func:`jacacc.graph.as_graph`); a traced function's
        ``.graph`` works too.
    mode : {"vertex", "edge", "face", "structure"} or another registered mode, optional
        Default: ``"vertex"``, or the mode of a method registered in one
        other mode only (``optimize(g, method="dstar")``); see :func:`resolve_mode`.
    method : str, callable or explicit order
        A name from :func:`jacacc.methods` (``mode``), a callable
        ``finder(graph, *, seed=None, **options)``, or an explicit order: a
        permutation of the intermediates (vertex mode), a list of
        ``((src, dst), "front" | "back")`` steps (edge mode), or a list of faces
        (face mode; a vertex order or an edge sequence given in face mode is
        replayed face by face).
    seed : int, optional
        For randomized methods.
    baselines : bool, default True
        Check a named or callable method's plan against forward and reverse
        mode in the same mode and keep the cheapest (:attr:`Plan.baseline`
        says when a baseline won).  Both costs come from degree counts
        (:func:`~jacacc.orders.heuristics.forward_reverse_costs`), so the check
        is one pass over the graph; a baseline's schedule is built only when it
        is cheaper.  Greedy heuristics can lose to both on large graphs (issue
        43: Markowitz costs 4.3× forward mode on a random DAG of 1.1·10⁴
        vertices).  Modes without registered ``forward``/``reverse`` methods
        (``structure``) and explicit orders are not checked; ``False`` keeps
        the method's order.
    **options
        Passed to the method; those the mode's engine takes as keywords (face
        mode's ``rule``) are passed to the engine as well.

    Returns
    -------
    Plan

    Examples
    --------
    >>> g = {"inputs": ["x"], "outputs": ["y", "z"],
    ...      "edges": [["x", "a", 2], ["a", "b", 3], ["b", "y", 5], ["b", "z", 7]]}
    >>> plan = optimize(g, method="markowitz")
    >>> plan.mults, plan.order
    (3, ('a', 'b'))
    >>> plan.jacobian().ravel().tolist()
    [30.0, 42.0]
    """
    g = as_graph(graph)
    _check_seed(seed)
    mode = resolve_mode(mode, method)
    engine = get_engine(mode)
    engine_options = _accepted(engine, options)
    finder = isinstance(method, str) or callable(method)
    if finder:
        result = find_order(g, mode, method, seed, options)
        name = method if isinstance(method, str) else getattr(method, "__name__", "callable")
    else:
        result, name = OrderResult(explicit_order(g, mode, method, **engine_options)), "explicit"
    if result.schedule is not None:  # a structure strategy builds its own schedule
        schedule = result.schedule
    else:
        schedule = engine(g, result.order, **engine_options)
    baseline = method_mults = better = None
    if baselines and finder and name not in ("forward", "reverse"):
        better = _cheaper_baseline(g, mode, schedule.mults, engine, engine_options)
        if better is not None:
            baseline, method_mults, schedule = better[0], schedule.mults, better[2]
    bound = structural_lower_bound(g, mode)
    if result.lower_bound is not None:
        bound = max(bound, result.lower_bound)
    optimal = result.optimal if better is None else None
    if optimal is None and schedule.mults == bound:
        optimal = True  # the bound is attained, so no order of this mode is cheaper
    if schedule.order is not None:
        order = schedule.order
    else:
        order = tuple(result.order if better is None else better[1])
    return Plan(g, mode, name, order, schedule, optimal, bound, seed, dict(options), result.search, baseline,
                method_mults)


def _cheaper_baseline(g: CompGraph, mode: str, mults: int, engine: Callable[..., Schedule],
                      engine_options: dict[str, Any]) -> tuple[str, Any, Schedule] | None:
    """``(name, order, schedule)`` of forward or reverse mode in ``mode`` where it costs fewer than
    ``mults`` multiplications, else None (also for modes without those methods)."""
    if not {"forward", "reverse"} <= set(methods(mode)):
        return None
    forward, reverse = forward_reverse_costs(g)
    if min(forward, reverse) >= mults:
        return None
    name = "forward" if forward <= reverse else "reverse"
    order = find_order(g, mode, name, None, {}).order
    schedule = engine(g, order, **engine_options)
    # the degree counts are each mode's forward/reverse cost; the schedule's own count decides
    return (name, order, schedule) if schedule.mults < mults else None
