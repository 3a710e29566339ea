"""Light image augmentation in torch (no torchvision): random crop with zero padding and
random horizontal flips, per image, on whole batches.

Used by the image models in training mode only (the task's ``collate`` stays a pure function
of its examples, as the trainer requires); in eval mode it is the identity.

Legend: ``b`` batch, ``c`` channels, ``H`` / ``W`` image rows / columns.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["RandomCropFlip", "random_crop", "random_hflip"]


# The draws run eagerly under torch.compile: Dynamo cannot trace randint or rand of a symbolic
# batch size (a compiled model meets batches of several sizes), and the draws are cheap.
@torch.compiler.disable
def _draw_ints(high: int, n: int, generator: torch.Generator | None) -> Tensor:
    return torch.randint(0, high, (n,), generator=generator)


@torch.compiler.disable
def _draw_uniform(n: int, generator: torch.Generator | None) -> Tensor:
    return torch.rand(n, generator=generator)


def random_crop(x: Tensor, padding: int, *, generator: torch.Generator | None = None) -> Tensor:
    """Pad ``x`` ``(b, c, H, W)`` with ``padding`` zeros on every side and cut a random
    ``H x W`` window from each image (a shift of at most ``padding`` pixels each way)."""
    if padding == 0:
        return x
    b, _, height, width = x.shape
    padded = nn.functional.pad(x, (padding,) * 4)  # (b, c, H + 2p, W + 2p)
    dy = _draw_ints(2 * padding + 1, b, generator).to(x.device)
    dx = _draw_ints(2 * padding + 1, b, generator).to(x.device)
    rows = dy[:, None] + torch.arange(height, device=x.device)  # (b, H)
    cols = dx[:, None] + torch.arange(width, device=x.device)  # (b, W)
    batch = torch.arange(b, device=x.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]  # (b, H, W, c)
    return out.permute(0, 3, 1, 2).contiguous()


def random_hflip(x: Tensor, p: float = 0.5, *, generator: torch.Generator | None = None) -> Tensor:
    """Mirror each image of ``x`` ``(b, c, H, W)`` left-right with probability ``p``."""
    flip = _draw_uniform(x.shape[0], generator).to(x.device) < p
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


class RandomCropFlip(nn.Module):
    """Random crop with zero padding, then a random horizontal flip, in training mode.

    Args:
        padding: pixels of zero padding before cropping back (0: no crop).
        flip: mirror images left-right with probability 1/2 (right for clothes, wrong for
            digits).

    Shapes: ``(b, c, H, W)`` in and out.
    """

    def __init__(self, *, padding: int = 2, flip: bool = True) -> None:
        super().__init__()
        if not isinstance(padding, int) or padding < 0:
            raise ValueError(f"padding: expected an int >= 0, got {padding!r}")
        self.padding, self.flip = padding, flip

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return x
        if x.dim() != 4:
            raise ValueError(f"x: expected (batch, channels, rows, cols), got {tuple(x.shape)}")
        x = random_crop(x, self.padding)
        return random_hflip(x) if self.flip else x

    def extra_repr(self) -> str:
        return f"padding={self.padding}, flip={self.flip}"
