import csv
import dataclasses
import json
import math

import pytest
from matplotlib.image import imread

from dpnc.experiments import dpzero_synthetic as exp
from dpnc.privacy import NoiseSource

TINY = exp.SyntheticConfig(dims=(10, 40), steps=(10, 40), stepsizes=(0.01, 0.1, 1.0), clips=(1.0, 10.0), n=500)


def test_tiny_run_writes_every_output(tmp_path):
    result = exp.run_experiment(TINY, progress=False)
    assert len(result["rows"]) == 3 * 2 * 3 * 2 * 3 * 2  # hessians·dims·methods·T·stepsizes·clips
    for p in result["privacy"]:
        # The paper's σ certifies exactly ε = 2 by advanced composition; exact accounting says less.
        assert p["epsilon_paper"] == pytest.approx(2.0, rel=1e-9)
        assert p["epsilon_pld"] <= p["epsilon_rdp"] <= 2.0 and p["private"]
    paths = exp.write_outputs(result, tmp_path, "dpnc reproduce dpzero-synthetic (test)")
    assert {p.name for p in paths} == {"results.csv", "privacy.csv", "fig1_test_grad_norm.png",
                                       "fig2_train_grad_norm.png", "fig3_loss.png", "result.json", "summary.md"}
    for name, rows in (("results.csv", result["rows"]), ("privacy.csv", result["privacy"])):
        with (tmp_path / name).open() as f:   # every row, every column, as the run made it
            assert list(csv.DictReader(f)) == [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]
    # the whole result, compared as JSON text (NaN-safe)
    assert json.dumps(json.loads((tmp_path / "result.json").read_text())) == json.dumps(result)
    for name, panel_rows in (("fig1_test_grad_norm.png", 1), ("fig2_train_grad_norm.png", 1), ("fig3_loss.png", 2)):
        # one panel per effective rank (3) across, one per metric down: 4.2 × 3.4 inches each at 120 dpi
        assert imread(tmp_path / name).shape[:2] == (round(3.4 * panel_rows * 120), round(4.2 * 3 * 120))
    summary = (tmp_path / "summary.md").read_text()
    assert "DPGD-0th is always worst" in summary and "| T | σ/Δ |" in summary


def test_grid_runs_are_independent_of_batching():
    """A grid point run inside the batch equals the same point run alone (they share the public seed).

    The noise draws differ between the two runs, so ε is made huge to make the noise negligible.
    """
    problem = exp.Quadratic.synthetic(15, "sqrt", n=300)
    noiseless = dataclasses.replace(TINY, epsilon=1e12, stepsizes=(0.01, 0.1), clips=(1.0, 10.0))
    batch, _ = exp.run_grid(problem, "DPZero", 20, noiseless, NoiseSource.for_testing(0))
    alone, _ = exp.run_grid(problem, "DPZero", 20, dataclasses.replace(noiseless, stepsizes=(0.1,), clips=(10.0,)),
                            NoiseSource.for_testing(1))
    match = [r for r in batch if r["stepsize"] == 0.1 and r["C"] == 10.0]
    assert len(batch) == 4 and len(match) == 1 and len(alone) == 1
    assert match[0]["test_grad_norm"] == pytest.approx(alone[0]["test_grad_norm"], rel=1e-9)
    assert match[0]["test_grad_norm"] < problem.gradient_norm(problem.train[0] * 0, "test")


def test_effective_rank_not_dimension_drives_dpzero():
    """Spec §5.13 on a small instance: DPGD-0th grows with d in all three modes, and DPZero's growth
    in d is much smaller with r = log d than with r = d."""
    config = exp.SyntheticConfig(dims=(20, 200), steps=(40, 160), stepsizes=(0.03, 0.1, 0.3, 1.0),
                                 clips=(1.0, 3.0, 10.0), n=5_000)
    best = exp.best_over_grid(exp.run_experiment(config, progress=False)["rows"])
    g = {k: v["test_grad_norm"] for k, v in best.items()}
    for h in exp.HESSIANS:
        assert g[(h, 200, "DPGD-0th")] > g[(h, 20, "DPGD-0th")]
    growth = {h: g[(h, 200, "DPZero")] / g[(h, 20, "DPZero")] for h in ("identity", "inverse")}
    assert growth["inverse"] < growth["identity"] / 3


@pytest.mark.parametrize("field, value, message", [
    ("dims", (20, 0), r"dims must be an integer >= 1; got 0"),
    ("steps", (), r"steps must be non-empty; got \(\)"),
    ("stepsizes", (0.1, math.nan), r"stepsizes must be a finite number >= 0; got nan"),
    ("clips", (-1.0,), r"clips must be a finite number > 0; got -1.0"),
    ("clips", (math.inf,), r"clips must be a finite number > 0; got inf"),
    ("epsilon", 0.0, r"epsilon must be a finite number > 0; got 0.0"),
    ("delta", 1.0, r"delta must be in the open interval \(0, 1\); got 1.0"),
    ("direction", "cube", r"direction must be among \('gaussian', 'sphere'\); got 'cube'"),
])
def test_config_rejects_bad_values_at_construction(field, value, message):
    with pytest.raises(ValueError, match=message):
        exp.SyntheticConfig(**{field: value})


def test_config_rejects_unknown_names():
    with pytest.raises(ValueError, match=r"hessians must be among \('identity', 'sqrt', 'inverse'\); got 'diag'"):
        exp.SyntheticConfig(hessians=("diag",))
    with pytest.raises(ValueError, match="methods must be among"):
        exp.SyntheticConfig(methods=("SGD",))
