"""``attnlab demo`` (``make demo``): why self-attention needs context, on "I saw a saw".

Trains three part-of-speech taggers on the Brown corpus (universal tags) under the same small
budget: a self-attention tagger and the lecture's fully-connected baselines over a context
window of k = 1 (each word on its own) and k = 3 vectors. It prints each one's test accuracy,
tags "I saw a saw ." with each, and draws the self-attention tagger's attention heatmaps.

The k = 1 tagger sees one word at a time, so it *must* give both "saw"s the same tag; the
self-attention tagger looks at the whole sentence and can tell the verb from the noun.

``attnlab demo speech``: spoken digits with self-attention over 10 ms log-mel frames. Trains the
``fsdd`` task (Free Spoken Digit Dataset, the dataset's own speaker-dependent split) for a few
minutes on two CPU cores, prints its test accuracy, classifies one test recording and draws its
spectrogram above the attention of every layer and head.
"""

from __future__ import annotations

import time
from pathlib import Path

SENTENCE = "I saw a saw ."

#: name -> overrides of the pos task's defaults
MODELS = {
    "self-attention": [],
    "window k=1": ["--model.encoder.kind=fc", "--model.encoder.context=1"],
    "window k=3": ["--model.encoder.kind=fc", "--model.encoder.context=3"],
}


def _budget(quick: bool) -> list[str]:
    sentences, epochs = (1500, 1) if quick else (12000, 2)
    return [
        f"--task_options.max_train_sentences={sentences}",
        f"--train.epochs={epochs}",
        "--train.batch_size=64",
        "--train.lr=3e-3",
        "--train.warmup_fraction=0.05",
    ]


def run_demo(out_dir: str = "runs/demo", quick: bool = False) -> int:
    """Train the taggers of :data:`MODELS` and print how each tags the sentence; the trainer's
    own log lines stay quiet (the progress bars say enough)."""
    from attnlab.lab.train.logs import quiet_logs

    with quiet_logs():
        return _run_demo(out_dir, quick)


def _run_demo(out_dir: str, quick: bool) -> int:
    from attnlab.lab.train import Trainer, resolve_config

    out = Path(out_dir)
    tokens = SENTENCE.split()
    rows = []
    start = time.perf_counter()
    for name, overrides in MODELS.items():
        slug = name.replace(" ", "").replace("=", "")
        cfg = resolve_config(task="pos", overrides=[*_budget(quick), *overrides])
        cfg.out_dir = str(out / slug)
        print(
            f"training the {name} tagger on Brown ({cfg.model.encoder.kind} encoder) ...",
            flush=True,
        )
        trainer = Trainer("pos", cfg, overwrite=True)  # `make demo` again replaces its runs
        try:
            result = trainer.fit()
        finally:
            trainer.close()
        task, model = trainer.task, trainer.model
        tags = task.predict(model, [tokens])[0]["tags"]
        rows.append((name, result, tags, Path(cfg.out_dir) / "best.pt", task, model))

    print(f"\nPOS tagging, Brown corpus, 12 universal tags ({time.perf_counter() - start:.0f} s):")
    width = max(len(r[0]) for r in rows)
    for name, result, tags, _, _, _ in rows:
        acc = result.test["accuracy"]
        tagged = " ".join(f"{w}/{t}" for w, t in zip(tokens, tags, strict=True))
        print(f"  {name:<{width}}  test accuracy {acc:6.2%}   {tagged}")
    attn = rows[0]
    saw1, saw2 = attn[2][1], attn[2][3]
    k1 = rows[1][2]
    print(f'\nThe k = 1 tagger gives both "saw"s the same tag ({k1[1]}/{k1[3]}): it cannot see '
          "their neighbours.")  # fmt: skip
    verdict = "tells them apart" if saw1 != saw2 else "does not tell them apart this time"
    print(f"Self-attention {verdict}: saw/{saw1} ... saw/{saw2}.")
    task, model = attn[4], attn[5]
    png = task.draw(
        model, tokens, out / "attention.png", title=f"self-attention tagger: {SENTENCE}"
    )
    print(f"\nattention heatmaps: {png}")
    print("checkpoints (try `attnlab predict CKPT 'I saw a saw .'`):")
    for name, _, _, ckpt, _, _ in rows:
        print(f"  {name:<{width}}  {ckpt}")
    return 0


# ---- attnlab demo speech --------------------------------------------------------------------
#: a small budget: Conv2d x4 subsampling keeps the sequences short
SPEECH_BUDGET = ["--model.frontend.subsample=conv2d", "--train.epochs=8", "--train.lr=2e-3"]
SPEECH_QUICK = ["--task_options.limit=64", "--train.epochs=1", "--model.dim=32"]
SPEECH_EXAMPLE = "7_jackson_3"  # a test recording (takes 0-4 are test)


def run_speech_demo(out_dir: str = "runs/demo-speech", quick: bool = False) -> int:
    """Train, test and show the digit classifier (the module docstring); the trainer's own log
    lines stay quiet."""
    from attnlab.lab.train.logs import quiet_logs

    with quiet_logs():
        return _run_speech_demo(out_dir, quick)


def _run_speech_demo(out_dir: str, quick: bool) -> int:
    from attnlab.lab.data.registry import dataset_path
    from attnlab.lab.train import Trainer, resolve_config

    start = time.perf_counter()
    cfg = resolve_config(task="fsdd", overrides=[*SPEECH_BUDGET, *(SPEECH_QUICK if quick else [])])
    cfg.out_dir = str(out_dir)
    print("training a self-attention digit classifier on FSDD (log-mel frames) ...", flush=True)
    trainer = Trainer("fsdd", cfg, overwrite=True)
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    task, model = trainer.task, trainer.model.eval()
    acc = result.test["accuracy"]
    print(f"\nFSDD test accuracy (takes 0-4 of every speaker): {acc:.2%} "
          f"({time.perf_counter() - start:.0f} s)")  # fmt: skip
    utt = task.parse_input(str(dataset_path("fsdd", SPEECH_EXAMPLE)))
    record = task.predict(model, [utt])[0]
    print(f"{SPEECH_EXAMPLE}.wav (a spoken 7): {task.format_text(record)}")
    png = task.draw(
        model, utt, Path(out_dir) / "attention.png", title=f"fsdd: {SPEECH_EXAMPLE}.wav"
    )
    print(f"\nspectrogram and attention: {png}")
    print(f"checkpoint (try `attnlab predict {Path(out_dir) / 'best.pt'} FILE.wav`)")
    return 0
