"""Functions that apply each registered operator of jacacc.tensor, with arguments where its
derivative rules are defined (well-conditioned matrices, distinct eigenvalues and singular
values): the samples the rule checks run over (jacacc.tensor.rule_checks)."""

from __future__ import annotations

import numpy as np
import scipy.special
import scipy.stats

import jacacc.linalg as jl
from jacacc.tensor.arrays import BasicKey, IndexArray
from jacacc.tensor.operators import apply_operator
from jacacc.tensor.trace import Traced, _node

_rng = np.random.default_rng(7)
_A = _rng.normal(size=(4, 4)) + 4 * np.eye(4)
_B = _rng.normal(size=(4, 3))
_S = _A @ _A.T
_TALL = _rng.normal(size=(5, 3))
_WIDE = _rng.normal(size=(3, 5))
_V = _rng.normal(size=(6,))
_BATCH = _rng.normal(size=(2, 4, 4)) + 4 * np.eye(4)


def _applied(name, x, *rest, **options):
    return Traced(apply_operator(name, [_node(x), *rest], **options)[0])


def _sum_outputs(*outputs):
    """One scalar-free combination reading every output (so every output gets a cotangent)."""
    return sum(np.sum(o * np.cos(np.arange(np.size(o))).reshape(np.shape(o))) for o in outputs)


#: label -> (function, arguments, operators it applies)
SAMPLES = {
    "trsm": (lambda A, B: jl.trsm(A, B, alpha=2.0, transpose=True, rightside=False, lower=True), (_A, _B),
             {"trsm"}),
    "trsm right upper": (lambda A, B: jl.trsm(A, B.T, rightside=True, lower=False), (_A, _B), {"trsm"}),
    "potrf": (lambda S: jl.potrf(S), (_S,), {"potrf"}),
    "potrf upper, batched": (lambda A: jl.potrf(A @ np.swapaxes(A, -1, -2), lower=False), (_BATCH,), {"potrf"}),
    "potri": (lambda S: jl.potri(jl.potrf(S)), (_S,), {"potrf", "potri"}),
    "gesv": (lambda A, B: jl.gesv(A, B), (_A, _B), {"getrs"}),
    "gesv transposed": (lambda A, B: jl.gesv(A, B, transpose=True), (_A, _B), {"getrs"}),
    "inverse": (lambda A: jl.inverse(A), (_A,), {"getri"}),
    "slogdet": (lambda A: jl.slogdet(A)[1], (_BATCH,), {"slogdet_lu"}),
    "gelqf": (lambda A: _sum_outputs(*jl.gelqf(A)), (_WIDE,), {"gelqf"}),
    "syevd": (lambda S: _sum_outputs(*jl.syevd(S)), (_S,), {"syevd"}),
    "qr": (lambda A: _sum_outputs(*np.linalg.qr(A)), (_TALL,), {"qr"}),
    "svd tall": (lambda A: _sum_outputs(*np.linalg.svd(A, full_matrices=False)), (_TALL,), {"gesdd"}),
    "svd wide": (lambda A: _sum_outputs(*np.linalg.svd(A, full_matrices=False)), (_WIDE,), {"gesdd"}),
    "pinv": (lambda A: np.linalg.pinv(A), (_WIDE,), {"pinv"}),
    "diagonals and triangles": (lambda A: jl.maketrian(jl.extracttrian(A, offset=-1), offset=1)
                                + jl.makediag(jl.extractdiag(A, offset=1), offset=1),
                                (_A,), {"extracttrian", "maketrian", "extractdiag", "makediag"}),
    "indexing": (lambda v: v.reshape(2, 3)[:, 1:] * 2.0, (_V,), {"reshape", "index"}),
    "index scatter": (lambda v: _applied("index_scatter", v, key=BasicKey((("s", 1, 2, 3),)), shape=(7,)), (_V[:3],),
                      {"index_scatter"}),
    "gather and scatter-add": (lambda v: _applied("scatter_add", v[[0, 2, 2, 5]], index=IndexArray([1, 1, 0, 3]),
                                                  shape=(4,)), (_V,), {"gather", "scatter_add"}),
    "cumsum": (lambda v: np.cumsum(v) + np.cumsum(v[::-1]), (_V,), {"cumsum", "index"}),
    "pad and concatenate": (lambda v: np.concatenate([np.pad(v, (1, 2)), v[:2] ** 2]), (_V,),
                            {"pad", "concatenate", "index"}),
    "sort": (lambda v: np.sort(v) * np.arange(6.0), (_V,), {"take_along"}),
    "put along": (lambda v: _applied("put_along", v, apply_operator("argsort", [_node(v)], axis=0)[0], axis=0), (_V,),
                  {"put_along"}),
    "computed indices": (lambda v: _applied("scatter_dynamic", np.sin(v)[np.floor(np.abs(v) * 2).astype(int) % 6],
                                            _node(np.floor(np.abs(v[:6]) * 1.5).astype(int) % 4), shape=(4,)),
                         (_V,), {"take_dynamic", "scatter_dynamic"}),
    "polygamma": (lambda v: scipy.special.gammaln(v * v + 1) + scipy.special.digamma(v * v + 1), (_V,),
                  {"polygamma"}),
    "scipy special": (lambda v: scipy.special.gamma(v * v + 0.5) + scipy.special.jv(1.5, v * v + 0.5), (_V,),
                      {"scipy_special"}),
    "scipy stats cdf": (lambda v: scipy.stats.gamma.cdf(v * v + 0.5, 2.0, loc=0.1, scale=1.5), (_V,),
                        {"scipy_stats_cdf"}),
}
