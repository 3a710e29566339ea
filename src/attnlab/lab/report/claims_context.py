"""Claim 3 of the report: self-attention reads the whole sentence, a window of 3 cannot.

The test is :mod:`.minimal_pairs`: pairs of sentences that differ in one word only, 3 or more
tokens from an ambiguous word whose tag differs between them, its -1 and +1 neighbours the same
in both. A window of 3 gives both sentences of a pair the same tag (pair accuracy 0 by
construction); the tagger trained on ``pos`` and chosen on its dev split alone is tested on them.
Each ``pos`` job of the report measures the pairs when it finishes (``execute.run_one``), as
``metrics["minimal_pairs"]``.
"""

from __future__ import annotations

import numpy as np

from .budgets import Budget
from .claim import SA, Claim, fc
from .jobs import Job, JobResult
from .minimal_pairs import MIN_DISTANCE, pairs
from .stats import Better, Verdict

__all__ = ["LongRange", "pair_table"]


def measured(rs: list[JobResult], key: str = "pair_accuracy") -> list[float]:
    """Per run, its score on the minimal pairs (runs that did not measure them are left out)."""
    return [float(r.metrics["minimal_pairs"][key]) for r in rs if r.metrics.get("minimal_pairs")]


def pair_table() -> tuple[str, list[str], list[list[str]]]:
    """The pairs as a table for the page: its title, header and rows."""
    header = ["#", "cue", "sentence a", "tag a", "sentence b", "tag b", "word", "decided by"]
    rows = [[str(n), p.family, " ".join(p.a), p.tag_a, " ".join(p.b), p.tag_b,
             f"{p.a[p.index]} ({p.index + 1})", f"{p.a[p.decider]} / {p.b[p.decider]} "
             f"({p.decider + 1})"] for n, p in enumerate(pairs(), 1)]  # fmt: skip
    title = (f"the {len(rows)} minimal pairs (word: the ambiguous word and its position; decided "
             "by: the one word that differs, and its position)")  # fmt: skip
    return title, header, rows


class LongRange(Claim):
    number, name = 3, "self-attention uses the whole sentence"
    claim = ("Self-attention reads the whole sentence: it tags an ambiguous word by a word far "
             "from it, where a window of 3 sees the same input in both readings and is at "
             "chance by construction (it tags the word alike in both sentences of a pair, so "
             "one of the two is right, and the pair never is).")  # fmt: skip
    setup = (f"pos (Brown, universal tags), tested on {len(pairs())} long-range minimal pairs "
             "written for this report (listed below): two sentences that differ in one word "
             f"only, {MIN_DISTANCE} or more tokens from an ambiguous word whose tag differs "
             "between them, its -1 and +1 neighbours the same in both (\"I know that cold "
             "water helps .\" / \"I know that cold water well .\": that is ADP, then DET). The "
             "FC window of 3 and the self-attention tagger train on pos train only; the "
             "self-attention recipe tested is the one of best mean dev accuracy, never chosen on "
             "the pairs. The window is claim 1's run: whatever its training, a window of 3 "
             "sees the same input in both sentences of a pair. Pair accuracy: the share of "
             "pairs whose two sentences are both tagged "
             "right at the ambiguous word. One self-attention variant starts from a masked "
             "language model (BERT's objective) pre-trained on 1.67M words of unlabelled "
             "text (Brown, CoNLL-2000, MASC and the treebank sample: their train splits) with "
             "the tagger's encoder.")  # fmt: skip
    THRESHOLD = 0.80
    revisions = ("2026-12-05, the quick budget (not the rule), to bring the quick report toward "
                 "its 20 minutes: the window is claim 1's run (its own took 2 x 54 s and is at "
                 "chance by construction), the self-attention taggers train 500 steps (were "
                 "1,000), the masked LM 600 (was an epoch, 1,343); 2026-12-05 again, for time "
                 "alone: taggers 300 steps, the masked LM 400",)  # fmt: skip
    rule = ("the window of 3 is at chance: on every seed it gives both sentences of every pair "
            "the same tag (pair accuracy 0; held or did not hold, a check of the construction); "
            "and self-attention (the variant of best mean dev accuracy) beats the window's pair "
            f"accuracy by more than {THRESHOLD:.2f}, i.e. tags both readings of over 80% of the "
            f"pairs: {Better(THRESHOLD)}")  # fmt: skip
    #: per budget, the training of claim 3's self-attention runs (replacing the budget's pos
    #: options of the same name): the quick budget's 250 steps on 8,000 sentences left the
    #: tagger at 92.8% dev, 1,000 steps on every sentence at 97.3% (docs/report/quick of
    #: 2026-12-04); the quick report now takes 300
    TRAIN = {
        "smoke": (),
        "quick": ("--task_options.max_train_sentences=0", "--train.max_steps=300",
                  "--train.lr=3e-3", "--train.warmup_fraction=0.05", "--train.eval_every=150"),
        "full": ("--train.epochs=4", "--train.lr=3e-3", "--train.warmup_fraction=0.05",
                 "--train.batch_size=64"),
    }  # fmt: skip
    #: per budget, the masked-language-model pre-training (``attnlab pretrain mlm``) that the
    #: pre-trained variant fine-tunes from: one run (seed 0) of the tagger's encoder on the
    #: unlabelled train text of Brown, CoNLL-2000, MASC and the treebank sample (85,908
    #: sentences, 1.67M words), with the tagger's settings (:data:`TAGGER`)
    PRETRAIN = {
        "smoke": ("--train.max_steps=3", "--task_options.max_train_sentences=200",
                  "--task_options.heldout_sentences=50"),
        "quick": ("--train.max_steps=400",),  # 30% of an epoch
        "full": ("--train.epochs=10",),
    }  # fmt: skip
    #: the settings that make the masked-LM's encoder the tagger's (rotary positions, dropout
    #: 0.1) and keep words cased, as the tagger reads them (its embedding rows match by string)
    TAGGER = ("--model.encoder.positional=rotary", "--model.encoder.dropout=0.1",
              "--task_options.lowercase=false", "--train.log_every=0")  # fmt: skip
    WINDOW = fc(3)
    ATTENTION = ((f"{SA[0]} (claim 3)", SA[1]),)
    PRETRAINED = f"{SA[0]}, pre-trained as a masked LM (claim 3)"

    def variants(self):
        return [self.WINDOW, *self.ATTENTION]

    def jobs(self, budget: Budget) -> dict[str, list[Job]]:
        window = super().jobs(budget)[self.WINDOW[0]]  # claim 1's run, the budget's options
        mine = self.TRAIN[budget.name]
        names = {o.split("=")[0] for o in mine}
        base = (*(o for o in budget.options[self.task] if o.split("=")[0] not in names), *mine)
        jobs = {label: [Job(self.task, (*base, *options), seed, label) for seed in budget.seeds]
                for label, options in self.ATTENTION}  # fmt: skip
        jobs = {self.WINDOW[0]: window, **jobs}
        model = tuple(o for o in base if o.startswith("--model."))  # the tagger's shape
        mlm = Job("mlm", (*self.TAGGER, *model, *self.PRETRAIN[budget.name]), 0,
                  f"masked-LM pre-training (claim 3, {budget.name})")  # fmt: skip
        jobs[self.PRETRAINED] = [Job(self.task, base, seed, self.PRETRAINED, init=mlm)
                                 for seed in budget.seeds]  # fmt: skip
        return jobs

    def analyse(self, results):
        window = results[self.WINDOW[0]]
        parts, notes = [self._window_at_chance(window)], []
        attention = {label: rs for label, rs in results.items() if label != self.WINDOW[0]}
        done = {label: rs for label, rs in attention.items() if rs}
        if not window or not done or len(done) < len(attention):  # chosen among them all
            parts.append(("pair accuracy: self-attention - window", Verdict.PENDING, None))
        else:
            chosen = max(done, key=lambda label: np.mean([r.dev for r in done[label]]))
            sa, fc3 = measured(done[chosen]), measured(window)
            name = f"pair accuracy: {chosen} (chosen on dev) - window"
            if len(sa) < len(done[chosen]) or len(fc3) < len(window):
                parts.append((name, Verdict.PENDING, None))
                notes.append("a run finished before the report measured the minimal pairs: "
                             "run it again in a new --out")  # fmt: skip
            else:
                parts.append((name, *Better(self.THRESHOLD)(sa, fc3)))
        for label, rs in results.items():
            notes += _per_seed(label, [r for r in rs if r.metrics.get("minimal_pairs")])
        return self._section(results, parts, notes=notes, details=pair_table())

    def _window_at_chance(self, window: list[JobResult]):
        name = "window of 3: the same tag for both sentences of every pair"
        same = measured(window, "same_tag")
        if not window or len(same) < len(window):
            return name, Verdict.PENDING, None
        return name, (Verdict.HELD if min(same) == 1.0 else Verdict.NOT_HELD), None


def _per_seed(label: str, rs: list[JobResult]) -> list[str]:
    """Notes: each seed's pair and sentence accuracy, and the pairs right per cue (family)."""
    if not rs:
        return []
    scores = [r.metrics["minimal_pairs"] for r in rs]
    seeds = ", ".join(
        f"seed {r.seed}: {100 * m['pair_accuracy']:.1f}% pairs, "
        f"{100 * m['accuracy']:.1f}% sentences"
        for r, m in zip(rs, scores)
    )
    right: dict[str, list[int]] = {}
    for m in scores:
        wrong = set(m.get("wrong", ()))
        for i, p in enumerate(pairs()):
            right.setdefault(p.family, [0, 0])[0] += i not in wrong
            right[p.family][1] += 1
    cues = ", ".join(f"{cue} {n}/{of}" for cue, (n, of) in right.items())
    return [f"{label}: {seeds}; pairs right per cue, all seeds: {cues}"]
