"""The zoo's benchmark functions written with ``jax.numpy``, for :func:`jacacc.from_jax`.

The same mathematics as :mod:`jacacc.problems.functions` (../shared/problems.md,
same constants, same GaussianDataFitting data), written vectorized the way a
JAX user would: the two states of RoeFlux_1d as the rows of one array,
``jnp.cos(x)`` once for all joints, SteadyStateCombustion's eight element
energies as one gathered expression, GaussianDataFitting's residuals as one
broadcast over the data.  Every function takes the input vector and returns
one array of outputs, in the NumPy version's order; the sample points are the
NumPy problems' (``jacacc.problems.get(name).sample(seed)``).

JAX is imported when a function is called, never when this module is
imported.  :data:`FUNCTIONS` maps the zoo name to the JAX function.

Examples
--------
>>> import numpy as np, pytest
>>> _ = pytest.importorskip("jax")
>>> from jacacc.problems import get
>>> x = get("RoeFlux_1d").sample(seed=0)
>>> bool(np.allclose(np.asarray(FUNCTIONS["RoeFlux_1d"](x)), get("RoeFlux_1d")(x), rtol=1e-6))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc.errors import require_extra
from jacacc.problems.functions import GAUSSIAN_DATA_SEED

__all__ = [
    "FUNCTIONS",
    "black_scholes",
    "black_scholes_jacobian",
    "gaussian_data_fitting",
    "human_heart_dipole",
    "names",
    "propane_combustion",
    "robot_arm_6dof",
    "roe_flux_1d",
    "steady_state_combustion",
]


def _jnp() -> Any:
    return require_extra("jax.numpy", "bench")


# =========================================================================== RoeFlux_1d
def roe_flux_1d(x: Any, gamma: float = 0.5) -> Any:
    """Roe's approximate Riemann solver flux, 1-D Euler (6 → 3), γ = 0.5.

    The left and right states are the rows of ``x.reshape(2, 3)`` (density,
    momentum, energy); see :func:`jacacc.problems.functions.roe_flux_1d`.
    """
    jnp = _jnp()
    u = jnp.reshape(x, (2, 3))  # rows: left, right
    rho, mom, ene = u[:, 0], u[:, 1], u[:, 2]
    p = (gamma - 1) * (ene - 0.5 * mom * mom / rho)
    v = mom / rho
    h = (ene + p) / rho
    s = jnp.sqrt(rho)
    w1 = jnp.sum(s)
    uu = jnp.sum(s * v) / w1  # Roe averages
    hh = jnp.sum(s * h) / w1
    du0, dp, dv = rho[1] - rho[0], p[1] - p[0], v[1] - v[0]
    ulr0 = jnp.sqrt(rho[0] * rho[1])
    q2 = uu * uu
    a2 = (gamma - 1) * (hh - 0.5 * q2)
    a = jnp.sqrt(a2)
    lp, lam, ln = jnp.abs(uu + a), jnp.abs(uu), jnp.abs(uu)
    n = a * ulr0
    c0 = (du0 - dp / a2) * lam
    c1 = (dv + dp / n) * lp
    c2 = (dv - dp / n) * ln
    c = 0.5 * ulr0 / a
    flux = jnp.sum(jnp.stack([mom, p + mom * v, v * (p + ene)]), axis=1)  # F(ul) + F(ur)
    dflux = jnp.stack([
        c0 + c * c1 - c * c2,
        c0 * uu + c * c1 * (uu + a) - c * c2 * (uu - a),
        c0 * 0.5 * q2 + c * c1 * (hh + uu * a) - c * c2 * (hh - uu * a),
    ])
    return 0.5 * (flux - dflux)


# =========================================================================== RobotArm_6DOF
def robot_arm_6dof(x: Any) -> Any:
    """Forward kinematics of a 6-axis arm: position and Euler angles (6 → 6); see
    :func:`jacacc.problems.functions.robot_arm_6dof` (``py`` carries ``+ c1·s4``)."""
    jnp = _jnp()
    a1, a2, a3 = 175.0, 890.0, 50.0
    d1, d4, d6 = 575.0, 1035.0, 185.0
    c1, c2, c3, c4, c5, c6 = jnp.cos(x)
    s1, s2, s3, s4, s5, s6 = jnp.sin(x)
    c23 = c2 * c3 - s2 * s3
    s23 = c2 * s3 + s2 * c3
    ax = s5 * (c1 * c23 * c4 + s1 * s4) + c1 * s23 * c5
    ay = s5 * (s1 * c23 * c4 - c1 * s4) + s1 * s23 * c5
    az = s23 * c4 * s5 - c23 * c5
    nz = c6 * (c23 * s5 + s23 * c4 * c5) - s23 * s4 * s6
    oz = -s6 * (c23 * s5 + s23 * c4 * c5) - s23 * s4 * c6
    reach = a1 + a2 * c2 + a3 * c23 + d4 * s23
    px = d6 * (s5 * (c1 * c23 * c4 + s1 * s4) + c1 * s23 * c5) + c1 * reach
    py = d6 * (s5 * (s1 * c23 * c4 + c1 * s4) + s1 * s23 * c5) + s1 * reach
    pz = a2 * s2 + d1 + a3 * s23 - d4 * c23 + d6 * (s23 * c4 * s5 - c23 * c5)
    angles = jnp.arctan2(jnp.stack([ay, jnp.sqrt(1 - az * az), oz]), jnp.stack([ax, az, -nz]))
    return jnp.concatenate([jnp.stack([px, py, pz]), angles])


# =========================================================================== HumanHeartDipole
def human_heart_dipole(x: Any) -> Any:
    """MINPACK-2 human heart dipole residuals, all σ constants 1 (8 → 8); see
    :func:`jacacc.problems.functions.human_heart_dipole`."""
    jnp = _jnp()
    x1, x2, x3, x4, x5, x6, x7, x8 = x
    sigma = 1.0
    x57 = x5 * x5 - x7 * x7
    x68 = x6 * x6 - x8 * x8
    x557 = x5 * (x5 * x5 - 3 * x7 * x7)
    x775 = x7 * (x7 * x7 - 3 * x5 * x5)
    x668 = x6 * (x6 * x6 - 3 * x8 * x8)
    x886 = x8 * (x8 * x8 - 3 * x6 * x6)
    return jnp.stack([
        x1 + x2,
        x3 + x4,
        x5 * x1 + x6 * x2 - x7 * x3 - x8 * x4,
        x7 * x1 + x8 * x2 + x5 * x3 + x6 * x4,
        x1 * x57 - 2 * x3 * x5 * x7 + x2 * x68 - 2 * x4 * x6 * x8,
        x3 * x57 - 2 * x1 * x5 * x7 + x4 * x68 - 2 * x2 * x6 * x8,
        x1 * x557 + x3 * x775 + x2 * x668 + x4 * x886,
        x3 * x557 - x1 * x775 + x4 * x668 - x2 * x886,
    ]) - sigma


# =========================================================================== PropaneCombustion
def propane_combustion(x: Any) -> Any:
    """MINPACK-2 combustion of propane residuals, p = 40, R = 10 (11 → 11); see
    :func:`jacacc.problems.functions.propane_combustion`."""
    jnp = _jnp()
    x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11 = x
    p, big_r = 40.0, 10.0
    px11 = jnp.sqrt(p / x11)
    return jnp.stack([
        x1 + x4 - 3,
        2 * x1 + x2 + x4 + x7 + x8 + x9 + 2 * x10 - big_r,
        2 * x2 + 2 * x5 + x6 + x7 - 8,
        2 * x3 + x9 - 4 * big_r,
        x2 * x4 - x1 * x5,
        jnp.sqrt(x2 * x4) - jnp.sqrt(x1) * px11 * x6,
        jnp.sqrt(x1 * x2) - jnp.sqrt(x4) * x7 * px11,
        x1 - x4 * x8 * p / x11,
        x1 * jnp.sqrt(x3) - x4 * x9 * px11,
        x1 * x1 - x4 * x4 * x10 * p / x11,
        x11 - jnp.sum(x[:10]),
    ])


# =========================================================================== BlackScholes
def _black_scholes_price(x: Any) -> Any:
    jnp = _jnp()
    erf = require_extra("jax.scipy.special", "bench").erf
    s, k, r, sigma, t = x
    rt = r * t
    fwd = jnp.exp(rt) * s
    vol = sigma * jnp.sqrt(t)
    d1 = (jnp.log(fwd / k) + 0.5 * (sigma * sigma * t)) / vol
    d2 = d1 - vol
    phi = 0.5 * (1 + erf(jnp.stack([d1, d2]) / np.sqrt(2.0)))
    return jnp.exp(-rt) * (fwd * phi[0] - k * phi[1])


def black_scholes(x: Any) -> Any:
    """Black–Scholes price of a European call; inputs S, K, r, σ, T (5 → 1); see
    :func:`jacacc.problems.functions.black_scholes`."""
    return _jnp().reshape(_black_scholes_price(x), (1,))


def black_scholes_jacobian(x: Any) -> Any:
    """The gradient of the Black–Scholes price by ``jax.grad`` (5 → 5): JAX's own
    reverse mode in place of the NumPy version's hand-written adjoint sweep."""
    jax = require_extra("jax", "bench")
    return jax.grad(_black_scholes_price)(x)


# =========================================================================== SteadyStateCombustion
# the eight element energies f(v, v_x, v_y) of the NumPy version, as index vectors into
# x = (v00, v01, v10, v11)
_SSC_V = np.array([0, 0, 1, 1, 2, 2, 3, 3])
_SSC_VX = np.array([2, 1, 3, 0, 0, 3, 1, 2])
_SSC_VY = np.array([1, 2, 0, 3, 3, 0, 2, 1])


def steady_state_combustion(x: Any, lam: float = 6.81) -> Any:
    """MINPACK-2 steady-state combustion energy on a 2×2 grid, λ = 6.81 (4 → 1); see
    :func:`jacacc.problems.functions.steady_state_combustion`."""
    jnp = _jnp()
    hx = hy = 0.5
    v, vx, vy = x[_SSC_V], x[_SSC_VX], x[_SSC_VY]
    mu = (2.0 / 3.0) * (jnp.exp(v) + jnp.exp(vx) + jnp.exp(vy))
    energy = (hx * hy / 4) * (((vx - v) / hx) ** 2 + ((vy - v) / hy) ** 2 - lam * mu)
    return jnp.sum(energy, keepdims=True)


# =========================================================================== GaussianDataFitting
_GAUSSIAN_T = np.arange(65) / 10
_GAUSSIAN_Y = np.random.default_rng(GAUSSIAN_DATA_SEED).random(65)


def gaussian_data_fitting(x: Any) -> Any:
    """MINPACK-2 Gaussian data fitting residuals, t_i = i/10 (11 → 65), the data of
    :func:`jacacc.problems.functions.gaussian_data_fitting` (seed ``GAUSSIAN_DATA_SEED``)."""
    jnp = _jnp()
    t = _GAUSSIAN_T
    decay = x[0] * jnp.exp(-t * x[4])
    bumps = x[1:4] * jnp.exp(-((t[:, None] - x[8:11]) ** 2) * x[5:8])  # (65, 3)
    return _GAUSSIAN_Y - decay - jnp.sum(bumps, axis=1)


#: zoo name -> JAX function (the names of :mod:`jacacc.problems.functions`)
FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "RoeFlux_1d": roe_flux_1d,
    "RobotArm_6DOF": robot_arm_6dof,
    "HumanHeartDipole": human_heart_dipole,
    "PropaneCombustion": propane_combustion,
    "BlackScholes": black_scholes,
    "BlackScholes_Jacobian": black_scholes_jacobian,
    "SteadyStateCombustion": steady_state_combustion,
    "GaussianDataFitting": gaussian_data_fitting,
}


def names() -> list[str]:
    """The zoo functions that have a JAX version, in zoo order.

    Examples
    --------
    >>> names()[:3]
    ['RoeFlux_1d', 'RobotArm_6DOF', 'HumanHeartDipole']
    """
    return list(FUNCTIONS)
