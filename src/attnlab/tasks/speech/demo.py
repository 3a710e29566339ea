"""``attnlab demo speech``: spoken digits with self-attention over 10 ms log-mel frames.

Trains the ``fsdd`` task (Free Spoken Digit Dataset, the dataset's own speaker-dependent split)
for a few minutes on two CPU cores, prints its test accuracy, classifies one test recording
and draws its spectrogram above the attention of every layer and head.
"""

from __future__ import annotations

import time
from pathlib import Path

#: a small budget: Conv2d x4 subsampling keeps the sequences short
BUDGET = ["--model.frontend.subsample=conv2d", "--train.epochs=8", "--train.lr=2e-3"]
QUICK = ["--task_options.limit=64", "--train.epochs=1", "--model.dim=32"]
EXAMPLE = "7_jackson_3"  # a test recording (takes 0-4 are test)


def run_speech_demo(out_dir: str = "runs/demo-speech", quick: bool = False) -> int:
    """Train, test and show the digit classifier (the module docstring); the trainer's own log
    lines stay quiet."""
    from attnlab.train.logs import quiet_logs

    with quiet_logs():
        return _run_speech_demo(out_dir, quick)


def _run_speech_demo(out_dir: str, quick: bool) -> int:
    from attnlab.data.registry import dataset_path
    from attnlab.train import Trainer, resolve_config

    start = time.perf_counter()
    cfg = resolve_config(task="fsdd", overrides=[*BUDGET, *(QUICK if quick else [])])
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
    utt = task.parse_input(str(dataset_path("fsdd", EXAMPLE)))
    record = task.predict(model, [utt])[0]
    print(f"{EXAMPLE}.wav (a spoken 7): {task.format_text(record)}")
    png = task.draw(model, utt, Path(out_dir) / "attention.png", title=f"fsdd: {EXAMPLE}.wav")
    print(f"\nspectrogram and attention: {png}")
    print(f"checkpoint (try `attnlab predict {Path(out_dir) / 'best.pt'} FILE.wav`)")
    return 0
