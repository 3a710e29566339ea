"""Ready-to-use corpora with fixed, documented train/dev/test splits.

Tagging corpora (:func:`load_tagging`) and their tag sets:

============  ===========================  ====================  ===========================
corpus        ``tagset="universal"``        ``tagset="native"``   splits
============  ===========================  ====================  ===========================
brown         ``universal``: 12 tags (a)    ``brown``: 472 tags   by document, seeded (b)
conll2000     ``universal``: 12 tags (a)    ``ptb``: Penn tags    own train/test; dev (c)
ud-atis       ``upos``: 17 UD tags          (no XPOS column)      own train/dev/test
ud-ewt        ``upos``: 17 UD tags          ``ptb``: XPOS         own train/dev/test
============  ===========================  ====================  ===========================

(a) Petrov, Das & McDonald (2012), "A Universal Part-of-Speech Tagset", through the maps of
NLTK's ``universal_tagset`` package (``en-brown.map``, ``en-ptb.map``): ``. ADJ ADP ADV CONJ DET
NOUN NUM PRON PRT VERB X``.

(b) :func:`brown_document_split`: the 500 Brown documents are split 400 / 50 / 50.

(c) CoNLL-2000 has no dev set: dev is the *last* ``len(train) // 10`` sentences of
``train.txt`` (893 of 8,936), train the first 8,043. The file is in WSJ order, so this holds out
the end of section 18, with at most one article cut in two.

Sentence-classification corpora (:func:`load_sentences`): ``sst2`` and ``sst5`` with their own
train/dev/test; ``trec`` has no dev file, so dev is a seeded 10% of train
(:func:`seeded_holdout`, 545 of 5,452 questions).

Loaded corpora are cached in-process, keyed by the resolved file paths, and shared: they are
made of tuples so that no caller can change them for the others.
"""

import functools
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from attnlab.lab.data.readers import (
    LabeledSentence,
    TaggedSentence,
    list_zip_fileids,
    load_tagmap,
    read_conllu,
    read_nltk_tagged_zip,
    read_sentences,
)
from attnlab.lab.data.registry import fetch

logger = logging.getLogger(__name__)

T = TypeVar("T")

TAGGING_CORPORA = ("brown", "conll2000", "ud-atis", "ud-ewt")
TAGSETS = ("universal", "native")
SENTENCE_CORPORA = ("sst2", "sst5", "trec")

UNIVERSAL_TAGS = (
    ".",
    "ADJ",
    "ADP",
    "ADV",
    "CONJ",
    "DET",
    "NOUN",
    "NUM",
    "PRON",
    "PRT",
    "VERB",
    "X",
)
"""The 12 tags of Petrov et al. (2012)."""

UPOS_TAGS = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
    "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X",
)  # fmt: skip
"""The 17 Universal Dependencies UPOS tags."""

BROWN_FILEID_PATTERN = r"c[a-r]\d\d"
"""Brown document ids (``ca01`` ... ``cr09``), as in NLTK's Brown reader."""

SENTENCE_LABELS: dict[str, tuple[str, ...]] = {
    "sst2": ("negative", "positive"),
    "sst5": ("very negative", "negative", "neutral", "positive", "very positive"),
    # The files number TREC's coarse classes in this order; the class sizes (86 ABBR, 1,162
    # DESC, 1,250 ENTY, 1,223 HUM, 835 LOC, 896 NUM in train) match Li & Roth (2002).
    "trec": ("DESC", "ENTY", "ABBR", "HUM", "LOC", "NUM"),
}

SEED = 0


@dataclass(frozen=True)
class TaggingCorpus:
    """A part-of-speech tagging corpus.

    Args:
        train: ``(tokens, tags)`` sentences.
        dev: ``(tokens, tags)`` sentences.
        test: ``(tokens, tags)`` sentences.
        tagset_name: ``"universal"`` (12 tags), ``"upos"`` (17), ``"brown"`` or ``"ptb"``.
    """

    train: tuple[TaggedSentence, ...]
    dev: tuple[TaggedSentence, ...]
    test: tuple[TaggedSentence, ...]
    tagset_name: str

    def tags(self) -> list[str]:
        """Sorted tags that occur in any split."""
        return sorted(
            {t for split in (self.train, self.dev, self.test) for s in split for t in s[1]}
        )


@dataclass(frozen=True)
class ClassificationCorpus:
    """A sentence-classification corpus.

    Args:
        train: ``(tokens, label)`` pairs; ``label`` indexes ``labels``.
        dev: ``(tokens, label)`` pairs.
        test: ``(tokens, label)`` pairs.
        labels: Class names.
    """

    train: tuple[LabeledSentence, ...]
    dev: tuple[LabeledSentence, ...]
    test: tuple[LabeledSentence, ...]
    labels: tuple[str, ...]


def brown_document_split(
    fileids: Sequence[str], seed: int = SEED
) -> tuple[list[str], list[str], list[str]]:
    """Split Brown documents 80 / 10 / 10 into train / dev / test.

    Algorithm: sort the file ids, shuffle them with ``random.Random(seed).shuffle``, take the
    first ``n * 8 // 10`` as train, the next ``n // 10`` as dev, the rest as test, and sort each
    part. For the 500 Brown documents: 400 / 50 / 50. Splitting by document keeps the sentences
    of one text out of two splits.

    Args:
        fileids: Document ids, e.g. ``["ca01", ...]``.
        seed: Seed of the shuffle.
    """
    ids = sorted(fileids)
    random.Random(seed).shuffle(ids)
    n_train, n_dev = len(ids) * 8 // 10, len(ids) // 10
    train, dev, test = ids[:n_train], ids[n_train : n_train + n_dev], ids[n_train + n_dev :]
    return sorted(train), sorted(dev), sorted(test)


def seeded_holdout(items: Sequence[T], seed: int = SEED) -> tuple[list[T], list[T]]:
    """Hold out a fixed 10% of ``items``: returns ``(rest, held_out)``, both in original order.

    Algorithm: shuffle ``list(range(n))`` with ``random.Random(seed).shuffle``; the first
    ``n // 10`` indices are held out.

    Args:
        items: Items to split.
        seed: Seed of the shuffle.
    """
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    held = set(order[: len(items) // 10])
    rest = [x for i, x in enumerate(items) if i not in held]
    return rest, [x for i, x in enumerate(items) if i in held]


def load_tagging(
    corpus: str, tagset: str = "universal", *, mirror: str | os.PathLike[str] | None = None
) -> TaggingCorpus:
    """Load a part-of-speech tagging corpus with its fixed splits (see the module docstring).

    Args:
        corpus: One of ``TAGGING_CORPORA``.
        tagset: ``"universal"`` (12 universal tags; UPOS for UD) or ``"native"``.
        mirror: Mirror directory; overrides ``$ATTNLAB_DATA`` (see :mod:`attnlab.lab.data.resolve`).

    Raises:
        ValueError: Unknown corpus or tagset, or ``native`` for ``ud-atis``.
        DatasetUnavailable: A file is missing and cannot be downloaded.
    """
    if corpus not in TAGGING_CORPORA:
        raise ValueError(f"corpus must be one of {TAGGING_CORPORA}, got {corpus!r}")
    if tagset not in TAGSETS:
        raise ValueError(f"tagset must be one of {TAGSETS}, got {tagset!r}")
    if corpus == "ud-atis" and tagset == "native":
        raise ValueError("ud-atis has no native (XPOS) tags; use tagset='universal' (UPOS)")
    files = tuple(sorted((k, str(p)) for k, p in fetch(corpus, mirror=mirror).items()))
    return _load_tagging_cached(corpus, tagset, files)


def load_sentences(
    name: str, *, mirror: str | os.PathLike[str] | None = None
) -> ClassificationCorpus:
    """Load a sentence-classification corpus with its fixed splits (see the module docstring).

    Args:
        name: One of ``SENTENCE_CORPORA``.
        mirror: Mirror directory; overrides ``$ATTNLAB_DATA``.

    Raises:
        ValueError: Unknown name, or a label outside the corpus's classes.
        DatasetUnavailable: A file is missing and cannot be downloaded.
    """
    if name not in SENTENCE_CORPORA:
        raise ValueError(f"name must be one of {SENTENCE_CORPORA}, got {name!r}")
    files = tuple(sorted((k, str(p)) for k, p in fetch(name, mirror=mirror).items()))
    return _load_sentences_cached(name, files)


# -- cached loaders (keyed by resolved paths, so a different mirror or cache reloads) -----------


def _timed(load: Callable[..., T], what: str, *args: object) -> T:
    start = time.perf_counter()
    result = load(*args)
    logger.info("loaded %s in %.2f s", what, time.perf_counter() - start)
    return result


@functools.lru_cache(maxsize=16)
def _load_tagging_cached(
    corpus: str, tagset: str, files: tuple[tuple[str, str], ...]
) -> TaggingCorpus:
    paths = {key: Path(path) for key, path in files}
    loader = {"brown": _brown, "conll2000": _conll2000}.get(corpus, _ud)
    return _timed(loader, f"{corpus} ({tagset} tags)", paths, tagset)


@functools.lru_cache(maxsize=16)
def _load_sentences_cached(name: str, files: tuple[tuple[str, str], ...]) -> ClassificationCorpus:
    paths = {key: Path(path) for key, path in files}
    return _timed(_sentences, name, name, paths)


def _brown(paths: dict[str, Path], tagset: str) -> TaggingCorpus:
    zip_path = paths["corpus"]
    tagmap = None
    if tagset == "universal":
        tagmap = load_tagmap(paths["tagset"], "universal_tagset/en-brown.map")
    fileids = list_zip_fileids(zip_path, "brown", BROWN_FILEID_PATTERN)
    docs = read_nltk_tagged_zip(zip_path, "brown", fileids, tagmap, layout="slash")
    splits = [tuple(s for f in ids for s in docs[f]) for ids in brown_document_split(fileids)]
    return TaggingCorpus(*splits, tagset_name="universal" if tagmap else "brown")


def _conll2000(paths: dict[str, Path], tagset: str) -> TaggingCorpus:
    tagmap = None
    if tagset == "universal":
        tagmap = load_tagmap(paths["tagset"], "universal_tagset/en-ptb.map")
    docs = read_nltk_tagged_zip(
        paths["corpus"], "conll2000", ["train.txt", "test.txt"], tagmap, layout="columns"
    )
    train, test = docs["train.txt"], docs["test.txt"]
    n_dev = len(train) // 10
    return TaggingCorpus(
        tuple(train[:-n_dev]),
        tuple(train[-n_dev:]),
        tuple(test),
        tagset_name="universal" if tagmap else "ptb",
    )


def _ud(paths: dict[str, Path], tagset: str) -> TaggingCorpus:
    column = "upos" if tagset == "universal" else "xpos"
    train, dev, test = (tuple(read_conllu(paths[s], column)) for s in ("train", "dev", "test"))
    return TaggingCorpus(train, dev, test, tagset_name="upos" if column == "upos" else "ptb")


def _sentences(name: str, paths: dict[str, Path]) -> ClassificationCorpus:
    labels = SENTENCE_LABELS[name]
    splits = {key: read_sentences(path) for key, path in paths.items()}
    for key, pairs in splits.items():
        bad = next((y for _, y in pairs if y >= len(labels)), None)
        if bad is not None:
            raise ValueError(
                f"{paths[key]}: label {bad} is outside the {len(labels)} classes of {name}"
            )
    if "dev" not in splits:
        splits["train"], splits["dev"] = seeded_holdout(splits["train"])
    return ClassificationCorpus(
        tuple(splits["train"]), tuple(splits["dev"]), tuple(splits["test"]), labels
    )
