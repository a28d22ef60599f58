"""Benchmark functions written with NumPy operators, traceable by :func:`jacacc.trace`.

Definitions follow ../shared/problems.md (the AlphaGrad task set, Lohoff &
Neftci 2024, and MINPACK-2).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

from jacacc.problems.base import Problem, register

__all__ = [
    "GAUSSIAN_DATA_SEED",
    "black_scholes",
    "black_scholes_jacobian",
    "gaussian_data_fitting",
    "human_heart_dipole",
    "propane_combustion",
    "robot_arm_6dof",
    "roe_flux_1d",
    "steady_state_combustion",
]


def roe_flux_1d(x, gamma: float = 0.5):
    """Roe's approximate Riemann solver flux for the 1-D Euler equations (6 → 3).

    ``x = (ul0, ul1, ul2, ur0, ur1, ur2)``: left and right (density,
    momentum, energy).  γ = 0.5 as in the AlphaGrad study; with it the
    sound speed a² = (γ−1)(h − q²/2) is positive only for fast flows, such as
    the registered point.

    Examples
    --------
    >>> [round(float(v), 6) for v in roe_flux_1d(np.array([1.0, 3.0, 2.5, 1.2, 3.3, 2.8]))]
    [2.981929, 9.959915, 10.474695]
    """
    ul0, ul1, ul2, ur0, ur1, ur2 = x

    def pressure(u0, u1, u2):
        return (gamma - 1) * (u2 - 0.5 * u1 * u1 / u0)

    def flux(u0, u1, u2, p):
        v = u1 / u0
        return u1, p + u1 * v, v * (p + u2)

    du0 = ur0 - ul0
    ulr0 = np.sqrt(ul0 * ur0)
    sl, sr = np.sqrt(ul0), np.sqrt(ur0)
    w1 = sl + sr
    vl, vr = ul1 / ul0, ur1 / ur0
    pl, pr = pressure(ul0, ul1, ul2), pressure(ur0, ur1, ur2)
    hl, hr = (ul2 + pl) / ul0, (ur2 + pr) / ur0
    dp = pr - pl
    dv = vr - vl
    u = (sl * vl + sr * vr) / w1
    h = (sl * hl + sr * hr) / w1
    q2 = u * u
    a2 = (gamma - 1) * (h - 0.5 * q2)
    a = np.sqrt(a2)
    lp = np.abs(u + a)
    lam = np.abs(u)
    ln = np.abs(u)
    n = a * ulr0
    c0 = (du0 - dp / a2) * lam
    c1 = (dv + dp / n) * lp
    c2 = (dv - dp / n) * ln
    c = 0.5 * ulr0 / a
    fl, fr = flux(ul0, ul1, ul2, pl), flux(ur0, ur1, ur2, pr)
    big_f = [fl[k] + fr[k] for k in range(3)]
    df0 = c0 + c * c1 - c * c2
    df1 = c0 * u + c * c1 * (u + a) - c * c2 * (u - a)
    df2 = c0 * 0.5 * q2 + c * c1 * (h + u * a) - c * c2 * (h - u * a)
    return [0.5 * (big_f[0] - df0), 0.5 * (big_f[1] - df1), 0.5 * (big_f[2] - df2)]


register(
    Problem(
        "RoeFlux_1d",
        "Roe's approximate Riemann solver flux, 1-D Euler (6 → 3)",
        "AlphaGrad task set (Lohoff & Neftci 2024); ../shared/problems.md",
        6,
        3,
        fn=roe_flux_1d,
        # fast flows keep a² > 0 with γ = 0.5: momentum² > 2·density·energy on both sides
        sampler=lambda rng: np.array([1.0, 3.0, 2.5, 1.2, 3.3, 2.8]) * rng.uniform(0.95, 1.05, 6),
        tags=("alphagrad",),
    )
)


# =========================================================================== RobotArm_6DOF
def _robot_arm_frame(x):
    """Position and the orientation entries used by :func:`robot_arm_6dof`.

    Returns ``(px, py, pz, ax, ay, az, nz, oz)``; the sampler checks the
    orientation part to stay away from the branch cuts of the arctan2 outputs.
    """
    t1, t2, t3, t4, t5, t6 = x
    a1, a2, a3 = 175.0, 890.0, 50.0
    d1, d4, d6 = 575.0, 1035.0, 185.0
    c1, c2, c3, c4, c5, c6 = np.cos(t1), np.cos(t2), np.cos(t3), np.cos(t4), np.cos(t5), np.cos(t6)
    s1, s2, s3, s4, s5, s6 = np.sin(t1), np.sin(t2), np.sin(t3), np.sin(t4), np.sin(t5), np.sin(t6)
    # cos(t2 + t3) and sin(t2 + t3) through the angle-sum identities, as in the study
    c23 = c2 * c3 - s2 * s3
    s23 = c2 * s3 + s2 * c3
    ax = s5 * (c1 * c23 * c4 + s1 * s4) + c1 * s23 * c5
    ay = s5 * (s1 * c23 * c4 - c1 * s4) + s1 * s23 * c5
    az = s23 * c4 * s5 - c23 * c5
    nz = c6 * (c23 * s5 + s23 * c4 * c5) - s23 * s4 * s6
    oz = -s6 * (c23 * s5 + s23 * c4 * c5) - s23 * s4 * c6
    reach = a1 + a2 * c2 + a3 * c23 + d4 * s23
    px = d6 * (s5 * (c1 * c23 * c4 + s1 * s4) + c1 * s23 * c5) + c1 * reach
    # problems.md has "+ c1s4" here (where ay has "− c1s4"); implemented as written
    py = d6 * (s5 * (s1 * c23 * c4 + c1 * s4) + s1 * s23 * c5) + s1 * reach
    pz = a2 * s2 + d1 + a3 * s23 - d4 * c23 + d6 * (s23 * c4 * s5 - c23 * c5)
    return px, py, pz, ax, ay, az, nz, oz


def robot_arm_6dof(x):
    """Forward kinematics of a 6-axis industrial robot arm (6 → 6).

    ``x = (t1, …, t6)``: joint angles in radians.  Outputs the tool position
    and its orientation as Euler angles, ``(px, py, pz, z, y', z'')`` with
    ``z = atan2(ay, ax)``, ``y' = atan2(√(1 − az²), az)`` and
    ``z'' = atan2(oz, −nz)``.  Link constants a1 = 175, a2 = 890, a3 = 50,
    d1 = 575, d4 = 1035, d6 = 185.  cos(t2 + t3) and sin(t2 + t3) are written
    through the angle-sum identities, and ``py`` carries ``+ c1·s4`` as
    ../shared/problems.md gives it.

    Source: AlphaGrad task set (Lohoff & Neftci 2024); ../shared/problems.md.
    Differentiable away from the arctan2 branch cuts and from az = ±1.

    Examples
    --------
    >>> [round(float(v), 4) for v in robot_arm_6dof(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))]
    [1731.6427, 207.7642, -235.8235, -0.127, 2.1633, -2.3146]
    """
    px, py, pz, ax, ay, az, nz, oz = _robot_arm_frame(x)
    z = np.arctan2(ay, ax)
    y1 = np.arctan2(np.sqrt(1 - az * az), az)
    z2 = np.arctan2(oz, -nz)
    return [px, py, pz, z, y1, z2]


def _robot_arm_sampler(rng: np.random.Generator) -> np.ndarray:
    """Joint angles with |az| ≤ 0.9 and both arctan2(y, x) away from the cut x < 0, y = 0."""
    for _ in range(10_000):
        t = rng.uniform(-np.pi, np.pi, 6)
        _, _, _, ax, ay, az, nz, oz = _robot_arm_frame(t)
        if (
            abs(az) <= 0.9
            and np.hypot(ax, ay) >= 0.3
            and np.hypot(nz, oz) >= 0.3
            and abs(np.arctan2(ay, ax)) <= np.pi - 0.25
            and abs(np.arctan2(oz, -nz)) <= np.pi - 0.25
        ):
            return t
    raise RuntimeError("no valid RobotArm_6DOF point found")  # pragma: no cover


register(
    Problem(
        "RobotArm_6DOF",
        "Forward kinematics of a 6-axis industrial robot arm: position and Euler angles (6 → 6)",
        "AlphaGrad task set (Lohoff & Neftci 2024); ../shared/problems.md",
        6,
        6,
        fn=robot_arm_6dof,
        sampler=_robot_arm_sampler,
        tags=("alphagrad",),
    )
)


# =========================================================================== HumanHeartDipole
def human_heart_dipole(x):
    """MINPACK-2 human heart dipole problem, the residuals f1 … f8 (8 → 8).

    ``x = (x1, …, x8)``; all measured constants σmx, σmy, σA, …, σE are 1
    (f7 and f8 both subtract σE, as ../shared/problems.md writes them), so at
    ``x = 0`` every residual is −1.  Polynomial: valid everywhere.

    Source: MINPACK-2 test collection (Averick et al. 1992), via the AlphaGrad
    task set (Lohoff & Neftci 2024); ../shared/problems.md.

    Examples
    --------
    >>> [round(float(v), 4) for v in human_heart_dipole(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]))]
    [-0.7, -0.3, -1.36, -0.38, -1.674, -1.446, -1.4436, -1.4688]
    """
    x1, x2, x3, x4, x5, x6, x7, x8 = x
    smx = smy = s_a = s_b = s_c = s_d = s_e = 1.0
    f1 = x1 + x2 - smx
    f2 = x3 + x4 - smy
    f3 = x5 * x1 + x6 * x2 - x7 * x3 - x8 * x4 - s_a
    f4 = x7 * x1 + x8 * x2 + x5 * x3 + x6 * x4 - s_b
    x57 = x5 * x5 - x7 * x7
    x68 = x6 * x6 - x8 * x8
    f5 = x1 * x57 - 2 * x3 * x5 * x7 + x2 * x68 - 2 * x4 * x6 * x8 - s_c
    f6 = x3 * x57 - 2 * x1 * x5 * x7 + x4 * x68 - 2 * x2 * x6 * x8 - s_d
    x557 = x5 * (x5 * x5 - 3 * x7 * x7)
    x775 = x7 * (x7 * x7 - 3 * x5 * x5)
    x668 = x6 * (x6 * x6 - 3 * x8 * x8)
    x886 = x8 * (x8 * x8 - 3 * x6 * x6)
    f7 = x1 * x557 + x3 * x775 + x2 * x668 + x4 * x886 - s_e
    f8 = x3 * x557 - x1 * x775 + x4 * x668 - x2 * x886 - s_e
    return [f1, f2, f3, f4, f5, f6, f7, f8]


register(
    Problem(
        "HumanHeartDipole",
        "MINPACK-2 human heart dipole residuals, all σ constants 1 (8 → 8)",
        "MINPACK-2 test collection (Averick et al. 1992); AlphaGrad task set (Lohoff & Neftci 2024); "
        "../shared/problems.md",
        8,
        8,
        fn=human_heart_dipole,
        sampler=lambda rng: rng.uniform(-1.0, 1.0, 8),
        tags=("minpack2", "alphagrad"),
    )
)


# =========================================================================== PropaneCombustion
def propane_combustion(x):
    """MINPACK-2 combustion of propane, the residuals f1 … f11 (11 → 11).

    ``x = (x1, …, x11)``, with pressure p = 40, R = 10 and
    ``px11 = √(p/x11)``.  Valid for positive inputs (square roots, division
    by x11).

    Source: MINPACK-2 test collection (Averick et al. 1992), via the AlphaGrad
    task set (Lohoff & Neftci 2024); ../shared/problems.md.

    Examples
    --------
    >>> [round(float(v), 4) for v in propane_combustion(np.arange(1.0, 12.0))]
    [2.0, 42.0, 19.0, -25.0, 3.0, -8.6131, -25.2827, -115.3636, -66.9173, -580.8182, -44.0]
    """
    x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11 = x
    p, big_r = 40.0, 10.0
    px11 = np.sqrt(p / x11)
    f1 = x1 + x4 - 3
    f2 = 2 * x1 + x2 + x4 + x7 + x8 + x9 + 2 * x10 - big_r
    f3 = 2 * x2 + 2 * x5 + x6 + x7 - 8
    f4 = 2 * x3 + x9 - 4 * big_r
    f5 = x2 * x4 - x1 * x5
    f6 = np.sqrt(x2 * x4) - np.sqrt(x1) * px11 * x6
    f7 = np.sqrt(x1 * x2) - np.sqrt(x4) * x7 * px11
    f8 = x1 - x4 * x8 * p / x11
    f9 = x1 * np.sqrt(x3) - x4 * x9 * px11
    f10 = x1 * x1 - x4 * x4 * x10 * p / x11
    f11 = x11 - x1 - x2 - x3 - x4 - x5 - x6 - x7 - x8 - x9 - x10
    return [f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11]


register(
    Problem(
        "PropaneCombustion",
        "MINPACK-2 combustion of propane residuals, p = 40, R = 10 (11 → 11)",
        "MINPACK-2 test collection (Averick et al. 1992); AlphaGrad task set (Lohoff & Neftci 2024); "
        "../shared/problems.md",
        11,
        11,
        fn=propane_combustion,
        # positive inputs keep the square roots and the division by x11 smooth
        sampler=lambda rng: rng.uniform(0.5, 3.0, 11),
        tags=("minpack2", "alphagrad"),
    )
)


# =========================================================================== BlackScholes
_SQRT2 = float(np.sqrt(2.0))
_ERF_SLOPE = float(2.0 / np.sqrt(np.pi))  # erf'(u) = (2/√π)·exp(−u²)


def _black_scholes_forward(x):
    """The forward sweep of the Black–Scholes price: its intermediates, by name."""
    s, k, r, sigma, t = x
    rt = r * t
    growth = np.exp(rt)
    fwd = growth * s  # F = e^{rT}·S
    moneyness = fwd / k
    log_m = np.log(moneyness)
    var = sigma * sigma
    var_t = var * t
    num = log_m + 0.5 * var_t
    sqrt_t = np.sqrt(t)
    vol = sigma * sqrt_t  # σ√T
    d1 = num / vol
    d2 = d1 - vol
    phi1 = 0.5 * (1 + erf(d1 / _SQRT2))
    phi2 = 0.5 * (1 + erf(d2 / _SQRT2))
    call = fwd * phi1 - k * phi2
    discount = np.exp(-rt)
    price = discount * call
    return {
        "rt": rt,
        "growth": growth,
        "fwd": fwd,
        "moneyness": moneyness,
        "log_m": log_m,
        "var": var,
        "var_t": var_t,
        "num": num,
        "sqrt_t": sqrt_t,
        "vol": vol,
        "d1": d1,
        "d2": d2,
        "phi1": phi1,
        "phi2": phi2,
        "call": call,
        "discount": discount,
        "price": price,
    }


def black_scholes(x):
    """Black–Scholes price of a European call option (5 → 1).

    ``x = (S, K, r, σ, T)``: spot, strike, interest rate, volatility, time to
    expiry.  With Φ(z) = (1 + erf(z/√2))/2 (:func:`scipy.special.erf`) and the
    forward F = e^{rT}·S: d1 = (ln(F/K) + σ²T/2)/(σ√T), d2 = d1 − σ√T,
    price = e^{−rT}(F·Φ(d1) − K·Φ(d2)).  Valid for S, K, σ, T > 0.

    Source: Black & Scholes 1973; AlphaGrad task set (Lohoff & Neftci 2024);
    ../shared/problems.md.

    Examples
    --------
    >>> [round(float(v), 6) for v in black_scholes(np.array([100.0, 95.0, 0.05, 0.2, 1.0]))]
    [13.346465]
    """
    return [_black_scholes_forward(x)["price"]]


def black_scholes_jacobian(x):
    """The gradient of the Black–Scholes price, by hand-written reverse mode (5 → 5).

    ``x = (S, K, r, σ, T)`` as in :func:`black_scholes`; the outputs are
    ∂price/∂S, ∂price/∂K, ∂price/∂r, ∂price/∂σ, ∂price/∂T (delta, the strike
    sensitivity, rho, vega, and minus theta).  The forward sweep of
    :func:`black_scholes` is followed by an explicit adjoint sweep over the
    same intermediates, using erf'(u) = (2/√π)·e^{−u²}; so the function is
    itself traceable, and its Jacobian is the price's (symmetric) Hessian.
    Valid for S, K, σ, T > 0.

    Source: Black & Scholes 1973; AlphaGrad task set (Lohoff & Neftci 2024);
    ../shared/problems.md.

    Examples
    --------
    >>> [round(float(v), 6) for v in black_scholes_jacobian(np.array([100.0, 95.0, 0.05, 0.2, 1.0]))]
    [0.727897, -0.625719, 59.443283, 33.19273, 6.291437]
    """
    s, k, r, sigma, t = x
    v = _black_scholes_forward(x)
    # adjoint sweep, in reverse order of the forward sweep; price_bar = 1
    discount_bar = v["call"]
    call_bar = v["discount"]
    rt_bar = -discount_bar * v["discount"]
    fwd_bar = call_bar * v["phi1"]
    phi1_bar = call_bar * v["fwd"]
    k_bar = -call_bar * v["phi2"]
    phi2_bar = -call_bar * k
    d2_bar = phi2_bar * 0.5 * _ERF_SLOPE * np.exp(-((v["d2"] / _SQRT2) ** 2)) / _SQRT2
    d1_bar = phi1_bar * 0.5 * _ERF_SLOPE * np.exp(-((v["d1"] / _SQRT2) ** 2)) / _SQRT2 + d2_bar
    vol_bar = -d2_bar - d1_bar * v["d1"] / v["vol"]
    num_bar = d1_bar / v["vol"]
    sigma_bar = vol_bar * v["sqrt_t"]
    sqrt_t_bar = vol_bar * sigma
    t_bar = sqrt_t_bar * 0.5 / v["sqrt_t"]
    log_m_bar = num_bar
    var_t_bar = 0.5 * num_bar
    var_bar = var_t_bar * t
    t_bar = t_bar + var_t_bar * v["var"]
    sigma_bar = sigma_bar + 2 * var_bar * sigma
    moneyness_bar = log_m_bar / v["moneyness"]
    fwd_bar = fwd_bar + moneyness_bar / k
    k_bar = k_bar - moneyness_bar * v["moneyness"] / k
    growth_bar = fwd_bar * s
    s_bar = fwd_bar * v["growth"]
    rt_bar = rt_bar + growth_bar * v["growth"]
    r_bar = rt_bar * t
    t_bar = t_bar + rt_bar * r
    return [s_bar, k_bar, r_bar, sigma_bar, t_bar]


def _black_scholes_sampler(rng: np.random.Generator) -> np.ndarray:
    """S, K ∈ [80, 120], r ∈ [0.01, 0.08], σ ∈ [0.1, 0.5], T ∈ [0.25, 2]."""
    lo = np.array([80.0, 80.0, 0.01, 0.1, 0.25])
    hi = np.array([120.0, 120.0, 0.08, 0.5, 2.0])
    return rng.uniform(lo, hi)


register(
    Problem(
        "BlackScholes",
        "Black–Scholes price of a European call; inputs S, K, r, σ, T (5 → 1)",
        "Black & Scholes 1973; AlphaGrad task set (Lohoff & Neftci 2024); ../shared/problems.md",
        5,
        1,
        fn=black_scholes,
        sampler=_black_scholes_sampler,
        tags=("alphagrad",),
    )
)

register(
    Problem(
        "BlackScholes_Jacobian",
        "Gradient of the Black–Scholes price by hand-written reverse mode; its Jacobian is the "
        "price's Hessian (5 → 5)",
        "Black & Scholes 1973; AlphaGrad task set (Lohoff & Neftci 2024); ../shared/problems.md",
        5,
        5,
        fn=black_scholes_jacobian,
        sampler=_black_scholes_sampler,
        tags=("alphagrad",),
    )
)


# =========================================================================== SteadyStateCombustion
def steady_state_combustion(x, lam: float = 6.81):
    """MINPACK-2 steady-state combustion (Bratu-type) energy on a 2×2 grid (4 → 1).

    ``x = (v00, v01, v10, v11)``; hx = hy = 0.5, λ = 6.81 and
    μ(a, b, c) = (2/3)(e^a + e^b + e^c).  The element energy
    f(v, v_x, v_y) = (hx·hy/4)(((v_x − v)/hx)² + ((v_y − v)/hy)² − λ·μ(v, v_x, v_y))
    serves as both fL (right/upper neighbours) and fR (left/lower neighbours);
    the output is the sum of the eight terms of ../shared/problems.md.
    Smooth everywhere.

    Source: MINPACK-2 test collection (Averick et al. 1992), via the AlphaGrad
    task set (Lohoff & Neftci 2024); ../shared/problems.md.

    Examples
    --------
    >>> [round(float(v), 6) for v in steady_state_combustion(np.array([0.1, 0.2, 0.3, 0.4]))]
    [-8.698958]
    """
    v00, v01, v10, v11 = x
    hx = hy = 0.5

    def mu(a, b, c):
        return (2.0 / 3.0) * (np.exp(a) + np.exp(b) + np.exp(c))

    def f(v, vx, vy):
        return (hx * hy / 4) * (((vx - v) / hx) ** 2 + ((vy - v) / hy) ** 2 - lam * mu(v, vx, vy))

    f_l = f_r = f
    total = (
        f_l(v00, v10, v01)
        + f_r(v00, v01, v10)
        + f_l(v01, v11, v00)
        + f_r(v01, v00, v11)
        + f_l(v10, v00, v11)
        + f_r(v10, v11, v00)
        + f_l(v11, v01, v10)
        + f_r(v11, v10, v01)
    )
    return [total]


register(
    Problem(
        "SteadyStateCombustion",
        "MINPACK-2 steady-state combustion energy on a 2×2 grid, λ = 6.81 (4 → 1)",
        "MINPACK-2 test collection (Averick et al. 1992); AlphaGrad task set (Lohoff & Neftci 2024); "
        "../shared/problems.md",
        4,
        1,
        fn=steady_state_combustion,
        sampler=lambda rng: rng.uniform(-1.0, 1.0, 4),
        tags=("minpack2", "alphagrad"),
    )
)


# =========================================================================== GaussianDataFitting
GAUSSIAN_DATA_SEED = 20241
"""Seed of the data y_i of :func:`gaussian_data_fitting`: ``np.random.default_rng(20241).random(65)``."""

_GAUSSIAN_T = [i / 10 for i in range(65)]
_GAUSSIAN_Y = [float(v) for v in np.random.default_rng(GAUSSIAN_DATA_SEED).random(65)]


def gaussian_data_fitting(x):
    """MINPACK-2 Gaussian data fitting, the 65 residuals (11 → 65).

    ``x = (x1, …, x11)``; for i = 0 … 64, with t_i = i/10,
    r_i = y_i − x1·e^{−t_i x5} − x2·e^{−(t_i − x9)² x6} − x3·e^{−(t_i − x10)² x7}
    − x4·e^{−(t_i − x11)² x8}.  The data y_i are pseudo-random in [0, 1):
    ``np.random.default_rng(GAUSSIAN_DATA_SEED).random(65)`` with
    ``GAUSSIAN_DATA_SEED = 20241``.  Smooth everywhere.

    Source: MINPACK-2 test collection (Averick et al. 1992), via the AlphaGrad
    task set (Lohoff & Neftci 2024); ../shared/problems.md.

    Examples
    --------
    >>> x = np.array([1.3, 0.65, 0.65, 0.7, 0.6, 3.0, 5.0, 7.0, 2.0, 4.5, 5.5])
    >>> [round(float(v), 4) for v in gaussian_data_fitting(x)[:4]]
    [-0.7498, -0.5984, -0.8521, -0.3304]
    """
    x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11 = x
    residuals = []
    for t, y in zip(_GAUSSIAN_T, _GAUSSIAN_Y, strict=True):
        residuals.append(
            y
            - x1 * np.exp(-t * x5)
            - x2 * np.exp(-((t - x9) ** 2) * x6)
            - x3 * np.exp(-((t - x10) ** 2) * x7)
            - x4 * np.exp(-((t - x11) ** 2) * x8)
        )
    return residuals


register(
    Problem(
        "GaussianDataFitting",
        f"MINPACK-2 Gaussian data fitting residuals, t_i = i/10, y_i pseudo-random in [0, 1) "
        f"from np.random.default_rng({GAUSSIAN_DATA_SEED}).random(65) (11 → 65)",
        "MINPACK-2 test collection (Averick et al. 1992); AlphaGrad task set (Lohoff & Neftci 2024); "
        f"../shared/problems.md; data seed {GAUSSIAN_DATA_SEED}",
        11,
        65,
        fn=gaussian_data_fitting,
        # around the MINPACK-2 standard starting point, scaled by ±10 %
        sampler=lambda rng: (
            np.array([1.3, 0.65, 0.65, 0.7, 0.6, 3.0, 5.0, 7.0, 2.0, 4.5, 5.5]) * rng.uniform(0.9, 1.1, 11)
        ),
        tags=("minpack2", "alphagrad"),
    )
)
