"""dpnc.tier.attention: the math form of scaled dot-product attention that vmap batches equals
torch's kernel under every option nn.MultiheadAttention passes (masks, causality, scale, grouped
heads)."""

import pytest
import torch
import torch.nn.functional as F

from dpnc.tier.attention import math_attention

F64 = torch.float64


def qkv(heads=2, kv_heads=2, length=5, dim=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(3, heads, length, dim, generator=gen, dtype=F64)
    k, v = (torch.randn(3, kv_heads, length, dim, generator=gen, dtype=F64) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"is_causal": True},
        {"scale": 0.3},
        {"attn_mask": torch.rand(5, 5, generator=torch.Generator().manual_seed(1)) > 0.3},
        {"attn_mask": torch.randn(5, 5, generator=torch.Generator().manual_seed(2), dtype=F64)},
    ],
    ids=["plain", "causal", "scale", "bool-mask", "float-mask"],
)
def test_math_attention_is_torchs_attention(options):
    q, k, v = qkv()
    mask = options.get("attn_mask")
    if mask is not None and mask.dtype == torch.bool:
        mask[:, 0] = True  # every query attends somewhere (a fully masked row is NaN in both)
    expected = F.scaled_dot_product_attention(q, k, v, **options)
    torch.testing.assert_close(math_attention(q, k, v, **options), expected)


def test_grouped_heads_share_their_keys_and_values():
    q, k, v = qkv(heads=4, kv_heads=2)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(math_attention(q, k, v, enable_gqa=True), expected)
