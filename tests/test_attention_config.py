"""AttentionConfig: names checked where they are written, with the valid choices listed."""

from __future__ import annotations

import pytest
import torch

from attnlab import AttentionConfig, MultiHeadAttention


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(score="cosine"), "attention.score: unknown score 'cosine'; valid choices: additive"),
        (dict(normalize="max"), "attention.normalize: unknown normalization 'max'; valid choices"),
        (dict(backend="cuda"), "attention.backend: unknown backend 'cuda'; valid choices: auto"),
        (dict(kernel="nope"), "attention.kernel: unknown kernel 'nope'; valid choices: bigbird"),
        (
            dict(kernel="performer", kernel_options={"window": 3}),
            r"attention.kernel_options: kernel 'performer' has no option\(s\) \['window'\]; "
            "valid options: features=256",
        ),
        (dict(kernel_options={"window": 3}), "need attention.kernel"),
        (
            dict(kernel="linear", backend="sdpa"),
            "attention.backend: kernel 'linear' has no backend",
        ),
        (
            dict(kernel="local", backend="cuda"),
            "attention.backend: backend must be 'auto', 'banded'",
        ),
        (
            dict(kernel="local", kernel_options={"backend": "banded"}),
            "attention.kernel_options: .*as attention.backend",
        ),
    ],
)
def test_bad_names_are_errors_that_list_the_choices(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AttentionConfig(**kwargs)


def test_valid_settings_build_the_layer():
    cases = [
        AttentionConfig(),
        AttentionConfig(score="additive", normalize="relu", backend="chunked"),
        AttentionConfig(kernel="performer", kernel_options={"features": 8}),
        AttentionConfig(kernel="local", backend="banded", kernel_options={"window": 2}),
    ]
    x = torch.randn(2, 5, 16)
    for cfg in cases:
        layer = MultiHeadAttention.from_config(16, 4, cfg)
        assert layer(x).out.shape == (2, 5, 16)
    assert MultiHeadAttention.from_config(16, 4, cases[3]).kernel.backend == "banded"


def test_kernel_modules_pass_old_option_names_do_not():
    with pytest.raises(ValueError, match=r"kernel 'local' has no option\(s\) \['impl'\]"):
        AttentionConfig(kernel="local", kernel_options={"impl": "banded"})  # now backend=
    AttentionConfig(kernel=torch.nn.Identity())  # a module is the blocks' business: unchecked
