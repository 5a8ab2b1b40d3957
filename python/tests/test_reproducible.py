"""ree.reproducible(model): a transformers Llama's logits have the same bits whatever the batch
composition, and ATen is itself again after the context."""

import pytest
import torch

import ree
from conftest import assert_bits_equal

transformers = pytest.importorskip("transformers")


def tiny_llama(seed=0):
    config = transformers.LlamaConfig(
        vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-5, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


def test_llama_logits_independent_of_batch_composition():
    model = tiny_llama()
    g = torch.Generator().manual_seed(1)
    a, b, c = (torch.randint(0, 300, (1, 150), generator=g) for _ in range(3))
    with ree.reproducible(model):
        alone = logits(model, a)
        in_pair = logits(model, torch.cat([b, a]))
        in_three = logits(model, torch.cat([a, c, b]))
        again = logits(model, a)
        prefix = logits(model, a[:, :70])  # causal: a prefix's logits are the full run's
    assert_bits_equal(in_pair[1:2], alone, "a after b")
    assert_bits_equal(in_three[0:1], alone, "a before c, b")
    assert_bits_equal(again, alone, "run to run")
    assert_bits_equal(prefix, alone[:, :70], "prefix")
    # Close to transformers' own result (the same model outside the context).
    reference = logits(model, a)
    assert (alone - reference).abs().max().item() < 1e-3
    # ... but computed by REE: ATen's own bits differ (and ATen's prefix run is not the full run's).
    assert not torch.equal(alone, reference)
    assert not torch.equal(logits(model, a[:, :70]), reference[:, :70])
    assert model.config._attn_implementation == "sdpa"


def test_context_restores_aten():
    x = torch.randn(3, 4, dtype=torch.float64)
    with ree.reproducible():
        with pytest.raises(TypeError, match="aten::mm on torch.float64"):
            torch.mm(x, x.t())
        y = torch.mm(x.float(), x.float().t())
    assert torch.equal(y, ree.ops.matmul(x.float(), x.float().t()))
    torch.mm(x, x.t())  # ATen's kernel again


def test_matrix_products_on_repops():
    """baddbmm (eager attention's scores), mv and dot (1-D matmul), addmm with scales: REE's
    products (ATen's, summed in another order, differ in some bits)."""
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(3, 5, 300, generator=g), torch.randn(3, 300, 6, generator=g)
    m, v = torch.randn(7, 300, generator=g), torch.randn(300, generator=g)
    bias = torch.randn(3, 5, 6, generator=g)
    with ree.reproducible():
        scores = torch.baddbmm(bias, a, b, beta=0, alpha=0.25)
        shifted = torch.baddbmm(bias, a, b, beta=0.5, alpha=2.0)
        mv, dot, vm = torch.mv(m, v), torch.dot(v, v), v @ m.t()
        scaled = torch.addmm(bias[0, 0], m, m.t()[:, :6], beta=3.0)
    product = ree.ops.matmul(a, b)
    assert_bits_equal(scores, product * 0.25, "baddbmm beta=0")
    assert_bits_equal(shifted, product * 2.0 + bias * 0.5, "baddbmm")
    assert_bits_equal(mv, ree.ops.matmul(m, v), "mv")
    assert_bits_equal(dot, ree.ops.matmul(v, v), "dot")
    assert_bits_equal(vm, ree.ops.matmul(m, v), "1-D @ 2-D")
    assert_bits_equal(scaled, ree.ops.matmul(m, m.t()[:, :6]) + bias[0, 0] * 3.0, "addmm beta=3")
    assert not torch.equal(torch.baddbmm(bias, a, b, beta=0, alpha=0.25), scores)
    assert not torch.equal(torch.mv(m, v), mv)


def qkv(batch=3, heads=4, kv_heads=2, length=70, dim=16, seed=5):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, length, dim, generator=g)
    k, v = (torch.randn(batch, kv_heads, length, dim, generator=g) for _ in range(2))
    return q, k, v


def test_sdpa_is_ree_attention():
    """F.scaled_dot_product_attention, causal or with padded keys (a boolean or an additive
    -inf mask): ree.ops.attention over each row's real positions; padded queries give zeros."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = qkv()
    expected = ree.ops.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    # Row 0 unpadded, row 1 right-padded to 41 tokens, row 2 left-padded to 9.
    keys = torch.zeros(3, 70, dtype=torch.bool)
    keys[0], keys[1, :41], keys[2, -9:] = True, True, True
    mask = torch.ones(70, 70, dtype=torch.bool).tril()[None, None] & keys[:, None, None, :]
    additive = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
    with ree.reproducible():
        causal = sdpa(q, k, v, is_causal=True, enable_gqa=True)
        masked = sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
        masked_float = sdpa(q, k, v, attn_mask=additive, enable_gqa=True)
        decode = sdpa(q[:, :, -1:], k, v, enable_gqa=True)  # one query, no mask: sees every key
    assert_bits_equal(causal, expected.transpose(1, 2), "causal")
    assert_bits_equal(decode, expected.transpose(1, 2)[:, :, -1:], "one query")
    assert_bits_equal(masked_float, masked, "additive mask")
    assert_bits_equal(masked[0], causal[0], "unpadded row")
    assert_bits_equal(masked[1, :, :41], causal[1, :, :41], "right-padded row")
    alone = ree.ops.attention(q[2:3, :, -9:].transpose(1, 2), k[2:3, :, -9:].transpose(1, 2),
                              v[2:3, :, -9:].transpose(1, 2))
    assert_bits_equal(masked[2, :, -9:], alone[0].transpose(0, 1), "left-padded row")
    assert not masked[2, :, :-9].any() and not masked[1, :, 41:].any(), "padded queries"


def test_sdpa_without_a_repop_raises():
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = qkv(kv_heads=4, length=12)
    ones = torch.ones(12, 12, dtype=torch.bool)
    window = ones.tril() & ~ones.tril(-4)
    with ree.reproducible():
        with pytest.raises(NotImplementedError, match="not causal"):
            sdpa(q, k, v)  # bidirectional
        with pytest.raises(NotImplementedError, match="not causal with padded keys"):
            sdpa(q, k, v, attn_mask=window)  # a sliding window
        with pytest.raises(NotImplementedError, match="attention bias"):
            sdpa(q, k, v, attn_mask=torch.randn(12, 12))
        with pytest.raises(NotImplementedError, match="dropout"):
            sdpa(q, k, v, is_causal=True, dropout_p=0.1)
    sdpa(q, k, v)  # ATen's again


def test_model_swaps_and_restores():
    """Inside the context a Llama's RMSNorms run as ree.ops.rms_norm and its rotary embedding
    holds REE's correctly rounded inverse frequencies; everything is restored on exit."""
    model = tiny_llama()
    rotary, norm = model.model.rotary_emb, model.model.norm
    before = rotary.inv_freq.clone()
    x = torch.randn(2, 5, 64)
    with ree.reproducible(model):
        assert_bits_equal(rotary.inv_freq, ree.ops.rope_inv_freq(16, 10000.0), "inv_freq")
        assert_bits_equal(norm(x), ree.ops.rms_norm(x, norm.weight, 1e-5, True), "RMSNorm")
        assert model.config._attn_implementation == "ree"
    assert "forward" not in norm.__dict__
    assert_bits_equal(rotary.inv_freq, before, "inv_freq restored")
    assert_bits_equal(rotary.original_inv_freq, before, "original_inv_freq restored")
    assert model.config._attn_implementation == "sdpa"


def test_without_model_sdpa_llama_is_batch_invariant():
    """ree.reproducible() without the model: a transformers Llama on SDPA reaches REE's attention
    through the scaled_dot_product_attention override, padded batches included."""
    model = tiny_llama()
    g = torch.Generator().manual_seed(6)
    a, b = torch.randint(0, 300, (1, 90), generator=g), torch.randint(0, 300, (1, 90), generator=g)
    mask = torch.ones(2, 90, dtype=torch.long)
    mask[1, 60:] = 0
    with ree.reproducible():
        alone, short = logits(model, a), logits(model, b[:, :60])
        pair = logits(model, torch.cat([b, a]))
        padded = model(input_ids=torch.cat([a, b]), attention_mask=mask, use_cache=False).logits
    assert_bits_equal(pair[1:2], alone, "a after b")
    assert_bits_equal(padded[0:1], alone, "a beside a padded row")
    assert_bits_equal(padded[1:2, :60], short, "padded row")
