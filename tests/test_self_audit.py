"""make_private's one-run self-audit: a correct run stays below its claim; σ/4 and a loss that reads
the whole dataset are flagged in one run. Seeded noise, batches and canaries (tests only: every
result says not private)."""

import dataclasses
import json

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import dpnc
from dpnc.privacy.calibrate import noise_multiplier
from dpnc.self_audit import SelfAudit, SelfAuditResult, accuracy_cost

# the canary's slope: far above the clip, so its clipped contribution is exactly ±C along its own axis
BIG = 1e4
DELTA = 1e-5


def _run(optimizer, *, m, n, B, T, epsilon=1.0, factor=1.0, loss="correct", seed=0, **measured):
    """One self-audited run of a linear model whose m weights are the canaries' own coordinates; the
    n other examples have feature 0 (loss 0), so each release is noise plus the canaries drawn
    in."""
    model = nn.Linear(m, 1, bias=False)
    nn.init.zeros_(model.weight)
    X, y = torch.zeros(n, m), torch.zeros(n, dtype=torch.long)
    audit = SelfAudit(
        m,
        row=lambda k, sign: (
            sign * nn.functional.one_hot(torch.tensor(k), m).float(),
            torch.tensor(0),
        ),
        coordinates=range(m),
        testing_seed=seed,
    )
    options = dict(
        data=TensorDataset(X, y),
        n=n,
        optimizer=optimizer,
        steps=T,
        batch_size=B,
        lr=1e-3,
        clip=1.0,
        testing_seed=seed + 1,
        audit=audit,
        accountant="rdp",
    )  # RDP: calibrates in milliseconds
    if optimizer == "dpzero":
        options["seed"] = (
            seed + 2
        )  # the public direction seed: fixed, so the whole run is reproducible
    if factor == 1.0:
        options.update(target_epsilon=epsilon, delta=DELTA)
    else:  # BROKEN ON PURPOSE: σ/factor in the real step, the claim still the target's
        options.update(noise_multiplier=noise_multiplier(epsilon, DELTA, B / (n + m), T) / factor)
    opt, loader, accountant = dpnc.make_private(model, **options)
    everything = torch.stack(
        [row[0] for row in loader.dataset]
    )  # what a dataset-reading loss reads

    def per_example(xb, yb):
        losses = BIG * model(xb).squeeze(-1)
        if (
            loss == "reads-dataset"
        ):  # BROKEN ON PURPOSE: adds a term of every example, canaries included
            losses = losses + BIG * model(everything).squeeze(-1).mean()
        return losses

    for _ in loader:
        opt.step(per_example)
    return audit.result(delta=DELTA, claimed_epsilon=epsilon, **measured), accountant


# σ/4 at this setting: bounds 1.43-1.75 at seeds 0-4 (flagged 5 of 5); the correct run's 0-0.09
FIRST = dict(optimizer="dp-sgd", m=500, n=500, B=50, T=100)
ZEROTH = dict(optimizer="dpzero", m=100, n=300, B=20, T=300)


@pytest.mark.parametrize("setting", [FIRST, ZEROTH], ids=["dp-sgd", "dpzero"])
def test_a_correct_run_stays_below_its_claim(setting):
    result, accountant = _run(**setting)
    assert accountant.get_epsilon(DELTA) == pytest.approx(1.0, rel=1e-2)
    assert result.epsilon_lower_bound <= 1.0 and not result.flagged
    assert 0 < result.best_possible and result.guesses <= result.m == setting["m"]
    assert not result.private and "NOT PRIVATE" in str(result)


def test_sigma_over_four_is_flagged_in_one_run():
    result, _ = _run(**FIRST, factor=4.0)
    assert result.flagged and result.epsilon_lower_bound > 1.0


# dpzero at T = 800: flagged at each of seeds 0-3 (bounds 1.45-1.84); at T = 300 only at 2 of 4
# (0.63-1.25): one scalar per step carries every canary, so the zeroth-order audit needs more steps
# (docs/audit.md)
@pytest.mark.parametrize(
    "setting", [dict(FIRST, n=100, T=30), dict(ZEROTH, T=800)], ids=["dp-sgd", "dpzero"]
)
def test_a_loss_that_reads_the_whole_dataset_is_flagged_in_one_run(setting):
    result, _ = _run(**setting, loss="reads-dataset")
    assert result.flagged and result.epsilon_lower_bound > 1.0


def test_the_ledger_counts_every_canary_and_the_summary_names_none():
    _, accountant = _run(**dict(FIRST, T=2))
    assert accountant.ledger[-1].release.sampling.q == pytest.approx(
        50 / (500 + 500)
    )  # n + m, a public bound
    names = {f.name for f in dataclasses.fields(SelfAuditResult)}
    assert names == {
        "epsilon_lower_bound",
        "claimed_epsilon",
        "flagged",
        "best_possible",
        "m",
        "guesses",
        "correct",
        "delta",
        "confidence",
        "private",
        "note",
        "accuracy",
        "canary_free_accuracy",
        "accuracy_cost",
        "accuracy_note",
    }


def test_refusals():
    model = nn.Linear(2, 1, bias=False)
    data = TensorDataset(torch.zeros(4, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="audit must be a dpnc.self_audit.SelfAudit"):
        dpnc.make_private(
            model,
            data=data,
            n=4,
            steps=1,
            batch_size=2,
            lr=0.1,
            clip=1.0,
            noise_multiplier=1.0,
            audit=10,
        )
    audit = SelfAudit(2, row=lambda k, s: (torch.zeros(2), torch.tensor(0.0)), coordinates=[0, 1])
    with pytest.raises(ValueError, match="private optimizer"):
        dpnc.make_private(
            model, data=data, optimizer="mezo", steps=1, batch_size=2, lr=0.1, audit=audit
        )
    with pytest.raises(ValueError, match="has not watched a run"):
        SelfAudit(2, row=lambda k, s: None, coordinates=[0, 1]).result(delta=DELTA)
    with pytest.raises(ValueError, match="coordinates must hold at least m = 3"):
        SelfAudit(3, row=lambda k, s: None, coordinates=[0, 1])
    with pytest.raises(ValueError, match="m must be an integer >= 2"):
        SelfAudit(1, row=lambda k, s: None, coordinates=[0, 1])


def test_the_cli_prints_a_saved_self_audit(tmp_path):
    from typer.testing import CliRunner

    from dpnc.cli import app

    result, _ = _run(**dict(FIRST, T=5))
    result.save(tmp_path)
    assert SelfAuditResult.load(tmp_path) == result
    out = CliRunner().invoke(app, ["audit", "--one-run", str(tmp_path)])
    assert out.exit_code == 0 and out.output.strip() == str(result)
    # one item a line, wrapped for a terminal (before: a single line of some 600 characters)
    lines = out.output.strip().splitlines()
    assert max(map(len, lines)) <= 100, lines
    items = " ".join(line.strip() if line.startswith("    ") else "\n" + line for line in lines)
    bound, counts, cost, note = items.strip().split("\n")
    assert bound.startswith("one-run audit (500 canaries") and "ε ≥" in bound
    assert bound.strip().endswith(("no violation found", "FLAGGED: the run broke its claim"))
    assert "guesses correct" in counts and "accuracy" in cost and note.startswith("note: ")
    as_json = CliRunner().invoke(app, ["audit", "--one-run", str(tmp_path), "--json"])
    assert json.loads(as_json.output) == result.to_dict()
    missing = CliRunner().invoke(app, ["audit", "--one-run", str(tmp_path / "none")])
    assert missing.exit_code != 0 and "does not exist" in " ".join(
        missing.output.replace("│", " ").split()
    )


def test_watch_reads_the_declared_optimizer_and_release_and_refuses_the_rest():
    from dpnc.privacy import Accountant
    from dpnc.sampling import ShuffleSampler
    from dpnc.tier import DPZeroOptimizer

    model = nn.Linear(2, 1, bias=False).eval()
    audit = SelfAudit(2, row=lambda k, s: None, coordinates=[0, 1])
    with pytest.raises(ValueError, match=r"watches dpnc.s DPZero or DPOptimizer \(.*\); got a SGD"):
        audit.watch(torch.optim.SGD(model.parameters(), lr=0.1))
    fixed_size = DPZeroOptimizer(
        model.parameters(),
        lr=0.1,
        clip=1.0,
        noise_multiplier=1.0,
        sampler=ShuffleSampler(4, 2),
        accountant=Accountant("replace-one"),
        model=model,
        data=(torch.zeros(4, 2), torch.zeros(4)),
    )
    with pytest.raises(
        ValueError, match=r"Poisson-subsampled Gaussian.*got Sampled\(sampling=FixedSize"
    ):
        audit.watch(fixed_size)


def test_the_accuracy_cost_is_recorded_only_as_measured(tmp_path):
    """No twin run: the cost is None and the note says it was not measured; a twin's accuracy: their
    difference."""
    result, _ = _run(**dict(FIRST, T=2))
    assert result.accuracy is result.accuracy_cost is None and result.accuracy_note.startswith(
        "not measured"
    )
    alone, _ = _run(**dict(FIRST, T=2), accuracy=0.8)
    assert (
        alone.accuracy == 0.8
        and alone.accuracy_cost is None
        and "no canary-free twin" in alone.accuracy_note
    )
    paired, _ = _run(**dict(FIRST, T=2), accuracy=0.75, canary_free_accuracy=0.8)
    assert (
        paired.accuracy_cost == pytest.approx(0.05) and "one pair of runs" in paired.accuracy_note
    )
    assert "cost +0.0500" in str(paired)
    paired.save(tmp_path)
    assert SelfAuditResult.load(tmp_path) == paired
    with pytest.raises(ValueError, match="canary_free_accuracy needs accuracy"):
        accuracy_cost(None, 0.8)
    with pytest.raises(ValueError, match=r"accuracy must be an accuracy in \[0, 1\]"):
        accuracy_cost(80.0, None)
