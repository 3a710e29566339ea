"""The convolutional stems (hybrid, cnn) with batch norm and ReLU, and max pooling, fused
(attnlab.native): one training step gives the logits and gradients of PyTorch's BatchNorm2d,
ReLU and MaxPool2d, in float32 and under bfloat16 autocast, and a model saved with
``Sequential(conv, BatchNorm2d, ReLU)`` stems loads."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab.lab.tasks.images import ImageModelConfig
from attnlab.lab.tasks.images.encoders import CNNConfig, HybridConfig
from attnlab.lab.tasks.images.model import build_image_model
from attnlab.native import BatchNormReLU2d, MaxPool2x2, unavailable_reason

CONFIGS = {
    "hybrid": HybridConfig(stem=4, stem_depth=2, downsample=2, stem_tail=1, dim=8, heads=2,
                           ff_hidden=8, dropout=0.0, attention_dropout=0.0),
    "cnn": CNNConfig(channels=(4, 8), dropout=0.0),
}  # fmt: skip


def _model(kind: str) -> nn.Module:
    torch.manual_seed(0)
    cfg = ImageModelConfig(encoder=CONFIGS[kind])
    return build_image_model(cfg, size=(8, 8), num_classes=10).train()


def _step(model: nn.Module, images: torch.Tensor, bf16: bool):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model({"images": images})
    logits.float().logsumexp(-1).sum().backward()
    return logits.float(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"fused op: {unavailable_reason()}")
@pytest.mark.parametrize("kind", sorted(CONFIGS))
@pytest.mark.parametrize("bf16", [False, True])
def test_a_training_step_equals_pytorchs_operators(kind, bf16, monkeypatch):
    images = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    fusible = (BatchNormReLU2d, MaxPool2x2)
    layers = [m for m in _model(kind).modules() if isinstance(m, fusible)]
    assert {type(m) for m in layers} == set(fusible)
    calls = []
    for cls in fusible:
        fused = cls.fused
        monkeypatch.setattr(cls, "fused", lambda self, x, f=fused: calls.append(f(self, x)) or
                            calls[-1])  # fmt: skip
    torch.manual_seed(2)  # the crop augmentation's draws
    logits, grads = _step(_model(kind), images, bf16)
    assert len(calls) == len(layers) and all(calls)  # each layer ran fused
    for cls in fusible:
        monkeypatch.setattr(cls, "fused", lambda self, x: False)
    torch.manual_seed(2)
    want_logits, want_grads = _step(_model(kind), images, bf16)
    tolerance = dict(rtol=2e-2, atol=2e-2) if bf16 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(logits, want_logits, **tolerance)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, want_grads[name], **tolerance, msg=name)


def test_a_stem_saved_with_batch_norm_and_relu_modules_loads():
    old = _model("hybrid")
    stems = [m for m in old.modules() if isinstance(m, nn.Sequential) and len(m) == 2
             and isinstance(m[1], BatchNormReLU2d)]  # fmt: skip
    assert stems
    for conv_bn_relu in stems:  # as _conv built them before: conv, BatchNorm2d, ReLU
        conv_bn_relu[1] = nn.BatchNorm2d(conv_bn_relu[1].num_features)
        conv_bn_relu.append(nn.ReLU())
    with torch.no_grad():
        for tensor in old.state_dict().values():
            tensor.add_(1)  # other values than a new model's
    new = _model("hybrid")
    new.load_state_dict(old.state_dict())
    for (name, got), want in zip(new.state_dict().items(), old.state_dict().values()):
        assert torch.equal(got, want), name
