"""Seeded random families of linearized computational graphs, with size knobs.

Every generator returns a valid :class:`~jacacc.graph.CompGraph`: acyclic,
inputs without in-edges, outputs without out-edges, and every intermediate on
an input→output path (the graph is built with ``prune=False``, so a generator
bug raises instead of being silently pruned).  Every input and every output
is connected.

Partials are drawn from the generator's own ``numpy.random.default_rng(seed)``
*after* the structure, uniformly from [−1, −0.1] ∪ [0.1, 1] (``|p| ≥ 0.1``
keeps products of long paths away from zero); ``partials="ones"`` puts 1 on
every edge and ``partials="none"`` leaves them out (a structural graph).  The
structure for one seed is the same whichever ``partials`` is chosen.

Node names: inputs ``x0 …``, outputs ``y0 …``, intermediates ``v…`` (``v{i}``
or ``v{level}_{i}``).

======================  ==========================================================
family                  what it exercises
======================  ==========================================================
:func:`random_dag`      general sparse DAGs of bounded in-degree (any size, 10⁵+)
:func:`layered`         MLP-like layered graphs; "layered dense graphs" when dense
:func:`bipartite`       one middle layer; ``n×1×m`` is the hourglass / bottleneck
:func:`reduction_tree`  many inputs → one output (a sum or product tree)
:func:`broadcast_tree`  one input → many outputs (its mirror image)
:func:`chain`           a chain of scalar operations
:func:`ladder`          parallel chains joined by rungs
======================  ==========================================================

The module registers named instances in the problem zoo (tags ``"random"``,
plus ``"scale"`` for the large ones), with their seeds in the descriptions.

References
----------
A. Griewank and A. Walther, *Evaluating Derivatives*, 2nd ed., SIAM 2008,
ch. 9–10 (vertex elimination, forward and reverse cost, Markowitz orders).
U. Naumann, "Optimal Jacobian accumulation is NP-complete", Math. Program.
112 (2008).  Notes on Computational Graph and Jacobian Accumulation
(../shared/papers, 003): simple chains, layered dense graphs.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from jacacc.graph import CompGraph
from jacacc.problems.base import Problem, register

__all__ = [
    "bipartite",
    "broadcast_tree",
    "chain",
    "ladder",
    "layered",
    "random_dag",
    "recent_plus_random",
    "reduction_tree",
]

PARTIALS = ("random", "ones", "none")
_SOURCE = "jacacc.problems.generators (seeded random graph families)"


# ---------------------------------------------------------------------------- helpers
def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_density(density: float) -> float:
    if not 0.0 <= float(density) <= 1.0:
        raise ValueError(f"density must lie in [0, 1], got {density!r}")
    return float(density)


def _check_partials(partials: str) -> str:
    if partials not in PARTIALS:
        raise ValueError(f"partials must be one of {', '.join(map(repr, PARTIALS))}, got {partials!r}")
    return partials


def _draw_partials(rng: np.random.Generator, n: int, partials: str) -> np.ndarray | None:
    """``n`` edge values: uniform on [−1, −0.1] ∪ [0.1, 1], all ones, or None."""
    if partials == "none":
        return None
    if partials == "ones":
        return np.ones(n)
    magnitude = rng.uniform(0.1, 1.0, n)
    return np.where(rng.random(n) < 0.5, -magnitude, magnitude)


def _build(
    inputs: list[str],
    intermediates: list[str],
    outputs: list[str],
    edges: list[tuple[str, str]],
    rng: np.random.Generator,
    partials: str,
) -> CompGraph:
    """One pass into a plain DiGraph (nodes in topological order), then one CompGraph."""
    g = nx.DiGraph()
    g.add_nodes_from(inputs)
    g.add_nodes_from(intermediates)
    g.add_nodes_from(outputs)
    values = _draw_partials(rng, len(edges), partials)
    if values is None:
        g.add_edges_from(edges)
    else:
        g.add_edges_from((u, v, {"partial": p}) for (u, v), p in zip(edges, values.tolist(), strict=True))
    # prune=False: a vertex on no input→output path is a bug here, so it raises
    return CompGraph(g, inputs, outputs, prune=False, edge_order=edges)


# ---------------------------------------------------------------------------- random DAG
def random_dag(
    n_inputs: int,
    n_intermediates: int,
    n_outputs: int,
    *,
    max_preds: int = 3,
    window: int | None = None,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """A random DAG of bounded in-degree: the general sparse computational graph.

    Inputs and intermediates are numbered in topological order (positions
    ``0 … n_inputs + n_intermediates − 1``).  Intermediate ``v{i}`` draws
    k ∈ {1, …, ``max_preds``} (uniform) distinct predecessors uniformly from
    the vertices before it — only the last ``window`` of them when ``window``
    is given (a band: local data flow, as in a long program).  Each output
    draws its 1 … ``max_preds`` predecessors likewise from all inputs and
    intermediates (the last ``window`` with a window).  Then a repair pass:

    * an intermediate with no successor gets one edge to a uniformly chosen
      later vertex (a later intermediate within ``window`` positions, or an
      output when the window reaches the end);
    * an input with no successor gets one edge to one of the first ``window``
      intermediates (any intermediate without a window; an output when there
      are no intermediates).

    So every intermediate lies on an input→output path, every input and output
    is used, and in-degrees stay ≤ ``max_preds`` except for repair targets.
    Vectorized draws and a single CompGraph construction keep the generator's
    own work linear in the size (about 1.5 s for 10⁵ intermediates); at that
    size most of the build time is CompGraph's validation.

    Parameters
    ----------
    n_inputs, n_outputs : int
        At least 1.
    n_intermediates : int
        At least 0.
    max_preds : int, default 3
        Largest number of predecessors drawn per vertex.
    window : int, optional
        Draw predecessors only among the ``window`` vertices just before.
    seed : int or None
        Seed of ``numpy.random.default_rng``; the graph is a function of it.
    partials : {"random", "ones", "none"}
        Edge values (see the module docstring).

    Returns
    -------
    CompGraph

    References
    ----------
    Griewank & Walther, *Evaluating Derivatives* (2008), ch. 9–10: vertex
    elimination on general computational graphs.  The same construction as the
    Hypothesis strategy ``random_lcgs`` in the test suite (tests/dags.py).

    Examples
    --------
    >>> g = random_dag(3, 20, 2, seed=0)
    >>> len(g.inputs), len(g.intermediates), len(g.outputs)
    (3, 20, 2)
    >>> g == random_dag(3, 20, 2, seed=0)
    True
    >>> random_dag(3, 20, 2, seed=0, partials="none").partials_kind
    'structural'
    """
    n_in = _check_int("n_inputs", n_inputs, 1)
    n_mid = _check_int("n_intermediates", n_intermediates, 0)
    n_out = _check_int("n_outputs", n_outputs, 1)
    max_preds = _check_int("max_preds", max_preds, 1)
    if window is not None:
        window = _check_int("window", window, 1)
    _check_partials(partials)
    rng = np.random.default_rng(seed)

    n_pos = n_in + n_mid  # positions of inputs and intermediates
    names = [f"x{i}" for i in range(n_in)] + [f"v{i}" for i in range(n_mid)]
    outputs = [f"y{i}" for i in range(n_out)]

    # --- predecessors: row r < n_mid is intermediate position n_in + r, the rest are outputs
    n_rows = n_mid + n_out
    hi = np.concatenate([np.arange(n_in, n_pos), np.full(n_out, n_pos)])
    lo = np.zeros(n_rows, dtype=np.int64) if window is None else np.maximum(hi - window, 0)
    avail = hi - lo
    want = np.minimum(rng.integers(1, max_preds + 1, size=n_rows), avail)
    # 2·max_preds candidates per row, drawn with replacement; the first `want` distinct are kept
    picks = (lo[:, None] + np.floor(rng.random((n_rows, 2 * max_preds)) * avail[:, None])).astype(np.int64)
    picks = np.minimum(picks, (hi - 1)[:, None])

    edges: list[tuple[str, str]] = []
    has_succ = np.zeros(n_pos, dtype=bool)
    for r, (row, k) in enumerate(zip(picks.tolist(), want.tolist(), strict=True)):
        chosen = list(dict.fromkeys(row))[:k]
        if len(chosen) < k:  # rare: too many repeats among the candidates; top up exactly
            taken = set(chosen)
            for p in (int(lo[r]) + rng.permutation(int(avail[r]))).tolist():
                if p not in taken:
                    chosen.append(p)
                    taken.add(p)
                    if len(chosen) == k:
                        break
        dst = names[n_in + r] if r < n_mid else outputs[r - n_mid]
        for p in sorted(chosen):
            edges.append((names[p], dst))
        has_succ[chosen] = True

    # --- repair: every intermediate without a successor gets an edge to a later vertex
    u_mid = rng.random(n_mid)
    for r in np.flatnonzero(~has_succ[n_in:]).tolist():
        pos = n_in + r
        last = n_pos - 1 if window is None else min(pos + window, n_pos - 1)
        reaches_end = window is None or pos + window >= n_pos
        n_later = last - pos + (n_out if reaches_end else 0)
        j = int(u_mid[r] * n_later)
        j = min(j, n_later - 1)
        edges.append((names[pos], names[pos + 1 + j] if j < last - pos else outputs[j - (last - pos)]))

    # --- repair: every input without a successor gets an edge to an early intermediate (or an output)
    u_in = rng.random(n_in)
    first = n_mid if window is None else min(window, n_mid)
    for i in np.flatnonzero(~has_succ[:n_in]).tolist():
        if first:
            edges.append((names[i], names[n_in + min(int(u_in[i] * first), first - 1)]))
        else:
            edges.append((names[i], outputs[min(int(u_in[i] * n_out), n_out - 1)]))

    return _build(names[:n_in], names[n_in:], outputs, edges, rng, partials)


# ---------------------------------------------------------------------------- recent plus random
def recent_plus_random(
    n_inputs: int,
    n_intermediates: int,
    n_outputs: int,
    *,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """A DAG in which each vertex combines the vertex just before it with a uniformly drawn earlier one.

    The family of issue 43's scaling check: a long program whose every step reads the previous
    result and one value from anywhere before it.  Inputs and intermediates are numbered in
    topological order; intermediate ``v{i}`` (position ``p``) has the predecessors ``p − 1`` and
    one position drawn uniformly from ``0 … p − 2`` (just ``p − 1`` for the first intermediate
    after a single input).  Output ``y0`` combines the last intermediate with a uniformly drawn
    vertex; every other output combines two uniformly drawn vertices.  Every intermediate but the
    last feeds the next one, and an input nothing drew feeds the first intermediate, so every
    vertex lies on an input→output path.  On this family greedy Markowitz
    orders cost several times forward mode (issue 43: 721,082 against 166,123 multiplications at
    1.1·10⁴ vertices), which :func:`jacacc.optimize`'s baseline check catches.

    Parameters
    ----------
    n_inputs, n_outputs : int
        At least 1.
    n_intermediates : int
        At least 1.
    seed : int or None
        Seed of ``numpy.random.default_rng``; the graph is a function of it.
    partials : {"random", "ones", "none"}
        Edge values (see the module docstring).

    Returns
    -------
    CompGraph

    Examples
    --------
    >>> g = recent_plus_random(2, 10, 1, seed=0)
    >>> len(g.inputs), len(g.intermediates), len(g.outputs)
    (2, 10, 1)
    >>> "v4" in g.predecessors("v5"), len(g.predecessors("v5"))   # the vertex just before, one earlier
    (True, 2)
    """
    n_in = _check_int("n_inputs", n_inputs, 1)
    n_mid = _check_int("n_intermediates", n_intermediates, 1)
    n_out = _check_int("n_outputs", n_outputs, 1)
    _check_partials(partials)
    rng = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(n_in)] + [f"v{i}" for i in range(n_mid)]
    outputs = [f"y{i}" for i in range(n_out)]
    n_pos = n_in + n_mid
    earlier = np.floor(rng.random(n_pos) * np.maximum(np.arange(n_pos) - 1, 1)).astype(np.int64)
    edges: list[tuple[str, str]] = []
    for pos in range(n_in, n_pos):
        edges.append((names[pos - 1], names[pos]))
        if pos >= 2:
            edges.append((names[int(earlier[pos])], names[pos]))
    used = {u for u, _ in edges}
    edges.extend((x, names[n_in]) for x in names[:n_in] if x not in used)
    drawn = np.floor(rng.random((n_out, 2)) * n_pos).astype(np.int64).tolist()
    for k, (a, b) in enumerate(drawn):
        first = n_pos - 1 if k == 0 else a
        for p in sorted({first, b}):
            edges.append((names[p], outputs[k]))
    return _build(names[:n_in], names[n_in:], outputs, edges, rng, partials)


# ---------------------------------------------------------------------------- layered
def layered(
    widths: Sequence[int],
    *,
    density: float = 1.0,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """A layered graph, like a multilayer perceptron's scalar data flow.

    Layer 0 holds ``widths[0]`` inputs, the last layer ``widths[-1]`` outputs,
    and layer ``l`` in between the intermediates ``v{l}_{i}``.  Edges join
    only consecutive layers; each possible edge is present with probability
    ``density``, then every vertex without a predecessor in the previous
    layer gets one (uniform), and every vertex without a successor in the next
    layer gets one.  ``density=1`` gives the layered *dense* graph (complete
    bipartite between layers).

    For a dense graph the forward (topological) vertex order costs
    Σ_l w_l·w_0·w_{l+1} and the reverse order Σ_l w_l·w_{l−1}·w_L over the
    inner layers l (w_L the output width): the matrix-chain problem in graph form.

    Parameters
    ----------
    widths : sequence of int
        At least two layer widths, each ≥ 1.
    density : float in [0, 1], default 1.0
    seed : int or None
    partials : {"random", "ones", "none"}

    Returns
    -------
    CompGraph

    References
    ----------
    Griewank & Walther (2008), ch. 9 (Jacobian accumulation as a matrix chain
    product); paper 003 §4 (depth levels and layered dense graphs).

    Examples
    --------
    >>> g = layered([2, 3, 2], seed=0)
    >>> len(g.inputs), len(g.intermediates), len(g.outputs), g.n_edges
    (2, 3, 2, 12)
    >>> sparse = layered([8, 16, 8], density=0.2, seed=1)
    >>> all(sparse.predecessors(v) and sparse.successors(v) for v in sparse.intermediates)
    True
    """
    widths = [_check_int("each width", w, 1) for w in widths]
    if len(widths) < 2:
        raise ValueError(f"layered needs at least two widths (inputs and outputs), got {widths!r}")
    density = _check_density(density)
    _check_partials(partials)
    rng = np.random.default_rng(seed)
    last = len(widths) - 1
    layers = []
    for level, width in enumerate(widths):
        if level == 0:
            layers.append([f"x{i}" for i in range(width)])
        elif level == last:
            layers.append([f"y{i}" for i in range(width)])
        else:
            layers.append([f"v{level}_{i}" for i in range(width)])
    edges: list[tuple[str, str]] = []
    for level in range(last):
        a, b = widths[level], widths[level + 1]
        mask = rng.random((a, b)) < density
        cols = np.flatnonzero(~mask.any(axis=0))  # next-layer vertices without a predecessor
        mask[rng.integers(0, a, size=cols.size), cols] = True
        rows = np.flatnonzero(~mask.any(axis=1))  # this-layer vertices without a successor
        mask[rows, rng.integers(0, b, size=rows.size)] = True
        src, dst = layers[level], layers[level + 1]
        edges.extend((src[i], dst[j]) for i, j in zip(*np.nonzero(mask), strict=True))
    inner = [v for layer in layers[1:-1] for v in layer]
    return _build(layers[0], inner, layers[-1], edges, rng, partials)


def bipartite(
    n_inputs: int,
    n_outputs: int,
    n_middle: int = 1,
    *,
    density: float = 1.0,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """Inputs → one middle layer → outputs: ``layered([n_inputs, n_middle, n_outputs])``.

    With ``n_middle=1`` this is the *hourglass* (bottleneck) ``n×1×m``: the
    Jacobian is the rank-one outer product of two vectors, every vertex order
    costs n·m multiplications, and tangent-propagating forward mode (n + n·m)
    or adjoint reverse mode (m + n·m) both do slightly more work than the one
    elimination — the standard example that neither pure mode is optimal
    in general.  A dense middle layer of width k makes every order cost k·n·m.

    Parameters
    ----------
    n_inputs, n_outputs, n_middle : int
        At least 1.
    density : float in [0, 1], default 1.0
    seed : int or None
    partials : {"random", "ones", "none"}

    Returns
    -------
    CompGraph

    References
    ----------
    Griewank & Walther (2008), ch. 9–10 (vertex elimination; forward and
    reverse mode as special orders); Naumann (2008).

    Examples
    --------
    >>> g = bipartite(4, 3, seed=0)
    >>> len(g.intermediates), g.n_edges
    (1, 7)
    """
    return layered([n_inputs, n_middle, n_outputs], density=density, seed=seed, partials=partials)


# ---------------------------------------------------------------------------- trees
def reduction_tree(
    depth: int,
    branching: int = 2,
    *,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """A complete reduction tree: ``branching**depth`` inputs → one output.

    The data flow of a tree-shaped sum or product (pairwise summation for
    ``branching=2``): leaves ``x0 …`` are the inputs, each vertex combines
    ``branching`` children, the root ``y0`` is the output; levels 1 … depth−1
    (counted from the leaves) hold the intermediates ``v{level}_{i}``.  A
    gradient: reverse order costs b² + … + b^depth multiplications, forward
    order (depth−1)·b^depth — the cheap-gradient principle in miniature.

    Parameters
    ----------
    depth : int
        Edge levels from the leaves to the root, at least 1.
    branching : int, default 2
        At least 1 (1 gives a chain of ``depth`` edges).
    seed : int or None
        Seeds the partials only; the structure is fixed.
    partials : {"random", "ones", "none"}

    Returns
    -------
    CompGraph

    References
    ----------
    Griewank & Walther (2008): the cheap gradient principle; vertex
    elimination (ch. 9–10).

    Examples
    --------
    >>> g = reduction_tree(3, 2, seed=0)
    >>> len(g.inputs), len(g.intermediates), len(g.outputs)
    (8, 6, 1)
    """
    depth = _check_int("depth", depth, 1)
    branching = _check_int("branching", branching, 1)
    _check_partials(partials)
    rng = np.random.default_rng(seed)
    levels = _tree_levels(depth, branching, leaves="x", root="y")
    edges = [
        (levels[level - 1][branching * i + c], parent)
        for level in range(1, depth + 1)
        for i, parent in enumerate(levels[level])
        for c in range(branching)
    ]
    inner = [v for layer in levels[1:-1] for v in layer]
    return _build(levels[0], inner, levels[-1], edges, rng, partials)


def broadcast_tree(
    depth: int,
    branching: int = 2,
    *,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """A complete broadcast (fan-out) tree: one input → ``branching**depth`` outputs.

    The mirror image of :func:`reduction_tree` (every edge reversed): the root
    ``x0`` is the input, level ``l`` (from the root) holds ``branching**l``
    vertices, the leaves ``y0 …`` are the outputs.  A tangent: forward order
    costs b² + … + b^depth multiplications, reverse order (depth−1)·b^depth.

    Parameters
    ----------
    depth : int
        At least 1.
    branching : int, default 2
        At least 1.
    seed : int or None
        Seeds the partials only; the structure is fixed.
    partials : {"random", "ones", "none"}

    Returns
    -------
    CompGraph

    References
    ----------
    Griewank & Walther (2008): forward mode for one input; vertex elimination
    (ch. 9–10).

    Examples
    --------
    >>> g = broadcast_tree(2, 3, seed=0)
    >>> len(g.inputs), len(g.intermediates), len(g.outputs)
    (1, 3, 9)
    """
    depth = _check_int("depth", depth, 1)
    branching = _check_int("branching", branching, 1)
    _check_partials(partials)
    rng = np.random.default_rng(seed)
    levels = _tree_levels(depth, branching, leaves="y", root="x")[::-1]  # levels[l]: distance l from root
    edges = [
        (parent, levels[level + 1][branching * i + c])
        for level in range(depth)
        for i, parent in enumerate(levels[level])
        for c in range(branching)
    ]
    inner = [v for layer in levels[1:-1] for v in layer]
    return _build(levels[0], inner, levels[-1], edges, rng, partials)


def _tree_levels(depth: int, branching: int, *, leaves: str, root: str) -> list[list[str]]:
    """Vertex names by height: [leaves, level 1, …, [root]]."""
    levels = [[f"{leaves}{i}" for i in range(branching**depth)]]
    for level in range(1, depth):
        levels.append([f"v{level}_{i}" for i in range(branching ** (depth - level))])
    levels.append([f"{root}0"])
    return levels


# ---------------------------------------------------------------------------- chains
def chain(length: int, *, seed: int | None = None, partials: str = "random") -> CompGraph:
    """A chain of ``length`` scalar operations: x0 → v1 → … → v{length−1} → y0.

    ``length`` edges and ``length − 1`` intermediates; every vertex order costs
    one multiplication per intermediate (``length − 1``), so forward, reverse
    and Markowitz agree — the simple chain of paper 003.

    Parameters
    ----------
    length : int
        Number of edges, at least 1.
    seed : int or None
        Seeds the partials only.
    partials : {"random", "ones", "none"}

    Returns
    -------
    CompGraph

    Examples
    --------
    >>> g = chain(4, partials="ones")
    >>> g.intermediates, g.n_edges
    (('v1', 'v2', 'v3'), 4)
    """
    length = _check_int("length", length, 1)
    _check_partials(partials)
    rng = np.random.default_rng(seed)
    path = ["x0"] + [f"v{i}" for i in range(1, length)] + ["y0"]
    edges = list(zip(path[:-1], path[1:], strict=True))
    return _build(path[:1], path[1:-1], path[-1:], edges, rng, partials)


def ladder(
    length: int,
    width: int = 2,
    *,
    seed: int | None = None,
    partials: str = "random",
) -> CompGraph:
    """``width`` parallel chains ("rails") of ``length`` edges joined by rungs.

    Level 0 holds the inputs ``x0 … x{width−1}``, level ``length`` the outputs
    ``y0 …``, levels 1 … length−1 the intermediates ``v{level}_{k}`` (rail k).
    Between levels l and l+1 every rail has its edge (l,k) → (l+1,k), and the
    rungs cross between neighbouring rails, alternating direction: from rail k
    to rail k+1 when l is even, from rail k+1 to rail k when l is odd.  So the
    ladder has ``length·(2·width − 1)`` edges, and for ``length ≥ width`` every
    output depends on every input.

    For ``width=2`` and ``length ≥ 2``, forward and reverse vertex orders both
    cost 6·(length − 2) + 5 multiplications, while the best vertex order costs
    5·(length − 1) (checked exhaustively for length ≤ 5) and the Markowitz
    heuristic finds it: cross-country beats both pure modes by a predictable
    margin.  ``width=1`` is :func:`chain`.

    Parameters
    ----------
    length : int
        Edges along each rail, at least 1.
    width : int, default 2
        Number of rails, at least 1.
    seed : int or None
        Seeds the partials only.
    partials : {"random", "ones", "none"}

    Returns
    -------
    CompGraph

    References
    ----------
    Griewank & Walther (2008), ch. 9–10 (the vertex-elimination cost model);
    paper 003 (simple chains and blocks).

    Examples
    --------
    >>> g = ladder(3)
    >>> len(g.inputs), len(g.intermediates), len(g.outputs), g.n_edges
    (2, 4, 2, 9)
    """
    length = _check_int("length", length, 1)
    width = _check_int("width", width, 1)
    _check_partials(partials)
    rng = np.random.default_rng(seed)
    levels = [[f"x{k}" for k in range(width)]]
    levels += [[f"v{level}_{k}" for k in range(width)] for level in range(1, length)]
    levels.append([f"y{k}" for k in range(width)])
    edges: list[tuple[str, str]] = []
    for level in range(length):
        here, there = levels[level], levels[level + 1]
        edges.extend((here[k], there[k]) for k in range(width))
        if level % 2 == 0:
            edges.extend((here[k], there[k + 1]) for k in range(width - 1))
        else:
            edges.extend((here[k + 1], there[k]) for k in range(width - 1))
    inner = [v for layer in levels[1:-1] for v in layer]
    return _build(levels[0], inner, levels[-1], edges, rng, partials)


# ---------------------------------------------------------------------------- the zoo
def _register(
    name: str, description: str, builder, n_inputs: int, n_outputs: int, scale: bool = False
) -> None:
    register(
        Problem(
            name,
            description,
            _SOURCE,
            n_inputs,
            n_outputs,
            builder=builder,
            tags=("random", "scale") if scale else ("random",),
        )
    )


_register(
    "random_dag_s",
    "random DAG, 8 inputs, 50 intermediates, 6 outputs: random_dag(8, 50, 6, max_preds=3, seed=1)",
    lambda: random_dag(8, 50, 6, max_preds=3, seed=1),
    8,
    6,
)
_register(
    "random_dag_m",
    "random DAG, 20 inputs, 500 intermediates, 10 outputs, band 50: "
    "random_dag(20, 500, 10, max_preds=3, window=50, seed=2)",
    lambda: random_dag(20, 500, 10, max_preds=3, window=50, seed=2),
    20,
    10,
)
_register(
    "random_dag_l",
    "random DAG, 16 inputs, 2000 intermediates, 8 outputs, band 200: "
    "random_dag(16, 2000, 8, max_preds=3, window=200, seed=3)",
    lambda: random_dag(16, 2000, 8, max_preds=3, window=200, seed=3),
    16,
    8,
    scale=True,
)
_register(
    "layered_8x16x16x8",
    "layered dense graph (MLP-like), widths 8-16-16-8: layered([8, 16, 16, 8], density=1.0, seed=4)",
    lambda: layered([8, 16, 16, 8], density=1.0, seed=4),
    8,
    8,
)
_register(
    "layered_sparse_16x32x32x16",
    "sparse layered graph, widths 16-32-32-16, density 0.2: layered([16, 32, 32, 16], density=0.2, seed=5)",
    lambda: layered([16, 32, 32, 16], density=0.2, seed=5),
    16,
    16,
)
_register(
    "bipartite_hourglass",
    "hourglass / bottleneck 16×1×16 (rank-one Jacobian): bipartite(16, 16, 1, seed=6)",
    lambda: bipartite(16, 16, 1, seed=6),
    16,
    16,
)
_register(
    "bipartite_12x4x12",
    "bipartite graph 12 inputs, 4 middle, 12 outputs, density 0.5: bipartite(12, 12, 4, density=0.5, seed=7)",
    lambda: bipartite(12, 12, 4, density=0.5, seed=7),
    12,
    12,
)
_register(
    "reduction_tree_d5",
    "binary reduction tree of depth 5, 32 inputs → 1 output: reduction_tree(5, 2, seed=8)",
    lambda: reduction_tree(5, 2, seed=8),
    32,
    1,
)
_register(
    "broadcast_tree_d5",
    "binary broadcast tree of depth 5, 1 input → 32 outputs: broadcast_tree(5, 2, seed=9)",
    lambda: broadcast_tree(5, 2, seed=9),
    1,
    32,
)
_register(
    "ladder_20",
    "two chains of 20 operations with alternating rungs: ladder(20, 2, seed=10)",
    lambda: ladder(20, 2, seed=10),
    2,
    2,
)
_register(
    "chain_50",
    "a chain of 50 scalar operations: chain(50, seed=11)",
    lambda: chain(50, seed=11),
    1,
    1,
)
