"""The figure graphs of paper 003, reconstructed as numeric computational graphs.

Paper 003 (*Notes on Computational Graph and Jacobian Accumulation*; the
author and year are not in the text we have) illustrates its arguments with small differentiation graphs.  The text
we have lost most mathematical symbols, so every graph here is a
*reconstruction*: the smallest graph consistent with every statement the text
makes about the figure.  ``docs/paper003_figures.md`` lists, figure by
figure, what the text says, the reconstructed edges and what is certain and
what is assumed; each builder's docstring repeats the essentials.

Conventions
-----------
* The paper draws **dependence** arrows: a root (a function value) points to
  what it depends on, down to the terminals (the independent variables); the
  label of arrow ``s → d`` is ∂s/∂d.  jacacc's edges follow the **data flow**,
  so paper arrow ``s → d`` becomes our edge ``d → s`` with partial ∂s/∂d:
  the paper's roots are our *outputs*, its terminals our *inputs*.
  :func:`paper_edges` gives a figure in the paper's direction.
* Vertex names are ours (the symbols were lost): ``f``, ``g``, ``r1``, ``r2``
  … for roots, ``x``, ``y``, ``t1``, ``t2`` … for terminals, other letters for
  intermediates; a primed name (``p'``) is a copy made by splitting a vertex.
* Partials are the primes 2, 3, 5, 7, … assigned in the order the paper-
  direction edge list gives the edges of an *original* figure, so that every
  path product is a distinct square-free integer and a wrong combination of
  paths shows in the Jacobian.  *Derived* figures (a figure obtained from
  another by splitting vertices, segmenting an edge or replacing a chain by a
  reference edge) keep the labels of the edges they copy; an edge that only
  copies a value (a segmentation edge) has partial 1, and a reference edge
  carries the value of the chain or block it replaces.

Every figure is registered as a graph :class:`~jacacc.problems.base.Problem`
named ``paper003_<figure>`` with the tag ``"paper003"``.

Examples
--------
>>> from jacacc.problems import paper003
>>> sorted(paper003.paper003_graphs())[:3]
['paper003_fig1_1', 'paper003_fig3_1a', 'paper003_fig3_1b']
>>> paper003.paper_edges("fig3_1a")
[('f', 'a', 2.0), ('a', 'x', 3.0), ('f', 'x', 5.0)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jacacc.graph import CompGraph
from jacacc.problems.base import Problem, register

__all__ = [
    "fig1_1",
    "fig3_1a",
    "fig3_1b",
    "fig3_1c",
    "fig4_1a",
    "fig4_1b",
    "fig4_1c",
    "fig4_2a",
    "fig4_2b",
    "fig4_2c",
    "fig4_2d",
    "fig4_4a",
    "fig5_1a",
    "fig5_2a",
    "fig5_2b",
    "paper003_graphs",
    "paper_edges",
]

PaperEdge = tuple[str, str, float]

SOURCE = (
    "Notes on Computational Graph and Jacobian Accumulation (paper 003); "
    "reconstructed from the text, see docs/paper003_figures.md"
)


@dataclass(frozen=True)
class _Figure:
    """A figure in the paper's dependence direction: roots → … → terminals."""

    roots: tuple[str, ...]
    terminals: tuple[str, ...]
    edges: tuple[PaperEdge, ...]

    def graph(self) -> CompGraph:
        # paper arrow s → d (s depends on d, label ∂s/∂d) is our data-flow edge d → s
        return CompGraph.from_edges(
            self.terminals, self.roots, [(d, s, label) for s, d, label in self.edges]
        )


def _primes(n: int) -> list[float]:
    """The first ``n`` primes, as floats."""
    found: list[int] = []
    k = 2
    while len(found) < n:
        if all(k % p for p in found if p * p <= k):
            found.append(k)
        k += 1
    return [float(p) for p in found]


def _original(roots: Sequence[str], terminals: Sequence[str], arrows: Sequence[tuple[str, str]]) -> _Figure:
    """An original figure: arrows labelled with the primes in the order given."""
    labels = _primes(len(arrows))
    edges = tuple((s, d, p) for (s, d), p in zip(arrows, labels, strict=True))
    return _Figure(tuple(roots), tuple(terminals), edges)


def _label(figure: _Figure, source: str, destination: str) -> float:
    """The label of ``figure``'s arrow ``source → destination``."""
    return next(p for s, d, p in figure.edges if (s, d) == (source, destination))


def _original_name(node: str, figure: _Figure) -> str:
    """The vertex a copy was made from: ``p''`` and ``c3`` are copies of ``p`` and ``c``
    (roots and terminals are never copied)."""
    if node in figure.roots or node in figure.terminals:
        return node
    return node.rstrip("'").rstrip("0123456789")


def _derived(base: _Figure, arrows: Sequence[tuple]) -> _Figure:
    """A figure made from ``base`` by copying vertices.

    An arrow ``(s, d)`` copies the label of the base arrow between the vertices ``s`` and ``d``
    were copied from; ``(s, d, (bs, bd))`` copies the label of base arrow ``bs → bd``;
    ``(s, d, number)`` gives the label outright (a unit copy edge, a reference edge).
    """
    edges = []
    for arrow in arrows:
        s, d = arrow[0], arrow[1]
        if len(arrow) == 2:
            value = _label(base, _original_name(s, base), _original_name(d, base))
        elif isinstance(arrow[2], tuple):
            value = _label(base, *arrow[2])
        else:
            value = float(arrow[2])
        edges.append((s, d, value))
    return _Figure(base.roots, base.terminals, tuple(edges))


# ---------------------------------------------------------------------------------------- the figures
_FIG1_1 = _original(["y1", "y2"], ["x"], [("y1", "v"), ("y2", "v"), ("v", "x")])

_FIG3_1A = _original(["f"], ["x"], [("f", "a"), ("a", "x"), ("f", "x")])
_FIG3_1B = _derived(_FIG3_1A, [("f", "a"), ("a", "x"), ("f", "f'", 1.0), ("f'", "x", ("f", "x"))])
_FIG3_1C = _derived(_FIG3_1A, [("f", "a"), ("a", "x"), ("f", "x'", ("f", "x")), ("x'", "x", 1.0)])

_FIG4_1A = _original(
    ["f"], ["x"],
    [("f", "a"), ("f", "b"), ("a", "c"), ("b", "c"), ("c", "d"), ("c", "e"), ("d", "x"), ("e", "x")],
)
# one direct simple chain per root–terminal path of Fig. 4.1 (a); copies numbered by path
_FIG4_1C = _derived(
    _FIG4_1A,
    [arrow for k, (u, w) in enumerate([("a", "d"), ("a", "e"), ("b", "d"), ("b", "e")], start=1)
     for arrow in [("f", f"{u}{k}"), (f"{u}{k}", f"c{k}"), (f"c{k}", f"{w}{k}"), (f"{w}{k}", "x")]],
)

_FIG4_1B = _original(
    ["f"], ["x"],
    [("f", "a"), ("f", "b"), ("a", "v"), ("b", "v"), ("a", "p"), ("b", "q"),
     ("v", "p"), ("v", "q"), ("p", "x"), ("q", "x")],
)
_B_ARROWS = [("f", "a"), ("f", "b"), ("a", "v"), ("b", "v")]  # the simple block B(f, v) once a, b are split
_R_ARROWS = [("v", "p"), ("v", "q"), ("p", "x"), ("q", "x")]  # the simple block B(v, x) once p, q are split
# backward factorization, step 1: p and q (in-degree 2) split; the copies p', q' take a and b
_FIG4_2A = _derived(_FIG4_1B, _B_ARROWS + _R_ARROWS + [("a", "p'"), ("p'", "x"), ("b", "q'"), ("q'", "x")])
# step 2: v (in-degree 2) heads the simple block B(v, x), which is split like an edge
_FIG4_2B = _derived(
    _FIG4_1B,
    [("f", "a"), ("f", "b"), ("a", "v"), ("b", "v'")] + _R_ARROWS
    + [("v'", "p''"), ("v'", "q''"), ("p''", "x"), ("q''", "x")]
    + [("a", "p'"), ("p'", "x"), ("b", "q'"), ("q'", "x")],
)
# forward factorization, step 1: a and b (out-degree 2) split; the copies a', b' take p and q
_FIG4_2C = _derived(_FIG4_1B, _B_ARROWS + _R_ARROWS + [("f", "a'"), ("a'", "p"), ("f", "b'"), ("b'", "q")])
# step 2: v (out-degree 2) is the sink of the simple block B(f, v), which is split like an edge
_FIG4_2D = _derived(
    _FIG4_1B,
    _B_ARROWS + [("v", "p")]
    + [("f", "a''"), ("f", "b''"), ("a''", "v'"), ("b''", "v'"), ("v'", "q")]
    + [("f", "a'"), ("a'", "p"), ("f", "b'"), ("b'", "q"), ("p", "x"), ("q", "x")],
)

_FIG4_4A = _original(
    ["f", "g"], ["x", "y"],
    [("f", "a"), ("f", "b"), ("a", "c"), ("b", "c"), ("c", "x"),
     ("g", "d"), ("d", "e"), ("d", "h"), ("e", "y"), ("h", "y")],
)

_FIG5_1A = _original(
    ["r1", "r2"], ["t1", "t2"],
    [("r1", "u"), ("u", "t1"), ("u", "a"), ("a", "t1"), ("r2", "u"), ("a", "t2")],
)

_FIG5_2A = _original(
    ["r1", "r2"], ["t1", "t2"],
    [("r1", "v"), ("r2", "v"), ("v", "c"), ("c", "w"), ("w", "t1"), ("w", "t2"), ("r1", "w"), ("r2", "t2")],
)
_FIG5_2B = _derived(
    _FIG5_2A,
    [("r1", "v"), ("r2", "v"), ("v", "w", _label(_FIG5_2A, "v", "c") * _label(_FIG5_2A, "c", "w")),
     ("w", "t1"), ("w", "t2"), ("r1", "w"), ("r2", "t2")],
)

_FIGURES: dict[str, _Figure] = {
    "fig1_1": _FIG1_1,
    "fig3_1a": _FIG3_1A,
    "fig3_1b": _FIG3_1B,
    "fig3_1c": _FIG3_1C,
    "fig4_1a": _FIG4_1A,
    "fig4_1b": _FIG4_1B,
    "fig4_1c": _FIG4_1C,
    "fig4_2a": _FIG4_2A,
    "fig4_2b": _FIG4_2B,
    "fig4_2c": _FIG4_2C,
    "fig4_2d": _FIG4_2D,
    "fig4_4a": _FIG4_4A,
    "fig5_1a": _FIG5_1A,
    "fig5_2a": _FIG5_2A,
    "fig5_2b": _FIG5_2B,
}


def paper_edges(figure: str) -> list[PaperEdge]:
    """A figure's edges in the paper's dependence direction.

    Parameters
    ----------
    figure : str
        ``"fig4_1a"`` or ``"paper003_fig4_1a"``.

    Returns
    -------
    list of (source, destination, label)
        Arrow ``source → destination`` means *source depends on destination*;
        ``label`` is ∂source/∂destination.  jacacc's graph has the edge
        ``destination → source`` with that partial.

    Examples
    --------
    >>> paper_edges("paper003_fig1_1")
    [('y1', 'v', 2.0), ('y2', 'v', 3.0), ('v', 'x', 5.0)]
    >>> sorted(fig1_1().edges)
    [('v', 'y1'), ('v', 'y2'), ('x', 'v')]
    """
    key = figure.removeprefix("paper003_")
    if key not in _FIGURES:
        raise KeyError(f"unknown paper-003 figure {figure!r}; known: {', '.join(_FIGURES)}")
    return list(_FIGURES[key].edges)


# ---------------------------------------------------------------------------------------- builders
def fig1_1() -> CompGraph:
    """Fig. 1.1 (a): a computational graph whose adjacent edge paths overlap on one edge.

    What the text says: an adjacent edge path is one in-edge and one out-edge
    of a vertex; two adjacent edge paths overlap on an edge, so eliminating
    that edge eliminates both; Fig. 1.1 (b) is the line graph, in which each
    adjacent edge path is one edge; §5 says one "can list all the root-terminal
    pairs in Fig. 1.1 (a)", so it has more than one root–terminal pair.

    Reconstruction (smallest graph with all of that; the figure's own vertices
    are not recoverable): paper arrows ``y1 → v``, ``y2 → v``, ``v → x``.  The
    adjacent edge paths ``(x→v, v→y1)`` and ``(x→v, v→y2)`` (data flow)
    overlap on ``x → v``; the line graph has vertices ``xv, vy1, vy2`` and the
    two edges ``xv → vy1``, ``xv → vy2``.  Certain: the overlap and the
    several root–terminal pairs.  Assumed: the size, one terminal and two
    roots (two terminals and one root would do as well).

    Returns
    -------
    CompGraph
        1 input (``x``), 1 intermediate, 2 outputs (``y1``, ``y2``).

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> g = fig1_1()
    >>> g
    CompGraph(inputs=1, intermediates=1, outputs=2, edges=3, partials='numeric')
    >>> reference_jacobian(g).ravel().tolist()
    [10.0, 15.0]
    """
    return _FIG1_1.graph()


def fig3_1a() -> CompGraph:
    """Fig. 3.1 (a): a graph with a cross-level edge.

    What the text says (Definition 3.4): roots are on the first depth level,
    terminals on the last, an intermediate on the level of its longest path
    from a root; an edge spanning more than one level is a cross-level edge,
    and Fig. 3.1 (b) or (c) is the segmentation of the cross-level edge of
    Fig. 3.1 (a).

    Reconstruction (smallest graph with a cross-level edge): paper arrows
    ``f → a``, ``a → x``, ``f → x``; levels f 0, a 1, x 2, so ``f → x`` crosses
    level 1.  Certain: one cross-level edge.  Assumed: the rest of the graph.

    Returns
    -------
    CompGraph
        1 input, 1 intermediate, 1 output.

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> reference_jacobian(fig3_1a()).item()  # 2·3 + 5
    11.0
    """
    return _FIG3_1A.graph()


def fig3_1b() -> CompGraph:
    """Fig. 3.1 (b): the cross-level edge of Fig. 3.1 (a) segmented from its tail.

    The paper fills the crossed level with a vertex "derived from its head or
    tail vertex", turning the edge into a direct simple chain.  Here the new
    vertex ``f'`` is a copy of the tail ``f``: paper arrows ``f → f'`` (label 1,
    a copy) and ``f' → x`` (the old label ∂f/∂x).  The paper notes that the
    multiplication by the unit label is unnecessary.

    Returns
    -------
    CompGraph
        1 input, 2 intermediates, 1 output; same Jacobian as :func:`fig3_1a`.

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> reference_jacobian(fig3_1b()).item()
    11.0
    """
    return _FIG3_1B.graph()


def fig3_1c() -> CompGraph:
    """Fig. 3.1 (c): the cross-level edge of Fig. 3.1 (a) segmented from its head.

    As :func:`fig3_1b`, but the filling vertex ``x'`` is a copy of the head
    ``x``: paper arrows ``f → x'`` (the old label) and ``x' → x`` (label 1).

    Returns
    -------
    CompGraph
        1 input, 2 intermediates, 1 output; same Jacobian as :func:`fig3_1a`.

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> reference_jacobian(fig3_1c()).item()
    11.0
    """
    return _FIG3_1C.graph()


def fig4_1a() -> CompGraph:
    """Fig. 4.1 (a): two simple blocks chained together.

    What the text says: two simple blocks chained together, written at once
    as the algebraic expression Eq. 4.1; Fig. 4.1 (c) lists all root–terminal
    paths of it as a direct simple block (Eq. 4.2); Eq. 4.2 costs 12 fma's,
    Eq. 4.1 only 5; accumulating the middle local Jacobians first "splits
    [the middle vertex] into 4 vertices".

    Reconstruction: paper arrows ``f → a``, ``f → b``, ``a → c``, ``b → c``
    (the block B(f, c)), ``c → d``, ``c → e``, ``d → x``, ``e → x`` (the block
    B(c, x)).  Eq. 4.1 is ``(f_a a_c + f_b b_c)(c_d d_x + c_e e_x)``: 2 + 2 + 1
    = 5 fma's; the four paths have 4 edges each: 4 · 3 = 12 fma's; c has
    2 × 2 = 4 (predecessor, successor) pairs.  Certain, given blocks of direct
    simple chains without a direct source–sink edge: the numbers 5 and 12
    force exactly two chains of one intermediate in each block, so this graph
    is the only one.

    Returns
    -------
    CompGraph
        1 input (``x``), 5 intermediates, 1 output (``f``), 8 edges.

    Examples
    --------
    >>> from jacacc import optimize, reference_jacobian
    >>> g = fig4_1a()
    >>> reference_jacobian(g).item()  # (2·5 + 3·7)(11·17 + 13·19)
    13454.0
    >>> optimize(g, method="markowitz").mults  # Eq. 4.1's 5
    5
    """
    return _FIG4_1A.graph()


def fig4_1b() -> CompGraph:
    """Fig. 4.1 (b): a complex block.

    What the text says: a complex block (no algebraic expression "at one
    glance"); in backward factorization the two predecessors p, q of the sink
    have in-degree 2 and are split, connecting [a] and [b] to the new p and q
    (Fig. 4.2 (a)); then a vertex v has in-degree 2 and heads a simple block,
    which is split like an edge (Fig. 4.2 (b)); Eq. 4.3 / 4.5 use a reference
    variable r for that block, appearing twice; forward factorization mirrors
    this (Fig. 4.2 (c), (d), Eq. 4.4).

    Reconstruction (smallest graph with all of that): paper arrows ``f → a``,
    ``f → b``, ``a → v``, ``b → v``, ``a → p``, ``b → q``, ``v → p``,
    ``v → q``, ``p → x``, ``q → x``.  Backward: split p and q, then v heads
    B(v, x) = {v→p→x, v→q→x}; Eq. 4.5 is ``f_a(a_v r + a_p p_x) + f_b(b_v r +
    b_q q_x)`` with ``r = v_p p_x + v_q q_x``.  Forward gives Eq. 4.4
    ``(s v_p + f_a a_p) p_x + (s v_q + f_b b_q) q_x`` with ``s = f_a a_v + f_b
    b_v``.  Certain: one root, one terminal, p and q of in-degree 2 above the
    sink, v of in-degree 2 heading a block that becomes simple.  Assumed: the
    other parents of p and q are a and b (the text's "connecting ... and ...
    to the new ... and new ... respectively" suggests two distinct vertices).
    The text's "2 paths overlapped on" p → x cannot hold literally in any
    graph with the later in-degree-2 vertex v above p (3 paths do here); it
    reads as the in-degree.

    Returns
    -------
    CompGraph
        1 input, 5 intermediates, 1 output, 10 edges.

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> g = fig4_1b()
    >>> g
    CompGraph(inputs=1, intermediates=5, outputs=1, edges=10, partials='numeric')
    >>> r = 17 * 23 + 19 * 29  # the reference variable of Eq. 4.5
    >>> reference_jacobian(g).item() == 2 * (5 * r + 11 * 23) + 3 * (7 * r + 13 * 29)
    True
    """
    return _FIG4_1B.graph()


def fig4_1c() -> CompGraph:
    """Fig. 4.1 (c): all root–terminal paths of Fig. 4.1 (a), listed as a direct simple block.

    Four direct simple chains ``f → u_k → c_k → w_k → x`` for the paths
    through (u, w) = (a, d), (a, e), (b, d), (b, e), numbered k = 1…4; each
    copy keeps the label of the edge it copies.  Computing Eq. 4.2 on it takes
    4 · 3 = 12 multiplications whatever the order.

    Returns
    -------
    CompGraph
        1 input, 12 intermediates, 1 output, 16 edges; same Jacobian as
        :func:`fig4_1a`.

    Examples
    --------
    >>> from jacacc import optimize, reference_jacobian
    >>> g = fig4_1c()
    >>> reference_jacobian(g).item()
    13454.0
    >>> optimize(g, method="forward").mults
    12
    """
    return _FIG4_1C.graph()


def fig4_2a() -> CompGraph:
    """Fig. 4.2 (a): Fig. 4.1 (b) after the first backward-factorization step.

    p and q (in-degree 2) are split from behind: the copies ``p'`` and ``q'``
    take the arrows from a and b, each with its own copy of the arrow to x.
    Now v has in-degree 2 and heads the simple block B(v, x).  Derived from
    the reconstruction of :func:`fig4_1b`; labels are copied.

    Returns
    -------
    CompGraph
        1 input, 7 intermediates, 1 output; same Jacobian as :func:`fig4_1b`.

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> g = fig4_2a()
    >>> g.predecessors("v"), g.successors("v")  # data flow: two users, one block below
    (['p', 'q'], ['a', 'b'])
    """
    return _FIG4_2A.graph()


def fig4_2b() -> CompGraph:
    """Fig. 4.2 (b): Fig. 4.1 (b) after backward factorization (algebraic form Eq. 4.3).

    The simple block B(v, x) of Fig. 4.2 (a) is split like an edge: ``v'``,
    ``p''``, ``q''`` copy it for the path through b.  Every intermediate now
    has in-degree 1 in the paper's direction: the graph is the tree of paths
    from the root, with the terminal kept as one vertex.

    Returns
    -------
    CompGraph
        1 input, 10 intermediates, 1 output, 16 edges; same Jacobian as
        :func:`fig4_1b`.

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> g = fig4_2b()
    >>> all(len(g.successors(v)) == 1 for v in g.intermediates)
    True
    >>> reference_jacobian(g).item() == reference_jacobian(fig4_1b()).item()
    True
    """
    return _FIG4_2B.graph()


def fig4_2c() -> CompGraph:
    """Fig. 4.2 (c): Fig. 4.1 (b) after the first forward-factorization step.

    a and b (out-degree 2) are split from the head of their in-edge: the
    copies ``a'`` and ``b'`` take the arrows to p and q, each with its own copy
    of the arrow from f.  Now v has out-degree 2 and is the sink of the
    simple block B(f, v).

    Returns
    -------
    CompGraph
        1 input, 7 intermediates, 1 output; same Jacobian as :func:`fig4_1b`.

    Examples
    --------
    >>> g = fig4_2c()
    >>> g.predecessors("a"), g.predecessors("a'")  # data flow: what a and a' are computed from
    (['v'], ['p'])
    """
    return _FIG4_2C.graph()


def fig4_2d() -> CompGraph:
    """Fig. 4.2 (d): Fig. 4.1 (b) after forward factorization (algebraic form Eq. 4.4).

    The simple block B(f, v) of Fig. 4.2 (c) is split like an edge: ``a''``,
    ``b''``, ``v'`` copy it for the arrow to q.  Every intermediate now has
    out-degree 1 in the paper's direction: the graph is the tree of paths
    to the terminal, with the root kept as one vertex.

    Returns
    -------
    CompGraph
        1 input, 10 intermediates, 1 output, 16 edges; same Jacobian as
        :func:`fig4_1b`.

    Examples
    --------
    >>> g = fig4_2d()
    >>> all(len(g.predecessors(v)) == 1 for v in g.intermediates)
    True
    """
    return _FIG4_2D.graph()


def fig4_4a() -> CompGraph:
    """Fig. 4.4 (a): two unrelated subgraphs with conflicting optimal accumulation orders.

    What the text says: over the same depth levels, the left subgraph's
    optimal local-Jacobian order is the left-to-right one, the right
    subgraph's the right-to-left one; depth local Jacobian multiplication can
    be done separately in unrelated subgraphs that span the same levels.

    Reconstruction (smallest pair of unrelated subgraphs over 4 levels with
    opposite preferences): left ``f → a``, ``f → b``, ``a → c``, ``b → c``,
    ``c → x``; right ``g → d``, ``d → e``, ``d → h``, ``e → y``, ``h → y``.
    Left: (J1 J2) J3 costs 2 + 1 = 3, J1 (J2 J3) costs 2 + 2 = 4; the right
    subgraph is its mirror image (4 against 3).  One order for the whole graph
    costs 7 either way, separate orders 6.  Certain: two unrelated subgraphs
    over the same levels with opposite preferences.  Assumed: their shape and
    that they share no vertex (two roots, two terminals).  Fig. 4.4 (b) (a
    non-depth local Jacobian product) is not reconstructed.

    Returns
    -------
    CompGraph
        2 inputs (``x``, ``y``), 6 intermediates, 2 outputs (``f``, ``g``).

    Examples
    --------
    >>> from jacacc import optimize
    >>> optimize(fig4_4a(), method="markowitz").mults
    6
    """
    return _FIG4_4A.graph()


def fig5_1a() -> CompGraph:
    """Fig. 5.1 (a): a multi-root, multi-terminal graph whose pair (r1, t1) is an indirect simple chain.

    What the text says: a multi-root and multi-terminal differentiation graph;
    the vertices and edges relevant to one root–terminal pair form an
    indirect simple chain whose algebraic form is written down at once; yet
    after computing it the chain "cannot be eliminated directly" (nor in the
    line graph, Fig. 5.1 (b)) because other pairs still use it.

    Reconstruction (smallest such graph): paper arrows ``r1 → u``, ``u → t1``,
    ``u → a``, ``a → t1`` (the indirect simple chain r1 → u ⇒ t1 through the
    simple block B(u, t1) = {u → t1, u → a → t1}), ``r2 → u`` and ``a → t2``
    (the other pairs sharing u and a).  Algebraic form ``r1_u (u_t1 + u_a
    a_t1)``.  Certain: several roots and terminals, one pair's subgraph an
    indirect simple chain, shared with other pairs.  Assumed: everything else
    (the smallest simple block has a direct source–sink edge).

    Returns
    -------
    CompGraph
        2 inputs (``t1``, ``t2``), 2 intermediates, 2 outputs (``r1``, ``r2``).

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> reference_jacobian(fig5_1a())[0, 0]  # r1_u (u_t1 + u_a a_t1) = 2 (3 + 5·7)
    np.float64(76.0)
    """
    return _FIG5_1A.graph()


def fig5_2a() -> CompGraph:
    """Fig. 5.2 (a): the page-splitting example (low-confidence reconstruction).

    What the text says: replacing the simple chains of Fig. 5.2 (a) by
    reference edges gives Fig. 5.2 (b); in (b) one finds v, the vertex of
    largest r-degree on the depth level closest to the roots, and w, a vertex
    reachable from it of largest t-degree on the level closest to the
    terminals; (b) is split into two pages, one of them Fig. 5.2 (c), "and the
    edge between v and w is on the other page"; page (c) is separated by
    the rule for cross-level edges out of roots into (d) and (e), and (e)
    again into (g) and (h).

    Reconstruction (smallest graph honouring the checkable statements):
    paper arrows ``r1 → v``, ``r2 → v``, ``v → c``, ``c → w`` (the simple
    chain v → c → w), ``w → t1``, ``w → t2``, and two cross-level arrows out
    of roots with different spans, ``r1 → w`` and ``r2 → t2``.  In (b) v has
    r-degree 2, w t-degree 2, and the edge between them is the reference edge
    of the chain.  Certain: two or more roots and terminals, a simple chain
    that becomes the edge between v and w, cross-level edges out of roots.
    Assumed: everything else; pages (c)–(h) and Eq. 5.1–5.13 (13 expressions
    for page (e)) are not reproduced, so the original is surely larger.

    Returns
    -------
    CompGraph
        2 inputs (``t1``, ``t2``), 3 intermediates, 2 outputs (``r1``, ``r2``).

    Examples
    --------
    >>> from jacacc import reference_jacobian
    >>> reference_jacobian(fig5_2a()).tolist()
    [[957.0, 1131.0], [1155.0, 1384.0]]
    """
    return _FIG5_2A.graph()


def fig5_2b() -> CompGraph:
    """Fig. 5.2 (b): Fig. 5.2 (a) with its simple chain replaced by a reference edge.

    The chain v → c → w becomes one reference edge ``v → w`` whose label is
    the chain's value ``v_c c_w`` (5 · 7 = 35).

    Returns
    -------
    CompGraph
        2 inputs, 2 intermediates, 2 outputs; same Jacobian as :func:`fig5_2a`.

    Examples
    --------
    >>> fig5_2b().partial("w", "v")
    35.0
    """
    return _FIG5_2B.graph()


# ---------------------------------------------------------------------------------------- registry
_BUILDERS: dict[str, tuple[Callable[[], CompGraph], str]] = {
    "fig1_1": (fig1_1, "Fig. 1.1 (a): adjacent edge paths overlapping on one edge"),
    "fig3_1a": (fig3_1a, "Fig. 3.1 (a): a cross-level edge"),
    "fig3_1b": (fig3_1b, "Fig. 3.1 (b): the cross-level edge segmented from its tail"),
    "fig3_1c": (fig3_1c, "Fig. 3.1 (c): the cross-level edge segmented from its head"),
    "fig4_1a": (fig4_1a, "Fig. 4.1 (a): two simple blocks chained (5 fma factored, 12 listing paths)"),
    "fig4_1b": (fig4_1b, "Fig. 4.1 (b): a complex block"),
    "fig4_1c": (fig4_1c, "Fig. 4.1 (c): all paths of Fig. 4.1 (a) as a direct simple block"),
    "fig4_2a": (fig4_2a, "Fig. 4.2 (a): Fig. 4.1 (b) after one backward-factorization step"),
    "fig4_2b": (fig4_2b, "Fig. 4.2 (b): Fig. 4.1 (b) backward-factorized (Eq. 4.3)"),
    "fig4_2c": (fig4_2c, "Fig. 4.2 (c): Fig. 4.1 (b) after one forward-factorization step"),
    "fig4_2d": (fig4_2d, "Fig. 4.2 (d): Fig. 4.1 (b) forward-factorized (Eq. 4.4)"),
    "fig4_4a": (fig4_4a, "Fig. 4.4 (a): two subgraphs with conflicting optimal accumulation orders"),
    "fig5_1a": (fig5_1a, "Fig. 5.1 (a): multi-root, multi-terminal; one pair an indirect simple chain"),
    "fig5_2a": (fig5_2a, "Fig. 5.2 (a): page-splitting example (low confidence)"),
    "fig5_2b": (fig5_2b, "Fig. 5.2 (b): Fig. 5.2 (a) with its simple chain as a reference edge"),
}


def paper003_graphs() -> dict[str, CompGraph]:
    """Every reconstructed figure, built fresh, by problem name.

    Returns
    -------
    dict of str to CompGraph
        Keys ``"paper003_fig1_1"``, ``"paper003_fig4_1a"``, …; the same names
        under which the figures are registered in the problem zoo.

    Examples
    --------
    >>> graphs = paper003_graphs()
    >>> graphs["paper003_fig4_1a"]
    CompGraph(inputs=1, intermediates=5, outputs=1, edges=8, partials='numeric')
    >>> len(graphs)
    15
    """
    return {f"paper003_{key}": builder() for key, (builder, _) in _BUILDERS.items()}


for _key, (_builder, _description) in _BUILDERS.items():
    _fig = _FIGURES[_key]
    register(
        Problem(
            f"paper003_{_key}",
            _description,
            SOURCE,
            len(_fig.terminals),
            len(_fig.roots),
            builder=_builder,
            tags=("paper003",),
        )
    )
del _key, _builder, _description, _fig
