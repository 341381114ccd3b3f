"""dpnc.tier.base: the model checks (every reason, in the model's order), the argument checks, step
hooks, the note on an error raised after a release, and each step's forked global generator."""

import math

import pytest
import torch
from torch import nn

from dpnc.privacy import Accountant, Gaussian
from dpnc.tier.base import (
    StepHooks,
    check_arguments,
    raise_after_release,
    require_ready,
    step_randomness,
    validate_model,
)


def test_validate_model_lists_each_problem_in_the_models_order():
    batch_stats = nn.BatchNorm1d(8, track_running_stats=False)
    model = nn.Sequential(nn.Linear(4, 8), batch_stats, nn.Embedding(5, 8, max_norm=1.0))
    model.eval()  # BatchNorm without running statistics mixes examples even in eval mode
    problems = validate_model(model)
    assert [p.partition(":")[0] for p in problems] == ["1", "2"]
    assert "without running statistics" in problems[0] and "dpnc.fix_model" in problems[0]
    assert "max_norm" in problems[1]


def test_dropout_is_a_problem_only_for_zeroth_order_steps():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.2)).train()
    assert validate_model(model) == ["1: dropout (p=0.2) is active; call model.eval()"]
    assert validate_model(model, dropout=False) == []
    assert validate_model(nn.Dropout(0.0).train()) == []  # p = 0 drops nothing
    with pytest.raises(ValueError, match=r"not ready for zeroth-order steps:\n  1: dropout"):
        require_ready(model)
    require_ready(model, dropout=False)
    with pytest.raises(ValueError, match="not ready for per-example gradients"):
        require_ready(nn.BatchNorm1d(3).train(), dropout=False)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"lr": -1.0}, r"lr must be >= 0 and finite; got -1.0"),
        ({"smoothing": math.inf}, r"smoothing must be > 0 and finite"),
        ({"clip": 0.0}, r"clip must be > 0"),
        ({"noise_multiplier": math.nan}, r"noise_multiplier must be >= 0 and finite"),
        ({"clip": math.inf, "noise_multiplier": 1.0}, r"clip must be finite when noise"),
        # a missing value gets its option's words (what it is for, how to choose it), not the rule
        ({"clip": None}, r"clip must be the clipping threshold C > 0 .*; got None"),
        ({"lr": None}, r"lr must be the step size, a number >= 0 .*; got None"),
    ],
)
def test_check_arguments_names_what_it_refuses(arguments, message):
    with pytest.raises(ValueError, match=message):
        check_arguments(**arguments)


def test_check_arguments_takes_an_infinite_clip_without_noise():
    check_arguments(lr=0.0, smoothing=1e-3, clip=math.inf, noise_multiplier=0.0)


class Hooked(StepHooks):
    """The smallest user of the mixin: an optimizer that reports one step."""

    def __init__(self) -> None:
        self.accountant = Accountant()

    def step_release(self):
        return Gaussian(1.0, 2.0)


def test_step_hooks_run_in_order_until_removed_and_a_charge_records_the_steps_release():
    optimizer, calls = Hooked(), []
    first = optimizer.register_step_hook(lambda opt, info: calls.append(("first", info)))
    optimizer.register_step_hook(lambda opt, info: calls.append(("second", info)))
    optimizer._report_step("info")
    first.remove()
    optimizer._report_step("again")
    assert calls == [("first", "info"), ("second", "info"), ("second", "again")]
    with pytest.raises(ValueError, match="hook must be callable"):
        optimizer.register_step_hook("print")
    optimizer._charge()
    assert [(e.release, e.count) for e in optimizer.accountant.ledger] == [(Gaussian(1.0, 2.0), 1)]


def test_an_error_raised_after_a_release_says_so():
    with pytest.raises(RuntimeError, match="bad row") as raised:
        raise_after_release(RuntimeError("bad row"))
    assert raised.value.dpnc_released is True
    assert any("this step still released" in note for note in raised.value.__notes__)


def test_a_steps_draws_come_from_a_forked_generator():
    torch.manual_seed(123)  # test-only: a known global state to compare with
    before = torch.get_rng_state()
    with step_randomness(False, 7, torch.device("cpu")):
        testing = torch.rand(3)
    with step_randomness(False, 7, torch.device("cpu")):
        again = torch.rand(3)
    with step_randomness(True, 7, torch.device("cpu")):
        secret = torch.rand(3)
    assert torch.equal(torch.get_rng_state(), before)  # the global generator did not move
    assert torch.equal(testing, again) and not torch.equal(testing, secret)
    assert torch.equal(testing, torch.rand(3, generator=torch.Generator().manual_seed(7)))
