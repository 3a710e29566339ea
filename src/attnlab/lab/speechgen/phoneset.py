"""Festival's ``radio`` phone set, and the link between phone segments and 10 ms frames.

The ``kal_diphone`` voice (Debian ``festvox-kallpc16k``) speaks the ``radio`` phone set of
festival (``/usr/share/festival/radio_phones.scm``): 47 ARPAbet-like phones and the pause
``pau`` (48 labels; festival's ``brth`` and ``h#`` are declared but never produced by this voice,
so they are left out). Every frame gets one of :data:`PHONES`.

Framing follows :class:`attnlab.lab.audio.LogMel`: frame ``t`` covers the samples
``[t * hop, t * hop + win)`` (no centring padding), so there are
``1 + (samples - win) // hop`` frames and frame ``t``'s centre is at
``(t * hop + win / 2) / sample_rate`` seconds. A frame is labelled with the phone whose segment
holds that centre (the homework's labelling).

Legend: ``n`` frames.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["PHONES", "Segment", "num_frames", "frame_labels", "frames_to_segments"]

#: the radio phone set of festival as the kal_diphone voice produces it, ``pau`` last
PHONES: tuple[str, ...] = (
    "aa", "ae", "ah", "ao", "aw", "ax", "axr", "ay", "b", "ch", "d", "dh", "dx", "eh", "el",
    "em", "en", "er", "ey", "f", "g", "hh", "hv", "ih", "iy", "jh", "k", "l", "m", "n", "nx",
    "ng", "ow", "oy", "p", "r", "s", "sh", "t", "th", "uh", "uw", "v", "w", "y", "z", "zh",
    "pau",
)  # fmt: skip


class Segment(NamedTuple):
    """One phone and its time span in seconds (``start`` is the previous segment's end)."""

    phone: str
    start: float
    end: float


def num_frames(samples: int, *, sample_rate: int = 16000, win_ms: float = 25.0,
               hop_ms: float = 10.0) -> int:  # fmt: skip
    """How many whole frames ``samples`` samples hold: ``1 + (samples - win) // hop`` (0 when
    shorter than one window)."""
    win, hop = _win_hop(sample_rate, win_ms, hop_ms)
    return 0 if samples < win else 1 + (samples - win) // hop


def frame_labels(
    segments: Sequence[Segment],
    frames: int,
    *,
    sample_rate: int = 16000,
    win_ms: float = 25.0,
    hop_ms: float = 10.0,
) -> list[str]:
    """The phone at each frame's centre.

    Args:
        segments: the utterance's phones in time order (end times strictly increasing).
        frames: the number of frames (:func:`num_frames` of the audio).
        sample_rate, win_ms, hop_ms: the framing (as the log-mel front end's).

    Returns:
        ``frames`` phone names. A centre after the last segment's end (the audio may run a few
        ms past festival's last phone end) takes the last phone (a pause).

    Raises:
        ValueError: no segments, or end times that do not increase.
    """
    if not segments:
        raise ValueError("segments: expected at least one phone segment, got none")
    ends = [s.end for s in segments]
    if any(b <= a for a, b in zip(ends, ends[1:])):
        raise ValueError(f"segments: end times must increase, got {ends}")
    win, hop = _win_hop(sample_rate, win_ms, hop_ms)
    labels = []
    for t in range(frames):
        centre = (t * hop + win / 2) / sample_rate
        k = min(bisect.bisect_right(ends, centre), len(segments) - 1)  # first end > centre
        labels.append(segments[k].phone)
    return labels


def frames_to_segments(
    labels: Sequence[str],
    *,
    sample_rate: int = 16000,
    win_ms: float = 25.0,
    hop_ms: float = 10.0,
) -> list[Segment]:
    """Merge runs of equal frame labels into segments with times in seconds.

    A run of frames ``t0 .. t1`` spans the halfway points between its frame centres and its
    neighbours' (the first starts at 0, the last ends at the last frame's end), so
    ``frames_to_segments(frame_labels(segs, n))`` gives back ``segs`` to within a frame hop.
    """
    win, hop = _win_hop(sample_rate, win_ms, hop_ms)
    out: list[Segment] = []
    start = 0.0
    for t, label in enumerate(labels):
        if t + 1 < len(labels) and labels[t + 1] == label:
            continue
        # boundary halfway between this frame's centre and the next one's: t*hop + win/2 + hop/2
        last = t + 1 == len(labels)
        end = (t * hop + win) / sample_rate if last else ((t + 0.5) * hop + win / 2) / sample_rate
        out.append(Segment(label, round(start, 4), round(end, 4)))
        start = end
    return out


def _win_hop(sample_rate: int, win_ms: float, hop_ms: float) -> tuple[int, int]:
    win, hop = round(sample_rate * win_ms / 1000), round(sample_rate * hop_ms / 1000)
    if win < 1 or hop < 1:
        raise ValueError(
            f"win_ms={win_ms} and hop_ms={hop_ms} at sample_rate={sample_rate} must each be at "
            "least one sample"
        )
    return win, hop
