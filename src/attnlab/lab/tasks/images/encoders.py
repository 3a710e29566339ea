r"""The image encoders (N vectors -> 1): an image as a set of pixels, of patches, of CNN
features, and the CNN baseline; each with its configuration, chosen by ``kind``.

* ``pixels``: every pixel is a token (``H W`` tokens of width ``dim``: a linear map of its
  grey value) with a 2-D positional encoding; full attention or a 2-D window
  (:func:`attnlab.masks.grid_local`, ``window=r``).
* ``patches``: ViT (Dosovitskiy et al. 2021): ``p x p`` patches, each linearly embedded
  (a stride-``p`` convolution), ``(H / p)(W / p)`` tokens.
* ``hybrid``: a CNN as the stem (3x3 convolutions, 2x2 max pooling ``log2(downsample)``
  times, then ``stem_tail`` convolutions at the token grid), each feature vector a token, then
  self-attention over the feature map (the lecture's "use both": the convolutions' fixed 3x3
  receptive fields first, then attention over all of the map). By default the stem is the
  ``cnn`` baseline's whole feature extractor (its last stage at width 112) and one attention
  block follows.
* ``cnn``: 3x3 convolutions with batch norm and max pooling, then global average pooling.

The three attention encoders share :class:`GridTransformer`: an optional CLS token, a 2-D
positional encoding (:data:`attnlab.positional.GRID_POSITIONAL`), pre-norm
:class:`~attnlab.blocks.TransformerEncoder` blocks, and CLS or mean pooling.

Legend: ``b`` batch, ``c`` channels, ``H`` / ``W`` image rows / columns, ``n`` tokens, ``D``
width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal, NamedTuple

import torch
from torch import Tensor, nn

from attnlab import masks
from attnlab.blocks import TransformerEncoder, TrunkConfig
from attnlab.dropout import Dropout
from attnlab.native import BatchNormReLU2d, MaxPool2x2
from attnlab.positional import GRID_POSITIONAL

__all__ = [
    "CNNConfig",
    "CNNImageEncoder",
    "EncodedImage",
    "GridTransformer",
    "HybridConfig",
    "ImageEncoderConfig",
    "PatchesConfig",
    "PixelsConfig",
    "TokenImageEncoder",
    "build_image_encoder",
]

_KINDS: dict[str, type[ImageEncoderConfig]] = {}


class EncodedImage(NamedTuple):
    pooled: Tensor  # (b, D)
    weights: list[Tensor] | None  # per layer (b, h, n, n), when asked for
    grid: tuple[int, int]  # the token grid (rows, cols) behind the weights
    prefix: int  # tokens before the grid (1 with a CLS token)


@dataclass
class ImageEncoderConfig:
    """The image encoder; ``kind`` (``pixels``, ``patches``, ``hybrid``, ``cnn``) chooses its
    dataclass. Setting ``kind`` switches to that kind's defaults, then the section's other
    settings apply."""

    kind: str = "patches"

    @classmethod
    def kinds(cls) -> dict[str, type[ImageEncoderConfig]]:
        return dict(_KINDS)

    def switch_kind(self, kind: str) -> ImageEncoderConfig:
        if kind not in _KINDS:
            raise ValueError(f"unknown image encoder kind {kind!r}; valid: {', '.join(_KINDS)}")
        return self if kind == self.kind else _KINDS[kind]()

    def __post_init__(self) -> None:
        if _KINDS.get(self.kind) is not type(self):
            raise ValueError(
                f"{type(self).__name__} is not the config of image encoder kind {self.kind!r}; "
                f"valid kinds: {', '.join(_KINDS)}"
            )


def _kind(name: str):
    def register(cls):
        _KINDS[name] = cls
        return cls

    return register


@dataclass
class _AttentionSettings(ImageEncoderConfig, TrunkConfig):
    """Settings of the self-attention encoders: the trunk's
    (:class:`~attnlab.blocks.TrunkConfig`: ``depth``, ``heads``, ``ff_hidden`` (None: 4 x
    ``dim``), ``dropout``, ``norm_first``, ``attention``) and the image's own.

    Args:
        dim: token width ``D``.
        pooling: ``cls`` (a learned CLS token, its output) or ``mean`` (of the grid's outputs).
        positional: ``learned2d`` (row + column), ``sinusoidal2d``, ``relative2d`` (a learned
            2-D relative score bias) or none.
        window: a 2-D attention window radius (``masks.grid_local``; the CLS token stays
            global), or None for full attention.
    """

    dim: int = 64
    depth: int = 4
    ff_hidden: int | None = 128
    dropout: float = 0.0
    pooling: Literal["cls", "mean"] = "cls"
    positional: str | None = "learned2d"
    window: int | None = None

    where: ClassVar[str] = "model.encoder"

    def __post_init__(self) -> None:
        ImageEncoderConfig.__post_init__(self)
        TrunkConfig.__post_init__(self)
        if self.positional is not None:
            GRID_POSITIONAL.get(self.positional)  # an unknown name lists the valid ones
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling: expected 'cls' or 'mean', got {self.pooling!r}")
        if self.dim <= 0:
            raise ValueError(f"model.encoder.dim must be >= 1, got {self.dim}")
        self.check_width(self.dim)


@_kind("pixels")
@dataclass
class PixelsConfig(_AttentionSettings):
    """Every pixel a token (see :class:`_AttentionSettings` for the fields)."""

    kind: str = "pixels"
    dim: int = 32
    depth: int = 2
    ff_hidden: int | None = 64


@_kind("patches")
@dataclass
class PatchesConfig(_AttentionSettings):
    """ViT (see :class:`_AttentionSettings` for the shared fields).

    Args:
        patch: the patch side ``p``; must divide the image's sides (4 or 7 for 28x28).
    """

    kind: str = "patches"
    patch: int = 4
    depth: int = 6


@_kind("hybrid")
@dataclass
class HybridConfig(_AttentionSettings):
    """CNN stem then self-attention (see :class:`_AttentionSettings` for the shared fields).

    The defaults are the ``cnn`` baseline's convolutions (its third stage at width 112 instead
    of 128), then one attention block of width 112 (4 heads, feed-forward 112) over their 7x7
    map, mean pooled as the CNN is: 322k parameters against the CNN's 288k. Attention *in
    place of* the CNN's third stage (``stem_tail=0, dim=96, depth=3, ff_hidden=192``, the CNN's
    size) trained to 0.2-0.3 points below the CNN on test; after it, 0.26 above it on test but
    0.18 below it on dev, so selected on dev the CNN leads (BENCHMARKS.md).

    Args:
        stem: channels of the stem's first stage (doubling at each following stage).
        stem_depth: 3x3 convolutions (batch norm, ReLU) per stage.
        downsample: total stride of the stem, a power of 2: ``log2(downsample)`` stages, each
            ending in 2x2 max pooling (4: 28x28 -> 7x7 tokens; 1: one stage, no pooling).
        stem_tail: 3x3 convolutions (batch norm, ReLU) of width ``dim`` at the token grid's
            resolution, after the last pooling, making the tokens (0: a 1x1 convolution, a
            linear map of each feature vector). With 2 (the default), the stem is the CNN's
            three stages; with 1, its first two and the first convolution of its third.
    """

    kind: str = "hybrid"
    stem: int = 32
    stem_depth: int = 2
    downsample: int = 4
    stem_tail: int = 2
    dim: int = 112
    depth: int = 1
    ff_hidden: int | None = 112
    pooling: Literal["cls", "mean"] = "mean"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stem <= 0 or self.stem_depth <= 0:
            raise ValueError(
                f"model.encoder.stem={self.stem}, stem_depth={self.stem_depth}: expected both > 0"
            )
        if self.stem_tail < 0:
            raise ValueError(f"model.encoder.stem_tail={self.stem_tail}: expected >= 0")


@_kind("cnn")
@dataclass
class CNNConfig(ImageEncoderConfig):
    """The CNN baseline.

    Args:
        channels: per stage, two 3x3 convolutions (batch norm, ReLU) of this width, then 2x2
            max pooling (none after the last stage), then global average pooling.
        dropout: dropout on the pooled features.
    """

    kind: str = "cnn"
    channels: tuple[int, ...] = (32, 64, 128)
    dropout: float = 0.0


class GridTransformer(nn.Module):
    """Self-attention over a grid of tokens, pooled to one vector.

    Args:
        cfg: the attention settings.
        grid: ``(rows, cols)`` of the token grid.

    Shapes: tokens ``(b, rows * cols, D)`` -> :class:`EncodedImage`.
    """

    def __init__(self, cfg: _AttentionSettings, grid: tuple[int, int]) -> None:
        super().__init__()
        self.grid, self.pooling = grid, cfg.pooling
        self.prefix = 1 if cfg.pooling == "cls" else 0
        self.cls = nn.Parameter(torch.randn(1, 1, cfg.dim) * 0.02) if self.prefix else None
        pe = None
        if cfg.positional is not None:
            cls = GRID_POSITIONAL.get(cfg.positional)
            size = {"heads": cfg.heads} if cls.acts_on == "scores" else {"dim": cfg.dim}
            pe = cls(**size, height=grid[0], width=grid[1], prefix=self.prefix)
        self.encoder = TransformerEncoder.from_config(cfg.dim, cfg, positional=pe)
        self.mask = None
        if cfg.window is not None:
            self.mask = masks.grid_local(grid[0], grid[1], cfg.window, prefix=self.prefix)

    def forward(self, tokens: Tensor, *, need_weights: bool = False) -> EncodedImage:
        if self.cls is not None:
            tokens = torch.cat([self.cls.expand(tokens.shape[0], -1, -1), tokens], dim=1)
        out = self.encoder(tokens, mask=self.mask, need_weights=need_weights)
        pooled = out.out[:, 0] if self.prefix else out.out.mean(dim=1)  # (b, D)
        return EncodedImage(pooled, out.weights, self.grid, self.prefix)


#: the convolutions' memory layout: channels last (NHWC), in which oneDNN's CPU convolutions
#: run the hybrid's training step 1.34x as fast in bf16 as in NCHW (BENCHMARKS.md, "Training
#: speed"); the outputs flatten to tokens without a copy. Training images already arrived with
#: these strides from the crop augmentation; unaugmented ones (evaluation) did not. Set with
#: ``x.to(memory_format=...)``: a one-channel image counts as contiguous in both layouts, and
#: only ``to`` gives it the strides that make the first convolution choose NHWC.
CONV_LAYOUT = torch.channels_last


def _conv(c_in: int, c_out: int) -> nn.Sequential:
    """A 3x3 convolution, batch norm and ReLU; the last two one layer, fused on a CPU in
    training (:class:`~attnlab.native.BatchNormReLU2d`: its state dict is a ``BatchNorm2d``'s,
    so the checkpoints of ``Sequential(conv, BatchNorm2d, ReLU)`` load)."""
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), BatchNormReLU2d(c_out))


class TokenImageEncoder(nn.Module):
    """An image -> tokens stage (``embed``: pixels, patches or a CNN stem) and a
    :class:`GridTransformer`.

    ``size``: the ``(H, W)`` it was built for, checked exactly (a stride-``p`` patch embedding
    or a pooling stem silently drops the rows that do not fit, so a 9x9 image would give an 8x8
    model's token grid); None: only the token grid is checked.

    Shapes: x ``(b, 1, H, W)`` -> :class:`EncodedImage` (pooled ``(b, D)``).
    """

    def __init__(
        self, embed: nn.Module, body: GridTransformer, dim: int,
        size: tuple[int, int] | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.embed, self.body, self.dim = embed, body, dim
        self.size = None if size is None else (int(size[0]), int(size[1]))

    def forward(self, x: Tensor, *, need_weights: bool = False) -> EncodedImage:
        if self.size is not None and tuple(x.shape[-2:]) != self.size:
            raise ValueError(
                f"x: expected images of (H, W) = {self.size}, the size this encoder was built "
                f"for; got {tuple(x.shape[-2:])}"
            )
        features = self.embed(x.to(memory_format=CONV_LAYOUT))  # (b, D, rows, cols)
        if tuple(features.shape[-2:]) != self.body.grid:
            raise ValueError(
                f"x: a {tuple(x.shape[-2:])} image gives a {tuple(features.shape[-2:])} token "
                f"grid; this model was built for {self.body.grid}"
            )
        tokens = features.flatten(2).transpose(1, 2)  # (b, rows * cols, D)
        return self.body(tokens, need_weights=need_weights)


def _stages(c_in: int, widths: list[int], depth: int, pools: int) -> list[nn.Module]:
    """``depth`` 3x3 convolutions per width in ``widths``; 2x2 max pooling after the first
    ``pools`` stages."""
    layers: list[nn.Module] = []
    for i, c in enumerate(widths):
        layers += [_conv(c_in if j == 0 else c, c) for j in range(depth)]
        if i < pools:
            layers.append(MaxPool2x2())  # nn.MaxPool2d(2), fused on a CPU
        c_in = c
    return layers


class CNNImageEncoder(nn.Module):
    """The CNN baseline (see :class:`CNNConfig`). Shapes: ``(b, 1, H, W)`` -> pooled
    ``(b, channels[-1])``; it has no attention weights."""

    def __init__(self, cfg: CNNConfig, in_channels: int = 1) -> None:
        super().__init__()
        widths = list(cfg.channels)
        self.features = nn.Sequential(*_stages(in_channels, widths, 2, pools=len(widths) - 1))
        self.drop = Dropout(cfg.dropout)
        self.dim = widths[-1]

    def forward(self, x: Tensor, *, need_weights: bool = False) -> EncodedImage:
        pooled = self.features(x.to(memory_format=CONV_LAYOUT)).mean(dim=(2, 3))  # (b, c)
        return EncodedImage(self.drop(pooled), None, (0, 0), 0)


def build_image_encoder(
    cfg: ImageEncoderConfig, size: tuple[int, int], channels: int = 1
) -> nn.Module:
    """The encoder ``cfg`` describes, for images of ``size = (H, W)`` with ``channels`` channels
    (1: greyscale, 3: RGB).

    Raises:
        ValueError: a patch size or downsampling that does not divide the image.
    """
    height, width = size
    if isinstance(cfg, CNNConfig):
        return CNNImageEncoder(cfg, channels)
    if isinstance(cfg, PixelsConfig):
        embed: nn.Module = nn.Conv2d(channels, cfg.dim, 1)  # a linear map of each pixel
        grid = (height, width)
    elif isinstance(cfg, PatchesConfig):
        if height % cfg.patch or width % cfg.patch:
            raise ValueError(
                f"model.encoder.patch={cfg.patch} does not divide the {height}x{width} images; "
                "use a divisor (4 or 7 for 28x28, 2 or 4 for 8x8)"
            )
        embed = nn.Conv2d(channels, cfg.dim, cfg.patch, stride=cfg.patch)  # a linear map per patch
        grid = (height // cfg.patch, width // cfg.patch)
    elif isinstance(cfg, HybridConfig):
        steps = int(math.log2(cfg.downsample)) if cfg.downsample > 0 else -1
        if 2**steps != cfg.downsample or height % cfg.downsample or width % cfg.downsample:
            raise ValueError(
                f"model.encoder.downsample={cfg.downsample}: expected a power of 2 dividing the "
                f"{height}x{width} images"
            )
        widths = [cfg.stem * 2**i for i in range(max(steps, 1))]
        stem = _stages(channels, widths, cfg.stem_depth, pools=steps)
        if cfg.stem_tail:
            stem += _stages(widths[-1], [cfg.dim], cfg.stem_tail, pools=0)
        else:
            stem.append(nn.Conv2d(widths[-1], cfg.dim, 1))  # a linear map per position
        embed = nn.Sequential(*stem)  # a token per position
        grid = (height // cfg.downsample, width // cfg.downsample)
    else:
        raise ValueError(f"unknown image encoder config {type(cfg).__name__}")
    return TokenImageEncoder(embed, GridTransformer(cfg, grid), cfg.dim, size=(height, width))
