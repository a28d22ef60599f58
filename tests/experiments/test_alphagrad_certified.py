"""paper_reproductions/alphagrad_certified.py re-verifies the committed certificates; the certificate
script's command line (the search itself runs in experiments/alphagrad_certify.py, minutes)."""

from __future__ import annotations

import importlib.util

import pytest
from experiment_scripts import REPO, load_experiment

REPRODUCTION = REPO / "paper_reproductions" / "alphagrad_certified.py"


def test_reproduction_script(capsys):
    spec = importlib.util.spec_from_file_location("alphagrad_certified", REPRODUCTION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == 0
    table = capsys.readouterr().out
    for task in ("RoeFlux_1d", "RobotArm_6DOF", "HumanHeartDipole", "PropaneCombustion", "g"):
        assert f"| {task} |" in table
    assert table.count("| optimal |") >= 3


def test_certify_script_refuses_an_unknown_task():
    script = load_experiment("alphagrad_certify")
    with pytest.raises(SystemExit):
        script.main(["--tasks", "MLP"])
