"""Long work says what it is doing (jacacc.progress.slow_work): silent when quick or when stderr is
no terminal; past the delay each stage is announced, then the end with its seconds — in a compile
of a scalar kernel and in the first call of a tensor transformation."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

import jacacc
from jacacc import progress


def test_quick_work_and_non_terminals_stay_silent():
    out = io.StringIO()
    with progress.slow_work("quick", delay=10.0, enabled=True, file=out) as work:
        work.stage("a stage")
    assert out.getvalue() == ""
    with progress.slow_work("not a terminal", delay=0.0, file=out) as work:  # enabled=None: a StringIO is no tty
        time.sleep(0.05)
        work.stage("a stage")
    assert out.getvalue() == ""


def test_slow_work_announces_its_stages_and_its_end():
    out = io.StringIO()
    announced = threading.Event()
    with progress.slow_work("hessian of f", delay=0.0, enabled=True, file=out) as work:
        for _ in range(200):  # the timer thread announces; wait for it rather than for a fixed time
            if work.announced:
                announced.set()
                break
            time.sleep(0.01)
        work.stage("planning")
        work.stage("compiling 3 kernels")
    lines = out.getvalue().splitlines()
    assert announced.is_set()
    assert lines[0] == "jacacc: hessian of f …"
    assert lines[1:3] == ["jacacc: hessian of f: planning …", "jacacc: hessian of f: compiling 3 kernels …"]
    assert lines[3].startswith("jacacc: hessian of f: done in ") and lines[3].endswith(" s")


@pytest.fixture
def loud(monkeypatch):
    """Every slow_work shows at once (a delay of 0 announces synchronously), on the captured stderr."""
    monkeypatch.setattr(progress, "SLOW_WORK_DELAY", 0.0)
    monkeypatch.setattr(progress, "shows_progress", lambda enabled, stream=None: True)


def test_a_kernel_compile_says_what_it_compiles(loud, capsys):
    f = jacacc.trace(lambda x: [np.sin(x[0]) * x[1]], 2)
    kernel = jacacc.compile(f, backend="numpy", backend_options={"tier": "table"}, cache=False)
    kernel.compile()
    err = capsys.readouterr().err
    assert "jacacc: compiling the numpy kernel (" in err and "instruction table" in err


def test_a_first_tensor_call_says_tracing_and_planning(loud, capsys):
    import jacacc.tensor as jt

    def energy(x):
        return np.sum(np.tanh(x) ** 2)

    jt.hessian(energy)(np.linspace(-1.0, 1.0, 5))
    err = capsys.readouterr().err
    assert "jacacc: hessian of energy" in err
    assert "tracing …" in err and "deriving and planning (1 arguments) …" in err and "done in" in err
    assert err.index("tracing …") < err.index("deriving and planning")
