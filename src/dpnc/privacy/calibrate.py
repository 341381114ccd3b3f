"""Noise for a target budget: numerical calibration and the papers' closed forms.

:func:`noise_multiplier` asks the same :class:`~dpnc.privacy.accountant.Accountant` that runs use;
:func:`opacus_noise_multiplier` reproduces the published DPZero code's recipe. Every closed form
cites its source and is cross-checked against the accountant in the tests. See docs/privacy.md."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import optimize

from dpnc.checks import check_integer, check_positive, check_probability
from dpnc.privacy.accountant import METHODS, Accountant, coarse_pld_epsilon, quiet_dp_accounting
from dpnc.privacy.budget import check_delta, check_epsilon, check_rho, epsilon_to_rho
from dpnc.privacy.releases import (
    FixedSize,
    Gaussian,
    Poisson,
    Relation,
    Release,
    Sampled,
    UnsupportedRelease,
)
from dpnc.privacy.tree import leaf_participation

# Opacus ≤ 1.4's RDP orders and tolerance (opacus/accountants/utils.py, rdp.py).
OPACUS_ORDERS = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)))
OPACUS_EPSILON_TOLERANCE = 0.01


def _check_steps(steps: int) -> int:
    check_integer(steps=steps)
    return steps


def _check_rate(q: float) -> float:
    check_probability(include_one=True, sampling_rate=q)
    return float(q)


def _event(multiplier: float, q: float, steps: int) -> dp_event.DpEvent:
    gaussian = dp_event.GaussianDpEvent(multiplier)
    inner = gaussian if q == 1 else dp_event.PoissonSampledDpEvent(q, gaussian)
    return dp_event.SelfComposedDpEvent(inner, steps)


def epsilon_for(
    multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    *,
    accountant: str = "rdp",
    relation: Relation | str = Relation.ADD_OR_REMOVE_ONE,
    fixed_size_of: int | None = None,
) -> float:
    """ε(δ) of ``steps`` Gaussian releases with noise multiplier σ/Δ, each on a Poisson sample of
    rate q.

    ``sampling_rate=1`` means full batch (no subsampling). ``fixed_size_of=n``: each batch is
    instead exactly q·n of the n examples drawn without replacement
    (:class:`dpnc.sampling.ShuffleSampler`; replace-one, RDP only). Answered by :class:`Accountant`,
    so the multiplier means σ/Δ with Δ the sensitivity under ``relation``, as everywhere in dpnc.
    """
    if not (isinstance(multiplier, (int, float)) and multiplier > 0 and math.isfinite(multiplier)):
        raise ValueError(f"noise multiplier must be a finite number > 0; got {multiplier!r}")
    q, steps, delta = _check_rate(sampling_rate), _check_steps(steps), check_delta(delta)
    if accountant not in METHODS:
        raise ValueError(f"accountant must be one of {METHODS}; got {accountant!r}")
    return _ledger(multiplier, q, steps, relation, fixed_size_of).epsilon(delta, accountant)


def _ledger(
    multiplier: float, q: float, steps: int, relation: Relation | str, fixed_size_of: int | None
) -> Accountant:
    """The ledger of :func:`epsilon_for`'s question: ``steps`` Gaussian releases of σ/Δ =
    ``multiplier``."""
    acct = Accountant(relation)
    gaussian = Gaussian(1.0, float(multiplier))
    if fixed_size_of is not None:
        batch = round(q * fixed_size_of)
        if not (isinstance(fixed_size_of, int) and 1 <= batch <= fixed_size_of):
            raise ValueError(
                f"fixed_size_of must be the integer n with 1 <= q·n <= n; got {fixed_size_of!r}"
            )
        release = Sampled(FixedSize(fixed_size_of, batch), gaussian)
    else:
        release = gaussian if q == 1 else Sampled(Poisson(q), gaussian)
    acct.record(release, steps)
    return acct


def noise_multiplier(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    *,
    accountant: str = "rdp",
    relation: Relation | str = Relation.ADD_OR_REMOVE_ONE,
    fixed_size_of: int | None = None,
) -> float:
    """The smallest σ/Δ (to a relative 1e-6) whose ``steps`` Gaussian releases are (ε, δ)-DP.

    Root-finding on :func:`epsilon_for` (``fixed_size_of`` as there); the multiplier returned always
    satisfies the budget. A handful of accountant calls (regula falsi on log ε against log σ), each
    bounded in time for any budget (the PLD grid's interval grows with ε:
    :func:`dpnc.privacy.accountant.pld_interval`); where PLD cannot answer (a Gaussian with too
    little noise for a grid) it falls back to RDP with a warning.

    Results are cached in the process and, since a PLD calibration takes seconds, on disk too: one
    small JSON file per question in :func:`cache_dir`, shared between processes (a resumed run, the
    ranks of a data-parallel one, the next run of the same config), holding only public parameters
    and the multiplier. A stored multiplier is never trusted: it is used only after one accountant
    call shows it meets the target and is the smallest that does (up to a tolerance; else the search
    runs again), so a stale or edited file can neither weaken the guarantee nor add noise the target
    does not need."""
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    q, steps = _check_rate(sampling_rate), _check_steps(steps)
    if accountant not in METHODS:
        raise ValueError(f"accountant must be one of {METHODS}; got {accountant!r}")
    multiplier, fallback = _noise_multiplier(
        epsilon, delta, q, steps, accountant, Relation.parse(relation), fixed_size_of
    )
    if fallback:
        warnings.warn(fallback, stacklevel=2)
    return multiplier


@functools.lru_cache(maxsize=512)
def _noise_multiplier(
    epsilon, delta, q, steps, accountant, relation, fixed_size_of=None
) -> tuple[float, str]:
    """(the multiplier, "" or why PLD fell back to RDP): from the disk cache where it meets the
    target, else searched (:func:`_search`) and stored."""
    question = (epsilon, delta, q, steps, accountant, relation.value, fixed_size_of)

    def meets(multiplier: float, method: str) -> bool:
        """The multiplier spends at most ε, and no less than ε·e^(−STORED_TOLERANCE): the smallest
        one, up to the tolerance (a stored σ twice too large meets the target, but would cost the
        run accuracy for nothing)."""
        try:
            spent = epsilon_for(
                multiplier,
                q,
                steps,
                delta,
                accountant=method,
                relation=relation,
                fixed_size_of=fixed_size_of,
            )
        except (UnsupportedRelease, ValueError):
            return False
        return epsilon * math.exp(-STORED_TOLERANCE) <= spent <= epsilon

    path = (
        _cache_file(question) if accountant == "pld" else None
    )  # RDP answers in a fraction of a second
    stored = _read(path, question)
    if stored is not None and meets(stored[0], "rdp" if stored[1] else accountant):
        return stored
    answer = _search(epsilon, delta, q, steps, accountant, relation, fixed_size_of)
    _write(path, question, answer)
    return answer


def _search(epsilon, delta, q, steps, accountant, relation, fixed_size_of) -> tuple[float, str]:
    def spent(m: float) -> float:
        return epsilon_for(
            m,
            q,
            steps,
            delta,
            accountant=accountant,
            relation=relation,
            fixed_size_of=fixed_size_of,
        )

    if accountant == "rdp":
        return _smallest_multiplier(spent, epsilon, 1.0), ""
    # PLD is tighter than RDP (under add/remove): start from the RDP answer, which PLD usually meets
    # already.
    start, _ = _noise_multiplier(epsilon, delta, q, steps, "rdp", Relation.ADD_OR_REMOVE_ONE)
    start *= 2 if relation is Relation.REPLACE_ONE else 1

    def coarse_spent(
        m: float,
    ) -> float:  # ε on a PLD grid COARSENESS× coarser: ~1/COARSENESS of the cost
        return coarse_pld_epsilon(_ledger(m, q, steps, relation, fixed_size_of), delta, COARSENESS)

    try:
        coarse_spent(start)
    except (
        UnsupportedRelease
    ) as err:  # e.g. a Gaussian with σ/Δ below PLD_MIN_MULTIPLIER: fall back to RDP
        try:
            fallback, _ = _noise_multiplier(
                epsilon, delta, q, steps, "rdp", relation, fixed_size_of
            )
        except UnsupportedRelease:
            raise err from None
        return fallback, (
            f"PLD accounting cannot answer for (ε = {epsilon:g}, δ = {delta:g}, q = {q:g}, T = "
            f"{steps}) ({err}); the noise multiplier σ/Δ = {fallback:.4g} is calibrated by RDP instead "
            "(a valid, looser upper bound)"
        )

    def or_inf(epsilon_of: Callable[[float], float]) -> Callable[[float], float]:
        def spent_or_inf(m: float) -> float:  # too little noise for PLD on a grid: not a candidate
            try:
                return epsilon_of(m)
            except UnsupportedRelease:
                return math.inf

        return spent_or_inf

    fine, coarse = (
        or_inf(spent),
        functools.cache(or_inf(coarse_spent)),
    )  # the slope below re-reads coarse(near)
    # Most of the search on the coarse grid, then a few steps on the accountant's own, from there:
    # every candidate returned was evaluated on the accountant's grid.
    near = _smallest_multiplier(coarse, epsilon, start)
    # d log ε / d log m there, from one more coarse call 1 % below: the fine search's first step is
    # a secant along it (the fine and coarse ε differ by the discretisation, ~1e-5 relative, and
    # hardly in slope): usually 1-2 fine calls.
    at, below = coarse(near), coarse(near * 0.99)
    slope = math.log(below / at) / math.log(0.99) if 0 < at and 0 < below < math.inf else None
    return _smallest_multiplier(fine, epsilon, near, slope=slope), ""


# How much coarser the PLD grid of a calibration's first search is than the accountant's (measured:
# a search at ε = 2, q = 4/1000, T = 1 took 11 calls on the fine grid, 44 s of CPU; now 12 coarse
# calls and 1 fine one, 8 s).
COARSENESS = 10.0


# Bump when a change to calibration or accounting changes the answer to a question already stored.
CACHE_VERSION = 1
# How far below the target a stored multiplier's ε may fall and still be used (the search stops
# within 1e-5 of it; the slack admits a newer dp-accounting's rounding, never a multiplier 1 %
# larger than the minimum).
STORED_TOLERANCE = 1e-3


def cache_dir() -> Path | None:
    """Where calibrations are kept between processes: ``$DPNC_CACHE_DIR`` (``off``, ``0`` or empty:
    nowhere), else ``$XDG_CACHE_HOME/dpnc`` or ``~/.cache/dpnc``."""
    where = os.environ.get("DPNC_CACHE_DIR")
    if where is not None:
        return None if where.strip().lower() in ("", "off", "0") else Path(where)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpnc"


def _cache_file(question: tuple) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    text = repr((CACHE_VERSION, _dp_accounting_version(), question))
    return folder / "calibrations" / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


@functools.cache
def _dp_accounting_version() -> str:
    try:
        return metadata.version("dp-accounting")
    except (
        metadata.PackageNotFoundError
    ):  # an unpacked copy (the GPU payload installs it as a wheel, so rarely)
        return "unknown"


def _read(path: Path | None, question: tuple) -> tuple[float, str] | None:
    try:
        entry = json.loads(path.read_text()) if path is not None else None
        if entry["question"] == list(question) and entry["version"] == CACHE_VERSION:
            return float(entry["multiplier"]), str(entry["fallback"])
    except (OSError, ValueError, KeyError, TypeError):  # absent, unreadable or not ours: search
        pass
    return None


def _write(path: Path | None, question: tuple, answer: tuple[float, str]) -> None:
    if path is None:
        return
    entry = {
        "version": CACHE_VERSION,
        "dp_accounting": _dp_accounting_version(),
        "question": list(question),
        "multiplier": answer[0],
        "fallback": answer[1],
    }
    try:  # write then rename: a reader sees a whole file or none (processes share the folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(entry))
        os.replace(partial, path)
    except OSError:  # a read-only or full disk: the cache is an optimisation, never a requirement
        pass


def _smallest_multiplier(
    spent: Callable[[float], float],
    epsilon: float,
    start: float,
    *,
    tolerance: float = 1e-5,
    slope: float | None = None,
) -> float:
    """The smallest m (up to ``tolerance``) with ``spent(m)`` ≤ ε, for ``spent`` decreasing in m.

    Root-finding on f(log m) = log(spent(m)/ε), nearly linear: a bracket [lo, hi] (lo from the guess
    ε·m increasing as m shrinks, which holds for the Gaussian), then the Illinois variant of regula
    falsi, a handful of evaluations (each PLD one costs up to a second). Every candidate returned
    was evaluated: spent(m) ≤ ε, and spent(m) ≥ ε·e^(−tolerance) unless the bracket shrank below a
    relative 1e-12 first. ``slope``: d log ε / d log m near ``start`` (negative), known from a
    cheaper search: one secant step along it comes first, aimed at −tolerance/2."""

    def f(m: float) -> float:
        e = spent(m)
        return math.inf if e == math.inf else (-math.inf if e <= 0 else math.log(e / epsilon))

    lo, f_lo = None, math.inf
    hi, f_hi = start, f(start)
    if (
        slope is not None and slope < 0 and math.isfinite(f_hi) and not -tolerance < f_hi <= 0
    ):  # a secant step
        m = start * math.exp((-tolerance / 2 - f_hi) / slope)
        (lower, f_lower), (upper, f_upper) = sorted([(start, f_hi), (m, f(m))])
        if f_upper <= 0 < f_lower:  # a bracket
            lo, f_lo, hi, f_hi = lower, f_lower, upper, f_upper
        # both meet ε (the smaller is the better upper end) or neither (search up from the larger)
        else:
            hi, f_hi = (lower, f_lower) if f_lower <= 0 else (upper, f_upper)
    while f_hi > 0:
        if hi > 1e12:
            raise ValueError(
                f"epsilon={epsilon:g} cannot be met by any noise multiplier up to 1e12"
            )
        lo, f_lo = hi, f_hi
        hi = hi * 2 if math.isinf(f_hi) else hi * max(2.0, math.exp(f_hi))
        f_hi = f(hi)
    if f_hi > -tolerance:
        return hi
    if lo is None:
        lo = hi * min(math.exp(f_hi), 0.999) if math.isfinite(f_hi) else hi / 2
        f_lo = f(lo)
        while f_lo <= 0:  # still enough noise: a new upper end
            hi, f_hi = lo, f_lo
            if f_hi > -tolerance or hi < 1e-12:
                return hi
            lo = hi / 2
            f_lo = f(lo)
    a, fa, b, fb, fb_true, side = math.log(lo), f_lo, math.log(hi), f_hi, f_hi, 0
    m = hi
    for _ in range(200):
        if -fb_true <= tolerance or b - a <= 1e-12:
            break
        if math.isfinite(fa) and math.isfinite(fb):
            x = b - fb * (b - a) / (fb - fa)
            x = min(max(x, a + 1e-3 * (b - a)), b - 1e-3 * (b - a))  # strictly inside the bracket
        else:
            x = (a + b) / 2
        fx = f(math.exp(x))
        if fx <= 0:
            b, fb, fb_true, m = x, fx, fx, math.exp(x)
            if side == -1:
                fa /= 2
            side = -1
        else:
            a, fa = x, fx
            if side == 1:
                fb /= 2
            side = 1
    return m


def opacus_noise_multiplier(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    *,
    epsilon_tolerance: float = OPACUS_EPSILON_TOLERANCE,
) -> float:
    """The noise multiplier of opacus 1.4.0 ``get_noise_multiplier(accountant="rdp")``.

    Implements the published DPZero code's accounting (docs/papers.md, DPZero §1.5): RDP of the
    Poisson-subsampled Gaussian at opacus's orders, converted by Balle et al. 2020 Thm 21; σ_high
    starts at 10 and doubles until ε ≤ target, then bisection on [0, σ_high] until
    target − ε(σ_high) ≤ tolerance; σ_high is returned.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    q, steps = _check_rate(sampling_rate), _check_steps(steps)

    def eps(sigma: float) -> float:
        acct = rdp_lib.RdpAccountant(orders=OPACUS_ORDERS)
        with quiet_dp_accounting():
            acct.compose(_event(sigma, q, steps))
            return float(acct.get_epsilon(delta))

    sigma_low, sigma_high = 0.0, 10.0
    eps_high = eps(sigma_high)
    while eps_high > epsilon:
        sigma_low, sigma_high = sigma_high, 2 * sigma_high
        eps_high = eps(sigma_high)
    while epsilon - eps_high > epsilon_tolerance:
        sigma = (sigma_low + sigma_high) / 2
        e = eps(sigma)
        if e < epsilon:
            sigma_high, eps_high = sigma, e
        else:
            sigma_low = sigma
    return sigma_high


# --- the papers' closed forms ---------------------------------------------------------------


def dpzero_sigma(C: float, n: int, steps: int, epsilon: float, delta: float) -> float:
    """σ = 4C·√(2T·log(e + ε/δ))/(nε): the noise std of DPGD-0th and DPZero (full batch).

    Implements: Zhang, Li, Thekumparampil, Oh, He (DPZero), Lemma 2.2 (advanced composition,
    Kairouz et al. 2015 Thm 4.3) with replace-one sensitivity 2C/n; DPZero §1.4. The paper
    calls σ a "variance"; it is a standard deviation.
    """
    check_positive(C=C)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1; got {n!r}")
    steps, epsilon, delta = _check_steps(steps), check_epsilon(epsilon), check_delta(delta)
    return 4 * C * math.sqrt(2 * steps * math.log(math.e + epsilon / delta)) / (n * epsilon)


def advanced_composition_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    """The ε that DPZero's Lemma 2.2 certifies for ``steps`` Gaussian releases with σ/Δ = m.

    Inverts σ = 2Δ·√(2T·log(e + ε/δ))/ε (the paper's claim for a given noise), by bisection on the
    decreasing map ε ↦ 2√(2T·log(e + ε/δ))/ε.
    """
    if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier must be a finite number > 0; got {noise_multiplier!r}")
    steps, delta = _check_steps(steps), check_delta(delta)

    def gap(log_eps: float) -> float:
        eps = math.exp(log_eps)
        return 2 * math.sqrt(2 * steps * math.log(math.e + eps / delta)) / eps - noise_multiplier

    lo, hi = -30.0, 10.0
    while gap(hi) > 0:
        hi += 10
    return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-13))


def ztc_tree_sigma(
    d: int, L: float, rho: float, T: int, B1: int, B2: int = 1, *, paper: bool = False
) -> float:
    """Tree-node noise σ of Zhang–Tran–Cutkosky Cor 4.4 for (α, αρ²/2)-RDP (ρ²/2-zCDP).

    Sensitivities: s₁ = 2dL/B1 (the GRAD anchor) and s₂ = 4dL/(B2·T) (a DIFF with ‖w_t − w_{t−1}‖ ≤
    2D = 2δ/T). Corrected (default): σ = √(⌊log₂T⌋ + 1)·max(s₁, s₂)/ρ, with the exact per-leaf node
    count. ``paper=True``: σ = √(2 ln T)·s₂/ρ as reconstructed in ZTC §3 (Cor 4.4), which
    requires B1 ≥ T·B2/2 and under-counts for T ∈ {1, 2, 4}.
    """
    check_positive(L=L)
    check_positive(rho=rho)
    for name, v in (("d", d), ("T", T), ("B1", B1), ("B2", B2)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {v!r}")
    s1, s2 = 2 * d * L / B1, 4 * d * L / (B2 * T)
    if paper:
        if B1 < T * B2 / 2:
            raise ValueError(f"Cor 4.4 requires B1 >= T·B2/2 = {T * B2 / 2:g}; got B1={B1}")
        return math.sqrt(2 * math.log(T)) * s2 / rho
    return math.sqrt(leaf_participation(T)) * max(s1, s2) / rho


def klt_tree_sigma(
    sensitivity: float, num_leaves: int, epsilon: float, delta: float, *, paper: bool = False
) -> float:
    """Tree-node noise σ = 4s·√(Lvl·ln(1/δ))/ε of Kornowski–Liu–Talwar Prop 2.5.

    Corrected (default): Lvl = ⌊log₂Σ⌋ + 1 = ⌈log₂(Σ + 1)⌉, the exact per-leaf node count (spec
    KLT §2.1). ``paper=True``: Lvl = ⌈log₂Σ⌉, the printed depth (0 for Σ = 1).
    """
    check_positive(sensitivity=sensitivity)
    if not isinstance(num_leaves, int) or num_leaves < 1:
        raise ValueError(f"num_leaves must be an integer >= 1; got {num_leaves!r}")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    levels = math.ceil(math.log2(num_leaves)) if paper else leaf_participation(num_leaves)
    return 4 * sensitivity * math.sqrt(levels * math.log(1 / delta)) / epsilon


def zcdp_gaussian_sigma(sensitivity: float, rho: float) -> float:
    """σ = Δ/√(2ρ): the Gaussian mechanism that spends exactly ρ of zCDP (Bun & Steinke 2016, Prop
    1.6).

    The noise level Menart et al. use for every release (Menart et al. §1.2).
    """
    check_positive(sensitivity=sensitivity)
    rho = check_rho(rho)
    if rho == 0:
        raise ValueError("rho must be > 0 for a finite noise level; got 0")
    return sensitivity / math.sqrt(2 * rho)


def fit_rho(
    releases: Callable[[float], list[tuple[Release, int]]], *, epsilon: float, delta: float
) -> float:
    """The zCDP budget ρ to calibrate for, so that the accountant's own ε(δ) of ``releases(ρ)`` is ≤
    ε.

    Starts from ρ(ε, δ) of the optimal zCDP conversion and shrinks it while the accountant (RDP over
    a finite order grid, so a hair above the continuous optimum) answers more than ε: the ledger,
    not a formula, decides. ``releases(ρ)`` lists the (release, count) pairs a run calibrated for ρ
    will record (each pass's disjoint-data releases counted once)."""
    rho = epsilon_to_rho(epsilon, delta)
    for _ in range(50):
        accountant = Accountant()
        for release, count in releases(rho):
            accountant.record(release, count)
        spent = accountant.epsilon(delta)
        if spent <= epsilon:
            return rho
        rho *= (epsilon / spent) ** 2 * (1 - 1e-4)
    raise RuntimeError(f"could not calibrate ρ to ε = {epsilon} (the accountant answered {spent})")
