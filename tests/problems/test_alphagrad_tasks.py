"""The AlphaGrad tasks as graphax builds them reproduce AlphaGrad's published counts (issue 43, item 1).

The expected numbers are AlphaGrad's table (:data:`jacacc.problems.alphagrad.PUBLISHED`);
every count here is computed: by jacacc's own vertex elimination for the scalar
tasks, by the replay of graphax's cost model (:func:`graphax_cost`) for all.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import jacacc
from jacacc.problems import get, names
from jacacc.problems.alphagrad import (
    PUBLISHED,
    SCALAR_TASKS,
    TASKS,
    dumps,
    graphax_cost,
    graphax_order,
    published_order,
    task_data,
)

COLUMNS = {"forward": 1, "reverse": 2, "markowitz": 3}

# Four published cells that AlphaGrad's own publication-state code does not give: its
# evaluation notebooks print a minimal-Markowitz order equal to ours (tested below), and
# replaying it under the publication-state cost model gives 956, 12257 and 51896; the f
# notebook draws its reference line at 9333 for the best of forward/reverse/Markowitz,
# our reverse count.  joint.yaml's numbers for these cells were recorded before, with a
# state of the code or of JAX that we could not identify.
STALE = {
    ("RoeFlux_3d", "markowitz"): 956,
    ("f", "reverse"): 9333,
    ("f", "markowitz"): 12257,
    ("Transformer", "markowitz"): 51896,
}


def test_every_stored_task_is_a_zoo_graph():
    assert names("graphax") == [f"graphax_{t}" for t in TASKS]
    for task in TASKS:
        problem = get(f"graphax_{task}")
        graph = problem.graph()
        data = task_data(task)
        assert problem.kind == "graph"
        assert (problem.n_inputs, problem.n_outputs) == (len(data["inputs"]), len(data["outputs"]))
        assert list(graph.inputs) == data["inputs"] and list(graph.outputs) == data["outputs"]


@pytest.mark.parametrize("task", SCALAR_TASKS)
def test_scalar_tasks_cost_the_published_counts_with_jacacc(task):
    graph = get(f"graphax_{task}").graph()
    counts = [len(graph.intermediates)]
    for method in ("forward", "reverse", "markowitz_lowest_index"):
        counts.append(jacacc.optimize(graph, mode="vertex", method=method, baselines=False).mults)
    assert counts == list(PUBLISHED[task][:4])


@pytest.mark.parametrize("task", TASKS)
def test_vertex_count(task):
    data = task_data(task)
    assert len(data["vertices"]) - len(data["outputs"]) == PUBLISHED[task][0]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("task", TASKS)
def test_graphax_cost_model_gives_the_published_counts(task, column):
    count = graphax_cost(task, graphax_order(task, column))
    if (task, column) in STALE:
        assert count == STALE[task, column] != PUBLISHED[task][COLUMNS[column]]
    else:
        assert count == PUBLISHED[task][COLUMNS[column]]


@pytest.mark.parametrize("task", TASKS)
def test_markowitz_order_is_the_one_alphagrad_printed(task):
    assert [int(v[1:]) for v in graphax_order(task, "markowitz")] == published_order(task, "markowitz")


@pytest.mark.parametrize("task", TASKS)
def test_alphagrad_orders_reproduce_the_alphagrad_column(task):
    assert graphax_cost(task, published_order(task, "alphagrad")) == PUBLISHED[task][4]


@pytest.mark.parametrize("task", SCALAR_TASKS)
def test_on_scalar_tasks_graphax_cost_is_the_markowitz_count(task):
    graph = get(f"graphax_{task}").graph()
    order = published_order(task, "alphagrad")
    assert graphax_cost(task, order) == jacacc.optimize(graph, mode="vertex", method=[f"v{v}" for v in order]).mults


def test_orders_must_cover_the_intermediates():
    order = graphax_order("MLP", "forward")
    with pytest.raises(jacacc.JacaccError, match="permutation"):
        graphax_cost("MLP", order[:-1])


# ---------------------------------------------------------------------------- with JAX
@pytest.fixture(scope="module")
def functions():
    pytest.importorskip("jax")
    from jacacc.problems import alphagrad_functions

    return alphagrad_functions


@pytest.mark.parametrize("task", TASKS)
def test_tracing_again_gives_the_stored_graph(functions, task):
    data = functions.graphax_graph(functions.task_jaxpr(task))
    stored = {k: v for k, v in task_data(task).items() if k not in ("task", "jax_version")}
    assert json.loads(dumps(data)) == stored


def test_the_graph_is_traced_in_float32_whatever_jax_is_set_to(functions):
    # g traces to other equations in float64: the tasks are traced as graphax traced them
    import jax

    with jax.enable_x64(True):
        data = functions.graphax_graph(functions.task_jaxpr("g"))
    assert json.loads(dumps(data)) == {k: v for k, v in task_data("g").items() if k not in ("task", "jax_version")}


@pytest.mark.parametrize("task", [t for t in TASKS if t != "g"])
def test_values_are_finite_at_the_sample_point(functions, task):
    # g is NaN at every point: real powers of negative numbers and arctanh beyond ±1
    # (graphax dropped its own value tests of g for the same reason)
    import jax

    spec = functions.TASKS[task]
    out = spec.traced_function()(*spec.point(np.random.default_rng(0)))
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree_util.tree_leaves(out))
