"""`make demo` runs the built-in example end to end and verifies every schedule."""

from __future__ import annotations

from jacacc.demo import main


def test_demo_verifies_every_schedule(capsys):
    assert main() == 0
    out = capsys.readouterr().out
    assert "all schedules verified" in out and "FAILED" not in out
    assert "RoeFlux_1d" in out and "markowitz" in out and "face" in out
