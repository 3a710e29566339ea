"""``AttentionConfig``: a model's attention settings, one typed object passed down whole.

Blocks, encoders and model configurations carry one :class:`AttentionConfig` instead of a
free-form ``dict`` of keyword arguments, so a misspelt option is an error where it is written
(``--model.encoder.attention.kernel=performer`` on the command line) rather than deep inside a
constructor, and every layer of a model is built from the same settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["AttentionConfig"]


@dataclass
class AttentionConfig:
    """Which attention maths every :class:`~attnlab.MultiHeadAttention` of a model runs.

    Args:
        score: relevance score: ``"scaled_dot"``, ``"dot"`` or ``"additive"``.
        normalize: ``"softmax"``, ``"relu"``, ``"sigmoid"`` or ``"none"``.
        backend: exact-attention backend: ``"auto"``, ``"reference"``, ``"sdpa"``, ``"flex"``
            or ``"chunked"``.
        kernel: ``None`` for exact attention, or the registered name of an efficient kernel
            (``"performer"``, ``"linformer"``, ...), which replaces the exact maths.
        kernel_options: that kernel's constructor options (e.g. ``{"features": 128}``).
    """

    score: str = "scaled_dot"
    normalize: str = "softmax"
    backend: str = "auto"
    kernel: str | None = None
    kernel_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kernel_options and self.kernel is None:
            raise ValueError(
                f"attention.kernel_options {sorted(self.kernel_options)} need attention.kernel "
                "(a kernel name)"
            )

    def layer_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~attnlab.MultiHeadAttention` for these settings."""
        kwargs: dict[str, Any] = {
            "score": self.score, "normalize": self.normalize, "backend": self.backend,
        }  # fmt: skip
        if self.kernel is not None:
            kwargs.update(kernel=self.kernel, **self.kernel_options)
        return kwargs
