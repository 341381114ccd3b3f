"""Opacus's habits, each answered with dpnc's equivalent instead of a bare TypeError."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import dpnc

DATA = TensorDataset(torch.randn(20, 3), torch.randn(20))
OPTIONS = dict(
    n=20, optimizer="dp-sgd", target_epsilon=1.0, delta=1e-5, steps=2, batch_size=4, lr=0.1
)


@pytest.mark.parametrize(
    "name,value,answer",
    [
        ("target_delta", 1e-5, "target_delta -> delta="),
        ("max_grad_norm", 1.0, "max_grad_norm -> clip="),
        ("sample_rate", 0.1, "sample_rate -> batch_size="),
        ("poisson_sampling", True, "secret Poisson batches"),
    ],
)
def test_opacus_names_get_dpncs_equivalent(name, value, answer):
    with pytest.raises(TypeError, match=f"unexpected keyword arguments \\['{name}'\\].*{answer}"):
        dpnc.make_private(nn.Linear(3, 1), data=DATA, clip=1.0, **OPTIONS, **{name: value})


def test_an_unknown_name_lists_the_options_and_says_what_make_private_returns():
    with pytest.raises(
        TypeError,
        match=r"\['lrr'\] \(the optimizers' options are lr, smoothing, .*clip, .*\)\. "
        r"It returns \(optimizer, loader, accountant\)",
    ):
        dpnc.make_private(nn.Linear(3, 1), data=DATA, clip=1.0, lrr=0.1, **OPTIONS)


def test_a_data_loader_is_answered_with_its_dataset_and_batch_size():
    with pytest.raises(ValueError, match=r"pass data=loader.dataset and batch_size="):
        dpnc.make_private(nn.Linear(3, 1), data=DataLoader(DATA, batch_size=4), clip=1.0, **OPTIONS)


def test_unpacking_in_opacuss_order_says_dpncs_order():
    model, optimizer, loader = dpnc.make_private(nn.Linear(3, 1), data=DATA, clip=1.0, **OPTIONS)
    with pytest.raises(
        TypeError, match=r"returns \(optimizer, loader, accountant\), in that order"
    ):
        for _ in loader:  # the accountant, under Opacus's order
            pass
