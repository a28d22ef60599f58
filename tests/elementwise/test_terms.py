"""Long sums of like terms as one sum over a table of their constants (jacacc.elementwise.terms):
the same values and gradients as the sum written out, tables that are no arguments, and names that
never clash with the user's."""

from __future__ import annotations

import numpy as np
import pytest

import jacacc.elementwise as ew
from jacacc.elementwise.function import ElementwiseFunction
from jacacc.elementwise.parse import SourceError, parse
from jacacc.elementwise.terms import TERM_TABLE_MIN, tabulate_terms

TEMPLATES = ["x[i]*{c}", "tanh(x[i]*{c} + y[i])*x[i]", "exp(-{c}*x[i]**2)", "{c}", "sum(k, 0, i, x[k]*{c})*y[i]"]


def _random_sum(rng: np.random.Generator, n: int) -> str:
    terms = []
    for k in range(n):
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        c = float(rng.choice([0.5, 1.25, -2.0])) if k % 3 else round(float(rng.uniform(-1, 1)), 6)
        terms.append(template.format(c=repr(c)))
    signs = rng.choice([" + ", " - "], size=n - 1)
    return "f[i] = " + terms[0] + "".join(s + t for s, t in zip(signs, terms[1:], strict=True))


def _written_out(source: str, extent: int) -> ElementwiseFunction:
    """The function with its sum as written (no tables): the reference."""
    return ElementwiseFunction(parse(source), {"i": extent}, backend="python")


@pytest.mark.parametrize("seed", range(8))
def test_tabulated_sums_give_the_written_sums_values_and_gradients(seed: int) -> None:
    rng = np.random.default_rng(seed)
    source = _random_sum(rng, int(rng.integers(TERM_TABLE_MIN, 120)))
    f = ew.define(source, {"i": 6}, backend="python")
    reference = _written_out(source, 6)
    arrays = {"x": rng.uniform(-1, 1, 6), "y": rng.uniform(-1, 1, 6)}
    assert f.constants and "sum(t" in str(f)  # at least one group became a table
    assert np.allclose(f(**arrays), reference(**arrays), rtol=1e-12, atol=1e-12)
    df = rng.standard_normal(6)
    got, want = f.vjp(df, **arrays), reference.vjp(df, **arrays)
    assert set(got) == set(want) == {"x", "y"}  # the tables have no gradient
    for name in want:
        assert np.allclose(got[name], want[name], rtol=1e-11, atol=1e-12)


def test_small_groups_are_left_as_written() -> None:
    source = "f[i] = " + " + ".join(f"x[i]*{k}" for k in range(TERM_TABLE_MIN - 1)) + " + y[i]"
    tabulated = tabulate_terms(parse(source))
    assert tabulated.constants == {} and str(tabulated.definition) == source


def test_constant_columns_stay_numbers_and_signs_become_a_table() -> None:
    # the 2.0 is the same in every term: no table for it; signs alternate: a table of ±1
    source = "f[i] = " + " - ".join(f"x[i]*{k}*2.0" for k in range(10))
    tabulated = tabulate_terms(parse(source))
    assert sorted(tabulated.constants) == ["f_c0_0", "f_s0"]
    assert tabulated.constants["f_s0"].tolist() == [1.0] + [-1.0] * 9
    assert "2" in str(tabulated.definition)


def test_tables_are_no_arguments_and_never_clash_with_the_users() -> None:
    source = "f[i] = f_c0_0[i] + " + " + ".join(f"x[i]*{k + 1}" for k in range(10))
    f = ew.define(source, {"i": 3}, backend="python")
    assert f.arguments == ["f_c0_0", "x"] and set(f.constants).isdisjoint(f.arguments)
    arrays = {"f_c0_0": np.ones(3), "x": np.arange(3.0)}
    assert np.allclose(f(**arrays), 1 + 55 * np.arange(3.0))
    table = next(iter(f.constants))
    with pytest.raises(SourceError, match=f"{table} is a table of f's constants"):
        f.derivative(table)


def test_the_compiled_kernels_read_the_tables() -> None:
    pytest.importorskip("numba")
    rng = np.random.default_rng(1)
    terms = [f"tanh(x[i]*{k / 40!r} + y[i])*x[i]" if k % 2 else f"x[i]*{k}" for k in range(40)]
    source = "f[i] = " + " - ".join(terms)
    f = ew.define(source, {"i": 5}, backend="numba")
    reference = _written_out(source, 5)
    arrays = {"x": rng.uniform(-1, 1, 5), "y": rng.uniform(-1, 1, 5)}
    compiled = f.compile("numba")
    assert np.allclose(compiled(**arrays), reference(**arrays), rtol=1e-12, atol=1e-12)
    df = rng.standard_normal(5)
    want = reference.vjp(df, **arrays)
    for name, gradient in compiled.vjp(df, **arrays).items():
        assert np.allclose(gradient, want[name], rtol=1e-11, atol=1e-12)
