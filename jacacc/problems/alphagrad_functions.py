"""The ten AlphaGrad tasks written with ``jax.numpy``, operation for operation as graphax has them.

AlphaGrad (Lohoff & Neftci, NeurIPS 2024) learned vertex-elimination orders on
ten functions of the graphax collection (``graphax.examples``); its counts are
those of the graph graphax's interpreter builds from the function's jaxpr: one
vertex per jaxpr equation.  The functions here compute the same mathematics
with the same sequence of JAX operations, so that :func:`jax.make_jaxpr` gives
the same equations in the same order: a subexpression the original evaluates
twice (``jnp.sqrt(ul0)`` in RoeFlux_1d, the bracket of ``px`` and ``py`` in
RobotArm_6DOF) is evaluated twice here too, and ``x**2`` stays an integer
power where a product ``x*x`` would be another equation.  Do not "simplify"
them.

:data:`TASKS` maps each task name to a :class:`Task`: the function, the point
the AlphaGrad experiments traced it at (which fixes the shapes), and the
``jax.vmap`` wrapping the experiments applied (batch size 1).
:func:`task_jaxpr` traces a task; :func:`graphax_graph` turns a jaxpr into the
graph graphax builds from it (see there for its rules); the generator
``experiments/alphagrad_graphs.py`` writes those graphs to
``jacacc/problems/data/alphagrad/``, from which :mod:`jacacc.problems.alphagrad`
registers the zoo entries without importing JAX.

JAX is imported when a function is called, never when this module is imported.

Examples
--------
>>> import pytest
>>> _ = pytest.importorskip("jax")
>>> data = graphax_graph(task_jaxpr("HumanHeartDipole"))
>>> len(data["inputs"]), len(data["outputs"])
(8, 8)
>>> len(data["vertices"]) - len(data["outputs"])  # the intermediates: AlphaGrad's vertex count
78
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jacacc.errors import require_extra

__all__ = [
    "TASKS",
    "Task",
    "encoder",
    "f",
    "g",
    "graphax_graph",
    "human_heart_dipole",
    "perceptron",
    "propane_combustion",
    "robot_arm_6dof",
    "roe_flux_1d",
    "roe_flux_3d",
    "task_jaxpr",
]


def _jnp() -> Any:
    return require_extra("jax.numpy", "bench")


def _lax() -> Any:
    return require_extra("jax.lax", "bench")


GAMMA = 0.5  # the ratio of specific heats both Roe fluxes use


# =========================================================================== RoeFlux_1d
def roe_flux_1d(ul0: Any, ul1: Any, ul2: Any, ur0: Any, ur1: Any, ur2: Any) -> tuple[Any, Any, Any]:
    """Roe's approximate Riemann solver flux, 1-D Euler equations (6 → 3), γ = 0.5.

    Left state (``ul0``, ``ul1``, ``ul2``) and right state (``ur0``, ``ur1``,
    ``ur2``): density, momentum, energy.  Returns the three flux components.
    """
    jnp = _jnp()

    def pressure(u0, u1, u2):
        return (GAMMA - 1.0) * (u2 - 0.5 * u1**2 / u0)

    def enthalpy(u0, u2, p):
        return (u2 + p) / u0

    def flux(u0, u1, u2, p):
        vel = u1 / u0
        return u1, p + u1 * vel, vel * (p + u2)

    du0 = ur0 - ul0
    ulr0 = jnp.sqrt(ul0 * ur0)
    w1 = jnp.sqrt(ul0) + jnp.sqrt(ur0)
    vl = ul1 / ul0
    pl = pressure(ul0, ul1, ul2)
    hl = enthalpy(ul0, ul2, pl)
    vr = ur1 / ur0
    pr = pressure(ur0, ur1, ur2)
    hr = enthalpy(ur0, ur2, pr)
    dp = pr - pl
    dv = vr - vl
    # Roe averages; the square roots are taken again, as in the original
    u = (jnp.sqrt(ul0) * vl + jnp.sqrt(ur0) * vr) / w1
    h = (jnp.sqrt(ul0) * hl + jnp.sqrt(ur0) * hr) / w1
    q2 = u**2
    a2 = (GAMMA - 1.0) * (h - 0.5 * q2)
    a = jnp.sqrt(a2)
    lam_p = jnp.abs(u + a)
    lam = jnp.abs(u)
    lam_n = jnp.abs(u)  # the same eigenvalue twice: two equations in the original
    n = a * ulr0
    c0 = (du0 - dp / a2) * lam
    c1 = (dv + dp / n) * lam_p
    c2 = (dv - dp / n) * lam_n
    fl0, fl1, fl2 = flux(ul0, ul1, ul2, pl)
    fr0, fr1, fr2 = flux(ur0, ur1, ur2, pr)
    big_f0, big_f1, big_f2 = fl0 + fr0, fl1 + fr1, fl2 + fr2
    c = 0.5 * ulr0 / a
    df0 = c0 + c * c1 - c * c2
    df1 = c0 * u + c * c1 * (u + a) - c * c2 * (u - a)
    df2 = c0 * 0.5 * q2 + c * c1 * (h + u * a) - c * c2 * (h - u * a)
    return 0.5 * (big_f0 - df0), 0.5 * (big_f1 - df1), 0.5 * (big_f2 - df2)


# =========================================================================== RoeFlux_3d
def roe_flux_3d(ul0: Any, ul: Any, ul4: Any, ur0: Any, ur: Any, ur4: Any) -> tuple[Any, Any, Any]:
    """Roe's flux for the 3-D Euler equations (10 → 5), γ = 0.5; the AlphaGrad form.

    ``ul0``, ``ur0`` (shape (1,)): densities; ``ul``, ``ur`` (shape (3,)):
    momenta; ``ul4``, ``ur4`` (shape (1,)): energies.  Returns the mass flux
    (1,), the momentum fluxes (3,) and the energy flux (1,).  The wave
    strengths follow the graphax example, which takes no absolute values of
    the eigenvalues.
    """
    jnp = _jnp()

    def pressure(u0, mom, u4):
        return (GAMMA - 1.0) * (u4 - 0.5 * jnp.sum(mom**2) / u0)

    def enthalpy(u0, u4, p):
        return (u4 + p) / u0

    def flux(u0, mom, vel, u4, p):
        vel1 = vel[0:1]
        p_first = jnp.concatenate([p, jnp.zeros(2, dtype=jnp.float32)])  # p on the first momentum only
        return mom[0:1], p_first + mom * vel, vel1 * (p + u4)

    du0 = ur0 - ul0
    du = ur - ul
    du1, du2, du3 = du[0:1], du[1:2], du[2:]
    du4 = ur4 - ul4
    vl = ul / ul0
    vr = ur / ur0
    w1 = jnp.sqrt(ul0) + jnp.sqrt(ur0)
    uvw = (jnp.sqrt(ul0) * vl + jnp.sqrt(ur0) * vr) / w1  # Roe-averaged velocity
    u, v, w = uvw[0:1], uvw[1:2], uvw[2:]
    pl = pressure(ul0, ul, ul4)
    hl = enthalpy(ul0, ul4, pl)
    pr = pressure(ur0, ur, ur4)
    hr = enthalpy(ur0, ur4, pr)
    h = (jnp.sqrt(ul0) * hl + jnp.sqrt(ur0) * hr) / w1
    q2 = jnp.sum(uvw**2)
    a2 = (GAMMA - 1.0) * (h - 0.5 * q2)
    a = jnp.sqrt(a2)
    lam_p = u + a
    lam = u
    lam_m = u - a
    c3 = ((GAMMA - 1.0) / a2 * ((h - q2) * du0 + jnp.dot(uvw, du) - du4)) * lam
    c2 = (du3 / w - du1) * lam
    c1 = (du2 / v - du0) * lam
    k1 = du0 - c3
    k2 = (du1 - u * du0) / a
    c0 = 0.5 * (k1 - k2) * lam_m
    c4 = 0.5 * (k1 + k2) * lam_p
    fl0, fl, fl4 = flux(ul0, ul, vl, ul4, pl)
    fr0, fr, fr4 = flux(ur0, ur, vr, ur4, pr)
    big_f0 = fl0 + fr0
    big_f = fl + fr
    big_f4 = fl4 + fr4
    df0 = c0 + c3 + c4 * lam_p
    df1 = c0 * lam_m + c3 * u + c4 * lam_p
    df2 = c0 * v + c1 * v + c3 * v + c4 * v
    df3 = c0 * w + c2 * w + c3 * w + c4 * w
    df4 = c0 * (h - u * a) + c1 * v**2 + c2 * w**2 + c3 * 0.5 * q2 + c4 * (h + u * a)
    df = jnp.concatenate([df1, df2, df3])
    return 0.5 * (big_f0 - df0), 0.5 * (big_f - df), 0.5 * (big_f4 - df4)


# =========================================================================== RobotArm_6DOF
def robot_arm_6dof(t1: Any, t2: Any, t3: Any, t4: Any, t5: Any, t6: Any) -> tuple[Any, ...]:
    """Forward kinematics of a 6-axis arm (6 → 6): position and Tait–Bryan angles.

    Joint angles ``t1`` … ``t6``; returns ``(px, py, pz, z, y', z'')``.  cos
    and sin of t2 + t3 come from the angle-sum identities; the bracket of
    ``px`` and ``py`` is recomputed for each, as in the original.
    """
    jnp = _jnp()
    a1, a2, a3 = 175.0, 890.0, 50.0
    d1, d4, d6 = 575.0, 1035.0, 185.0

    def sin_sum(x, y):
        return jnp.cos(x) * jnp.sin(y) + jnp.sin(x) * jnp.cos(y)

    def cos_sum(x, y):
        return jnp.cos(x) * jnp.cos(y) - jnp.sin(x) * jnp.sin(y)

    c1, c2, c4, c5, c6 = jnp.cos(t1), jnp.cos(t2), jnp.cos(t4), jnp.cos(t5), jnp.cos(t6)
    c23 = cos_sum(t2, t3)
    s1, s2, s4, s5, s6 = jnp.sin(t1), jnp.sin(t2), jnp.sin(t4), jnp.sin(t5), jnp.sin(t6)
    s23 = sin_sum(t2, t3)
    ax = s5 * (c1 * c23 * c4 + s1 * s4) + c1 * s23 * c5
    ay = s5 * (s1 * c23 * c4 - c1 * s4) + s1 * s23 * c5
    az = s23 * c4 * s5 - c23 * c5
    nz = c6 * (c23 * s5 + s23 * c4 * c5) - s23 * s4 * s6
    oz = -s6 * (c23 * s5 + s23 * c4 * c5) - s23 * s4 * c6
    z = jnp.arctan2(ay, ax)
    y_ = jnp.arctan2(jnp.sqrt(1.0 - az**2), az)
    z__ = jnp.arctan2(oz, -nz)
    px = d6 * (s5 * (c1 * c23 * c4 + s1 * s4) + c1 * s23 * c5) + c1 * (a1 + a2 * c2 + a3 * c23 + d4 * s23)
    py = d6 * (s5 * (s1 * c23 * c4 + c1 * s4) + s1 * s23 * c5) + s1 * (a1 + a2 * c2 + a3 * c23 + d4 * s23)
    pz = a2 * s2 + d1 + a3 * s23 - d4 * c23 + d6 * (s23 * c4 * s5 - c23 * c5)
    return px, py, pz, z, y_, z__


# =========================================================================== MINPACK-2
def human_heart_dipole(x1: Any, x2: Any, x3: Any, x4: Any, x5: Any, x6: Any, x7: Any, x8: Any) -> tuple[Any, ...]:
    """MINPACK-2 human heart dipole residuals with all σ constants 1 (8 → 8)."""
    sigma = 1.0
    f1 = x1 + x2 - sigma
    f2 = x3 + x4 - sigma
    f3 = x5 * x1 + x6 * x2 - x7 * x3 - x8 * x4 - sigma
    f4 = x7 * x1 + x8 * x2 + x5 * x3 + x6 * x4 - sigma
    x57 = x5**2 - x7**2
    x68 = x6**2 - x8**2
    f5 = x1 * x57 - 2 * x3 * x5 * x7 + x2 * x68 - 2 * x4 * x6 * x8 - sigma
    f6 = x3 * x57 - 2 * x1 * x5 * x7 + x4 * x68 - 2 * x2 * x6 * x8 - sigma
    x557 = x5 * (x5**2 - 3 * x7**2)
    x775 = x7 * (x7**2 - 3 * x5**2)
    x668 = x6 * (x6**2 - 3 * x8**2)
    x886 = x8 * (x8**2 - 3 * x6**2)
    f7 = x1 * x557 + x3 * x775 + x2 * x668 + x4 * x886 - sigma
    f8 = x3 * x557 - x1 * x775 + x4 * x668 - x2 * x886 - sigma
    return f1, f2, f3, f4, f5, f6, f7, f8


def propane_combustion(*x: Any) -> tuple[Any, ...]:
    """MINPACK-2 propane combustion residuals, full formulation (11 → 11), p = 40, R = 10."""
    jnp = _jnp()
    p, r = 40.0, 10.0
    x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11 = x
    px11 = jnp.sqrt(p / x11)
    f1 = x1 + x4 - 3.0
    f2 = 2 * x1 + x2 + x4 + x7 + x8 + x9 + 2 * x10 - r
    f3 = 2 * x2 + 2 * x5 + x6 + x7 - 8.0
    f4 = 2 * x3 + x9 - 4 * r
    f5 = x2 * x4 - x1 * x5
    f6 = jnp.sqrt(x2 * x4) - jnp.sqrt(x1) * px11 * x6
    f7 = jnp.sqrt(x1 * x2) - jnp.sqrt(x4) * x7 * px11
    f8 = x1 - x4 * x8 * p / x11
    f9 = x1 * jnp.sqrt(x3) - x4 * x9 * px11
    f10 = x1**2 - x4**2 * x10 * p / x11
    f11 = x11 - x1 - x2 - x3 - x4 - x5 - x6 - x7 - x8 - x9 - x10
    return f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11



# =========================================================================== f and g
def f(v0: Any, v1: Any, v2: Any, v4: Any) -> tuple[Any, ...]:
    """graphax's random tensor program ``f`` (4 tensor inputs → 5 outputs).

    A machine-generated straight-line program over a vector ``v0`` (4,), a
    matrix ``v1`` (2, 3), ``v2`` (4, 4) and ``v4`` (4, 1), mixing elementwise
    functions, contractions (``lax.dot_general``), reductions, reshapes, a
    slice and a ``stop_gradient``.  The names are the original's, so that
    each line can be checked against it.
    """
    jnp, lax = _jnp(), _lax()

    def dot(a, b, axes):
        return lax.dot_general(a, b, dimension_numbers=(axes, ((), ())))

    v5 = jnp.power(v2, 3)
    v6 = dot(v4, v5, ((0,), (0,)))
    v7 = dot(v5, v6, ((0,), (1,)))
    v8 = jnp.power(v6, 2)
    v9 = dot(v0, v8, ((0,), (1,)))
    v10 = jnp.sqrt(v0)
    v11 = jnp.arccos(v7)
    v12 = jnp.transpose(v1, axes=[0, 1])
    v13 = dot(v11, v8, ((1,), (0,)))
    v14 = jnp.add(v11, v9.reshape([1, 1]))
    v15 = jnp.subtract(v14, v9.reshape([1, 1]))
    v16 = jnp.cos(v9)
    v17 = jnp.add(jnp.reshape(v10, [4, 1]), v13)
    v18 = jnp.arcsinh(v17)
    v16_11 = v16.reshape([1, 1])
    v19 = jnp.add(v15, v16_11)
    v20 = jnp.negative(v12)
    v21 = jnp.sqrt(v10)
    v22 = dot(v21, v18, ((0,), (1,)))
    v23 = jnp.tanh(v12)
    v24 = jnp.arctan(v19)
    v25 = jnp.square(v24)
    v26 = jnp.cos(v22)
    v27 = jnp.subtract(v16_11, v25)
    v28 = jnp.cosh(v23)
    v29 = jnp.sum(v20, axis=0)
    v30 = jnp.transpose(v28, axes=[1, 0])
    v31 = jnp.sum(v16, axis=0)
    v32 = jnp.squeeze(v26)
    v33 = jnp.subtract(jnp.reshape(v29, [3, 1]), v30)
    v34 = jnp.divide(v31, v33)
    v35 = jnp.add(v13, v10.reshape([4, 1]))
    v36 = jnp.multiply(jnp.reshape(v32, [4, 1]), v35)
    v37 = jnp.power(v32, 2)
    v38 = jnp.amax(v34, axis=1)
    v39 = jnp.sinh(v36)
    v40 = jnp.exp(v27)
    v41 = lax.slice(v39, start_indices=[3, 3], limit_indices=[4, 4])
    v42 = jnp.sum(v37, axis=0)
    v43 = jnp.add(v42, v38)
    v44 = dot(v32, v40, ((0,), (0,)))
    v45 = jnp.arcsinh(v43)
    v46 = dot(v24, v15, ((1,), (1,)))
    v47 = lax.stop_gradient(v41)
    v48 = lax.logistic(v45)
    v49 = dot(v29, v48, ((0,), (0,)))
    v50 = dot(v22, v21, ((0,), (0,)))
    v51 = dot(v44, v47, ((0,), (1,)))
    v52 = dot(v30, v33, ((0,), (0,)))
    v53 = jnp.multiply(v46, v50)
    v54 = jnp.sqrt(v37)
    v55 = jnp.sqrt(jnp.abs(v51))
    v56 = jnp.subtract(v52, v49)
    v57 = jnp.cosh(v54)
    v58 = jnp.negative(v37)
    v59 = jnp.add(jnp.reshape(v57, [4, 1]), v53)
    v60 = jnp.square(v57)
    v61 = jnp.sin(v58)
    v62 = jnp.arctan(v59)
    v63 = jnp.sum(v62, axis=0)
    v64 = jnp.amin(v63, axis=0)
    v65 = jnp.subtract(v64, v55)
    v66 = jnp.sqrt(v2)
    v67 = jnp.sum(v56, axis=1)
    v68 = jnp.subtract(jnp.reshape(v61, [4, 1]), v66)
    v69 = dot(v60, v61, ((0,), (0,)))
    v70 = dot(v68, v62, ((0,), (0,)))
    v71 = jnp.add(jnp.reshape(v22, [4, 1]), v2)
    v72 = lax.logistic(v70)
    v73 = dot(v72, v71, ((0,), (0,)))
    v74 = jnp.divide(v6, v37.reshape([1, 4]))
    return v74, v65, v67, v69, v73


# g: graphax's random scalar program of 15 inputs (v0 … v14) and 20 outputs, one
# operation per line in the original's order: "target operation operands".  ``ones``
# is jnp.ones(()), a constant vertex with no in-edges.
_G_PROGRAM = """
15 ones; 16 ones; 17 arctan2 15 3; 18 power 15 14; 19 arctan2 13 17; 20 power 17 5;
21 subtract 9 8; 22 arctan 10; 23 multiply 21 0; 24 subtract 22 18; 25 power 24 11;
26 add 21 12; 27 exp 2; 28 add 21 26; 29 power 16 17; 30 sin 3; 31 divide 2 23;
32 arctan2 24 26; 33 subtract 29 25; 34 arctan 33; 35 multiply 7 27; 36 tan 13;
37 add 27 19; 38 divide 7 6; 39 subtract 25 34; 40 subtract 29 6; 41 power 35 4;
42 cos 0; 43 subtract 40 19; 44 divide 41 7; 45 subtract 40 8; 46 arctan2 16 43;
47 divide 8 30; 48 power 37 36; 49 power 47 44; 50 arctan2 45 40; 51 arctan2 44 13;
52 divide 4 34; 53 arctan2 41 1; 54 arctan2 25 53; 55 add 12 51; 56 power 3 48;
57 subtract 24 32; 58 arctanh 48; 59 arctanh 54; 60 arctan2 2 26; 61 subtract 52 18;
62 cos 38; 63 divide 8 32; 64 arctan2 42 46; 65 sinh 36; 66 subtract 61 50;
67 power 13 39; 68 power 37 26; 69 subtract 68 43; 70 log 65; 71 power 23 58;
72 arctan2 50 69; 73 divide 20 72; 74 multiply 41 56; 75 multiply 39 33;
76 multiply 61 15; 77 power 66 64; 78 arctan2 53 25; 79 subtract 59 60; 80 arctan2 73 41;
81 multiply 74 46; 82 square 5; 83 arctan2 28 62; 84 arctan2 39 9; 85 multiply 4 12;
86 divide 57 56; 87 arctan2 61 63; 88 arcsinh 14; 89 power 86 83; 90 arcsin 66;
91 subtract 70 79; 92 arctan2 37 65; 93 multiply 67 77; 94 power 87 55; 95 square 49;
96 divide 92 94; 97 add 15 95; 98 divide 91 76; 99 arctanh 46; 100 multiply 75 45;
101 divide 100 28; 102 add 90 29; 103 arctan2 80 84; 104 subtract 20 91; 105 add 82 90;
106 divide 102 103; 107 power 75 42; 108 multiply 68 62; 109 divide 102 1;
110 power 98 101; 111 negative 100; 112 divide 31 89; 113 divide 105 108; 114 subtract 22 70;
115 multiply 106 44; 116 subtract 107 81; 117 power 58 115; 118 subtract 78 108;
119 tan 87; 120 power 87 48; 121 add 105 38
"""
_G_OUTPUTS = (121, 71, 85, 88, 93, 96, 97, 99, 104, 109, 110, 111, 112, 113, 114, 116, 117, 118, 119, 120)


def g(*v: Any) -> tuple[Any, ...]:
    """graphax's random scalar program ``g`` (15 → 20), run from :data:`_G_PROGRAM`."""
    jnp = _jnp()
    values = dict(enumerate(v))
    for line in _G_PROGRAM.replace("\n", " ").split(";"):
        target, op, *operands = line.split()
        args = [values[int(k)] for k in operands]
        values[int(target)] = jnp.ones(()) if op == "ones" else getattr(jnp, op)(*args)
    return tuple(values[k] for k in _G_OUTPUTS)


# =========================================================================== MLP and Transformer
def _softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    jnp, jnn = _jnp(), require_extra("jax.nn", "bench")
    return -jnp.sum(labels * jnp.log(jnn.softmax(logits, axis=-1)), axis=-1)


def _layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    jnp = _jnp()
    mu = jnp.mean(x, axis=-1)
    var = jnp.sum((x - mu) ** 2, axis=-1) / x.shape[-1]
    return (x - mu) / jnp.sqrt(var + 1e-6) * gamma + beta


def perceptron(x: Any, y: Any, w1: Any, b1: Any, w2: Any, b2: Any, gamma: Any, beta: Any) -> Any:
    """The AlphaGrad "MLP": a two-layer tanh perceptron with layer norm and a softmax cross-entropy loss.

    ``x`` (4,) input, ``y`` (4,) labels, ``w1`` (8, 4), ``b1`` (8,), ``w2``
    (4, 8), ``b2`` (4,), ``gamma`` and ``beta`` the layer norm's scalar gain
    and shift.  Returns the scalar loss.
    """
    jnp = _jnp()
    out = jnp.tanh(w1 @ x + b1)
    out = _layer_norm(out, gamma, beta)
    out = jnp.tanh(w2 @ out + b2)
    return _softmax_cross_entropy(out, y)


def _encoder_block(x: Any, wq: Any, wk: Any, wv: Any, w: Any, b: Any, gamma: Any, beta: Any) -> Any:
    jnp, jnn = _jnp(), require_extra("jax.nn", "bench")
    q, k, v = wq @ x, wk @ x, wv @ x
    attention = jnn.softmax(q.T @ k, axis=1) @ v
    c = _layer_norm(x + attention, gamma, beta)
    z = w @ c + b
    return z * (1.0 / (1.0 + jnp.exp(-z)))  # SiLU, written out as the original does


def encoder(x: Any, y: Any, wq1: Any, wq2: Any, wk1: Any, wk2: Any, wv1: Any, wv2: Any, w1: Any, w2: Any,
            b1: Any, b2: Any, gamma0: Any, beta0: Any, gamma1: Any, beta1: Any) -> Any:
    """The AlphaGrad "Transformer": two single-head attention encoder blocks and a softmax cross-entropy loss.

    ``x`` (4, 4) the sequence, ``y`` (2, 4) labels; per block query, key and
    value weights (4, 4), a SiLU output layer ``w1`` (4, 4) + ``b1`` (4,),
    ``w2`` (2, 4) + ``b2`` (2, 1), and the layer norms' scalar gains and
    shifts.  Returns the losses (4,).
    """
    z1 = _encoder_block(x, wq1, wk1, wv1, w1, b1, gamma0, beta0)
    z2 = _encoder_block(z1, wq2, wk2, wv2, w2, b2, gamma1, beta1)
    return _softmax_cross_entropy(z2, y)



# =========================================================================== the tasks
@dataclass(frozen=True)
class Task:
    """One AlphaGrad task: how the AlphaGrad experiments traced it.

    Attributes
    ----------
    name : str
        The task's name in AlphaGrad's tables.
    fn : callable
        The function (from this module).
    point : callable
        ``point(rng) -> tuple of arguments``: the shapes AlphaGrad traced at
        (the values do not change the graph; those here are valid points).
    in_axes : tuple or None
        ``jax.vmap``'s ``in_axes`` where the experiments traced the batched
        function (batch size 1), else None.
    """

    name: str
    fn: Callable[..., Any]
    point: Callable[[Any], tuple[Any, ...]]
    in_axes: tuple[int | None, ...] | None = None

    def traced_function(self) -> Callable[..., Any]:
        """The function as traced: ``fn`` or its ``jax.vmap``."""
        if self.in_axes is None:
            return self.fn
        jax = require_extra("jax", "bench")
        return jax.vmap(self.fn, in_axes=self.in_axes)


def _f32(rng: Any, *shape: int, low: float = 0.0, high: float = 1.0) -> Any:
    import numpy as np

    return np.asarray(rng.uniform(low, high, size=shape), dtype=np.float32)


def _batch(*values: float) -> tuple[Any, ...]:
    """Scalars as (1, 1) float32 arrays: a batch of one, as the vmapped experiments had them."""
    import numpy as np

    return tuple(np.full((1, 1), v, dtype=np.float32) for v in values)


def _roe3d_point(rng: Any) -> tuple[Any, ...]:
    import numpy as np

    rows = ([0.1], [0.1, 0.2, 0.3], [0.5], [0.2], [0.2, 0.2, 0.4], [0.6])  # AlphaGrad's state
    return tuple(np.asarray([r], dtype=np.float32) for r in rows)


def _perceptron_point(rng: Any) -> tuple[Any, ...]:
    import numpy as np

    return (np.ones((1, 4), np.float32), _f32(rng, 1, 4), _f32(rng, 8, 4, low=-1), _f32(rng, 8, low=-1),
            _f32(rng, 4, 8, low=-1), _f32(rng, 4, low=-1), 0.0, 1.0)


def _encoder_point(rng: Any) -> tuple[Any, ...]:
    import numpy as np

    weights = [_f32(rng, 4, 4, low=-1) for _ in range(6)]  # WQ1, WQ2, WK1, WK2, WV1, WV2
    return (np.ones((4, 4), np.float32), _f32(rng, 2, 4), *weights, _f32(rng, 4, 4, low=-1),
            _f32(rng, 2, 4, low=-1), _f32(rng, 4, low=-1), _f32(rng, 2, 1, low=-1), 0.0, 1.0, 0.0, 1.0)


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("RoeFlux_1d", roe_flux_1d, lambda rng: (0.01, 0.02, 0.02, 0.01, 0.03, 0.03)),
        Task("RoeFlux_3d", roe_flux_3d, _roe3d_point, in_axes=(0,) * 6),
        Task("RobotArm_6DOF", robot_arm_6dof, lambda rng: (0.02,) * 6),
        Task("HumanHeartDipole", human_heart_dipole, lambda rng: (0.15,) * 8),
        Task("PropaneCombustion", propane_combustion, lambda rng: (0.15,) * 11),
        Task("f", f, lambda rng: (_f32(rng, 4), _f32(rng, 2, 3), _f32(rng, 4, 4), _f32(rng, 4, 1))),
        Task("g", g, lambda rng: _batch(*[0.15] * 15), in_axes=(0,) * 15),
        Task("MLP", perceptron, _perceptron_point, in_axes=(0, 0) + (None,) * 6),
        Task("Transformer", encoder, _encoder_point),
    )
}


def task_jaxpr(name: str, seed: int = 0) -> Any:
    """The jaxpr of task ``name`` (a key of :data:`TASKS`) at its point, in float32 as graphax traced
    it: with ``jax_enable_x64`` on (as a float64 user or test sets it) some tasks trace to other
    equations (g's constants and conversions)."""
    import numpy as np

    jax = require_extra("jax", "bench")
    task = TASKS[name]
    with jax.enable_x64(False):
        return jax.make_jaxpr(task.traced_function())(*task.point(np.random.default_rng(seed)))


# =========================================================================== the graph graphax builds
# Edge kinds: graphax's sparsity types of an edge's Jacobian (an (out1, out2, in1, in2)
# tensor, scalars as 1×1, vectors as n×1).  The names say what the partial is:
#   dense             1   no structure
#   diag(a,b)         2…7 diagonal between index a and index b (1, 2 the output's, 3, 4 the input's)
#   diag_kron(a,b)    8, 9   diagonal (1,3) resp. (1,4) and a Kronecker δ on the other pair
#   kron_diag(a,b)   -8, -9  a Kronecker δ on (1,3) resp. (1,4) and a diagonal on the other pair
#   kron(a,b)        -2…-7  Kronecker δ (unit diagonal) between a and b; -6, -7 are copies
#   scaled_kron      10, -10 a constant times δ (1,3)(2,4) resp. (1,4)(2,3)
#   copy             -1   convert_element_type: the identity whatever the shapes
#   reshape          11   reshape, slice, concatenate: graphax treats it as a copy
#   none              0   no edge (stop_gradient)
# Only the integers are stored in the data; :data:`jacacc.problems.alphagrad.KIND_TIES` and :func:`~jacacc.problems.alphagrad.graphax_cost` give
# them their cost.
_ELEMENTWISE_UNARY = frozenset({
    "neg", "abs", "exp", "log", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "integer_pow", "sqrt", "rsqrt",
    "logistic", "erf", "custom_jvp_call",
    # JAX ≥ 0.4.36 writes jnp.square as its own primitive where graphax's JAX
    # (0.4.28) wrote integer_pow[y=2]: the same vertex, the same edge
    "square",
})
_ELEMENTWISE_BINARY = frozenset({"add", "atan2", "mul", "sub", "div", "add_any", "eq", "pow"})
_COPY_LIKE = frozenset({"broadcast_in_dim", "squeeze"})  # kind -6 if the shape is kept, else -7
_RESHAPE_LIKE = frozenset({"reshape", "slice", "dynamic_slice", "dynamic_update_slice", "concatenate"})


def _matrix_shape(aval: Any) -> tuple[int, int]:
    """graphax's view of a value: a scalar (or any size-1 array) is 1×1, a vector of n is n×1."""
    shape = tuple(int(d) for d in aval.shape)
    if len(shape) == 1 and shape[0] != 1:
        return shape[0], 1
    if aval.size == 1:
        return 1, 1
    if len(shape) != 2:
        raise NotImplementedError(f"graphax's graphs hold scalars, vectors and matrices, not shape {shape}")
    return shape  # type: ignore[return-value]


def _kind_shape(aval: Any) -> tuple[int, int]:
    """The shape graphax decides edge kinds on for sums and products: 0 marks a missing axis.

    A 1-D array is (n, 0) even for n = 1, while a 0-D or 1×1 one is (0, 0).
    """
    shape = tuple(int(d) for d in aval.shape)
    if len(shape) == 1:
        return shape[0], 0  # a vector, even of one element
    if aval.size == 1:
        return 0, 0
    return shape  # type: ignore[return-value]


def _unary_kind(shape: tuple[int, int]) -> int:
    return 1 if shape == (1, 1) else 6  # a scalar's partial is a number; else elementwise: diagonal


def _binary_kind(shape: tuple[int, int], other: tuple[int, int], out: tuple[int, int]) -> int:
    if shape == (1, 1):
        return 1  # a scalar operand, broadcast or not: dense
    if shape[1] == 1:  # column vector
        if out[1] == 1:
            return -2 if other == (1, 1) else 2
        return 2
    if shape[0] == 1:  # row vector
        if out[0] == 1:
            return -3 if other == (1, 1) else 3
        return 3
    # A matrix operand.  graphax's rule names a scalar partner 10 and then
    # overwrites it: a 1×1 partner is also "a column vector", so it ends as -8.
    if other[1] == 1:
        return -8
    if other[0] == 1:
        return 8
    return 6


def _dot_general_kinds(lhs: Any, rhs: Any, contracting: tuple[int, int]) -> tuple[int, int]:
    left, right = _kind_shape(lhs), _kind_shape(rhs)
    ldim, rdim = contracting
    if left[0] > 0 and left[1] == 0:  # lhs a vector
        if right[0] > 0 and right[1] == 0:
            return 1, 1  # dot product
        if right[0] == 1 and right[1] > 0:
            return {(0, 1): (-3, -2), (1, 0): (-2, -3)}.get((ldim, rdim), (1, 1))
        return -4, -3
    if right[0] > 0 and right[1] == 0:  # matrix times vector
        return -2, 1
    if right[0] > 0 and right[1] > 0:  # matrix times matrix
        return {(1, 0): (-2, -3), (1, 1): (-2, -5), (0, 0): (-4, -3), (0, 1): (-4, -5)}.get((ldim, rdim), (1, 1))
    return 1, 1


def _reduce_kind(primitive: str, operand: Any, out: Any, axes: tuple[int, ...]) -> int:
    source, target = _kind_shape(operand), _kind_shape(out)
    if not (source[0] > 0 and source[1] > 0) or target == (0, 0):
        return 1  # a vector summed, or everything summed: dense
    if primitive == "reduce_sum":
        if target[1] == 0:
            return -4 if axes[0] == 0 else -2
        return -3 if target[0] == 1 else 1
    if target[1] == 0:
        return 2
    return 3 if target[0] == 1 and target[1] > 1 else 1


def _transpose_kind(shape: tuple[int, int]) -> int:
    if shape == (1, 1):
        return 1
    if shape[1] == 1:
        return -4
    if shape[0] == 1:
        return -5
    return -7


def _is_softmax_max(eqn: Any, core: Any) -> bool:
    """``max(-inf, x)``: the identity that later JAX's ``jax.nn.softmax`` writes.

    Newer ``jax.nn.softmax`` takes its maximum with ``initial=-inf``, which
    adds this equation after the ``reduce_max``; the JAX graphax traced with
    (0.4.2x) wrote none, and graphax has no rule for ``max``.  Dropping it
    gives graphax's vertex counts for MLP (38) and Transformer (90).
    """
    if eqn.primitive.name != "max" or len(eqn.invars) != 2:
        return False
    first = eqn.invars[0]
    return isinstance(first, core.Literal) and float(first.val) == float("-inf")


def graphax_graph(closed_jaxpr: Any) -> dict[str, Any]:
    """The graph graphax's interpreter (AlphaGrad's ``make_graph``) builds from a jaxpr.

    Its rules, which fix the vertex count and the published operation counts:

    - the jaxpr's inputs are the inputs (``x1`` …); every equation is one
      vertex (``v1`` … in equation order), whether its partials are unit
      (``add``, ``neg``) or not, and whether it reads inputs at all (an
      equation on literals only, such as ``jnp.ones``, is a vertex without
      in-edges that elimination still visits);
    - literals make no edges; an equation makes an edge from each variable it
      reads, but an elementwise one-operand primitive from its first operand
      only; ``stop_gradient`` makes no edge;
    - each edge carries a kind (see the table above this function) and the
      4-tuple of its Jacobian's dimensions ``(out1, out2, in1, in2)``;
    - an output that no equation reads is an output vertex; an output that an
      equation reads stays an intermediate (it is eliminated like the others)
      and gets a new output vertex after all others, joined by a copy edge of
      kind 8 — graphax's copy slice.

    Returns ``{"inputs", "outputs", "vertices", "edges"}``: ``vertices`` as
    ``[id, primitive, [rows, cols]]`` in equation order, then the copy
    vertices; ``edges`` as ``[source, target, kind, [out1, out2, in1, in2]]``.
    """
    core = require_extra("jax.extend.core", "bench")
    jaxpr = closed_jaxpr.jaxpr
    if jaxpr.constvars:
        raise NotImplementedError("graphax's interpreter reads no closed-over constants")
    names: dict[Any, str] = {}
    for k, var in enumerate(jaxpr.invars, start=1):
        names[var] = f"x{k}"
    vertices: list[list[Any]] = []
    edges: dict[tuple[str, str], list[Any]] = {}

    def is_var(atom: Any) -> bool:
        return not isinstance(atom, core.Literal)

    def add_edge(source: Any, target: Any, kind: int, out_shape: tuple[int, int], in_shape: tuple[int, int]) -> None:
        # a second edge between the same pair (x*x) overwrites the first, as in graphax
        edges[names[source], names[target]] = [names[source], names[target], kind, [*out_shape, *in_shape]]

    read: set[Any] = set()
    alias: dict[Any, Any] = {}  # an equation dropped as the identity → the value it passes on
    k = 0
    for eqn in jaxpr.eqns:
        if _is_softmax_max(eqn, core):
            alias[eqn.outvars[0]] = alias.get(eqn.invars[1], eqn.invars[1])
            continue
        k += 1
        eqn = eqn.replace(invars=[alias.get(a, a) if is_var(a) else a for a in eqn.invars])
        if len(eqn.outvars) != 1:
            raise NotImplementedError(f"equation {k} ({eqn.primitive.name}) has {len(eqn.outvars)} outputs")
        out = eqn.outvars[0]
        names[out] = f"v{k}"
        name = eqn.primitive.name
        out_shape = _matrix_shape(out.aval)
        vertices.append([f"v{k}", name, list(out_shape)])
        operands = [a for a in eqn.invars if is_var(a)]
        read.update(operands)
        if not operands or name in ("iota", "stop_gradient"):
            continue
        if name in _ELEMENTWISE_UNARY:
            first = eqn.invars[0]
            shape = _matrix_shape(first.aval)
            add_edge(first, out, _unary_kind(shape), out_shape, shape)
        elif name in _ELEMENTWISE_BINARY:
            for a in operands:
                other = eqn.invars[1 - eqn.invars.index(a)]
                shape = _matrix_shape(a.aval)
                add_edge(a, out, _binary_kind(shape, _matrix_shape(other.aval), out_shape), out_shape, shape)
        elif name == "dot_general":
            (lc, rc), _ = eqn.params["dimension_numbers"]
            kinds = _dot_general_kinds(eqn.invars[0].aval, eqn.invars[1].aval, (lc[0], rc[0]))
            for a, kind in zip(eqn.invars, kinds, strict=True):
                if is_var(a):
                    add_edge(a, out, kind, out_shape, _matrix_shape(a.aval))
        elif name in ("reduce_sum", "reduce_max", "reduce_min"):
            a = operands[0]
            kind = _reduce_kind(name, a.aval, out.aval, tuple(eqn.params["axes"]))
            add_edge(a, out, kind, out_shape, _matrix_shape(a.aval))
        elif name == "transpose":
            a = operands[0]
            add_edge(a, out, _transpose_kind(_matrix_shape(a.aval)), out_shape, _matrix_shape(a.aval))
        elif name in _COPY_LIKE:
            a = operands[0]
            shape = _matrix_shape(a.aval)
            add_edge(a, out, -6 if shape == out_shape else -7, out_shape, shape)
        elif name in _RESHAPE_LIKE:
            for a in operands if name == "concatenate" else operands[:1]:
                # graphax gives every concatenated piece the first piece's shape
                add_edge(a, out, 11, out_shape, _matrix_shape(operands[0].aval))
        elif name == "convert_element_type":
            a = operands[0]
            add_edge(a, out, -1, out_shape, _matrix_shape(a.aval))
        else:
            raise NotImplementedError(f"graphax has no vertex rule for the primitive {name!r}")

    outputs: list[str] = []
    for var in jaxpr.outvars:
        if not is_var(var):
            continue
        var = alias.get(var, var)
        if var in read:
            # read by an equation: a copy vertex becomes the output
            copy = f"v{len(vertices) + 1}"
            shape = _matrix_shape(var.aval)
            vertices.append([copy, "copy", list(shape)])
            edges[names[var], copy] = [names[var], copy, 8, [*shape, *shape]]
            outputs.append(copy)
        else:
            outputs.append(names[var])
    return {
        "inputs": [names[v] for v in jaxpr.invars],
        "outputs": outputs,
        "vertices": vertices,
        "edges": list(edges.values()),
    }
