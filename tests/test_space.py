"""DPZero §5.7 (seed regeneration) and §5.8 (direction distribution), docs/papers.md, for
dpnc.space."""

import math
import warnings

import pytest
import torch
from torch import nn

from dpnc import space as space_module
from dpnc.space import DIRECTIONS, FlatSpace, ModuleSpace

EPS32 = torch.finfo(torch.float32).eps
EPS64 = torch.finfo(torch.float64).eps


def flat(d=7, direction="gaussian", seed=0, dtype=torch.float64, K=None):
    gen = torch.Generator().manual_seed(seed)
    shape = (d,) if K is None else (K, d)
    return FlatSpace(torch.randn(shape, generator=gen, dtype=dtype), direction)


def mlp(dtype=torch.float32, seed=0):
    torch.manual_seed(seed)  # test-only: initialise the model reproducibly
    return nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).to(dtype)


def snapshot(params):
    return [p.detach().clone() for p in params]


def record_directions(space):
    """Wrap ``space.each_piece`` (what every pass draws u from) so that every regeneration of u is
    recorded (seed, flat copy)."""
    calls, original = [], space.each_piece

    def spy(seed, fn):
        parts = []

        def record(i, start, z):
            parts.append((i, start, z.detach().clone()))  # the CPU pieces share a buffer: copy each
            fn(i, start, z)

        original(seed, record)
        parts.sort(key=lambda part: part[:2])  # pieces may come from several threads in any order
        calls.append((seed, torch.cat([z for _, _, z in parts])))

    space.each_piece = spy
    return calls


# --- DPZero §5.7 seed regeneration ----------------------------------------------------------------


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_direction_is_bit_identical_across_uses_and_spaces(direction):
    space = flat(d=33, direction=direction)
    first = space.direction(123)
    # Interleave another seed, so a cached sphere radius must be recomputed for the first seed.
    other = space.direction(456)
    assert not torch.equal(first, other)
    for _ in range(4):
        assert torch.equal(space.direction(123), first)
    # A different space of the same shape and dtype regenerates the same u (only the seed is
    # needed).
    assert torch.equal(flat(d=33, direction=direction, seed=99).direction(123), first)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_module_space_regenerates_u_identically_in_every_pass_of_a_step(direction):
    model = mlp()
    space = ModuleSpace(model.parameters(), direction)
    calls = record_directions(space)
    lam, seed = 1e-3, 2024
    space.perturb_(seed, lam)
    space.perturb_(seed, -2 * lam)
    space.update_(seed, -0.01)
    assert len(calls) == 3  # +λ, −2λ, then restore-and-update in one pass
    assert all(s == seed for s, _ in calls)
    assert all(torch.equal(u, calls[0][1]) for _, u in calls)
    assert torch.equal(calls[0][1], space.direction(seed))


# Tensors around every edge of the CPU pieces: shorter than 16, a multiple of 16, one more than a
# multiple of CHUNK (the last piece of 5 joins the one before), CHUNK + 16 (a last piece of exactly
# 16), and larger.
EDGE_SIZES = (
    3,
    16,
    37,
    space_module.CHUNK + 5,
    space_module.CHUNK + 16,
    2 * space_module.CHUNK + 100,
)


def collect_pieces(space, seed):
    """Copies of the pieces of u(seed), in tensor and position order."""
    pieces = []
    space.each_piece(seed, lambda i, start, z: pieces.append((i, start, z.clone())))
    return sorted(pieces, key=lambda piece: piece[:2])


def edge_params(dtype):
    gen = torch.Generator().manual_seed(3)
    return [nn.Parameter(torch.randn(n, generator=gen, dtype=dtype)) for n in EDGE_SIZES] + [
        nn.Parameter(torch.randn(40, 30, generator=gen, dtype=dtype).t())
    ]  # non-contiguous: drawn whole


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_pieces_are_bit_identical_to_one_draw_per_tensor(monkeypatch, dtype, direction):
    """The pieces a ModuleSpace draws on the CPU are the values of one ``torch.randn`` per tensor
    from one generator (the seed trick's stream, unchanged by drawing it piece by piece)."""
    monkeypatch.setattr(
        space_module, "GROUP", 1 << 24
    )  # one group: one generator over all the tensors
    space = ModuleSpace(edge_params(dtype), direction)
    for seed in (0, 2**40 + 7):
        whole = space.direction(seed)  # one torch.randn per tensor
        gen = torch.Generator().manual_seed(seed)
        reference = torch.cat(
            [torch.randn(p.shape, generator=gen, dtype=dtype).reshape(-1) for p in space.params]
        )
        if direction == "gaussian":
            assert torch.equal(whole, reference)
        pieces = collect_pieces(space, seed)
        assert (
            max(len(z) for i, _, z in pieces if space.params[i].is_contiguous())
            <= space_module.CHUNK + 15
        )
        assert torch.equal(torch.cat([z for _, _, z in pieces]), whole)
        starts = {}
        for i, start, z in pieces:  # each tensor's pieces tile it in order
            assert start == starts.get(i, 0)
            starts[i] = start + len(z)
        assert [starts[i] for i in range(len(space.params))] == [p.numel() for p in space.params]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_piecewise_move_equals_adding_the_whole_direction(monkeypatch, dtype):
    monkeypatch.setattr(space_module, "GROUP", 1 << 24)
    params = edge_params(dtype)
    space = ModuleSpace(params)
    before = snapshot(params)
    us = list(space.directions(11))
    space.perturb_(11, 0.37)
    for p, p0, u in zip(params, before, us):
        assert torch.equal(p.detach(), p0.clone().add_(u, alpha=0.37))


def layout_reference(space, seed, dtype):
    """u(seed) by the rule of the module docstring, drawn whole: group g is one generator (the seed
    itself for g = 0), drawing one torch.randn per segment (a tensor, or a GROUP-long part of a
    larger one), in order."""
    groups, current, filled = [], [], 0
    for i, p in enumerate(space.params):
        n = p.numel()
        if current and filled + n > space_module.GROUP:
            groups.append(current)
            current, filled = [], 0
        if n > space_module.GROUP:
            groups += [
                [(i, a, min(a + space_module.GROUP, n))] for a in range(0, n, space_module.GROUP)
            ]
        else:
            current.append((i, 0, n))
            filled += n
    groups += [current] if current else []
    flat = [torch.empty(p.numel(), dtype=dtype) for p in space.params]
    for g, group in enumerate(groups):
        gen = torch.Generator().manual_seed(seed if g == 0 else space_module._group_seed(seed, g))
        for i, a, b in group:
            flat[i][a:b] = torch.randn(b - a, generator=gen, dtype=dtype)
    return torch.cat(flat), len(groups)


@pytest.fixture
def small_groups(monkeypatch):
    """Groups of 1024 entries and pieces of 64, so that small tensors exercise every case of the
    layout."""
    monkeypatch.setattr(space_module, "GROUP", 1024)
    monkeypatch.setattr(space_module, "CHUNK", 64)


def group_params(dtype=torch.float32):
    gen = torch.Generator().manual_seed(4)
    sizes = (
        3,
        500,
        500,
        30,
        1024,
        1023,
        2 * 1024 + 7,
        4 * 1024,
        17,
        1024 + 3,
        5,
    )  # fits, fills, splits, tails
    return [nn.Parameter(torch.randn(n, generator=gen, dtype=dtype)) for n in sizes]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_groups_follow_the_documented_layout_whatever_the_threads(small_groups, threads, dtype):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        space = ModuleSpace(group_params(dtype))
        for seed in (0, 99, 2**61 + 5):
            reference, count = layout_reference(space, seed, dtype)
            assert (
                count == len(space._groups) == 15
            )  # 1003, 30, 1024, 1023, 3 + 4 cut, 17, 2 cut, 5
            assert torch.equal(space.direction(seed), reference)
    finally:
        torch.set_num_threads(before)


def test_group_seeds_are_the_seed_then_distinct_63_bit_hashes():
    for seed in (0, 1, 2**62 - 1):
        seeds = [space_module._group_seed(seed, g) for g in range(2000)]
        assert seeds[0] == seed
        assert len(set(seeds)) == 2000 and all(0 <= s < 2**63 for s in seeds)
        assert (
            len({s % 2**32 for s in seeds}) == 2000
        )  # torch keeps 32 bits of a CPU seed: those differ too


def test_groups_are_independent_standard_normal(small_groups):
    space = ModuleSpace([nn.Parameter(torch.zeros(64 * 1024))])  # 64 groups of 1024 entries
    u = space.direction(7).reshape(64, 1024).double()
    assert abs(float(u.mean())) < 5 / 256 and abs(float(u.var()) - 1) < 5 * math.sqrt(2 / 65536)
    corr = torch.corrcoef(u)  # no two groups repeat (or track) each other's stream
    off = corr - torch.eye(64, dtype=torch.float64)
    assert float(off.abs().max()) < 5 / math.sqrt(1024)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_parallel_groups_move_restore_and_update_like_one_pass(small_groups, direction):
    params = group_params()
    space = ModuleSpace(params, direction)
    before, seed, lam = snapshot(params), 123, 0.3
    u = space.direction(seed)
    us = list(torch.split(u, [p.numel() for p in params]))
    space.perturb_(seed, lam)
    for p, p0, ui in zip(params, before, us):  # each piece added once, in place: exactly p0 + λu
        assert torch.equal(p.detach(), p0.clone().add_(ui, alpha=lam))
    space.perturb_(seed, -2 * lam)
    space.update_(seed, -0.25)
    for p, p0, ui in zip(params, before, us):
        tol = 4 * EPS32 * (p0.abs() + (2 * lam + 0.25) * ui.abs()) + 1e-45
        assert torch.all((p.detach() - (p0 - 0.25 * ui)).abs() <= tol)


def _direction_in_child(queue, params, seed):
    queue.put(
        ModuleSpace(params).direction(seed).tolist()
    )  # plain floats: a tensor would need its sender alive


@pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork"
)
def test_a_forked_child_draws_with_threads_of_its_own(small_groups):
    """A child forked after the parent drew in parallel inherits the thread pool object but not its
    threads: it must make its own (with the inherited pool it would wait forever)."""
    import multiprocessing

    params = group_params()
    u = ModuleSpace(params).direction(5)  # the parent's pool now exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_direction_in_child, args=(queue, params, 5))
    child.start()
    try:
        assert queue.get(timeout=60) == u.tolist()
    finally:
        child.join(timeout=5)
        if child.is_alive():
            child.kill()


@pytest.mark.parametrize("lam", [1e-3, 0.37, 2.0])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_flat_space_perturb_and_restore_are_bit_exact(lam, direction):
    space = flat(d=50, direction=direction)
    x0, seed = space.x.clone(), 77
    u = space.direction(seed)
    space.perturb_(seed, lam)
    assert torch.equal(space.x, x0 + lam * u)
    space.perturb_(seed, -2 * lam)
    assert torch.equal(space.x, x0 - lam * u)
    space.update_(seed, 0.0)
    assert torch.equal(space.x, x0) and torch.equal(space.anchor, x0)
    # §5.7's sequence +λ, −2λ, +λ also returns exactly to x₀.
    space.perturb_(seed, lam)
    space.perturb_(seed, -2 * lam)
    space.perturb_(seed, lam)
    assert torch.equal(space.x, x0)
    space.restore_()
    assert torch.equal(space.x, x0)


def test_flat_space_update_moves_along_u_exactly():
    space = flat(d=20)
    x0, seed, lam, coeff = space.x.clone(), 5, 1e-2, -0.3
    space.perturb_(seed, lam)
    space.perturb_(seed, -2 * lam)
    space.update_(seed, coeff)
    assert torch.equal(space.x, x0 + coeff * space.direction(seed))


@pytest.mark.parametrize("lam", [1e-3, 0.5])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_module_space_float32_restore_within_a_few_ulps(lam, direction):
    model = mlp(torch.float32)
    space = ModuleSpace(model.parameters(), direction)
    before, seed = snapshot(model.parameters()), 31
    us = list(space.directions(seed))
    space.perturb_(seed, lam)
    space.perturb_(seed, -2 * lam)
    space.update_(seed, 0.0)
    for p, p0, u in zip(model.parameters(), before, us):
        # Three rounded passes p ± s·u, each off by ≤ ε·(|p| + 2λ|u|) (product and sum rounding); a
        # regenerated u that differed in any bit would leave an error of order λ|u| ≫ this.
        tol = 3 * EPS32 * (p0.abs() + 2 * lam * u.abs()) + 1e-45
        assert torch.all((p.detach() - p0).abs() <= tol)
    # The update lands at x₀ + c·u to the same precision.
    coeff = -0.25
    space.perturb_(seed, lam)
    space.perturb_(seed, -2 * lam)
    space.update_(seed, coeff)
    for p, p0, u in zip(model.parameters(), before, us):
        tol = 4 * EPS32 * (p0.abs() + (2 * lam + abs(coeff)) * u.abs()) + 1e-45
        assert torch.all((p.detach() - (p0 + coeff * u)).abs() <= tol)


def test_module_space_float64_restore_and_frozen_parameters_untouched():
    model = mlp(torch.float64)
    model[0].bias.requires_grad_(False)
    space = ModuleSpace(model.parameters())
    assert space.d == sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = model[0].bias.detach().clone()
    before = snapshot(model.parameters())
    space.perturb_(3, 0.1)
    assert not torch.equal(model[0].weight, before[0])
    space.perturb_(3, -0.2)
    space.update_(3, 0.0)
    for p, p0 in zip(model.parameters(), before):
        assert torch.allclose(p, p0, rtol=0, atol=8 * EPS64 * (1 + float(p0.abs().max())))
    assert torch.equal(model[0].bias, frozen)


def tensors_in(obj, seen=None):
    """Every tensor reachable from an object's attributes and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_in(v, seen)]
    if isinstance(obj, (list, tuple, set)):
        return [t for v in obj for t in tensors_in(v, seen)]
    if hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.Generator)):
        return [t for v in vars(obj).values() for t in tensors_in(v, seen)]
    return []


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_module_space_keeps_no_buffer_besides_the_parameters(direction):
    model = mlp()
    params = list(model.parameters())
    space = ModuleSpace(params, direction)
    dicts_before = [dict(vars(p)) for p in params]
    for seed in (1, 2):
        space.perturb_(seed, 1e-3)
        space.perturb_(seed, -2e-3)
        space.update_(seed, 0.1)
        held = tensors_in(space)
        assert all(any(t is p for p in params) for t in held), [tuple(t.shape) for t in held]
        assert len(held) == len(params) and all(any(t is p for t in held) for p in params)
    # Nothing is stored on the Parameters themselves either.
    assert [dict(vars(p)) for p in params] == dicts_before


def test_flat_space_keeps_only_the_point():
    space = flat(d=40, direction="sphere")
    space.perturb_(9, 0.1)
    space.perturb_(9, -0.2)
    space.update_(9, 0.5)
    held = tensors_in(space)
    assert space.x is space.anchor
    assert all(t is space.anchor for t in held)


# --- DPZero §5.8 direction distribution -----------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 17, 1000])
def test_sphere_norm_is_exactly_sqrt_d_in_float64(d):
    space = flat(d=d, direction="sphere")
    for seed in range(20):
        norm = float(torch.linalg.vector_norm(space.direction(seed)))
        assert abs(norm - math.sqrt(d)) <= 1e-12 * math.sqrt(d)


def test_sphere_norm_over_several_float32_tensors():
    model = mlp(torch.float32)
    space = ModuleSpace(model.parameters(), "sphere")
    for seed in range(20):
        norm = float(torch.linalg.vector_norm(space.direction(seed).double()))
        # Each entry z·(√d/‖z‖) is rounded twice in float32 (the scale, the product): ≤ ε relative.
        assert abs(norm / math.sqrt(space.d) - 1) <= 1.5 * EPS32
    gauss = ModuleSpace(model.parameters(), "gaussian")
    assert any(
        abs(float(torch.linalg.vector_norm(gauss.direction(s))) - math.sqrt(space.d)) > 1e-3
        for s in range(5)
    )


N_MC = 20_000
D_MC = 5


def sample_directions(direction, d=D_MC, n=N_MC):
    space = flat(d=d, direction=direction)
    return torch.stack([space.direction(s) for s in range(n)])


_SAMPLES = {}


@pytest.fixture(scope="module", params=DIRECTIONS)
def directions(request):
    if request.param not in _SAMPLES:
        _SAMPLES[request.param] = sample_directions(request.param)
    return request.param, _SAMPLES[request.param]


@pytest.fixture(scope="module")
def sphere():
    if "sphere" not in _SAMPLES:
        _SAMPLES["sphere"] = sample_directions("sphere")
    return _SAMPLES["sphere"]


def test_second_moment_is_identity(directions):
    name, U = directions
    d = U.shape[1]
    M = U.T @ U / len(U)
    # Var(u_i u_j): Gaussian 1 (i≠j), 2 (i=j); sphere d/(d+2) (i≠j), (2d−2)/(d+2) (i=j).
    if name == "gaussian":
        var = torch.ones(d, d, dtype=U.dtype) + torch.eye(d, dtype=U.dtype)
    else:
        var = torch.full((d, d), d / (d + 2), dtype=U.dtype)
        var.fill_diagonal_(3 * d / (d + 2) - 1)
    assert torch.all((M - torch.eye(d, dtype=U.dtype)).abs() <= 6 * (var / len(U)).sqrt())


def test_projection_second_moment_is_squared_norm(directions):
    name, U = directions
    d = U.shape[1]
    a = torch.tensor([3.0, -1.0, 0.5, 2.0, 0.0], dtype=U.dtype)[:d]
    sq = (U @ a) ** 2
    norm2 = float(a @ a)
    # Var((uᵀa)²) = (E u₁⁴ − 1)‖a‖⁴ by isotropy: E u₁⁴ = 3 (Gaussian), 3d/(d+2) (sphere).
    fourth = 3.0 if name == "gaussian" else 3 * d / (d + 2)
    se = math.sqrt((fourth - 1) * norm2**2 / len(U))
    assert abs(float(sq.mean()) - norm2) <= 6 * se


def test_sphere_fourth_moment(sphere):
    U = sphere
    d = U.shape[1]
    # u = √d·x, x uniform on S^{d−1}: E x₁^{2k} = (2k−1)!!/(d(d+2)…(d+2k−2)).
    m4 = 3 * d / (d + 2)
    m8 = 105 * d**4 / (d * (d + 2) * (d + 4) * (d + 6))
    # The mean over coordinates has variance at most Var(u₁⁴) (an average of identically distributed
    # terms).
    se = math.sqrt((m8 - m4**2) / len(U))
    assert abs(float((U**4).mean()) - m4) <= 6 * se
    # The Gaussian's 3 is far outside this tolerance: the test tells the samplers apart.
    assert abs(3.0 - m4) > 2 * 6 * se


def test_sphere_projected_outer_moment(sphere):
    U = sphere
    d = U.shape[1]
    a = torch.tensor([1.0, -2.0, 0.0, 0.5, 1.5], dtype=U.dtype)
    w = (U @ a) ** 2
    terms = w[:, None, None] * U[:, :, None] * U[:, None, :]
    expected = d / (d + 2) * (2 * torch.outer(a, a) + (a @ a) * torch.eye(d, dtype=U.dtype))
    se = terms.std(0) / math.sqrt(len(U))
    assert torch.all((terms.mean(0) - expected).abs() <= 6 * se)


# --- batched runs ---------------------------------------------------------------------------------


def test_batched_flat_space_shares_u_with_per_run_coefficients():
    K, d, seed, lam = 4, 12, 8, 0.05
    space = flat(d=d, K=K)
    x0 = space.x.clone()
    u = space.direction(seed)
    assert u.shape == (d,)
    space.perturb_(seed, lam)
    assert torch.equal(space.x, x0 + lam * u)
    space.perturb_(seed, -2 * lam)
    coeff = torch.tensor([0.5, -1.0, 0.0, 2.5], dtype=torch.float64)
    space.update_(seed, coeff)
    for k in range(K):
        alone = FlatSpace(x0[k])
        alone.perturb_(seed, lam)
        alone.perturb_(seed, -2 * lam)
        alone.update_(seed, coeff[k])
        assert torch.equal(space.x[k], alone.x)
        assert torch.equal(space.x[k], x0[k] + coeff[k] * u)


def test_batched_flat_space_per_run_perturbation_scale():
    space = flat(d=6, K=3)
    x0, seed = space.x.clone(), 4
    scale = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    space.perturb_(seed, scale)
    u = space.direction(seed)
    assert torch.equal(space.x, x0 + scale[:, None] * u)
    space.restore_()
    assert torch.equal(space.x, x0)


# --- errors ---------------------------------------------------------------------------------------


def test_bad_direction_name():
    with pytest.raises(
        ValueError, match=r"direction must be one of \('gaussian', 'sphere'\); got 'uniform'"
    ):
        FlatSpace(torch.zeros(3, dtype=torch.float64), "uniform")
    with pytest.raises(ValueError, match="direction must be one of"):
        ModuleSpace(mlp().parameters(), "rademacher")


def test_moving_along_a_new_seed_while_perturbed_raises():
    for space in (flat(d=5), ModuleSpace(mlp().parameters())):
        space.perturb_(1, 0.1)
        with pytest.raises(RuntimeError, match="perturbed along seed 1"):
            space.perturb_(2, 0.1)
        with pytest.raises(RuntimeError, match="perturbed along seed 1"):
            space.update_(2, 0.1)
        space.perturb_(1, -0.2)  # the same seed is allowed (the ± pattern)
        space.restore_()
        space.perturb_(2, 0.1)  # after restoring, a new seed is fine
        space.restore_()


def test_flat_add_while_perturbed_raises():
    space = flat(d=5)
    space.perturb_(1, 0.1)
    with pytest.raises(RuntimeError, match="restore_"):
        space.add_(torch.ones(5, dtype=torch.float64))


def test_bad_inputs():
    with pytest.raises(ValueError, match="seed must be an integer in"):
        flat(d=3).direction(-1)
    with pytest.raises(ValueError, match="seed must be an integer in"):
        flat(d=3).perturb_(2**63, 0.1)
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        FlatSpace(torch.zeros(3, dtype=torch.int64))
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="params must contain at least one tensor"):
        ModuleSpace(frozen.parameters())
    mixed = [nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    with pytest.raises(ValueError, match="params must share one device and dtype"):
        ModuleSpace(mixed)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_regeneration_on_gpu_is_bit_identical(direction):
    model = mlp().cuda()
    space = ModuleSpace(model.parameters(), direction)
    calls = record_directions(space)
    before = snapshot(model.parameters())
    space.perturb_(5, 1e-3)
    space.perturb_(5, -2e-3)
    space.update_(5, 0.0)
    assert all(torch.equal(u, calls[0][1]) for _, u in calls)
    for p, p0 in zip(model.parameters(), before):
        assert torch.allclose(p, p0, rtol=0, atol=8 * EPS32 * (1 + float(p0.abs().max())))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_parameters_are_warned_about(dtype):
    # x + λu − 2λu + λu is x only up to rounding: in half precision the parameters drift each step
    # at lr 0 (a new-user review measured 0.02-0.035 over 50 steps on weights of ~2).
    with pytest.warns(
        UserWarning, match=f"parameters in torch.{str(dtype).split('.')[-1]}: moving them"
    ):
        ModuleSpace([nn.Parameter(torch.ones(8, dtype=dtype))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ModuleSpace([nn.Parameter(torch.ones(8))])  # float32: no warning
