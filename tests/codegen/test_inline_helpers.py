"""The vector-math helpers written into their callers' statements (jacacc.kernels.inline): the
rewritten module computes what the original computes, bit for bit, in Python and under Numba;
calls under a guard stay calls."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jacacc.kernels import HELPER_NAMES, VECTOR_MATH, inline_helpers, vector_math_source

HELPERS = "\n".join(vector_math_source(VECTOR_MATH, False))


def identity_njit(*args, **kwargs):
    """``njit`` for a run in the Python interpreter: the decorated function itself."""
    if args and callable(args[0]):
        return args[0]
    return lambda function: function


def run_in_python(text: str) -> dict:
    namespace = {"np": np, "njit": identity_njit, "prange": range}
    exec(compile(text, "<generated>", "exec"), namespace)  # noqa: S102 - the test's own text
    return namespace


def helper_calls(text: str, function: str) -> list[str]:
    """The helpers ``function`` of the module ``text`` still calls."""
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == function)
    return sorted(c.func.id for c in ast.walk(node)
                  if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in HELPER_NAMES)


def module(body: list[str]) -> str:
    """A module of the helpers and ``kernel(x, out)``; ``njit`` is whatever the namespace it runs in gives."""
    return "\n".join(["import numpy as np", HELPERS, "", "",
                      "def kernel(x, out):", *("    " + line for line in body)])


# ------------------------------------------------------------------ expressions drawn at random
LEAVES = st.sampled_from(["x[0]", "x[1]", "x[2]", "0.5", "-3.0", "710.0"])


def _combine(children):
    unary = st.tuples(st.sampled_from(["_exp", "_log", "_tanh", "_erf", "abs", "-"]), children).map(
        lambda t: f"({t[0]}({t[1]}))" if t[0] != "-" else f"(-{t[1]})")
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "/"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
    guarded = st.tuples(children, children, children).map(lambda t: f"({t[0]} if {t[1]} > {t[2]} else {t[2]})")
    short = st.tuples(children, children).map(lambda t: f"({t[0]} and {t[1]})")
    two = st.tuples(children, children).map(lambda t: f"(_logaddexp({t[0]}, {t[1]}))")  # arguments in order, once each
    return unary | binary | guarded | short | two


EXPRESSIONS = st.recursive(LEAVES, _combine, max_leaves=10)


_DRAWN = (st.lists(EXPRESSIONS, min_size=1, max_size=3),
          st.lists(st.floats(-40, 40, allow_nan=False), min_size=3, max_size=3))


@settings(max_examples=50, deadline=None)
@given(*_DRAWN)
def test_drawn_statements_compute_the_same_in_python(expressions, x):
    check_drawn_statements(expressions, x)


@pytest.mark.exhaustive  # the make-test twin above draws 50
@settings(max_examples=150, deadline=None)
@given(*_DRAWN)
def test_more_drawn_statements_compute_the_same_in_python(expressions, x):
    check_drawn_statements(expressions, x)


def check_drawn_statements(expressions: list[str], x: list[float]) -> None:
    """The statements compute the same before and after inlining, and only guarded calls remain."""
    body = [f"t{k} = {e}" for k, e in enumerate(expressions)]
    body += ["s = 0.0", *(f"s += t{k}" for k in range(len(expressions))), "if _tanh(s) > 0.0:", "    s = -s",
             "out[0] = s"]
    text = module(body)
    inlined = inline_helpers(text, HELPER_NAMES)
    results = []
    for version in (text, inlined):
        out = np.zeros(1)
        with np.errstate(all="ignore"):
            run_in_python(version)["kernel"](np.array(x), out)
        results.append(out[0])
    assert results[0] == results[1] or (np.isnan(results[0]) and np.isnan(results[1]))
    # every call outside a guard is gone: what remains sits under a conditional or a boolean
    remaining = helper_calls(inlined, "kernel")
    guarded = sum(e.count(f"{h}(") for e in expressions for h in HELPER_NAMES if " if " in e or " and " in e)
    assert len(remaining) <= guarded


def test_guarded_calls_stay_calls_and_unguarded_ones_go():
    body = [
        "a = _exp(x[0]) + _log(_tanh(x[1]) + 2.0)",            # unguarded, nested: all three go
        "b = _exp(x[0]) if x[1] > 0 else _log(x[1])",          # under a conditional: both stay
        "c = x[0] > 0 and _erf(x[0]) > 0.5",                   # under and: stays
        "d = 0.0 < _exp(x[2]) < 2.0",                          # chained comparison: stays
        "e = [_tanh(v) for v in x]",                           # comprehension: stays
        "while _log(x[2]) > 5.0:",                             # while test: stays
        "    break",
        "for v in range(1):",
        "    out[v] = a + b + c + d + e[0] + _erf(x[2])",      # in a loop body: goes (erf's own _exp too)
    ]
    text = module(body)
    inlined = inline_helpers(text, HELPER_NAMES)
    assert helper_calls(inlined, "kernel") == ["_erf", "_exp", "_exp", "_log", "_log", "_tanh"]
    assert helper_calls(text, "kernel") == sorted(["_exp", "_log", "_tanh", "_exp", "_log", "_erf", "_exp",
                                                   "_tanh", "_log", "_erf"])
    assert inlined.startswith("import numpy as np")  # no comment lines to keep: none added
    x = np.array([0.3, 0.7, 1.5])
    outs = []
    for version in (text, inlined):
        out = np.zeros(1)
        run_in_python(version)["kernel"](x, out)
        outs.append(out[0])
    assert outs[0] == outs[1]


def test_leading_comments_kept_and_text_without_calls_unchanged():
    text = "# generated: keep me\n# and me\n" + module(["out[0] = _exp(x[0])"])
    inlined = inline_helpers(text, HELPER_NAMES)
    assert inlined.startswith("# generated: keep me\n# and me\n") and helper_calls(inlined, "kernel") == []
    plain = module(["out[0] = np.sin(x[0])"])
    assert inline_helpers(plain, HELPER_NAMES) is plain
    # a helper that is not one statement list and a return is left alone, and so are its calls
    odd = "def _exp(x):\n    if x > 0:\n        return x\n    return -x\n\n\ndef kernel(x, out):\n    out[0] = _exp(x[0])\n"
    assert inline_helpers(odd, HELPER_NAMES) is odd


@pytest.mark.exhaustive  # two Numba compiles of erf, logaddexp …: 9 s
def test_inlined_module_matches_the_original_under_numba_bit_for_bit():
    numba = pytest.importorskip("numba")
    body = ["for i in range(x.shape[0]):",
            "    out[0, i] = _exp(x[i])", "    out[1, i] = _log(x[i])", "    out[2, i] = _erf(x[i])",
            "    out[3, i] = _tanh(x[i])", "    out[4, i] = _exp(_tanh(x[i]) * 3.0) - _log(1.0 + _exp(-x[i]))",
            "    out[5, i] = _logaddexp(x[i], -x[i] * 0.5) + _logaddexp(0.0, _tanh(x[i]))"]
    text = module(body)
    inlined = inline_helpers(text, HELPER_NAMES)
    assert helper_calls(inlined, "kernel") == []
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-50, 50, 2000), [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 709.79, -745.2]])
    outs = []
    for version in (text, inlined):
        namespace: dict = {"njit": numba.njit}
        exec(compile(version, "<generated>", "exec"), namespace)  # noqa: S102 - the test's own text
        out = np.empty((6, x.size))
        with np.errstate(all="ignore"):
            numba.njit(error_model="numpy")(namespace["kernel"])(x, out)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
