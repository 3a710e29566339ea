"""The ``phones`` dataset: sentences of a text corpus spoken by festival, with phone times.

:func:`make_phones` picks ``sentences`` sentences (3 to 12 words) of a tagging corpus of the
lab (default CoNLL-2000's Wall Street Journal text) with a seeded generator, gives each a
seeded speaking rate and pitch (so the data is not one uniform voice), has festival speak them
(:mod:`.festival`), and writes, atomically (a temporary directory renamed into place)::

    CACHE/phones/VERSION/manifest.json
    CACHE/phones/VERSION/wav/KEY.wav          16 kHz mono 16-bit PCM

``CACHE`` is :func:`attnlab.lab.data.resolve.cache_dir` (``$ATTNLAB_CACHE``). ``VERSION`` is a hash
of festival's version, the voice and its package, the corpus, ``sentences``, ``seed`` and
:data:`GENERATOR_VERSION`: a dataset is never overwritten by one made differently. The manifest
holds, per utterance, its text, rate, pitch, sample count and phone segments
(``[[phone, end_seconds], ...]``), and the train / dev / test keys (80/10/10 by sentence,
seeded). Frame labels are derived from the segments with the front end's framing
(:func:`~attnlab.lab.speechgen.phoneset.frame_labels`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import subprocess
import wave
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnlab.lab.data import TAGGING_CORPORA, load_tagging
from attnlab.lab.data.resolve import cache_dir
from attnlab.lab.speechgen.festival import VOICE, Utterance, festival_version, read_segs, synthesize
from attnlab.lab.speechgen.phoneset import PHONES

logger = logging.getLogger(__name__)

__all__ = [
    "GENERATOR_VERSION",
    "PERTURBATION",
    "dataset_version",
    "find_phones",
    "load_manifest",
    "make_phones",
    "corpus_sentences",
]

#: bump when the generator's output changes for the same inputs
GENERATOR_VERSION = 2
SAMPLE_RATE = 16000
MIN_WORDS, MAX_WORDS = 3, 12
#: per utterance, uniform in these ranges: Duration_Stretch, target F0 mean and std (Hz)
PERTURBATION: Mapping[str, tuple[float, float]] = {
    "stretch": (0.8, 1.25),
    "f0_mean": (80.0, 160.0),
    "f0_std": (6.0, 28.0),
}
_SPLIT = (0.8, 0.1)  # train, dev; the rest is test
_NO_SPACE_BEFORE = {",", ".", ";", ":", "?", "!", "%", ")", "'s", "n't", "'re", "'ve", "'ll",
                    "'d", "'m", "'"}  # fmt: skip
_DROP = {"``", "''", '"', "-LRB-", "-RRB-", "-NONE-"}


def detokenize(tokens: list[str]) -> str:
    """Treebank tokens back to plain text for festival (``Nomura 's`` -> ``Nomura's``)."""
    out = ""
    for token in tokens:
        if token in _DROP or token.startswith("*"):
            continue
        glue = not out or token in _NO_SPACE_BEFORE or out.endswith(("$", "("))
        out += token if glue else " " + token
    return out


def corpus_sentences(
    corpus: str = "conll2000", *, mirror: str | os.PathLike[str] | None = None
) -> list[str]:
    """Distinct sentences of 3 to 12 words from every split of a tagging corpus, as text
    (``mirror``: the data mirror, as for :func:`~attnlab.lab.data.load_tagging`)."""
    if corpus not in TAGGING_CORPORA:
        raise ValueError(f"corpus must be one of {TAGGING_CORPORA}, got {corpus!r}")
    data = load_tagging(corpus, "universal", mirror=mirror)
    seen: dict[str, None] = {}
    for split in (data.train, data.dev, data.test):
        for tokens, _ in split:
            words = [t for t in tokens if any(c.isalnum() for c in t)]
            if MIN_WORDS <= len(words) <= MAX_WORDS:
                seen.setdefault(detokenize(list(tokens)), None)
    return list(seen)


def _voice_package() -> str:
    """The voice package's Debian version (``festvox-kallpc16k 2.4-1``), or ``unknown``."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "festvox-kallpc16k"], capture_output=True,
                             text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return " ".join(out.stdout.split()) or "unknown"


def dataset_version(*, sentences: int, seed: int, corpus: str, festival: str,
                    voice_package: str) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """``(version, recipe)``: the first 12 hex digits of the recipe's sha256, and the recipe
    (everything that determines the data)."""
    recipe = {
        "generator": GENERATOR_VERSION, "festival": festival, "voice": VOICE,
        "voice_package": voice_package, "corpus": corpus, "sentences": sentences, "seed": seed,
    }  # fmt: skip
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    return digest[:12], recipe


def make_phones(
    sentences: int,
    *,
    seed: int = 0,
    corpus: str = "conll2000",
    workers: int = 2,
    root: str | os.PathLike[str] | None = None,
    mirror: str | os.PathLike[str] | None = None,
) -> Path:
    """Make the dataset (see the module docstring) unless it exists; return its directory.

    Args:
        sentences: how many sentences (>= 3: one each for train, dev and test at least).
        seed: picks the sentences, their rate and pitch, and the split.
        corpus: the text corpus (:data:`attnlab.lab.data.TAGGING_CORPORA`).
        workers: festival processes at once (at most 2 on a shared machine is polite).
        root: where datasets go (default ``cache_dir()``); the dataset is ``root/phones/VERSION``.
        mirror: the data mirror the text corpus is read from (default ``$ATTNLAB_DATA``).

    Raises:
        FestivalUnavailable: festival or the voice is missing (says how to install them).
        ValueError: a bad argument, or more sentences than the corpus has.
    """
    if not isinstance(sentences, int) or sentences < 3:
        raise ValueError(f"sentences must be an integer >= 3, got {sentences!r}")
    version, recipe = dataset_version(
        sentences=sentences, seed=seed, corpus=corpus, festival=festival_version(),
        voice_package=_voice_package(),
    )  # fmt: skip
    base = Path(root) if root is not None else cache_dir()
    final = base / "phones" / version
    if (final / "manifest.json").exists():
        return final
    texts = corpus_sentences(corpus, mirror=mirror)
    if sentences > len(texts):
        raise ValueError(
            f"sentences={sentences}: corpus {corpus!r} has only {len(texts)} sentences of "
            f"{MIN_WORDS} to {MAX_WORDS} words"
        )
    rng = random.Random(seed)
    chosen = rng.sample(texts, sentences)
    utterances = [
        Utterance(f"{i:06d}", text, **{k: round(rng.uniform(*r), 4)
                                       for k, r in PERTURBATION.items()})
        for i, text in enumerate(chosen)
    ]  # fmt: skip
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{version}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "wav").mkdir(parents=True)
    logger.info("phones: speaking %d sentences with festival into %s", sentences, final)
    try:
        synthesize(utterances, tmp / "wav", workers=workers)
        manifest = {**recipe, "version": version, "sample_rate": SAMPLE_RATE,
                    "phones": list(PHONES), "perturbation": dict(PERTURBATION),
                    "splits": _split([u.key for u in utterances], seed),
                    "utterances": [_record(u, tmp / "wav") for u in utterances]}  # fmt: skip
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        try:
            os.rename(tmp, final)
        except OSError:  # another process made the same version meanwhile: keep theirs
            if not (final / "manifest.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _record(u: Utterance, wav_dir: Path) -> dict[str, Any]:
    """The manifest entry of one spoken utterance (its segs file is folded in and removed)."""
    segs_path = wav_dir / f"{u.key}.segs"
    segments = read_segs(segs_path)
    segs_path.unlink()
    with wave.open(str(wav_dir / f"{u.key}.wav")) as w:
        if w.getframerate() != SAMPLE_RATE or w.getnchannels() != 1:
            raise RuntimeError(
                f"festival wrote {w.getframerate()} Hz x {w.getnchannels()} channels for "
                f"{u.text!r}; expected {SAMPLE_RATE} Hz mono (the {VOICE} voice)"
            )
        samples = w.getnframes()
    return {"key": u.key, "text": u.text, "stretch": u.stretch, "f0_mean": u.f0_mean,
            "f0_std": u.f0_std, "samples": samples,
            "segments": [[s.phone, s.end] for s in segments]}  # fmt: skip


def _split(keys: list[str], seed: int) -> dict[str, list[str]]:
    order = list(keys)
    random.Random(f"split-{seed}").shuffle(order)
    n_train = max(1, round(_SPLIT[0] * len(order)))
    n_dev = max(1, round(_SPLIT[1] * len(order)))
    n_train = min(n_train, len(order) - 2)
    return {"train": sorted(order[:n_train]), "dev": sorted(order[n_train : n_train + n_dev]),
            "test": sorted(order[n_train + n_dev :])}  # fmt: skip


def load_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of the dataset directory ``path`` (or of the manifest file itself)."""
    path = Path(path)
    file = path / "manifest.json" if path.is_dir() else path
    if not file.exists():
        raise FileNotFoundError(f"{file}: no phones dataset here (no manifest.json)")
    return json.loads(file.read_text())


def find_phones(*, sentences: int, seed: int, corpus: str = "conll2000",
                root: str | os.PathLike[str] | None = None) -> Path:  # fmt: skip
    """The directory of a made dataset with this recipe (the newest if festival versions
    differ); festival itself is not needed.

    Raises:
        FileNotFoundError: none was made; the message gives the command that makes it.
    """
    base = (Path(root) if root is not None else cache_dir()) / "phones"
    found = []
    for manifest in base.glob("*/manifest.json"):
        with manifest.open() as f:
            head = json.loads(f.read())
        if (head.get("sentences"), head.get("seed"), head.get("corpus"),
                head.get("generator")) == (sentences, seed, corpus, GENERATOR_VERSION):  # fmt: skip
            found.append(manifest.parent)
    if not found:
        corpus_flag = "" if corpus == "conll2000" else f" --corpus {corpus}"
        raise FileNotFoundError(
            f"no phones dataset of {sentences} sentences with seed {seed} in {base}; make it "
            f"with: attnlab data make phones --sentences {sentences} --seed {seed}{corpus_flag}"
        )
    return max(found, key=lambda p: (p / "manifest.json").stat().st_mtime)
