"""Grids: the JSON description of a sweep, crossed into cells.

A grid is a JSON object whose lists are crossed into cells (problem × mode ×
method × seed × options); a JSON list of such objects is a sweep of several
grids.  Keys:

============  ============  ================================================================
key           default       meaning
============  ============  ================================================================
problems      (required)    zoo names, ``tag:NAME`` (the zoo entries with that tag),
                            generator calls ``random_dag(4, 30, 4, max_preds=3)`` (any
                            function of :mod:`jacacc.problems.generators`, literal
                            arguments), or JSON graph files (relative paths: from the grid
                            file's folder, then the current one)
modes         ``[vertex]``  elimination modes (:func:`jacacc.modes`)
methods       (required)    order methods, crossed with the modes they are registered in;
                            ``"mode:method"`` names one pair
seeds         ``[0]``       integers ≥ 0 or null; a generator call without ``seed=`` takes
                            the cell's seed, so each seed is another graph
options       ``{}``        keyword options of ``optimize`` (``time_limit``, ``workers``,
                            ``iterations``, ...), or a list of such objects (an axis); each
                            cell gets the options its method takes
limits        ``[]``        ``{"modes", "methods", "max_edges" | "max_faces" |
                            "max_intermediates", "reason"}``: matching cells on larger
                            graphs are stored as ``skipped`` with the reason
verify        ``true``      check each schedule against the dense chain rule
name          none          a label
============  ============  ================================================================

A cell's key is (problem as written, mode, method, seed, the options it
takes); the store keeps one row per key.

Examples
--------
>>> [grid] = parse_grid({"problems": ["random_dag(3, 8, 3)"], "modes": ["vertex", "edge"],
...                      "methods": ["markowitz", "reverse"], "seeds": [0, 1]})
>>> len(grid)
8
>>> cell = next(iter(grid.cells()))
>>> cell.problem.key, cell.mode, cell.method, cell.seed
('random_dag(3, 8, 3)', 'vertex', 'markowitz', 0)
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from jacacc.errors import GridError, JacaccError

__all__ = ["Cell", "Grid", "Limit", "ProblemSpec", "load_grid", "parse_grid"]

GRID_KEYS = ("name", "problems", "modes", "methods", "seeds", "options", "limits", "verify")
LIMIT_KEYS = ("modes", "methods", "max_edges", "max_faces", "max_intermediates", "reason")
LIMIT_SIZES = {"max_edges": "edges", "max_faces": "faces", "max_intermediates": "intermediates"}
_CALL = re.compile(r"[A-Za-z_]\w*\s*\(.*\)\s*", re.S)


@dataclass(frozen=True)
class ProblemSpec:
    """One entry of a grid's ``problems``.

    Attributes
    ----------
    key : str
        As stored: the zoo name, the canonical generator call, or the file path as written.
    kind : {"zoo", "generator", "file"}
    generator : str or None
        The generator's name (``kind == "generator"``).
    args, kwargs : tuple
        The call's positional arguments and sorted ``(name, value)`` keywords.
    takes_seed : bool
        A generator call without ``seed=``: the cell's seed is passed.
    graph : dict or None
        A file's JSON, read by the coordinator and shipped to the workers.
    content : str or None
        A file's content hash (SHA-256 of its canonical JSON, 16 hex digits): part of each cell's
        key, so that a graph file changed at the same path is computed again, not resumed.
    """

    key: str
    kind: str
    generator: str | None = None
    args: tuple = ()
    kwargs: tuple = ()
    takes_seed: bool = False
    graph: Any = field(default=None, compare=False, hash=False, repr=False)
    content: str | None = None


@dataclass(frozen=True)
class Limit:
    """A size limit: cells of ``modes`` × ``methods`` (None: all) whose graph has more
    than ``maximum`` of ``size`` (edges, faces or intermediates) are skipped.

    Examples
    --------
    >>> limit = Limit(None, frozenset({"exhaustive"}), "faces", 30, "exact search")
    >>> limit.reason("vertex", "exhaustive", {"faces": 31})
    'exact search; more than 30 faces'
    >>> limit.reason("vertex", "markowitz", {"faces": 31}) is None
    True
    """

    modes: frozenset | None
    methods: frozenset | None
    size: str
    maximum: int
    note: str | None = None

    def reason(self, mode: str, method: str, size: Mapping[str, int]) -> str | None:
        """Why a cell of ``mode``/``method`` on a graph of ``size`` is skipped, or None."""
        if self.modes is not None and mode not in self.modes:
            return None
        if self.methods is not None and method not in self.methods:
            return None
        if size[self.size] <= self.maximum:
            return None
        return (f"{self.note}; " if self.note else "") + f"more than {self.maximum} {self.size}"


@dataclass(frozen=True)
class Cell:
    """One measurement: a problem optimized in one mode by one method with one seed and options.

    ``options`` holds only the options the method takes; ``key`` is the
    store's primary key (canonical JSON of problem, mode, method, seed, options).
    """

    problem: ProblemSpec
    mode: str
    method: str
    seed: int | None
    options: dict = field(default_factory=dict, compare=False, hash=False)
    verify: bool = True
    limits: tuple[Limit, ...] = ()

    @cached_property
    def key(self) -> str:
        problem = self.problem.key if self.problem.content is None else \
            f"{self.problem.key}#sha256={self.problem.content}"
        return cell_key(problem, self.mode, self.method, self.seed, self.options)


def cell_key(problem: str, mode: str, method: str, seed: int | None, options: Mapping[str, Any]) -> str:
    """The store's key of a cell: canonical JSON (sorted option names, no spaces).

    Examples
    --------
    >>> cell_key("chain_50", "vertex", "cpsat", 0, {"workers": 1, "time_limit": 2})
    '["chain_50","vertex","cpsat",0,{"time_limit":2,"workers":1}]'
    """
    return json.dumps([problem, mode, method, seed, dict(options)], sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Grid:
    """A parsed, validated grid; iterate its cells lazily with :meth:`cells`.

    Attributes
    ----------
    problems : tuple of ProblemSpec
    pairs : tuple of (mode, method)
    seeds : tuple
    options : dict
        For each (mode, method) pair, the distinct option dicts its cells take.
    limits : tuple of Limit
    verify : bool
    name : str or None
    source : dict
        The grid as given (recorded with each sweep).
    """

    problems: tuple[ProblemSpec, ...]
    pairs: tuple[tuple[str, str], ...]
    seeds: tuple[int | None, ...]
    options: dict = field(compare=False, hash=False)
    limits: tuple[Limit, ...] = ()
    verify: bool = True
    name: str | None = None
    source: Any = field(default=None, compare=False, hash=False, repr=False)

    def __len__(self) -> int:
        per_problem = sum(len(self.options[pair]) for pair in self.pairs) * len(self.seeds)
        return len(self.problems) * per_problem

    def cells(self) -> Iterator[Cell]:
        """The cells in order problem, (mode, method), seed, options — generated, not stored."""
        for problem, pair, seed in itertools.product(self.problems, self.pairs, self.seeds):
            for options in self.options[pair]:
                yield Cell(problem, pair[0], pair[1], seed, options, self.verify, self.limits)


# ---------------------------------------------------------------------------- loading
def load_grid(source: Any, base: str | os.PathLike | None = None) -> list[Grid]:
    """Grids from a JSON file path, a parsed JSON object or list, a :class:`Grid` or a list of them.

    Parameters
    ----------
    source : str, path, dict, list or Grid
    base : path, optional
        Folder against which relative graph-file paths are resolved first
        (default: the grid file's folder; then the current directory).

    Returns
    -------
    list of Grid

    Examples
    --------
    >>> [len(g) for g in load_grid([{"problems": ["chain_50"], "methods": ["forward", "reverse"]}])]
    [2]
    """
    if isinstance(source, Grid):
        return [source]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GridError(f"cannot read grid file {str(path)!r}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GridError(f"grid file {str(path)!r} is not valid JSON: {exc}") from None
        return parse_grid(data, path.parent if base is None else base)
    if isinstance(source, Sequence) and source and all(isinstance(g, Grid) for g in source):
        return list(source)
    return parse_grid(source, base)


def parse_grid(data: Any, base: str | os.PathLike | None = None) -> list[Grid]:
    """Validate a grid (a JSON object) or a list of grids; every error is one :class:`GridError` line.

    Examples
    --------
    >>> parse_grid({"problems": ["chain_50"], "methods": ["markowitzz"]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    jacacc.errors.GridError: grid: "methods": 'markowitzz' is registered in none of the modes vertex (known: anneal, ..., reverse, ...)
    """
    if isinstance(data, Mapping):
        return [_parse_one(data, base, "grid")]
    if isinstance(data, list) and data:
        return [_parse_one(item, base, f"grid[{i}]") for i, item in enumerate(data)]
    raise GridError(f"a grid is a JSON object (or a non-empty list of them), got {_type_name(data)}")


def _parse_one(data: Any, base: str | os.PathLike | None, where: str) -> Grid:
    if not isinstance(data, Mapping):
        raise GridError(f"{where}: a grid is a JSON object, got {_type_name(data)}")
    unknown = [k for k in data if k not in GRID_KEYS]
    if unknown:
        raise GridError(f"{where}: unknown key {unknown[0]!r}; a grid has keys {', '.join(GRID_KEYS)}")
    for required in ("problems", "methods"):
        if required not in data:
            raise GridError(f"{where}: missing key {required!r}")
    problems = _parse_problems(_list(data, "problems", where), base, where)
    modes = _parse_modes(_list(data, "modes", where, ["vertex"]), where)
    pairs = _parse_methods(_list(data, "methods", where), modes, where)
    seeds = _parse_seeds(_list(data, "seeds", where, [0]), where)
    options = _parse_options(data.get("options", {}), pairs, where)
    limits = tuple(_parse_limit(item, i, where) for i, item in enumerate(_list(data, "limits", where, [], empty=True)))
    verify = data.get("verify", True)
    if not isinstance(verify, bool):
        raise GridError(f'{where}: "verify" must be true or false, got {verify!r}')
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise GridError(f'{where}: "name" must be a string, got {_type_name(name)}')
    return Grid(problems, pairs, seeds, options, limits, verify, name, dict(data))


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}")


def _list(data: Mapping, key: str, where: str, default: list | None = None, *, empty: bool = False) -> list:
    value = data.get(key, default)
    if not isinstance(value, list):
        raise GridError(f'{where}: "{key}" must be a list, got {_type_name(value)}')
    if not value and not empty:
        raise GridError(f'{where}: "{key}" is empty')
    duplicate = _first_repeated(json.dumps(v, sort_keys=True) for v in value)
    if duplicate is not None:
        raise GridError(f'{where}: "{key}" lists {json.loads(duplicate)!r} twice')
    return value


def _first_repeated(items: Iterator[str]) -> str | None:
    """The first item seen twice, or None."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


# ---------------------------------------------------------------------------- problems
def _parse_problems(entries: list, base: str | os.PathLike | None, where: str) -> tuple[ProblemSpec, ...]:
    from jacacc.problems import names

    zoo = set(names())
    specs: list[ProblemSpec] = []
    for i, entry in enumerate(entries):
        at = f'{where}: "problems"[{i}]'
        if not isinstance(entry, str):
            raise GridError(f"{at}: a problem is a string, got {_type_name(entry)}")
        if entry.startswith("tag:"):
            tagged = names(entry[4:])
            if not tagged:
                raise GridError(f"{at}: no zoo problem has the tag {entry[4:]!r}")
            specs += [ProblemSpec(name, "zoo") for name in tagged]
        elif entry in zoo:
            specs.append(ProblemSpec(entry, "zoo"))
        elif _CALL.fullmatch(entry):
            specs.append(_parse_generator(entry, at))
        elif entry.endswith(".json") or os.path.exists(entry):
            specs.append(_read_graph_file(entry, base, at))
        else:
            raise GridError(f"{at}: {entry!r} is neither a zoo problem, tag:NAME, a generator call such as "
                            "'random_dag(4, 30, 4)' nor a JSON graph file")
    repeated = _first_repeated(s.key for s in specs)
    if repeated is not None:
        raise GridError(f'{where}: "problems" names {repeated!r} twice')
    return tuple(specs)


def _parse_generator(text: str, at: str) -> ProblemSpec:
    """``name(literal, ..., key=literal)`` of a generator → its ProblemSpec with a canonical key."""
    from jacacc.problems import generators

    try:
        call = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise GridError(f"{at}: {text!r} is not a generator call: {exc.msg}") from None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise GridError(f"{at}: {text!r} is not a generator call such as 'random_dag(4, 30, 4)'")
    name = call.func.id
    if name not in generators.__all__:
        raise GridError(f"{at}: unknown generator {name!r}; generators: {', '.join(generators.__all__)}")
    args = tuple(_literal(node, text, at) for node in call.args)
    if any(k.arg is None for k in call.keywords):
        raise GridError(f"{at}: {text!r}: ** arguments are not allowed")
    kwargs = {k.arg: _literal(k.value, text, at) for k in call.keywords}
    signature = inspect.signature(getattr(generators, name))
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise GridError(f"{at}: {text!r}: {exc}") from None
    takes_seed = "seed" in signature.parameters and "seed" not in bound.arguments
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in sorted(kwargs.items())]
    return ProblemSpec(f"{name}({', '.join(parts)})", "generator", name, args, tuple(sorted(kwargs.items())),
                       takes_seed)


def _literal(node: ast.AST, text: str, at: str) -> Any:
    if isinstance(node, ast.Starred):
        raise GridError(f"{at}: {text!r}: * arguments are not allowed")
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        raise GridError(f"{at}: {text!r}: argument {ast.unparse(node)!r} is not a literal "
                        "(numbers, strings, lists)") from None


def _read_graph_file(entry: str, base: str | os.PathLike | None, at: str) -> ProblemSpec:
    """A JSON graph file: found from ``base`` first, then the current directory; read and checked here."""
    from jacacc.graph import CompGraph

    candidates = [Path(entry)] if os.path.isabs(entry) else [Path(base or ".") / entry, Path(entry)]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise GridError(f"{at}: no graph file {entry!r}" + (f" (looked in {base} and .)" if base else ""))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        CompGraph.from_json(data)
    except json.JSONDecodeError as exc:
        raise GridError(f"{at}: graph file {entry!r} is not valid JSON: {exc}") from None
    except (JacaccError, OSError) as exc:
        raise GridError(f"{at}: graph file {entry!r}: {exc}") from None
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return ProblemSpec(entry, "file", graph=data, content=hashlib.sha256(canonical.encode()).hexdigest()[:16])


# ---------------------------------------------------------------------------- modes, methods, seeds
def _parse_modes(entries: list, where: str) -> tuple[str, ...]:
    from jacacc.eliminate import modes

    known = modes()
    for i, mode in enumerate(entries):
        if mode not in known:
            raise GridError(f'{where}: "modes"[{i}]: unknown mode {mode!r}; modes: {", ".join(known)}')
    return tuple(entries)


def _parse_methods(entries: list, modes: tuple[str, ...], where: str) -> tuple[tuple[str, str], ...]:
    """``name`` crossed with the grid's modes it is registered in; ``mode:name`` one pair."""
    from jacacc.eliminate import modes as all_modes
    from jacacc.orders import methods

    pairs: list[tuple[str, str]] = []
    for i, entry in enumerate(entries):
        at = f'{where}: "methods"[{i}]'
        if not isinstance(entry, str):
            raise GridError(f"{at}: a method is a string, got {_type_name(entry)}")
        mode, sep, name = entry.rpartition(":")
        if sep:
            if mode not in all_modes():
                raise GridError(f"{at}: unknown mode {mode!r} in {entry!r}; modes: {', '.join(all_modes())}")
            if name not in methods(mode):
                raise GridError(f"{at}: {mode} mode has no method {name!r}; known: {', '.join(methods(mode))}")
            pairs.append((mode, name))
            continue
        found = [(m, entry) for m in modes if entry in methods(m)]
        if not found:
            known = sorted({n for m in modes for n in methods(m)})
            raise GridError(f'{where}: "methods": {entry!r} is registered in none of the modes '
                            f"{', '.join(modes)} (known: {', '.join(known)})")
        pairs += found
    order = {mode: k for k, mode in enumerate(modes)}
    unique = list(dict.fromkeys(pairs))
    return tuple(sorted(unique, key=lambda p: order.get(p[0], len(order))))


def _parse_seeds(entries: list, where: str) -> tuple[int | None, ...]:
    for i, seed in enumerate(entries):
        # the store keeps seeds as SQLite integers: signed 64-bit
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
            raise GridError(f'{where}: "seeds"[{i}]: a seed is an integer in [0, 2**63) or null, got {seed!r}')
    return tuple(entries)


# ---------------------------------------------------------------------------- options and limits
def _parse_options(value: Any, pairs: tuple[tuple[str, str], ...], where: str) -> dict:
    """Per (mode, method) pair, the distinct dicts of the options that method takes."""
    axis = value if isinstance(value, list) else [value]
    if not axis:
        raise GridError(f'{where}: "options" is an empty list')
    for k, options in enumerate(axis):
        at = f'{where}: "options"' + (f"[{k}]" if isinstance(value, list) else "")
        if not isinstance(options, Mapping):
            raise GridError(f"{at} must be an object (or a list of objects), got {_type_name(options)}")
        for name, option in options.items():
            if name == "seed":
                raise GridError(f'{at}: give seeds with the "seeds" list, not as an option')
            try:
                json.dumps(option)
            except (TypeError, ValueError):
                raise GridError(f"{at}: option {name!r} is not a JSON value") from None
            if not any(_takes(mode, method, name) for mode, method in pairs):
                raise GridError(f"{at}: option {name!r} is taken by none of the methods "
                                f"{', '.join(f'{m}:{n}' for m, n in pairs)}")
    per_pair: dict[tuple[str, str], tuple[dict, ...]] = {}
    for mode, method in pairs:
        taken = [{k: v for k, v in o.items() if _takes(mode, method, k)} for o in axis]
        unique = {json.dumps(t, sort_keys=True): t for t in taken}
        per_pair[(mode, method)] = tuple(unique.values())
    return per_pair


def _takes(mode: str, method: str, option: str) -> bool:
    """Whether ``method`` of ``mode`` accepts the keyword ``option``."""
    from jacacc.orders import get_method

    parameters = inspect.signature(get_method(method, mode)).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return option in parameters and option != "graph"


def _parse_limit(item: Any, i: int, where: str) -> Limit:
    at = f'{where}: "limits"[{i}]'
    if not isinstance(item, Mapping):
        raise GridError(f"{at} must be an object, got {_type_name(item)}")
    unknown = [k for k in item if k not in LIMIT_KEYS]
    if unknown:
        raise GridError(f"{at}: unknown key {unknown[0]!r}; a limit has keys {', '.join(LIMIT_KEYS)}")
    sizes = [k for k in LIMIT_SIZES if k in item]
    if len(sizes) != 1:
        raise GridError(f"{at}: give exactly one of {', '.join(LIMIT_SIZES)}")
    maximum = item[sizes[0]]
    if isinstance(maximum, bool) or not isinstance(maximum, int) or maximum < 0:
        raise GridError(f"{at}: {sizes[0]} must be an integer >= 0, got {maximum!r}")
    selectors = {}
    for key in ("modes", "methods"):
        names = item.get(key)
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise GridError(f'{at}: "{key}" must be a list of names')
        selectors[key] = None if names is None else frozenset(names)
    note = item.get("reason")
    if note is not None and not isinstance(note, str):
        raise GridError(f'{at}: "reason" must be a string')
    return Limit(selectors["modes"], selectors["methods"], LIMIT_SIZES[sizes[0]], maximum, note)
