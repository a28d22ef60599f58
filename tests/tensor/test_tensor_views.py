"""Moves of entries collapsed (jacacc/tensor/views.py): a chain of basic indices, gathers,
reshapes and concatenations of one tensor's entries runs as one step — the same values, fewer
copies — and a basic index is recognized from the entries it takes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jacacc.tensor.arrays import BasicKey, IndexArray, concatenate_nodes, index_node, reshape_node
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import einsum, nodes_of, unary, var
from jacacc.tensor.operators import apply_operator
from jacacc.tensor.views import Views, basic_key, collapse_views

RNG = np.random.default_rng(7)


def _ops(roots) -> list[str]:
    return [n.param[0] for n in nodes_of(roots) if n.kind == "op"]


def _run(roots, inputs, values, collapse: bool):
    import jacacc.tensor.evaluate as evaluate

    real = evaluate.collapse_views
    evaluate.collapse_views = real if collapse else (lambda r, kept=frozenset(): list(r))
    try:
        return Program(roots, inputs)(*values)
    finally:
        evaluate.collapse_views = real


@st.composite
def _basic_indices(draw):
    """An array shape and a basic index of it: each axis held at an entry or sliced (any step)."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    items = []
    for n in shape:
        if draw(st.booleans()):
            items.append(draw(st.integers(0, n - 1)))
        else:
            start, stop = sorted(draw(st.lists(st.integers(0, n), min_size=2, max_size=2)))
            step = draw(st.sampled_from([1, 2, 3]))
            items.append(slice(stop - 1, (start - 1) if start else None, -step) if draw(st.booleans())
                         else slice(start, stop, step))
    return shape, tuple(items)


@settings(max_examples=200, deadline=None)
@given(_basic_indices())
def test_basic_key_takes_the_same_entries_as_the_index_it_is_recognized_from(case):
    shape, key = case
    positions = np.arange(int(np.prod(shape))).reshape(shape)[key]
    found = basic_key(positions, shape)
    if positions.size == 0:
        assert found is None
        return
    assert found is not None
    np.testing.assert_array_equal(np.arange(int(np.prod(shape))).reshape(shape)[found.numpy()],
                                  positions)


def test_basic_key_refuses_entries_no_basic_index_takes():
    grid = np.arange(12).reshape(3, 4)
    assert basic_key(grid.T.copy(), (3, 4)) is None  # a transpose
    assert basic_key(np.array([0, 1, 3]), (12,)) is None  # uneven
    assert basic_key(np.array([2, 2]), (12,)) is None  # a repeat


def test_a_chain_of_slices_is_one_basic_index():
    x = var("x", (6, 5, 4))
    inner = index_node(x, BasicKey((("s", 1, 1, 5), ("i", 2), ("s", 0, 1, 4))))      # x[1:6, 2]
    outer = index_node(inner, BasicKey((("s", 4, -2, 3), ("s", 1, 2, 2))))            # [4::-2, 1:4:2]
    y = unary("exp", outer)
    (z,) = collapse_views([y])
    assert _ops([y]) == ["index", "index"] and _ops([z]) == ["index"]
    value = RNG.standard_normal(x.shape)
    np.testing.assert_array_equal(_run([y], [x], [value], True)[0], np.exp(value[1:6, 2][4::-2, 1:4:2]))


def test_interleaved_slices_concatenated_are_one_gather_with_the_same_values():
    x = var("x", (8, 3))
    parts = [index_node(x, BasicKey((("s", k, 4, 2), ("s", 0, 1, 3)))) for k in (3, 0, 2, 1)]
    y = unary("tanh", concatenate_nodes(parts, 0))
    (z,) = collapse_views([y])
    assert _ops([z]) == ["gather"]
    value = RNG.standard_normal(x.shape)
    want = np.tanh(np.concatenate([value[k::4] for k in (3, 0, 2, 1)]))
    for collapse in (False, True):
        np.testing.assert_array_equal(_run([y], [x], [value], collapse)[0], want)


def test_a_move_read_elsewhere_is_kept_and_a_costlier_gather_is_not_made():
    """A slice that another step also reads stays (collapsing its reader would copy twice), and a
    chain whose single gather would cost more than its copies is left as it is."""
    x = var("x", (64, 64))
    rows = index_node(x, BasicKey((("s", 0, 2, 32), ("s", 0, 1, 64))))
    shuffled = apply_operator("gather", [rows], index=IndexArray(RNG.permutation(rows.size).reshape(rows.shape)))[0]
    y = einsum("ij,ij->", unary("exp", rows), shuffled)
    (z,) = collapse_views([y])
    assert z is y
    reshaped = reshape_node(index_node(x, BasicKey((("s", 0, 1, 64), ("s", 0, 1, 64)))), (4096,))
    assert Views().of(reshaped)[0] is x


@pytest.mark.parametrize("axis", [0, 1])
def test_views_follow_unit_axes_and_reshapes(axis):
    from jacacc.tensor.arrays import insert_unit_axes

    x = var("x", (3, 4))
    v = insert_unit_axes(reshape_node(index_node(x, BasicKey((("i", 1), ("s", 0, 1, 4)))), (2, 2)), (axis,))
    base, positions = Views().of(v)
    assert base is x
    np.testing.assert_array_equal(positions, np.expand_dims(np.arange(12).reshape(3, 4)[1].reshape(2, 2), axis))


def test_entries_of_a_scalar_are_no_basic_index_and_its_repeats_one_gather():
    # autograd's max_equal_values: a scalar's entry repeated by moves (found by its operation suite)
    assert basic_key(np.array([0, 0]), ()) is None
    s = var("s", ())
    twice = concatenate_nodes([reshape_node(s, (1,)), reshape_node(s, (1,))], 0)
    y = unary("exp", index_node(twice, BasicKey((("s", 1, -1, 2),))))
    (z,) = collapse_views([y])
    np.testing.assert_array_equal(_run([y], [s], [np.array(0.5)], True)[0], np.exp([0.5, 0.5]))
    assert z is not None


@st.composite
def _strided_takes(draw):
    """An array shape, the flat entries a strided view of it takes (a basic index, its axes
    transposed, unit and repeating axes put in, one axis possibly selected by an index list),
    and the layout the array comes in (C order, or a transposed view)."""
    shape, key = draw(_basic_indices())
    positions = np.arange(int(np.prod(shape))).reshape(shape)[key]
    if positions.ndim and draw(st.booleans()):  # one axis selected irregularly, repeats allowed
        axis = draw(st.integers(0, positions.ndim - 1))
        n = positions.shape[axis]
        if n:
            picks = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
            positions = np.take(positions, picks, axis=axis)
    positions = positions.transpose(draw(st.permutations(range(positions.ndim))))
    if draw(st.booleans()):  # a unit axis, or an axis repeating every entry
        axis = draw(st.integers(0, positions.ndim))
        positions = np.repeat(np.expand_dims(positions, axis), draw(st.integers(1, 3)), axis=axis)
    return shape, positions, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(_strided_takes(), st.integers(0, 2))
def test_a_strided_take_gathers_what_take_gathers_from_any_layout(case, lead):
    """The gather operator's strided form (views and one copy) gives ``take``'s entries, with
    leading batch axes, from a C-ordered or a transposed operand, as a new array."""
    from jacacc.tensor.arrays import _gather
    from jacacc.tensor.views import StridedTake

    shape, positions, transposed = case
    full = (3,) * lead + shape
    x = RNG.normal(size=full[::-1]).T if transposed else RNG.normal(size=full)
    want = np.ascontiguousarray(x).reshape((3,) * lead + (-1,)).take(positions, axis=lead)
    index = IndexArray(positions)
    got = _gather(x, index, lead)
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, x)
    if positions.size:
        assert index.strided(shape) is not None  # each drawn selection has the strided form
    assert StridedTake.of(np.array([[0, 1], [1, 2]]), (3,)) is None  # a diagonal walk is not one
