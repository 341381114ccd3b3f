"""The owner's view of declared public inputs beside the data: remarks, never published.

n and δ are public inputs, declared by whoever runs a private training (never read off the private
data: under add/remove the data's size differs between neighbours). A declared n far from the rows
there are is still a mistake worth telling its owner: n = 100 on 1,400 rows makes each batch 14× the
batch size; n = 10⁶ leaves almost every batch empty. Comparing n with the data reads the data, so
these remarks go to the owner's terminal as a :class:`DataWarning`, never into a published file. (δ
≥ 1/n reads nothing private, but is said the same way.) Used by :func:`dpnc.make_private` and by the
text trainer's checks (:mod:`dpnc.lm.owner_checks`)."""

from __future__ import annotations

import warnings

__all__ = ["DataWarning", "delta_note", "n_note", "tell_owner"]

FAR = 2.0  # a declared n more than this factor away from the rows there are is remarked on
PREFIX = "owner check (reads the training data; not published): "


class DataWarning(UserWarning):
    """What a check found in the training data (a statistic of it: keep it out of published
    files)."""


def n_note(n: int, rows: int) -> str | None:
    """A remark when the declared ``n`` is more than 2× away from the ``rows`` there are, else
    None."""
    if rows and 1 / FAR <= n / rows <= FAR:
        return None
    if rows == 0 or n > rows:
        effect = (
            "most batches will be nearly empty (each row joins a batch with probability q = B/n)"
        )
        scale = "much larger than"
    else:
        effect = (
            f"batches will hold about {rows / n:.1f}× the batch size B (each row joins a batch with "
            f"probability q = B/n), and a step's mean, divided by the fixed B, about {rows / n:.1f}× the "
            "planned size"
        )
        scale = "much smaller than"
    return (
        f"the declared n = {n:,} is {scale} the {rows:,} rows there are: {effect}. n is public (never read off "
        "the data), but a public bound far from the truth wastes the budget or the batches: declare the number "
        "you would publish"
    )


def delta_note(delta: float, n: int) -> str | None:
    """A remark when δ ≥ 1/n: then a mechanism that publishes a random example verbatim meets (ε,
    δ)."""
    if delta * n < 1:
        return None
    below = 10.0 ** -len(str(n))  # a power of ten at least 10× below 1/n
    return (
        f"delta = {delta:g} is at least 1/n = {1 / n:.3g}: a mechanism that publishes a random example "
        f"verbatim meets such an (ε, δ). Choose δ well below 1/n (e.g. {below:g})"
    )


def tell_owner(note: str, *, stacklevel: int = 3) -> None:
    """``note`` on the owner's terminal, as a :class:`DataWarning`."""
    warnings.warn(PREFIX + note, DataWarning, stacklevel=stacklevel)
