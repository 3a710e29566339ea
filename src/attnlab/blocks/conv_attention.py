r"""A convolution *is* a restricted self-attention: :func:`conv_as_attention` builds the exact
multi-head attention layer equal to a given ``nn.Conv2d`` (Cordonnier, Loukas & Jaggi 2020,
"On the relationship between self-attention and convolutional layers", Theorem 1).

Legend: ``b`` batch, ``c`` input channels, ``o`` output channels, ``H`` / ``W`` input rows /
columns, ``P`` / ``Q`` output rows / columns, ``i`` query (output pixel), ``j`` key (input
pixel), ``h`` heads = kernel offsets, ``d`` head dim, ``D = h d`` the layer's width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import MultiHeadAttention

__all__ = ["ConvAsAttention", "conv_as_attention"]


class ConvAsAttention(nn.Module):
    r"""A :class:`~attnlab.attention.MultiHeadAttention` layer that computes ``conv(x)`` exactly.

    **The construction.** A ``kh x kw`` convolution with weights
    :math:`W \in \mathbb{R}^{o \times c \times kh \times kw}` and bias :math:`\beta` computes,
    at output pixel :math:`p` (zero padding :math:`(\pi_r, \pi_c)`, stride 1),

    .. math::
        y_p = \beta + \sum_{\Delta} W_\Delta\, x_{p - \pi + \Delta}, \qquad
        \Delta = (r, s) \in \{0..kh-1\} \times \{0..kw-1\},\;
        W_\Delta = W[:, :, r, s] \in \mathbb{R}^{o \times c},

    where :math:`x_q = 0` outside the image. Multi-head attention with one head per offset
    :math:`\Delta` computes :math:`y_p = \sum_h \mathrm{head}_h(p)\, W^O_h + b^O` with
    :math:`\mathrm{head}_h(p) = \sum_q A^h_{pq}\, x_q W^V_h`. Choose

    * **scores**: :math:`q_p \cdot k_q = 0` (zero query and key projections) plus a
      relative-position bias that is :math:`0` at :math:`q - (p - \pi) = \Delta_h` and
      :math:`-\infty` elsewhere, given as a per-head mask (True only at that offset). The softmax
      of a row with one finite score is exactly 1 there: :math:`A^h_{pq} = [q = p - \pi +
      \Delta_h]`, the *hard* selection that Cordonnier et al. reach as the limit
      :math:`\alpha \to \infty` of the quadratic bias :math:`-\alpha \lVert \delta - \Delta_h
      \rVert^2`. When :math:`p - \pi + \Delta_h` lies outside the image the row is fully
      masked, and a fully masked row is zero: exactly the zero padding.
    * **values**: :math:`W^V_h = W_{\Delta_h}^\top` (``c -> o``, into head ``h``'s ``d >= o``
      coordinates; the rest zero), so :math:`\mathrm{head}_h(p) = W_{\Delta_h} x_{p-\pi+\Delta_h}`.
    * **output**: :math:`W^O` sums the heads (:math:`W^O_h = [I_o; 0]`), :math:`b^O = \beta`.

    Then :math:`\sum_h \mathrm{head}_h(p) W^O_h + b^O = \beta + \sum_\Delta W_\Delta
    x_{p-\pi+\Delta} = y_p`: the convolution, not an approximation. The layer's width is
    :math:`D = h\, d` with :math:`d = \max(o, \lceil c / h \rceil)`; inputs are zero-padded
    from ``c`` to ``D`` channels and the output keeps the first ``o``. With "same" padding the
    pixels attend to each other (self-attention); otherwise the output grid differs from the
    input's, and its pixels (zero vectors: their content is unused) query the input pixels.

    Args:
        conv: the convolution (its weights are copied; later changes to it are not seen).

    Shapes: ``x`` ``(b, c, H, W)`` -> ``(b, o, P, Q)``, ``P = H + 2 \pi_r - kh + 1``.

    Raises:
        ValueError: what the construction does not cover: ``stride != 1``, ``dilation != 1``,
            ``groups != 1``, a ``padding_mode`` other than ``"zeros"``; the message says which.
    """

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        _check_conv(conv)
        o, c, kh, kw = conv.weight.shape
        heads = kh * kw
        head_dim = max(o, -(-c // heads))
        dim = heads * head_dim
        self.in_channels, self.out_channels, self.kernel_size = c, o, (kh, kw)
        self.padding = _padding(conv)
        weight = conv.weight.detach()
        self.attention = MultiHeadAttention(
            dim, heads, context_dim=dim, bias=True,
        ).to(dtype=weight.dtype, device=weight.device)  # fmt: skip
        with torch.no_grad():
            for p in self.attention.parameters():
                p.zero_()
            # kv_proj rows [0, dim) are the keys (left zero), [dim, 2 dim) the values.
            w_v = self.attention.kv_proj.weight[dim:]  # (D, D): head h owns rows h d .. h d + o
            w_o = self.attention.out_proj.weight  # (D, D): out row r sums column h d + r
            for h in range(heads):
                r, s = divmod(h, kw)  # head h <-> offset (r, s)
                w_v[h * head_dim : h * head_dim + o, :c] = weight[:, :, r, s]
                w_o[:o, h * head_dim : h * head_dim + o] += torch.eye(o, dtype=weight.dtype)
            if conv.bias is not None:
                self.attention.out_proj.bias[:o] = conv.bias.detach()
        self._masks: dict[tuple, Tensor] = {}

    def selection_mask(self, height: int, width: int, device=None) -> Tensor:
        """The per-head hard selection ``(1, h, P Q, H W)``: True where input pixel ``j`` sits
        at head ``h``'s offset from output pixel ``i``."""
        key = (height, width, str(device))
        if key not in self._masks:
            (kh, kw), (pr, pc) = self.kernel_size, self.padding
            rows, cols = height + 2 * pr - kh + 1, width + 2 * pc - kw + 1
            p_r = torch.arange(rows, device=device).repeat_interleave(cols)  # (P Q,)
            p_c = torch.arange(cols, device=device).repeat(rows)
            j = torch.arange(height * width, device=device)
            j_r, j_c = j // width, j % width  # (H W,)
            r = torch.arange(kh, device=device).repeat_interleave(kw)  # (h,)
            s = torch.arange(kw, device=device).repeat(kh)
            want_r = p_r[None, :] - pr + r[:, None]  # (h, P Q)
            want_c = p_c[None, :] - pc + s[:, None]
            mask = (j_r[None, None, :] == want_r[..., None]) & (
                j_c[None, None, :] == want_c[..., None]
            )  # (h, P Q, H W)
            self._masks[key] = mask[None]
        return self._masks[key]

    def forward(self, x: Tensor, *, need_weights: bool = False) -> Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(
                f"x: expected (batch, {self.in_channels}, rows, cols), got {tuple(x.shape)}"
            )
        b, c, height, width = x.shape
        (kh, kw), (pr, pc) = self.kernel_size, self.padding
        rows, cols = height + 2 * pr - kh + 1, width + 2 * pc - kw + 1
        if rows <= 0 or cols <= 0:
            raise ValueError(
                f"x: a {height}x{width} image is smaller than the {kh}x{kw} kernel with "
                f"padding {self.padding}"
            )
        dim = self.attention.dim
        pixels = F.pad(x.flatten(2).transpose(1, 2), (0, dim - c))  # (b, H W, D)
        mask = self.selection_mask(height, width, x.device)
        if (rows, cols) == (height, width):  # "same" padding: the pixels attend to each other
            out = self.attention(pixels, mask=mask).out  # (b, H W, D)
        else:  # the output grid differs: its pixels query the input's (zero vectors suffice)
            queries = x.new_zeros(b, rows * cols, dim)  # (b, P Q, D)
            out = self.attention(queries, pixels, mask=mask).out  # (b, P Q, D)
        out = out[..., : self.out_channels].transpose(1, 2)  # (b, o, P Q)
        return out.reshape(b, self.out_channels, rows, cols)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"padding={self.padding}, heads={self.attention.heads}"
        )


def _check_conv(conv: nn.Conv2d) -> None:
    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"conv: expected an nn.Conv2d, got {type(conv).__name__}")
    unsupported = {
        "stride": (conv.stride, (1, 1)),
        "dilation": (conv.dilation, (1, 1)),
        "groups": (conv.groups, 1),
        "padding_mode": (conv.padding_mode, "zeros"),
    }
    for name, (got, want) in unsupported.items():
        if got != want:
            raise ValueError(
                f"conv_as_attention: conv.{name}={got!r} is not supported (the exact "
                f"construction covers {name}={want!r}: stride 1, no dilation, one group, zero "
                "padding); use a convolution with those settings"
            )


def _padding(conv: nn.Conv2d) -> tuple[int, int]:
    """The zero padding ``(rows, cols)`` on each side (``"same"`` / ``"valid"`` resolved)."""
    if conv.padding == "valid":
        return (0, 0)
    if conv.padding == "same":
        kh, kw = conv.kernel_size
        if kh % 2 == 0 or kw % 2 == 0:
            raise ValueError(
                f"conv_as_attention: padding='same' with an even kernel {conv.kernel_size} pads "
                "unevenly; use an odd kernel or explicit padding"
            )
        return (kh // 2, kw // 2)
    return (int(conv.padding[0]), int(conv.padding[1]))


def conv_as_attention(conv: nn.Conv2d) -> ConvAsAttention:
    """The multi-head self-attention layer equal to ``conv`` (:class:`ConvAsAttention`)."""
    return ConvAsAttention(conv)
