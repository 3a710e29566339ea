"""See the attention: one self-contained HTML page per input, for every modality.

``attnlab.viz.view(model_or_run, inputs)`` returns an :class:`AttentionView`; ``.save("page.html")``
writes the page (all JavaScript and CSS inline, no network), ``._repr_html_()`` shows it in
Jupyter, ``.weights`` are the arrays it shows. The page has a head view (lines from a query to
the keys it attends to, a colour per head), a matrix view (the weights with a colour bar, zoom,
masked pairs drawn as masked), a model view (every layer and head), attention rollout across
layers, and the modality's own picture (a spectrogram, an image's patches, a graph's
neighbourhood, a molecule).
"""

from .api import view
from .capture import capture, view_module
from .page import read_page, render
from .view import Attention, AttentionView, Modality, rollout

__all__ = [
    "view",
    "view_module",
    "capture",
    "Attention",
    "AttentionView",
    "Modality",
    "rollout",
    "render",
    "read_page",
]
