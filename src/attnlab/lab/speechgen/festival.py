"""Run Debian's ``festival`` in batch: many sentences -> WAV files and phone end times.

One Scheme script per worker selects the ``kal_diphone`` voice (``festvox-kallpc16k``, 16 kHz)
and, per utterance, sets its speaking rate (``Duration_Stretch``: > 1 is slower) and pitch
(``int_lr_params``: the target F0 mean and standard deviation of the LR intonation model, in
Hz), synthesises the text, and saves the waveform (``utt.save.wave``, RIFF) and the phone
segments (``utt.save.segs``: one ``END 100 PHONE`` line per phone). Festival starts in ~0.1 s
and speaks a sentence in a few tens of ms, so a worker takes a whole chunk of sentences.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from attnlab.lab.speechgen.phoneset import PHONES, Segment

__all__ = [
    "VOICE",
    "FestivalUnavailable",
    "Utterance",
    "festival_version",
    "read_segs",
    "scheme_string",
    "synthesize",
]

VOICE = "kal_diphone"
INSTALL_HINT = "apt-get install festival festvox-kallpc16k"
_TIMEOUT_PER_UTTERANCE_S = 30.0


class FestivalUnavailable(OSError):
    """``festival`` or its ``kal_diphone`` voice is not installed (an ``OSError``: the command
    line reports it as one line, with the install command)."""


@dataclass(frozen=True)
class Utterance:
    """One sentence to speak and how.

    Args:
        key: file stem of its outputs (``KEY.wav``, ``KEY.segs``); letters, digits, ``-_``.
        text: what to say.
        stretch: ``Duration_Stretch`` (1.0: the voice's rate; 1.2: 20% slower).
        f0_mean: target F0 mean in Hz (the voice's own: 105).
        f0_std: target F0 standard deviation in Hz (the voice's own: 14).
    """

    key: str
    text: str
    stretch: float = 1.0
    f0_mean: float = 105.0
    f0_std: float = 14.0


def festival_version() -> str:
    """``festival --version``'s line, e.g. ``"festival: ... 2.5.0:release December 2017"``.

    Raises:
        FestivalUnavailable: no ``festival`` on the PATH (the message says how to install it).
    """
    exe = shutil.which("festival")
    if exe is None:
        raise FestivalUnavailable(
            f"festival is not installed (no 'festival' on PATH); install it with: {INSTALL_HINT}"
        )
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    return (out.stdout or out.stderr).strip()


def scheme_string(text: str) -> str:
    """``text`` as a Scheme string literal (backslashes and quotes escaped, one line)."""
    flat = " ".join(text.split())
    return '"' + flat.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _script(utterances: Sequence[Utterance], out_dir: Path) -> str:
    lines = [
        f"(voice_{VOICE})",
        # (Utterance Text ...) does not evaluate its text, so each call is written out literally
        "(define (attnlab_say utt stretch params wav segs)",
        "  (Parameter.set 'Duration_Stretch stretch)",
        "  (set! int_lr_params params)",
        "  (unwind-protect",
        "    (begin (utt.synth utt) (utt.save.wave utt wav 'riff) (utt.save.segs utt segs))",
        '    (format t "ATTNLAB-FAILED %s\\n" wav)))',
    ]
    for u in utterances:
        params = (f"'((target_f0_mean {u.f0_mean:.2f}) (target_f0_std {u.f0_std:.2f}) "
                  "(model_f0_mean 170) (model_f0_std 34))")  # fmt: skip
        wav, segs = out_dir / f"{u.key}.wav", out_dir / f"{u.key}.segs"
        lines.append(
            f"(attnlab_say (Utterance Text {scheme_string(u.text)}) {u.stretch:.4f} {params} "
            f"{scheme_string(str(wav))} {scheme_string(str(segs))})"
        )
    return "\n".join(lines) + "\n"


def synthesize(
    utterances: Sequence[Utterance], out_dir: str | os.PathLike[str], *, workers: int = 2
) -> None:
    """Speak every utterance into ``out_dir/KEY.wav`` and ``out_dir/KEY.segs``.

    Args:
        utterances: what to say (keys unique).
        out_dir: an existing directory.
        workers: festival processes at once (the sentences are split into that many chunks).

    Raises:
        FestivalUnavailable: festival or the voice is missing.
        RuntimeError: festival failed on a sentence (the message names it) or exited badly.
    """
    exe = shutil.which("festival")
    if exe is None:
        festival_version()  # raises with the install hint
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    out = Path(out_dir)
    chunks = [list(utterances[i::workers]) for i in range(workers)]
    chunks = [c for c in chunks if c]

    def run(chunk: list[Utterance]) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".scm", dir=out, delete=False) as f:
            f.write(_script(chunk, out))
        try:
            proc = subprocess.run(
                [exe, "-b", f.name], capture_output=True, text=True,
                timeout=60 + _TIMEOUT_PER_UTTERANCE_S * len(chunk),
            )  # fmt: skip
        finally:
            os.unlink(f.name)
        log = proc.stdout + proc.stderr
        if f"voice_{VOICE}" in log and "unbound variable" in log:
            raise FestivalUnavailable(
                f"festival has no {VOICE} voice; install it with: {INSTALL_HINT}"
            )
        by_key = {u.key: u for u in chunk}
        for u in chunk:
            if not (out / f"{u.key}.segs").exists() or f"{u.key}.wav" in log:
                text = by_key[u.key].text
                raise RuntimeError(f"festival could not speak {text!r}: {log.strip()[-500:]}")

    with ThreadPoolExecutor(max_workers=len(chunks) or 1) as pool:
        list(pool.map(run, chunks))


def read_segs(path: str | os.PathLike[str]) -> list[Segment]:
    """The phone segments of a festival ``.segs`` file (``#`` then ``END 100 PHONE`` lines).

    Phones of zero length (an end time that does not increase) hold no frame and are dropped.

    Raises:
        ValueError: not a segs file, a phone outside :data:`PHONES`, or no phone at all; the
            message names the file.
    """
    segments: list[Segment] = []
    start = 0.0
    lines = Path(path).read_text().splitlines()
    if not lines or lines[0].strip() != "#":
        raise ValueError(f"{path}: not a festival segs file (expected a first line '#')")
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split()
        if not parts:
            continue
        try:
            end, phone = float(parts[0]), parts[2]
        except (IndexError, ValueError):
            raise ValueError(f"{path}:{number}: expected 'END 100 PHONE', got {line!r}") from None
        if phone not in PHONES:
            raise ValueError(f"{path}:{number}: phone {phone!r} is not in the radio phone set")
        if end <= start:  # a zero-length phone holds no frame centre
            continue
        segments.append(Segment(phone, start, end))
        start = end
    if not segments:
        raise ValueError(f"{path}: no phone segments")
    return segments
