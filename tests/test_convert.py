"""attnlab.convert: Hugging Face BERT and timm ViT layers, converted, compute the same function.

Each converted module is checked against its source module in float64 (outputs to 1e-10), with
masks where the source takes them. The peers (``transformers``, ``timm``) are optional: their
tests skip with a reason without them. timm is imported against a stub of torchvision where no
torchvision fits the installed torch (``tests/timm_without_torchvision.py``; its ViT never calls
torchvision). The ``mirror`` variant also runs the timm converters against a small copy of timm
1.0's ``Attention`` / ``Block`` / ``Mlp`` forward written here, so they are checked without timm.

Legend: ``b`` batch, ``n`` positions, ``h`` heads.
"""

from __future__ import annotations

import importlib
import sys

import pytest
import torch
from torch import nn

import attnlab.convert
from attnlab import AttentionConfig, MultiHeadAttention, masks
from attnlab.blocks import TransformerBlock
from attnlab.convert import (
    attention_from_hf_bert,
    attention_from_timm,
    block_from_hf_bert,
    block_from_timm,
    mask_from_hf,
)

from .timm_without_torchvision import import_timm

DIM, HEADS, F64 = 16, 4, torch.float64
TOL = {"atol": 1e-10, "rtol": 0}
LENGTHS = [6, 4]  # (b,) valid lengths of a padded batch of n = 6
TIMM_VERSION = "1.0.31"  # the version the Makefile installs


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def hf_masks(lengths: list[int], n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's user-facing ``attention_mask`` ``(b, n)`` (1 = token) and the additive extended
    mask ``(b, 1, 1, n)`` its models hand to every layer (0 = attend, finfo.min = ignore)."""
    user = (torch.arange(n)[None] < torch.tensor(lengths)[:, None]).long()  # (b, n)
    extended = (1.0 - user[:, None, None, :].to(F64)) * torch.finfo(F64).min  # (b, 1, 1, n)
    return user, extended


def randomise_norms(module: nn.Module, seed: int = 1) -> None:
    """Non-trivial LayerNorm affine parameters (they start as ones / zeros)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1 + 0.3 * torch.randn(m.weight.shape, generator=g, dtype=F64))
                m.bias.copy_(0.3 * torch.randn(m.bias.shape, generator=g, dtype=F64))


def shares_storage(a: nn.Module, b: nn.Module) -> bool:
    ptrs = {p.data_ptr() for p in a.parameters()}
    return any(p.data_ptr() in ptrs for p in b.parameters())


def test_convert_imports_without_the_peers(monkeypatch):
    for name in ("transformers", "timm", "torchvision"):
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now raises ImportError
    importlib.reload(attnlab.convert)


# ---- Hugging Face BERT ----------------------------------------------------------------------
@pytest.fixture
def bert():
    pytest.importorskip(
        "transformers",
        reason="transformers is not installed (pip install -e '.[peers]'); it is needed to "
        "check the BERT converters against Hugging Face's modules",
    )
    from transformers.models.bert import modeling_bert

    return modeling_bert


def bert_config(impl: str = "eager", **overrides):
    from transformers import BertConfig

    options = dict(
        hidden_size=DIM, num_attention_heads=HEADS, intermediate_size=24,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation=impl,
    )  # fmt: skip
    return BertConfig(**{**options, **overrides})


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_attention_from_hf_bert_attention(bert, impl):
    torch.manual_seed(0)
    ref = bert.BertAttention(bert_config(impl)).to(F64).eval()
    randomise_norms(ref)
    layer = attention_from_hf_bert(ref)
    x = randn(2, 6, DIM)
    user, extended = hf_masks(LENGTHS, 6)
    with torch.no_grad():
        expected = ref(x, attention_mask=extended)[0]
        heads = ref.self(x, attention_mask=extended)[0]  # the concatenated heads
        # The layer is attention + output dense; BertSelfOutput's residual and LayerNorm are
        # the block's.
        for mask, bias in [
            (mask_from_hf(user), None),
            (masks.padding(LENGTHS), None),
            (None, extended),  # HF's additive mask as a score bias
        ]:
            out = layer(x, mask=mask, bias=bias).out
            torch.testing.assert_close(out, ref.output.dense(heads), **TOL)
            torch.testing.assert_close(ref.output.LayerNorm(x + out), expected, **TOL)
    assert layer.q_proj.weight.dtype == F64 and not layer.training
    assert not shares_storage(layer, ref)


def test_attention_from_hf_bert_self_attention_alone_and_with_output(bert):
    torch.manual_seed(0)
    config = bert_config()
    sa = bert.BertSelfAttention(config).to(F64).eval()
    so = bert.BertSelfOutput(config).to(F64).eval()
    x = randn(2, 6, DIM)
    user, extended = hf_masks(LENGTHS, 6)
    with torch.no_grad():
        heads = sa(x, attention_mask=extended)[0]
        alone = attention_from_hf_bert(sa)  # identity output projection
        assert alone.out_proj.bias is None and torch.equal(
            alone.out_proj.weight, torch.eye(DIM, dtype=F64)
        )
        torch.testing.assert_close(alone(x, mask=mask_from_hf(user)).out, heads, **TOL)
        for output in (so, so.dense):
            layer = attention_from_hf_bert(sa, output=output)
            torch.testing.assert_close(
                layer(x, mask=mask_from_hf(user)).out, so.dense(heads), **TOL
            )


def test_attention_from_hf_bert_cross_attention(bert):
    torch.manual_seed(0)
    config = bert_config(is_decoder=True, add_cross_attention=True)
    ref = bert.BertAttention(config, is_cross_attention=True).to(F64).eval()
    layer = attention_from_hf_bert(ref)
    x, mem = randn(2, 5, DIM), randn(2, 6, DIM, seed=1)
    user, extended = hf_masks(LENGTHS, 6)
    with torch.no_grad():
        expected = ref.output.dense(
            ref.self(x, encoder_hidden_states=mem, attention_mask=extended)[0]
        )
        got = layer(x, mem, mask=mask_from_hf(user)).out
    torch.testing.assert_close(got, expected, **TOL)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu", "quick_gelu"])
def test_block_from_hf_bert(bert, impl, act):
    torch.manual_seed(0)
    ref = bert.BertLayer(bert_config(impl, hidden_act=act)).to(F64).eval()
    randomise_norms(ref)
    block = block_from_hf_bert(ref)
    assert not block.norm_first and not block.causal and not block.training
    assert block.ff.fc1.out_features == 24 and block.ff.drop.p == 0.0
    assert all(norm.eps == 1e-12 for norm in (block.attn_norm, block.ff_norm))
    if act != "quick_gelu":  # the known ones become torch modules
        assert type(block.ff.act).__module__.startswith("torch.nn")
    x = randn(2, 6, DIM)
    user, extended = hf_masks(LENGTHS, 6)
    with torch.no_grad():
        expected = ref(x, extended)
        expected = expected[0] if isinstance(expected, tuple) else expected  # transformers 4
        torch.testing.assert_close(block(x, mask=mask_from_hf(user)).out, expected, **TOL)
        torch.testing.assert_close(block(x, mask=masks.padding(LENGTHS)).out, expected, **TOL)
    assert not shares_storage(block, ref)


def test_block_from_hf_bert_decoder_with_cross_attention(bert):
    torch.manual_seed(0)
    ref = bert.BertLayer(bert_config(is_decoder=True, add_cross_attention=True)).to(F64).eval()
    randomise_norms(ref)
    block = block_from_hf_bert(ref, attention=AttentionConfig(backend="reference"))
    assert block.causal and block.cross_attn is not None  # causal from layer.is_decoder
    assert block.self_attn.backend == "reference" and block.cross_attn.backend == "reference"
    x, mem = randn(2, 5, DIM), randn(2, 6, DIM, seed=1)
    user, extended = hf_masks(LENGTHS, 6)
    # HF's decoder gets its causal mask from the model; give it to the layer by hand.
    causal = torch.full((5, 5), torch.finfo(F64).min, dtype=F64).triu(1)[None, None]
    with torch.no_grad():
        expected = ref(x, causal, mem, extended)
        expected = expected[0] if isinstance(expected, tuple) else expected
        got = block(x, context=mem, context_mask=mask_from_hf(user)).out
    torch.testing.assert_close(got, expected, **TOL)


def test_block_from_hf_bert_carries_dropouts_and_mode(bert):
    config = bert_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.2)
    ref = bert.BertLayer(config).to(F64).train()
    block = block_from_hf_bert(ref, causal=False)
    assert block.training and block.drop.p == 0.1 and block.self_attn.dropout == 0.2
    assert block.ff.drop.p == 0.0  # BERT has no dropout inside its feed-forward
    # An efficient kernel forms no attention weights: the attention dropout is dropped.
    approx = block_from_hf_bert(ref, attention=AttentionConfig(kernel="performer"))
    assert approx.self_attn.dropout == 0.0 and approx.drop.p == 0.1


def drop_biases(*linears: nn.Linear) -> None:
    for linear in linears:
        linear.register_parameter("bias", None)


@pytest.mark.parametrize(
    "without",
    [
        ("query", "key", "value"),  # bias-free q/k/v, biased output dense (timm-like)
        ("query",),  # biased keys and values only
        ("key",),  # Whisper-style: bias-free keys
        ("dense",),  # biased q/k/v, bias-free output
    ],
)
def test_attention_from_hf_bert_with_mixed_biases(bert, without):
    """Biases on some projections only: q/k/v share ``qkv_bias`` (a missing one is a zero
    bias), the output dense has ``out_bias``; the layer equals the module in float64."""
    torch.manual_seed(0)
    ref = bert.BertAttention(bert_config()).to(F64).eval()
    own = {"query": ref.self, "key": ref.self, "value": ref.self, "dense": ref.output}
    drop_biases(*(getattr(own[name], name) for name in without))
    layer = attention_from_hf_bert(ref)
    assert (layer.q_proj.bias is None) == (layer.kv_proj.bias is None)
    assert (layer.q_proj.bias is None) == ({"query", "key", "value"} <= set(without))
    assert (layer.out_proj.bias is None) == ("dense" in without)
    x = randn(2, 6, DIM)
    user, extended = hf_masks(LENGTHS, 6)
    with torch.no_grad():
        heads = ref.self(x, attention_mask=extended)[0]
        got = layer(x, mask=mask_from_hf(user)).out
    torch.testing.assert_close(got, ref.output.dense(heads), **TOL)


def test_block_from_hf_bert_with_a_bias_free_feed_forward_map(bert):
    torch.manual_seed(0)
    ref = bert.BertLayer(bert_config()).to(F64).eval()
    randomise_norms(ref)
    drop_biases(ref.output.dense, ref.attention.self.key)
    block = block_from_hf_bert(ref)
    assert block.ff.fc2.bias is not None and not block.ff.fc2.bias.any()  # a zero bias
    x = randn(2, 6, DIM)
    user, extended = hf_masks(LENGTHS, 6)
    with torch.no_grad():
        expected = ref(x, extended)
        expected = expected[0] if isinstance(expected, tuple) else expected
        torch.testing.assert_close(block(x, mask=mask_from_hf(user)).out, expected, **TOL)


def test_hf_bert_conversion_refuses_what_it_cannot_express(bert):
    config = bert_config()
    sa = bert.BertSelfAttention(config)
    sa.position_embedding_type = "relative_key"  # transformers 4's relative positions
    with pytest.raises(ValueError, match="position_embedding_type='relative_key'"):
        attention_from_hf_bert(sa)
    with pytest.raises(ValueError, match="output: a BertAttention brings its own"):
        attention_from_hf_bert(bert.BertAttention(config), output=nn.Linear(DIM, DIM))
    with pytest.raises(TypeError, match="query to be an nn.Linear"):
        attention_from_hf_bert(nn.Linear(DIM, DIM))
    with pytest.raises(TypeError, match="expected a BertLayer"):
        block_from_hf_bert(bert.BertAttention(config))


# ---- mask_from_hf (no peer needed) ----------------------------------------------------------
def test_mask_from_hf_reads_both_forms():
    user, extended = hf_masks(LENGTHS, 6)
    dense = masks.padding(LENGTHS).dense(2, 1, 6, 6)  # True = may attend
    for form in (user, user.bool(), user.float(), extended):
        got = mask_from_hf(form)
        assert got.dtype == torch.bool and got.shape == (2, 1, 1, 6)
        assert torch.equal(got.expand(2, 1, 6, 6), dense.expand(2, 1, 6, 6))
    inf = torch.zeros(2, 1, 6, 6).masked_fill(~dense.expand(2, 1, 6, 6), float("-inf"))
    assert torch.equal(mask_from_hf(inf), dense.expand(2, 1, 6, 6))
    assert mask_from_hf(dense) is dense  # a 4-D boolean mask already means True = attend


def test_mask_from_hf_refuses_other_values_and_shapes():
    with pytest.raises(ValueError, match="pass it as bias="):
        mask_from_hf(torch.full((2, 1, 1, 6), -3.0))
    with pytest.raises(ValueError, match=r"1 \(token\) / 0 \(padding\)"):
        mask_from_hf(torch.tensor([[1, 2, 0]]))
    with pytest.raises(ValueError, match=r"got shape \(2, 6, 6\)"):
        mask_from_hf(torch.ones(2, 6, 6))
    with pytest.raises(TypeError, match="attention_mask: expected a tensor"):
        mask_from_hf([[1, 0]])


# ---- timm ViT -------------------------------------------------------------------------------
# A copy of the forward passes of timm 1.0's Attention (non-fused path), Mlp and Block
# (timm/layers/attention.py, timm/layers/mlp.py, timm/models/vision_transformer.py), with the
# same class and attribute names, so the converters are checked without timm.
class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, qk_norm=False, proj_bias=True,
                 attn_drop=0.0, proj_drop=0.0, norm_layer=None):  # fmt: skip
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.attn_dim, self.scale = dim, self.head_dim**-0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.q_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.norm = nn.Identity()
        self.gate = None
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, attn_mask=None, is_causal=False):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        if is_causal:
            attn = attn + attn.new_full((N, N), float("-inf")).triu_(1)
        elif attn_mask is not None:
            attn = attn.masked_fill(~attn_mask, float("-inf"))
        x = self.attn_drop(attn.softmax(dim=-1)) @ v
        return self.proj_drop(self.proj(self.norm(x.transpose(1, 2).reshape(B, N, C))))


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features, act_layer=nn.GELU, bias=True, drop=0.0):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features, bias=bias)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden_features, in_features, bias=bias)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


class LayerScale(nn.Module):
    def __init__(self, dim, init_values=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class DropPath(nn.Module):
    def __init__(self, drop_prob):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return x  # eval mode


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4.0, qkv_bias=False, qk_norm=False,
                 proj_bias=True, proj_drop=0.0, attn_drop=0.0, init_values=None,
                 drop_path=0.0, act_layer=nn.GELU):  # fmt: skip
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, qkv_bias, qk_norm, proj_bias, attn_drop, proj_drop)
        self.ls1 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path1 = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_layer, proj_bias, proj_drop)
        self.ls2 = LayerScale(dim, init_values) if init_values else nn.Identity()
        self.drop_path2 = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

    def forward(self, x, attn_mask=None, is_causal=False):
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), attn_mask, is_causal)))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class GELUTanh(nn.Module):  # timm.layers.GELUTanh
    def forward(self, x):
        return nn.functional.gelu(x, approximate="tanh")


@pytest.fixture(params=["mirror", "timm"])
def vit(request):
    """Where ``Attention`` / ``Block`` / ``GELUTanh`` come from: the copy above, or timm."""
    if request.param == "mirror":
        return {"Attention": Attention, "Block": Block, "GELUTanh": GELUTanh}
    # timm imports against a stub of torchvision where no torchvision fits the installed torch
    # (tests/timm_without_torchvision.py); any other failure to import it is an error, not a skip
    try:
        layers = import_timm("timm.layers")
    except ModuleNotFoundError as err:
        if err.name != "timm":
            raise
        pytest.skip(
            "timm is not installed: `make install` installs it (or, after the peers extra, "
            f"`pip install --no-deps timm=={TIMM_VERSION}`: torchvision is not needed)"
        )
    vt = import_timm("timm.models.vision_transformer")
    return {"Attention": vt.Attention, "Block": vt.Block, "GELUTanh": layers.GELUTanh}


def padding_bool(lengths: list[int], n: int) -> torch.Tensor:
    return (torch.arange(n)[None] < torch.tensor(lengths)[:, None])[:, None, None, :]


@pytest.mark.parametrize(("qkv_bias", "proj_bias"), [(True, True), (False, False), (True, False)])
def test_attention_from_timm(vit, qkv_bias, proj_bias):
    torch.manual_seed(0)
    ref = vit["Attention"](
        DIM, num_heads=HEADS, qkv_bias=qkv_bias, proj_bias=proj_bias
    ).to(F64).eval()  # fmt: skip
    layer = attention_from_timm(ref)
    assert (layer.q_proj.bias is not None) == qkv_bias and not layer.training
    assert (layer.out_proj.bias is not None) == proj_bias
    x = randn(2, 6, DIM)
    mask = padding_bool(LENGTHS, 6)  # (b, 1, 1, n); timm / SDPA: True = may attend, as here
    with torch.no_grad():
        torch.testing.assert_close(layer(x).out, ref(x), **TOL)
        torch.testing.assert_close(layer(x, mask=mask).out, ref(x, attn_mask=mask), **TOL)
        torch.testing.assert_close(layer(x, mask=masks.causal()).out, ref(x, is_causal=True), **TOL)
    assert not shares_storage(layer, ref)


@pytest.mark.parametrize("init_values", [None, 0.5])
def test_block_from_timm(vit, init_values):
    torch.manual_seed(0)
    ref = vit["Block"](
        DIM, HEADS, mlp_ratio=1.5, qkv_bias=True, init_values=init_values
    ).to(F64).eval()  # fmt: skip
    randomise_norms(ref)
    if init_values:  # a trained LayerScale: per-channel gammas
        with torch.no_grad():
            ref.ls1.gamma.copy_(randn(DIM, seed=2))
            ref.ls2.gamma.copy_(randn(DIM, seed=3))
    block = block_from_timm(ref)
    assert block.norm_first and block.ff.fc1.out_features == 24 and not block.training
    assert block.attn_norm.eps == block.ff_norm.eps == 1e-6
    x = randn(2, 6, DIM)
    mask = padding_bool(LENGTHS, 6)
    with torch.no_grad():
        torch.testing.assert_close(block(x).out, ref(x), **TOL)
        torch.testing.assert_close(block(x, mask=mask).out, ref(x, attn_mask=mask), **TOL)
        got = block_from_timm(ref, causal=True)(x).out
        torch.testing.assert_close(got, ref(x, is_causal=True), **TOL)
    assert not shares_storage(block, ref)


def test_block_from_timm_activation_dropouts_and_settings(vit):
    ref = vit["Block"](
        DIM, HEADS, qkv_bias=True, proj_drop=0.1, attn_drop=0.2, act_layer=vit["GELUTanh"]
    ).to(F64)  # fmt: skip
    block = block_from_timm(ref, attention=AttentionConfig(backend="reference"))
    assert isinstance(block.ff.act, nn.GELU) and block.ff.act.approximate == "tanh"
    assert block.training and block.drop.p == 0.1 and block.ff.drop.p == 0.1
    assert block.self_attn.dropout == 0.2 and block.self_attn.backend == "reference"
    x = randn(2, 5, DIM)
    ref.eval(), block.eval()
    with torch.no_grad():
        torch.testing.assert_close(block(x).out, ref(x), **TOL)


def test_timm_defaults_bias_free_qkv_with_a_biased_proj(vit):
    """timm's defaults (``qkv_bias=False``, ``proj_bias=True``): the layer gets
    ``qkv_bias=False, out_bias=True`` and equals the source; through the classmethods too."""
    torch.manual_seed(0)
    ref = vit["Attention"](DIM, num_heads=HEADS).to(F64).eval()
    assert ref.qkv.bias is None and ref.proj.bias is not None
    layer = attention_from_timm(ref)
    assert layer.q_proj.bias is None and layer.kv_proj.bias is None
    assert layer.out_proj.bias is not None
    block_ref = vit["Block"](DIM, HEADS, mlp_ratio=1.5).to(F64).eval()
    randomise_norms(block_ref)
    block = block_from_timm(block_ref)
    assert block.self_attn.q_proj.bias is None and block.ff.fc1.bias is not None
    x = randn(2, 6, DIM)
    mask = padding_bool(LENGTHS, 6)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, mask=mask).out, ref(x, attn_mask=mask), **TOL)
        torch.testing.assert_close(block(x).out, block_ref(x), **TOL)
        torch.testing.assert_close(block(x, mask=mask).out, block_ref(x, attn_mask=mask), **TOL)


def test_the_classmethods_are_the_converters_and_keep_the_subclass():
    """``MultiHeadAttention.from_timm`` / ``TransformerBlock.from_timm`` give what
    ``attnlab.convert`` gives, and a subclass converts into itself (as ``from_torch``)."""

    class MyAttention(MultiHeadAttention):
        pass

    class MyBlock(TransformerBlock):
        pass

    torch.manual_seed(0)
    attn, block = Attention(DIM, HEADS).double().eval(), Block(DIM, HEADS).double().eval()
    for converted, function in [
        (attention_from_timm(attn), attention_from_timm(attn)),
        (block_from_timm(block, causal=True), block_from_timm(block, causal=True)),
    ]:
        assert type(converted) is type(function)
        got, want = converted.state_dict(), function.state_dict()
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) for k in got)
    assert type(attention_from_timm(attn, cls=MyAttention)) is MyAttention
    assert type(block_from_timm(block, cls=MyBlock)) is MyBlock


def test_timm_conversion_refuses_what_it_cannot_express(vit):
    ref = vit["Attention"](DIM, num_heads=HEADS, qkv_bias=False)
    with pytest.raises(ValueError, match="qk_norm=True"):
        attention_from_timm(
            vit["Attention"](
                DIM, num_heads=HEADS, qkv_bias=True, qk_norm=True, norm_layer=nn.LayerNorm
            )
        )
    with pytest.raises(ValueError, match="drop_path_rate=0"):
        block_from_timm(vit["Block"](DIM, HEADS, qkv_bias=True, drop_path=0.1))
    with pytest.raises(TypeError, match="expected timm.layers.Attention, got Linear"):
        attention_from_timm(nn.Linear(DIM, DIM))
    with pytest.raises(TypeError, match="expected timm.models.vision_transformer.Block"):
        block_from_timm(ref)


def test_from_torch_converts_what_it_is_given():
    from attnlab.blocks import TransformerBlock
    from attnlab.convert import from_torch

    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 2, batch_first=True).double().eval()
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).double().eval()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    ours = from_torch(mha)
    assert isinstance(ours, MultiHeadAttention)
    torch.testing.assert_close(ours(x).out, mha(x, x, x)[0])
    block = from_torch(layer).eval()
    assert isinstance(block, TransformerBlock)
    torch.testing.assert_close(block(x).out, layer(x))
    with pytest.raises(TypeError, match="from_torch converts nn.MultiheadAttention"):
        from_torch(nn.Linear(2, 2))
