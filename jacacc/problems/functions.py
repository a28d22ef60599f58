"""Benchmark functions written with NumPy operators, traceable by :func:`jacacc.trace`.

Definitions follow ../shared/problems.md (the AlphaGrad task set, Lohoff &
Neftci 2024, and MINPACK-2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from jacacc.errors import RegistryError

__all__ = ["PROBLEMS", "Problem", "get_problem", "roe_flux_1d"]


@dataclass(frozen=True)
class Problem:
    """A traceable benchmark function with its size and a valid point."""

    name: str
    function: Callable
    n_inputs: int
    n_outputs: int
    point: tuple[float, ...]
    description: str


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


PROBLEMS: dict[str, Problem] = {
    "RoeFlux_1d": Problem(
        "RoeFlux_1d", roe_flux_1d, 6, 3, (1.0, 3.0, 2.5, 1.2, 3.3, 2.8),
        "Roe's approximate Riemann solver flux, 1-D Euler",
    ),
}


def get_problem(name: str) -> Problem:
    """The registered problem ``name``; unknown names list the valid ones."""
    try:
        return PROBLEMS[name]
    except KeyError:
        raise RegistryError(f"unknown problem {name!r}; valid problems: {', '.join(PROBLEMS)}") from None
