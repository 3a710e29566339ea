"""Tasks made from a user's files alone, one per output shape: ``text-tag`` (one label per word,
N -> N, on the ``pos`` machinery) and ``text-classify`` (one label per sentence, N -> 1, on the
sentence classifiers'). No code: ``attnlab train text-classify --data.train=my.csv``.

Their labels are the strings of the train file (sorted; numerically when every label is a
number), their vocabularies are built from its words, and both are saved in the run with the
splits it read (:mod:`.files`), so ``eval``, ``predict`` and ``show`` need the run alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from attnlab.lab.data.own import label_order
from attnlab.lab.data.readers import LabelledRow
from attnlab.lab.tasks.text.files import DataOptions, as_data_options
from attnlab.lab.tasks.text.sentences import SentenceTask
from attnlab.lab.tasks.text.tagging import PosTask

__all__ = ["TextTagOptions", "TextTagTask", "TextClassifyOptions", "TextClassifyTask"]


def _required(data: DataOptions | dict, task: str, example: str) -> DataOptions:
    data = as_data_options(data)
    if not data.train:
        raise ValueError(
            f"task {task!r} trains on your own files: give --data.train=FILE (e.g. "
            f"attnlab train {task} --data.train={example}); dev and test are cut from it "
            "unless --data.dev / --data.test name them"
        )
    return data


@dataclass
class TextTagOptions:
    """Options of the ``text-tag`` task (one label per word of your own files).

    Args:
        min_count: words seen fewer times in train become ``<unk>``.
        max_train_sentences: use only the first N train sentences (0: all).
        data: your files: CoNLL-U, word TAB tag (a blank line between sentences) or word/TAG
            (a sentence per line).
    """

    min_count: int = 1
    max_train_sentences: int = 0
    data: DataOptions = field(default_factory=DataOptions)


class TextTagTask(PosTask):
    """One label per word of your own tagged files (N -> N), token accuracy."""

    name = "text-tag"

    @classmethod
    def default_options(cls) -> TextTagOptions:
        return TextTagOptions()

    def load_splits(self, opts: TextTagOptions) -> tuple[dict[str, list], list[str]]:
        return self.read_files(_required(opts.data, self.name, "my.conllu"))


@dataclass
class TextClassifyOptions:
    """Options of the ``text-classify`` task (one label per sentence of your own files).

    Args:
        min_count: words seen fewer times in train become ``<unk>``.
        lowercase: lowercase words before lookup.
        data: your files: CSV, TSV or JSON lines with a text and a label column, or label
            sentence lines.
    """

    min_count: int = 1
    lowercase: bool = False
    data: DataOptions = field(default_factory=DataOptions)


class TextClassifyTask(SentenceTask):
    """One label per sentence of your own files (N -> 1), accuracy."""

    name = "text-classify"

    @classmethod
    def default_options(cls) -> TextClassifyOptions:
        return TextClassifyOptions()

    def data_options(self, opts: TextClassifyOptions) -> DataOptions:
        return _required(opts.data, self.name, "my.csv")

    def train_labels(self, rows: Sequence[LabelledRow]) -> list[str]:
        return label_order(row.label for row in rows)
