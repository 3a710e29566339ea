"""Unlabelled text of the mirrored corpora, for pre-training (``attnlab pretrain mlm``).

Every corpus gives its words only, with train / dev / test splits that keep each corpus's own
held-out text out of train, so that a model pre-trained on the train splits never saw the test
sentences of a later ``pos`` run on the same corpus:

=============  =============================================  ==========================
corpus         splits                                         sentences (train/dev/test)
=============  =============================================  ==========================
brown          :func:`~.corpora.load_tagging`'s, by document  45,397 / 6,005 / 5,938
conll2000      :func:`~.corpora.load_tagging`'s               8,043 / 893 / 2,012
masc           documents 80 / 10 / 10 (a)                     29,271 / 2,893 / 2,369
treebank       documents 80 / 10 / 10 (a)                     3,197 / 442 / 370
sst2, sst5,    the classification corpus's own; labels        e.g. sst2 6,920 / 872 /
trec           dropped                                        1,821
=============  =============================================  ==========================

(a) :func:`~.corpora.brown_document_split` of the sorted document ids, seed 0.

The treebank sample is WSJ sections 00-01 and CoNLL-2000 sections 15-18 and 20: no sentence is
in both. The sentence-classification corpora are not in the default mix of the ``mlm`` task;
adding one (its *train* sentences, without labels) is domain-adaptive pre-training.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnlab.lab.data.corpora import (
    SENTENCE_CORPORA,
    brown_document_split,
    load_sentences,
    load_tagging,
)
from attnlab.lab.data.readers import TaggedSentence
from attnlab.lab.data.readers.nltk_words import read_masc_zip, read_treebank_zip
from attnlab.lab.data.registry import fetch

__all__ = ["UNLABELLED_CORPORA", "TextCorpus", "load_unlabelled"]

Words = tuple[str, ...]

UNLABELLED_CORPORA = ("brown", "conll2000", "masc", "treebank", *SENTENCE_CORPORA)

_DOCUMENT_READERS: dict[str, Callable[[Path], dict[str, list[TaggedSentence]]]] = {
    "masc": read_masc_zip,
    "treebank": read_treebank_zip,
}


@dataclass(frozen=True)
class TextCorpus:
    """The words of a corpus's sentences, split.

    Args:
        train: the training sentences' tokens.
        dev: held-out sentences.
        test: held-out sentences.
    """

    train: tuple[Words, ...]
    dev: tuple[Words, ...]
    test: tuple[Words, ...]


def load_unlabelled(name: str, *, mirror: str | os.PathLike[str] | None = None) -> TextCorpus:
    """The sentences of corpus ``name`` as words, in its fixed splits (module docstring).

    Args:
        name: one of :data:`UNLABELLED_CORPORA`.
        mirror: mirror directory; overrides ``$ATTNLAB_DATA``.

    Raises:
        ValueError: unknown name.
        DatasetUnavailable: a file is missing and cannot be downloaded.
    """
    if name not in UNLABELLED_CORPORA:
        raise ValueError(f"corpus must be one of {UNLABELLED_CORPORA}, got {name!r}")
    if name in _DOCUMENT_READERS:
        return _documents(name, str(fetch(name, mirror=mirror)["corpus"]))
    if name in SENTENCE_CORPORA:
        splits = load_sentences(name, mirror=mirror)
    else:
        splits = load_tagging(name, "native", mirror=mirror)
    return TextCorpus(*(tuple(s for s, _ in part) for part in
                        (splits.train, splits.dev, splits.test)))  # fmt: skip


@functools.lru_cache(maxsize=4)
def _documents(name: str, path: str) -> TextCorpus:
    docs = _DOCUMENT_READERS[name](Path(path))
    return TextCorpus(*(tuple(s for d in ids for s, _ in docs[d]) for ids in
                        brown_document_split(list(docs))))  # fmt: skip
