"""Speech tasks: utterances as sequences of 10 ms log-mel frames.

* :mod:`.base`: :class:`SpeechTask`, what every speech task shares (features, batching,
  losses, ``predict`` on WAV files, streaming, the ``show`` picture);
* :mod:`.model`: the speech model and its configuration (front end, encoder, head);
* :mod:`.stream`: streaming inference with causal local attention and bounded caches;
* :mod:`.fsdd`: spoken digits (N -> 1).
"""

from attnlab.lab.tasks.speech.base import IGNORE, SpeechTask, Utterance
from attnlab.lab.tasks.speech.model import (
    CausalTransformerEncoder,
    FrontendConfig,
    SpeechModel,
    SpeechModelConfig,
    build_speech_model,
)

__all__ = [
    "IGNORE",
    "CausalTransformerEncoder",
    "FrontendConfig",
    "SpeechModel",
    "SpeechModelConfig",
    "SpeechTask",
    "Utterance",
    "build_speech_model",
]
