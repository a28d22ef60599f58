"""A tensor language with Iverson brackets and purely functional derivatives (paper 001).

Programs are built in Python from ``var``, ``index``, ``gen`` (⊞), ``sum`` (Σ),
``bracket`` (the Iverson bracket [p]), affine reads ``x[i + 2*j - 1]``, scalar
arithmetic, black-box functions, ``let`` and pairs
(:mod:`~jacacc.iverson.syntax`).  A reference interpreter evaluates them
(:mod:`~jacacc.iverson.interpret`), :func:`compile` generates NumPy or Numba
code, :func:`cost` counts their additions, multiplications and black-box calls
under the paper's sparsity-aware model (§4.3), :func:`normalize` brings them
to tensor SSA form (§5), and :func:`forward`, :func:`adjoint` and :func:`grad`
differentiate them into programs of the same language without mutation (§6),
which :func:`simplify` cleans (sums removed through bracket equalities).

Examples
--------
>>> import numpy as np
>>> import jacacc.iverson as iv
>>> A = iv.var("A", (3, 3)); i = iv.index("i")
>>> trace = iv.sum(i, 3, A[i, i])
>>> iv.evaluate(trace, A=np.arange(9.0).reshape(3, 3))
12.0
>>> g = iv.grad(trace, A)
>>> iv.evaluate(g, A=np.zeros((3, 3)))                  # diag: the identity
array([[1., 0., 0.],
       [0., 1., 0.],
       [0., 0., 1.]])
>>> iv.cost(trace), iv.cost(g)
({'add': 2, 'mul': 0, 'nonlinear': 0}, {'add': 0, 'mul': 0, 'nonlinear': 0})
"""

from jacacc.iverson.bridge import Translation, einsum, from_tensor, print_tensor
from jacacc.iverson.check import check
from jacacc.iverson.codegen import compile
from jacacc.iverson.cost import cost
from jacacc.iverson.derive import adjoint, forward, grad
from jacacc.iverson.interpret import count_operations, evaluate
from jacacc.iverson.normalize import gen_pushout, let_lift, normalize, pair_eliminate, tensor_ssa
from jacacc.iverson.simplify import simplify
from jacacc.iverson.syntax import (
    Expr,
    IvTypeError,
    PairType,
    bracket,
    const,
    cos,
    exp,
    func,
    gen,
    index,
    let,
    log,
    pair,
    recip,
    relu,
    same,
    sin,
    sqrt,
    sum,
    tanh,
    var,
)

__all__ = [
    "Expr", "IvTypeError", "PairType", "Translation", "adjoint", "bracket", "check", "compile", "const", "cos", "cost", "count_operations",
    "einsum", "evaluate", "exp", "from_tensor", "forward", "func", "gen", "gen_pushout", "grad", "index", "let", "let_lift", "log", "normalize",
    "pair", "pair_eliminate", "print_tensor", "recip", "relu", "same", "simplify", "sin", "sqrt", "sum", "tanh", "tensor_ssa", "var",
]
