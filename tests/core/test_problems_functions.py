"""The function problems of the zoo: values, sampling, and traced Jacobians against differences.

Every function problem in the registry is checked (future entries too); the
hand-checked values below cover the functions of ../shared/problems.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from jacacc import problems
from jacacc.problems import functions
from jacacc.verify import central_differences

FUNCTION_PROBLEMS = [n for n in problems.names() if problems.get(n).kind == "function"]
SEEDS = (0, 1, 2)

EXPECTED = {
    # name: (n_inputs, n_outputs, a tag)
    "RoeFlux_1d": (6, 3, "alphagrad"),
    "RobotArm_6DOF": (6, 6, "alphagrad"),
    "HumanHeartDipole": (8, 8, "minpack2"),
    "PropaneCombustion": (11, 11, "minpack2"),
    "BlackScholes": (5, 1, "alphagrad"),
    "BlackScholes_Jacobian": (5, 5, "alphagrad"),
    "SteadyStateCombustion": (4, 1, "minpack2"),
    "GaussianDataFitting": (11, 65, "minpack2"),
}


def _rel_err(got, want) -> float:
    want = np.asarray(want, dtype=float)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    return float(np.max(np.abs(np.asarray(got, dtype=float) - want), initial=0.0)) / scale


# =========================================================================== registry-wide checks
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_registered(name):
    p = problems.get(name)
    n, m, tag = EXPECTED[name]
    assert p.kind == "function"
    assert (p.n_inputs, p.n_outputs) == (n, m)
    assert tag in p.tags
    assert "problems.md" in p.source


@pytest.mark.parametrize("name", FUNCTION_PROBLEMS)
def test_sampling(name):
    p = problems.get(name)
    points = [p.sample(seed) for seed in SEEDS]
    for seed, x in zip(SEEDS, points, strict=True):
        assert x.shape == (p.n_inputs,)
        np.testing.assert_array_equal(p.sample(seed), x)  # deterministic per seed
        y = p(x)
        assert y.shape == (p.n_outputs,)
        assert np.all(np.isfinite(y))
    for i in range(len(points)):
        for j in range(i):
            assert not np.array_equal(points[i], points[j])  # varied across seeds


@pytest.mark.parametrize("name", FUNCTION_PROBLEMS)
def test_inputs_of_every_kind(name):
    """fn runs on a list of Python floats, a float vector, a batch (x[k] arrays) and tracers."""
    p = problems.get(name)
    xs = np.stack([p.sample(seed) for seed in SEEDS])  # (3, n)
    want = np.stack([p(x) for x in xs])  # (3, m)
    floats = np.ravel(np.asarray(p.fn([float(v) for v in xs[0]]), dtype=float))
    np.testing.assert_allclose(floats, want[0], rtol=1e-14, atol=1e-14)
    if "matrix" not in p.tags:  # matrix-product networks take one point at a time
        batch = np.asarray(p.fn(xs.T), dtype=float)  # each x[k] an array of 3 points
        np.testing.assert_allclose(batch.reshape(p.n_outputs, len(xs)).T, want, rtol=1e-12, atol=1e-12)
    traced = p.trace()
    assert (len(traced.graph.inputs), len(traced.graph.outputs)) == (p.n_inputs, p.n_outputs)
    np.testing.assert_allclose(traced(xs), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", FUNCTION_PROBLEMS)
def test_traced_jacobian_matches_differences(name, seed):
    p = problems.get(name)
    x = p.sample(seed)
    traced = p.trace()
    np.testing.assert_allclose(traced(x), p(x), rtol=1e-12, atol=1e-12)
    fd = central_differences(p, x)
    assert fd.shape == (p.n_outputs, p.n_inputs)
    ref = traced.reference_jacobian(x)
    jac = traced.jacobian(x)
    assert ref.shape == jac.shape == fd.shape
    assert _rel_err(ref, fd) <= 1e-6, _rel_err(ref, fd)
    assert _rel_err(jac, fd) <= 1e-6, _rel_err(jac, fd)
    assert _rel_err(jac, ref) <= 1e-10


# =========================================================================== hand-checked values
def test_roe_flux_equal_states_is_physical_flux():
    # ul = ur: no jump, so the flux is F(u) = (u1, p + u1²/u0, v(p + u2)); p = −½(2.5 − 4.5) = 1
    u = [1.0, 3.0, 2.5]
    np.testing.assert_allclose(problems.get("RoeFlux_1d")(u + u), [3.0, 10.0, 10.5], rtol=1e-14)


def test_robot_arm_hand_values():
    p = problems.get("RobotArm_6DOF")
    # all joints at zero: stretched arm, px = a1 + a2 + a3, pz = d1 − d4 − d6
    np.testing.assert_allclose(p(np.zeros(6))[:3], [1115.0, 0.0, -645.0], atol=1e-9)
    # t5 = t6 = π/2: a = (1, 0, 0), nz ≈ 0, oz = −1; px = d6 + a1 + a2 + a3, pz = d1 − d4
    got = p([0.0, 0.0, 0.0, 0.0, math.pi / 2, math.pi / 2])
    np.testing.assert_allclose(got, [1300.0, 0.0, -460.0, 0.0, math.pi / 2, -math.pi / 2], atol=1e-9)


def test_human_heart_dipole_hand_values():
    p = problems.get("HumanHeartDipole")
    np.testing.assert_array_equal(p(np.zeros(8)), -np.ones(8))  # all σ constants are 1
    x = p.sample(0)
    x1, x2, x3, x4, x5, x6, x7, x8 = x
    f = p(x)
    assert f[0] == pytest.approx(x1 + x2 - 1)
    assert f[3] == pytest.approx(x7 * x1 + x8 * x2 + x5 * x3 + x6 * x4 - 1)
    assert f[6] == pytest.approx(
        x1 * x5 * (x5**2 - 3 * x7**2)
        + x3 * x7 * (x7**2 - 3 * x5**2)
        + x2 * x6 * (x6**2 - 3 * x8**2)
        + x4 * x8 * (x8**2 - 3 * x6**2)
        - 1
    )


def test_propane_hand_values():
    p = problems.get("PropaneCombustion")
    x = p.sample(1)
    f = p(x)
    assert f[0] == pytest.approx(x[0] + x[3] - 3)
    assert f[5] == pytest.approx(math.sqrt(x[1] * x[3]) - math.sqrt(x[0]) * math.sqrt(40 / x[10]) * x[5])
    assert f[7] == pytest.approx(x[0] - x[3] * x[7] * 40 / x[10])
    assert f[10] == pytest.approx(x[10] - sum(x[:10]))


def _phi(z):  # standard normal density and distribution
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi), (1 + math.erf(z / math.sqrt(2))) / 2


def _black_scholes_closed_form(s, k, r, sigma, t):
    """Price, the five first derivatives (closed-form Greeks) and gamma."""
    d1 = (math.log(s / k) + (r + sigma**2 / 2) * t) / (sigma * math.sqrt(t))
    d2 = d1 - sigma * math.sqrt(t)
    pdf1, cdf1 = _phi(d1)
    _, cdf2 = _phi(d2)
    disc = math.exp(-r * t)
    price = s * cdf1 - k * disc * cdf2
    grad = [
        cdf1,  # delta
        -disc * cdf2,
        k * t * disc * cdf2,  # rho
        s * pdf1 * math.sqrt(t),  # vega
        s * pdf1 * sigma / (2 * math.sqrt(t)) + r * k * disc * cdf2,  # −theta
    ]
    gamma = pdf1 / (s * sigma * math.sqrt(t))
    return price, grad, gamma


@pytest.mark.parametrize("seed", SEEDS)
def test_black_scholes_closed_form(seed):
    price_p, grad_p = problems.get("BlackScholes"), problems.get("BlackScholes_Jacobian")
    x = price_p.sample(seed)
    price, grad, gamma = _black_scholes_closed_form(*x)
    assert price_p(x)[0] == pytest.approx(price, rel=1e-12)
    np.testing.assert_allclose(grad_p(x), grad, rtol=1e-11)
    np.testing.assert_allclose(price_p.trace().jacobian(x)[0], grad, rtol=1e-11)
    hessian = grad_p.trace().jacobian(x)
    assert hessian[0, 0] == pytest.approx(gamma, rel=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_black_scholes_jacobian_is_gradient_and_hessian_symmetric(seed):
    price_p, grad_p = problems.get("BlackScholes"), problems.get("BlackScholes_Jacobian")
    x = grad_p.sample(seed)
    np.testing.assert_array_equal(x, price_p.sample(seed))
    assert _rel_err(grad_p(x), central_differences(price_p, x)[0]) <= 1e-7
    hessian = grad_p.trace().jacobian(x)
    assert _rel_err(hessian, hessian.T) <= 1e-12
    assert _rel_err(hessian, central_differences(grad_p, x)) <= 1e-6


def test_steady_state_combustion_hand_values():
    p = problems.get("SteadyStateCombustion")
    # constant v = c: no gradient terms, each of the 8 terms is (1/16)(−6.81·2e^c), total −6.81e^c
    for c in (0.0, 0.3):
        assert p(np.full(4, c))[0] == pytest.approx(-6.81 * math.exp(c), rel=1e-14)
    # v00 = 1, others 0: fL(v00,v10,v01) and fR(v00,v01,v10) have (−1/0.5)² twice,
    # the four terms centred elsewhere with v00 a neighbour have it once
    v = [1.0, 0.0, 0.0, 0.0]
    e = math.e
    want = 2 * (8 - 6.81 * (2 / 3) * (e + 2)) / 16 + 4 * (4 - 6.81 * (2 / 3) * (e + 2)) / 16
    want += 2 * (-6.81 * (2 / 3) * 3) / 16
    assert p(v)[0] == pytest.approx(want, rel=1e-14)


def test_gaussian_data_fitting_hand_values():
    p = problems.get("GaussianDataFitting")
    assert str(functions.GAUSSIAN_DATA_SEED) in p.description
    assert str(functions.GAUSSIAN_DATA_SEED) in p.source
    y = np.random.default_rng(functions.GAUSSIAN_DATA_SEED).random(65)
    x = p.sample(2)
    r = p(x)
    for i in (0, 7, 64):
        t = i / 10
        want = (
            y[i]
            - x[0] * math.exp(-t * x[4])
            - x[1] * math.exp(-((t - x[8]) ** 2) * x[5])
            - x[2] * math.exp(-((t - x[9]) ** 2) * x[6])
            - x[3] * math.exp(-((t - x[10]) ** 2) * x[7])
        )
        assert r[i] == pytest.approx(want, rel=1e-13, abs=1e-13)
    # all amplitudes zero: the residuals are the data
    np.testing.assert_array_equal(p(np.concatenate([np.zeros(4), np.ones(7)])), y)
