"""Property tests of :mod:`jacacc.elementwise` (paper 000 §5) on random elementwise functions.

The functions come from :mod:`tests.elementwise_sources` (strided, offset,
constant, flattened, diagonal and negative-coefficient reads, sums with
index-dependent and empty ranges, nested sums, arguments read under several
maps, ``+ - * / **``, unary minus, ``exp tanh sin cos log sqrt abs``), evaluated
with the pure-Python backend.  For each one:

- ``f(**arrays)`` equals the generator's own evaluation of its expression tree;
- ``f.vjp(df, **arrays)`` equals central differences of ``Σ df ⊙ f`` w.r.t. every
  element the function reads, and is exactly 0.0 on every element it never reads;
- ``f.derivative(x)(df=df, **arrays)`` equals ``f.vjp(df, **arrays)[x]``;
- second order: for ``g = f.derivative(x)``, ``g.vjp(dg, df=df, **arrays)`` has an
  entry for every argument of ``g`` (``df`` included), equal to central
  differences of ``Σ dg ⊙ g``, and 0 on the elements ``f`` never reads;
- the printed derivative parses back to the same text and, evaluated as an
  elementwise function with the shape of ``x``, gives the same values.

Hypothesis draws the functions (failures shrink); a sweep over fixed seeds of the
plain generator checks the same on larger functions and lists every failure; the
smallest failures found so far are kept as fixed cases.  The generator itself is
checked to cover every feature it names.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jacacc.elementwise import ElementwiseFunction, define, parse, unparse
from tests.elementwise_sources import FEATURES, Case, elementwise_functions, random_function

# 60 drawn functions per property in make test; the exhaustive tier's seeded sweep (test_seeded_functions)
# runs every check on larger functions
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = range(200)  # the seeded sweep (seeds 600–2700 at depths 4 and 5 passed once, outside the suite)
H = 1e-6  # central-difference step: error ~ H² (truncation) + 1e-16 / H (rounding) per unit of Σ df ⊙ f
TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}


def _uniform(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


def _central_differences(fun, inputs: dict[str, np.ndarray], name: str, weight: np.ndarray,
                         where: np.ndarray) -> np.ndarray:
    """∂/∂inputs[name] of Σ weight ⊙ fun(**inputs) by central differences at the elements ``where``; NaN elsewhere."""
    grad = np.full(inputs[name].shape, np.nan)
    for idx in zip(*np.nonzero(where), strict=True):
        plus = {**inputs, name: inputs[name].copy()}
        minus = {**inputs, name: inputs[name].copy()}
        plus[name][idx] += H
        minus[name][idx] -= H
        grad[idx] = (np.sum(weight * fun(**plus)) - np.sum(weight * fun(**minus))) / (2 * H)
    return grad


# ----------------------------------------------------------------------------- the checks
def check_first_order(case: Case, seed: int) -> None:
    f = define(case.source, case.sizes, backend="python")
    value = f(**case.arrays)
    assert value.shape == tuple(case.sizes.values())
    assert np.allclose(value, case.reference(), rtol=1e-12, atol=1e-12)
    assert set(f.arguments) == set(case.arrays)
    df = _uniform(value.shape, seed)
    gradients = f.vjp(df, **case.arrays, unused=np.ones(3))  # an extra array is ignored
    assert set(gradients) == set(case.arrays)
    for name, gradient in gradients.items():
        read = case.read[name]
        assert gradient.shape == case.arrays[name].shape, name
        assert np.all(gradient[~read] == 0.0), f"{name}: the elements never read must get exactly 0"
        expected = _central_differences(f, case.arrays, name, df, where=read)
        assert np.allclose(gradient[read], expected[read], **TOLERANCE), name


def check_derivative_functions(case: Case, seed: int) -> None:
    f = define(case.source, case.sizes, backend="python")
    df = _uniform(f.shape, seed)
    gradients = f.vjp(df, **case.arrays)
    for name in case.arrays:
        g = f.derivative(name)
        assert g.name == "d" + name
        assert np.allclose(g(df=df, **case.arrays), gradients[name], rtol=1e-12, atol=1e-12), (name, str(g))


def check_second_order(case: Case, seed: int, name: str) -> None:
    g = define(case.source, case.sizes, backend="python").derivative(name)
    inputs = {**case.arrays, "df": _uniform(tuple(case.sizes.values()), seed)}
    dg = _uniform(case.arrays[name].shape, seed + 1)
    second = g.vjp(dg, **inputs)
    assert set(second) == set(g.arguments) and "df" in second
    for other, gradient in second.items():
        assert gradient.shape == inputs[other].shape, other
        # g is a function of df and of the elements f reads, and of nothing else
        read = case.read.get(other, np.ones(inputs[other].shape, dtype=bool))
        assert np.allclose(gradient[~read], 0.0, rtol=0.0, atol=1e-12), (other, str(g))
        expected = _central_differences(g, inputs, other, dg, where=read)
        assert np.allclose(gradient[read], expected[read], **TOLERANCE), (other, str(g))


def check_printing(case: Case, seed: int) -> None:
    f = define(case.source, case.sizes, backend="python")
    inputs = {**case.arrays, "df": _uniform(f.shape, seed)}
    for name in case.arrays:
        g = f.derivative(name)
        definition = parse(str(g))
        assert unparse(definition) == str(g)
        again = ElementwiseFunction(definition, dict.fromkeys(definition.indices), backend="python", shape_of=name)
        assert np.array_equal(again(**inputs), g(**inputs)), (name, str(g))


# ----------------------------------------------------------------------------- hypothesis
@SETTINGS
@given(elementwise_functions(), st.integers(0, 2**31))
def test_values_and_first_derivatives(case, seed):
    check_first_order(case, seed)


@SETTINGS
@given(elementwise_functions(), st.integers(0, 2**31))
def test_derivative_functions_equal_the_vjp(case, seed):
    check_derivative_functions(case, seed)


@SETTINGS
@given(elementwise_functions(), st.integers(0, 2**31), st.data())
def test_second_derivatives(case, seed, data):
    if case.arrays:
        check_second_order(case, seed, data.draw(st.sampled_from(sorted(case.arrays)), label="argument"))


@SETTINGS
@given(elementwise_functions(), st.integers(0, 2**31))
def test_printed_derivatives_parse_back(case, seed):
    check_printing(case, seed)


# ----------------------------------------------------------------------------- the seeded sweep
@pytest.mark.exhaustive  # the hypothesis tests above run the same checks on drawn functions in make test
def test_seeded_functions():
    """Every check on :data:`SEEDS` of the plain generator (larger functions than hypothesis tends
    to draw); the failure lists every seed that fails, with its source and the error."""
    failures = []
    for seed in SEEDS:
        case = random_function(seed)
        checks = [("first order", check_first_order, ()), ("derivative", check_derivative_functions, ()),
                  ("printing", check_printing, ()),
                  *((f"second order d{name}", check_second_order, (name,)) for name in sorted(case.arrays))]
        for what, check, extra in checks:
            try:
                check(case, seed, *extra)
            except Exception as error:  # noqa: BLE001  (collected, reported below)
                shapes = {n: a.shape for n, a in case.arrays.items()}
                failures.append(f"seed {seed}, {what}: {case.source} with {case.sizes}, shapes {shapes}: "
                                f"{type(error).__name__}: {error}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


# ----------------------------------------------------------------------------- shrunk failures, kept
KNOWN = [
    # the sum is empty for i = 2, where f reads neither x[2] nor y[2]: dx must not read y[2]
    ("f[i] = sum(k, i, 1, x[i] * y[i])", {"i": 3}, {"x": (3,), "y": (2,)},
     {"x": np.array([True, True, False]), "y": np.ones(2, dtype=bool)},
     lambda env, a: sum(a["x"][env["i"]] * a["y"][env["i"]] for _ in range(env["i"], 2))),
    # w[0] is never read (k ≥ j ≥ 0): dw's factor y[dw0 - 1] must not be read at dw0 = 0
    ("f[j] = sum(k, j, j + 2, w[k + 1] * y[k])", {"j": 4}, {"w": (7,), "y": (6,)},
     {"w": np.arange(7) >= 1, "y": np.ones(6, dtype=bool)},
     lambda env, a: sum(a["w"][k + 1] * a["y"][k] for k in range(env["j"], env["j"] + 3))),
    # the sum is empty for i = 1: second order, ddf must not read ddx[1] there
    ("f[i] = sum(k, i, 0, x[i])", {"i": 2}, {"x": (1,)}, {"x": np.ones(1, dtype=bool)},
     lambda env, a: sum(a["x"][env["i"]] for _ in range(env["i"], 1))),
    # second order: the derivative of dx = y[0] * sum(z, …, df[dx0 - z, z]) w.r.t. y sums over dx0,
    # whose range is the shape of x
    ("f[i, s] = x[i + s] * y[0]", {"i": 2, "s": 2}, {"x": (3,), "y": (1,)},
     {"x": np.ones(3, dtype=bool), "y": np.ones(1, dtype=bool)},
     lambda env, a: a["x"][env["i"] + env["s"]] * a["y"][0]),
]


@pytest.mark.parametrize("source, sizes, shapes, read, evaluate", KNOWN)
def test_known_functions(source, sizes, shapes, read, evaluate):
    rng = np.random.default_rng(11)
    case = Case(source, sizes, {n: rng.uniform(-1, 1, s) for n, s in shapes.items()}, read, frozenset(), evaluate)
    check_first_order(case, 12)
    check_derivative_functions(case, 13)
    check_printing(case, 14)
    for name in shapes:
        check_second_order(case, 15, name)


def test_the_generator_covers_every_feature():
    seen: set[str] = set()
    for seed in range(300):
        case = random_function(seed)
        seen |= case.features
        assert all(case.read[n].shape == a.shape for n, a in case.arrays.items())
    assert seen == FEATURES, sorted(FEATURES - seen)
