"""Streaming, pure-Python readers for the tagging and sentence-classification file formats.

Formats:

- **CoNLL-U** (Universal Dependencies) and **NLTK tagged corpora in a zip** (Brown's
  ``word/tag`` tokens, CoNLL-2000's ``word POS chunk`` columns): :mod:`.tagging`.
- **Sentence classification** (Kim 2014): ``label<space>tokenized sentence`` per line, the
  label a non-negative integer: :mod:`.sentences`.
- **Tables of labelled sentences**: CSV, TSV or JSON lines, the sentence and its label in named
  columns: :mod:`.tables`.
- A file in any of these formats, its format found from its first lines (``attnlab eval
  --data``, a task's local files): :mod:`.sniff`.

A sentence is immutable (tuples), because the corpora built from it are cached and shared
(:mod:`.base`). Malformed input raises ``ValueError`` naming the file (``zip:member`` for zip
members) and the line number.
"""

from attnlab.lab.data.readers.base import LabeledSentence, StrPath, TaggedSentence
from attnlab.lab.data.readers.sentences import iter_sentences, read_sentences
from attnlab.lab.data.readers.sniff import (
    TAGGING_FORMATS,
    TEXT_FILE_FORMATS,
    classification_rows,
    read_classification_file,
    read_tagging_file,
    sniff_text_format,
    tag_line,
    tagging_format,
)
from attnlab.lab.data.readers.tables import (
    TABLE_FORMATS,
    LabelledRow,
    read_labelled_table,
    table_format,
)
from attnlab.lab.data.readers.tagging import (
    CONLLU_TAG_COLUMNS,
    NLTK_LAYOUTS,
    iter_conllu,
    list_zip_fileids,
    load_tagmap,
    read_conllu,
    read_nltk_tagged_zip,
)

__all__ = [
    "TaggedSentence",
    "LabeledSentence",
    "StrPath",
    "CONLLU_TAG_COLUMNS",
    "NLTK_LAYOUTS",
    "TEXT_FILE_FORMATS",
    "TAGGING_FORMATS",
    "TABLE_FORMATS",
    "LabelledRow",
    "iter_conllu",
    "read_conllu",
    "list_zip_fileids",
    "read_nltk_tagged_zip",
    "load_tagmap",
    "iter_sentences",
    "read_sentences",
    "sniff_text_format",
    "read_tagging_file",
    "read_classification_file",
    "classification_rows",
    "tagging_format",
    "tag_line",
    "read_labelled_table",
    "table_format",
]
