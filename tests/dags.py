"""Hypothesis strategies for random computational graphs (shared by the test modules)."""

from __future__ import annotations

import networkx as nx
from hypothesis import strategies as st

from jacacc.graph import CompGraph

# Built once: a strategy made inside the composite (a fresh ``filter`` lambda, a
# ``sampled_from`` over a new list) is validated again at every draw, which cost more than
# the tests that drew the graphs.  Indices into a list draw from cached integer strategies.
PARTIALS = st.floats(-2, 2, allow_nan=False, allow_infinity=False).filter(lambda p: abs(p) > 1e-3)


def _some_of(draw, pool: list, min_size: int, max_size: int) -> list:
    """Distinct members of ``pool``, drawn as indices (shrinking towards its start)."""
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=min_size, max_size=max_size, unique=True))
    return [pool[i] for i in picks]


@st.composite
def random_lcgs(draw, max_inputs: int = 4, max_intermediates: int = 8, max_outputs: int = 4,
                int_ids: bool | None = None) -> CompGraph:
    """A random LCG in which every intermediate lies on an input→output path.

    Vertices are created in topological order; each intermediate draws a
    non-empty set of earlier predecessors, each output a possibly empty one
    (an empty one is a constant output), and every intermediate without a
    successor is wired to a later vertex.  Partials are random numbers in
    [-2, 2].  Node ids are strings or (when ``int_ids``) integers.
    """
    n_in = draw(st.integers(1, max_inputs))
    n_mid = draw(st.integers(0, max_intermediates))
    n_out = draw(st.integers(1, max_outputs))
    use_ints = draw(st.booleans()) if int_ids is None else int_ids

    def name(kind: str, i: int):
        if use_ints:
            return {"x": 0, "v": 100, "y": 1000}[kind] + i
        return f"{kind}{i}"

    inputs = [name("x", i) for i in range(n_in)]
    mids = [name("v", i) for i in range(n_mid)]
    outputs = [name("y", i) for i in range(n_out)]
    g = nx.DiGraph()
    g.add_nodes_from(inputs + mids + outputs)
    earlier = list(inputs)
    for v in mids:
        preds = _some_of(draw, earlier, 1, 3)
        g.add_edges_from((u, v) for u in preds)
        earlier.append(v)
    for y in outputs:
        preds = _some_of(draw, earlier, 0, 4)
        g.add_edges_from((u, y) for u in preds)
    for pos, v in enumerate(mids):
        if g.out_degree(v) == 0:
            later = mids[pos + 1:] + outputs
            g.add_edge(v, later[draw(st.integers(0, len(later) - 1))])
    for u, v in g.edges:
        g.edges[u, v]["partial"] = draw(PARTIALS)
    return CompGraph(g, inputs, outputs)
