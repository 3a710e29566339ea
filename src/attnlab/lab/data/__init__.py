"""Datasets: a registry with mirror / cache / download resolution, readers, and split corpora.

Quick start::

    from attnlab.lab.data import load_tagging, load_sentences

    brown = load_tagging("brown")  # 12 universal tags, split 80/10/10 by document
    sst2 = load_sentences("sst2")

Files come from ``$ATTNLAB_DATA`` (a mirror directory; never the network) if set, else from the
cache ``$ATTNLAB_CACHE`` (default ``~/.cache/attnlab``), downloading and checking them there.
"""

from attnlab.lab.data.corpora import (
    SENTENCE_CORPORA,
    SENTENCE_LABELS,
    TAGGING_CORPORA,
    UNIVERSAL_TAGS,
    UPOS_TAGS,
    ClassificationCorpus,
    TaggingCorpus,
    brown_document_split,
    load_sentences,
    load_tagging,
    seeded_holdout,
)
from attnlab.lab.data.readers import (
    LabeledSentence,
    TaggedSentence,
    iter_conllu,
    iter_sentences,
    list_zip_fileids,
    load_tagmap,
    read_conllu,
    read_nltk_tagged_zip,
    read_sentences,
)
from attnlab.lab.data.registry import (
    DATASETS,
    Dataset,
    DatasetInfo,
    dataset_path,
    fetch,
    get_dataset,
    list_datasets,
)
from attnlab.lab.data.resolve import (
    CACHE_ENV,
    DATA_ENV,
    ChecksumError,
    DataFile,
    DatasetUnavailable,
    cache_dir,
    file_sha256,
    mirror_dir,
)

__all__ = [
    "CACHE_ENV",
    "DATASETS",
    "DATA_ENV",
    "SENTENCE_CORPORA",
    "SENTENCE_LABELS",
    "TAGGING_CORPORA",
    "UNIVERSAL_TAGS",
    "UPOS_TAGS",
    "ChecksumError",
    "ClassificationCorpus",
    "DataFile",
    "Dataset",
    "DatasetInfo",
    "DatasetUnavailable",
    "LabeledSentence",
    "TaggedSentence",
    "TaggingCorpus",
    "brown_document_split",
    "cache_dir",
    "dataset_path",
    "fetch",
    "file_sha256",
    "get_dataset",
    "iter_conllu",
    "iter_sentences",
    "list_datasets",
    "list_zip_fileids",
    "load_sentences",
    "load_tagging",
    "load_tagmap",
    "mirror_dir",
    "read_conllu",
    "read_nltk_tagged_zip",
    "read_sentences",
    "seeded_holdout",
]
