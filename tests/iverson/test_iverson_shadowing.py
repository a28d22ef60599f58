"""jacacc.iverson: a ``let`` that shadows an input of another type survives every pass.

Regression (found by hypothesis): the simplifier floats ``let x = (let h = v in b) in c`` to
``let h = v in let x = b in c``; when ``c`` reads an outer ``h`` (here an input ``w`` that an
inner, pair-typed ``let w`` shadows) the float captured it, and the rebuilt ``let`` refused
``w`` used with two types.  The floated binder is now renamed apart.
"""

from __future__ import annotations

import numpy as np
import pytest

import jacacc.iverson as iv

i = iv.index("i")
x, w, s = iv.var("x", (4,)), iv.var("w", (4,)), iv.var("s", ())
ARRAYS = {"x": np.array([0.3, -1.2, 0.7, 2.0]), "w": np.array([1.5, -0.4, 0.9, 0.2]), "s": 0.6}


def _inner_w() -> iv.Expr:
    """``let w = (⊞_i exp(x[i]), s) in π₁(w)[0] · π₂(w) + 4``: a pair-typed ``w`` hiding the input ``w``."""
    return iv.let("w", iv.pair(iv.gen(i, 4, iv.exp(x[i])), s), lambda p: p.fst[0] * p.snd + 4)


PROGRAMS = {
    # the float itself: let h = (let w = … in …) in h · w[0], the body reading the input w
    "let": iv.let("h", _inner_w(), lambda h: h * w[0] + h),
    # the same under a ⊞ binder: loop-invariant hoisting first, then the float
    "gen": iv.sum(i, 4, iv.let("h", _inner_w(), lambda h: h * w[i] + w[0] * w[0])),
    # the shadowing let and the input read side by side in one scalar product
    "product": _inner_w() * iv.sum(i, 4, w[i] * x[i]),
}


def _total(c: dict[str, int]) -> int:
    return c["add"] + c["mul"] + c["nonlinear"]


def _central(expr: iv.Expr, name: str, h: float = 1e-6) -> np.ndarray:
    base = np.asarray(ARRAYS[name], dtype=np.float64)
    out = np.zeros(base.shape)
    for ix in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[ix] += h
        minus[ix] -= h
        fp = iv.evaluate(expr, **{**ARRAYS, name: plus if base.shape else float(plus)})
        fm = iv.evaluate(expr, **{**ARRAYS, name: minus if base.shape else float(minus)})
        out[ix] = (fp - fm) / (2 * h)
    return out


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_shadowing_let_survives_simplify_and_cost(name: str) -> None:
    expr = PROGRAMS[name]
    want = iv.evaluate(expr, **ARRAYS)
    for out in (iv.simplify(expr), iv.normalize(expr), iv.simplify(iv.normalize(expr))):
        assert out.type == expr.type
        assert np.allclose(iv.evaluate(out, **ARRAYS), want, rtol=1e-12, atol=1e-12), str(out)
        assert iv.cost(out) == iv.count_operations(out, **ARRAYS), str(out)
        assert _total(iv.cost(out)) <= _total(iv.cost(expr)), str(out)


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("wrt", ["x", "w", "s"])
def test_shadowing_let_differentiates(name: str, wrt: str) -> None:
    expr = PROGRAMS[name]
    g = iv.grad(expr, iv.var(wrt, np.shape(ARRAYS[wrt])))
    want = _central(expr, wrt)
    for out in (g, iv.simplify(g), iv.simplify(iv.normalize(g))):
        assert np.allclose(iv.evaluate(out, **ARRAYS), want, rtol=1e-5, atol=1e-6), str(out)
        assert iv.cost(out) == iv.count_operations(out, **ARRAYS), str(out)


def test_float_renames_the_inner_binder_apart() -> None:
    # let h = (let w = … in …) in h · w[0]: the floated inner let may not keep the name w
    out = iv.simplify(PROGRAMS["let"])
    assert "w" in out.free_vars and out.free_vars["w"] == (4,)
