"""Part-of-speech tagging (N -> N): the ``pos`` task and its options."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.data import TAGGING_CORPORA, load_tagging
from attnlab.lab.data.own import keep_unseen
from attnlab.lab.data.readers import TAGGING_FORMATS, read_tagging_file, tag_line
from attnlab.lab.models.batch import pad_ids
from attnlab.lab.tasks.base import IGNORE_INDEX
from attnlab.lab.tasks.text.base import TextTask, options_as
from attnlab.lab.tasks.text.files import DataOptions, as_data_options

__all__ = ["PosTask", "TaggingOptions"]

IGNORE = IGNORE_INDEX  # label of padded positions


@dataclass
class TaggingOptions:
    """Options of the ``pos`` task.

    Args:
        corpus: ``brown`` (default), ``ud-ewt``, ``ud-atis``, ``conll2000``, or ``files``: the
            local files below (``data.train`` reads the user's files whatever it says).
        tagset: ``auto`` (Brown: the 12 universal tags; UD: UPOS; CoNLL-2000: Penn tags),
            ``universal`` or ``native``; local files keep their tags as written.
        min_count: words seen fewer times in train become ``<unk>`` (default 2: a word seen
            once gets no vector of its own; the character CNN still describes it. On Brown,
            dev accuracy equal to ``min_count=1``'s within the seeds' spread, with half the
            word embedding: BENCHMARKS.md, "Training speed").
        max_train_sentences: use only the first N train sentences (0: all).
        train_file: with ``corpus="files"``: the training sentences (CoNLL-U, ``word/TAG`` or
            ``word TAG`` columns; see :func:`~attnlab.lab.data.readers.read_tagging_file`);
            the older spelling of data.train, which cuts no dev or test split.
        dev_file: with ``corpus="files"``: the dev sentences (none: no dev split).
        test_file: with ``corpus="files"``: the test sentences (none: no test split).
        data: your own files (CoNLL-U, word TAB tag, word/TAG), ``--data.train=FILE``.
    """

    corpus: str = "brown"
    tagset: str = "auto"
    min_count: int = 2
    max_train_sentences: int = 0
    train_file: str = ""
    dev_file: str = ""
    test_file: str = ""
    data: DataOptions = field(default_factory=DataOptions)


def legacy_files(opts: TaggingOptions) -> DataOptions:
    """``opts.data``, or the older ``corpus="files"`` with ``train_file`` (and ``dev_file``,
    ``test_file``) as data options that cut nothing."""
    data = as_data_options(opts.data)
    if opts.corpus == "files" and not data.train:
        if not opts.train_file:
            raise ValueError(
                "task_options.corpus='files' needs task_options.train_file (and optionally "
                "dev_file, test_file), or --data.train=FILE"
            )
        files = {"train": opts.train_file, "dev": opts.dev_file, "test": opts.test_file}
        return replace(data, **files, split=(0.0, 0.0))
    if opts.train_file or opts.dev_file or opts.test_file:
        raise ValueError(
            f"task_options.train_file/dev_file/test_file are read only with "
            f"task_options.corpus='files' and no --data.train, got corpus={opts.corpus!r}"
        )
    return data


class PosTask(TextTask):
    """Part-of-speech tagging: one tag per word (N -> N), token accuracy."""

    name = "pos"
    unit = "tok"
    output = "token"

    @classmethod
    def default_options(cls) -> TaggingOptions:
        return TaggingOptions()

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        # Batches of 64 sentences at twice the trainer's learning rate: the same dev accuracy
        # as 32 at 1e-3 over two seeds, 1.5x faster (64 at 1e-3 lost 0.1 points). Lengths
        # padded to multiples of 8: oneDNN compiles a kernel for each new shape of a bf16
        # matmul, and a few recurring lengths hit its cache where one per batch did not
        # (padding is inert). BENCHMARKS.md, "Training speed".
        return {"batch_size": 64, "lr": 2e-3, "pad_multiple": 8}

    def setup(self, options: TaggingOptions) -> None:
        opts = options_as(type(self.default_options()), options)
        splits, tags = self.load_splits(opts)
        if opts.max_train_sentences:
            splits["train"] = splits["train"][: opts.max_train_sentences]
        self._splits = splits
        self._build_vocab([s for s, _ in splits["train"]], opts.min_count)
        if not self.labels:
            self.labels = tags

    def load_splits(self, opts: TaggingOptions) -> tuple[dict[str, list], list[str]]:
        """The splits (the corpus's, or the user's files') and their tags."""
        data = legacy_files(opts)
        if data.train:  # the user's files (or the copy the run kept of them)
            splits, tags = self.read_files(data)
        else:
            if opts.corpus not in TAGGING_CORPORA:
                raise ValueError(
                    f"task_options.corpus must be one of {(*TAGGING_CORPORA, 'files')}, got "
                    f"{opts.corpus!r}"
                )
            tagset = opts.tagset
            if tagset == "auto":
                tagset = "native" if opts.corpus == "conll2000" else "universal"
            corpus = load_tagging(opts.corpus, tagset)
            splits = {"train": list(corpus.train), "dev": list(corpus.dev),
                      "test": list(corpus.test)}  # fmt: skip
            tags = corpus.tags()
        return splits, tags

    # -- the user's files --------------------------------------------------------------------

    saved_ext = ".tsv"

    def read_files(self, data: DataOptions) -> tuple[dict[str, list], list[str]]:
        """The splits of the user's tagging files (or the run's copy) and the tags of the train
        file; a tag of a dev or test file that the train file lacks is an error naming its line.
        """
        if data.format not in ("auto", *TAGGING_FORMATS):
            raise ValueError(
                f"data.format: a tagging task reads auto, {', '.join(TAGGING_FORMATS)}; got "
                f"{data.format!r}"
            )
        splits, from_train = self.file_splits(
            data, lambda path: read_tagging_file(path, data.column, data.format)
        )
        tags = sorted({t for s in from_train for _, ts in splits[s] for t in ts})
        if data.unseen == "keep" and not self.labels:
            others = (t for s in splits if s not in from_train for _, ts in splits[s] for t in ts)
            tags = keep_unseen(tags, others, "tag")
        known = set(self.labels or tags)
        for split in (s for s in splits if s not in from_train):
            unseen = sorted({t for _, ts in splits[split] for t in ts} - known)
            if unseen:
                path = self.split_paths[split]
                raise ValueError(
                    f"{path}:{tag_line(path, unseen[0]) or '?'}: tag {unseen[0]!r} is not a tag "
                    f"of the train file {self.split_paths['train']} "
                    f"(it has {', '.join(sorted(known))}); --data.unseen=keep keeps it as a "
                    "class never trained on"
                )
        return splits, tags

    def render_split(self, examples: list) -> str:
        return "".join("".join(f"{w}\t{t}\n" for w, t in zip(*ex)) + "\n" for ex in examples)

    def read_saved(self, path: Path) -> list:
        return read_tagging_file(path, fmt="tsv") if path.stat().st_size else []

    def batch_size_of(self, example) -> int:
        return len(example[0])

    def collate(self, examples: list) -> dict[str, Tensor]:
        batch = self.encode([tokens for tokens, _ in examples])
        index = {t: i for i, t in enumerate(self.labels)}
        labels = [[index[t] for t in tags] for _, tags in examples]
        batch["labels"] = pad_ids(labels, batch["tokens"].shape[1], fill=IGNORE)  # (b, n)
        return batch

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        logits = model(batch)  # (b, n, L)
        labels = batch["labels"]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="sum",
                               ignore_index=IGNORE)  # fmt: skip
        return loss, (labels != IGNORE).sum()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        correct = total = oov_correct = oov_total = 0
        loss = 0.0
        for batch in batches:
            logits = model(batch)
            labels = batch["labels"]
            valid = labels != IGNORE
            loss += F.cross_entropy(logits[valid].float(), labels[valid], reduction="sum").item()
            hit = (logits.argmax(-1) == labels) & valid
            oov = (batch["tokens"] == 1) & valid  # <unk> id: words unseen in training
            correct += int(hit.sum())
            total += int(valid.sum())
            oov_correct += int((hit & oov).sum())
            oov_total += int(oov.sum())
        return {
            "accuracy": correct / max(total, 1),
            "oov_accuracy": oov_correct / max(oov_total, 1),
            "oov_rate": oov_total / max(total, 1),
            "loss": loss / max(total, 1),
            "tokens": float(total),
        }

    def read_examples(self, path: str | Path) -> list:
        """Tagged sentences of a CoNLL-U, ``word/TAG`` or ``word TAG`` columns file (see
        :func:`~attnlab.lab.data.readers.read_tagging_file`), checked against the model's tags.

        Raises:
            ValueError: not a tagging file; a tag the model does not know.
        """
        examples = read_tagging_file(path, self.read_option("column"))
        known = set(self.labels)
        unknown = sorted({t for _, tags in examples for t in tags if t not in known})
        if unknown:
            raise ValueError(
                f"{path}: tags {unknown[:10]} are not in the model's tag set {self.labels}"
            )
        return examples

    def example_input(self, example: Any) -> tuple[list[str], str]:
        tokens, tags = example
        return list(tokens), " ".join(f"{w}/{t}" for w, t in zip(tokens, tags))

    @torch.no_grad()
    def predict(self, model: nn.Module, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """Tag whitespace-tokenised sentences: ``[{"tokens": [...], "tags": [...]}, ...]``."""
        model.eval()
        batch = self.encode(sentences)
        ids = model(batch).argmax(-1)  # (b, n)
        return [
            {"tokens": list(s), "tags": [self.labels[int(t)] for t in ids[i, : len(s)]]}
            for i, s in enumerate(sentences)
        ]
