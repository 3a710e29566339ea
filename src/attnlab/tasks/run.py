"""What the CLI's ``train``, ``eval``, ``predict`` and ``show`` subcommands do."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

#: ``--attention.X`` is shorthand for ``--model.encoder.X`` (the efficient-kernel issue's spelling)
_ALIASES = {"--attention.": "--model.encoder."}


def normalize_overrides(args: Sequence[str]) -> list[str]:
    """``--a.b value`` -> ``--a.b=value``; apply the aliases; reject stray words."""
    out: list[str] = []
    i = 0
    args = list(args)
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ValueError(f"expected an option like --train.lr=1e-3, got {arg!r}")
        if "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("--"):
            arg = f"{arg}={args[i + 1]}"
            i += 1
        for short, full in _ALIASES.items():
            if arg.startswith(short):
                arg = full + arg[len(short) :]
        out.append(arg)
        i += 1
    return out


def train_command(task: str, rest: Sequence[str], *, config: str | None, resume: bool) -> int:
    from attnlab.train import Trainer, resolve_config

    overrides = normalize_overrides(rest)
    cfg = resolve_config(task=task, config_file=config, overrides=overrides)
    if not any(o.startswith("--out_dir") for o in overrides) and cfg.out_dir == "runs/default":
        cfg.out_dir = f"runs/{cfg.task}"
    trainer = Trainer(cfg.task, cfg, resume=resume or None)
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    if trainer.env.is_main:
        summary = result.summary()
        test = {k: round(v, 4) for k, v in (summary.get("test") or {}).items()}
        print(f"{cfg.task}: test {json.dumps(test)}")
        print(f"checkpoint: {Path(cfg.out_dir) / 'best.pt'}")
    return 0


def read_eval_file(task, path: str | Path) -> list:
    """Examples for ``task`` from a CoNLL-U, ``word/TAG`` (one sentence per line), column
    (``word TAG ...`` per line, blank line between sentences) or ``label sentence`` file."""
    from attnlab.data.readers import read_conllu, read_sentences

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--data: no such file {path}")
    if getattr(task, "output", "") == "sequence":
        examples = []
        for tokens, label in read_sentences(path):
            examples.append((list(tokens), int(label)))
        return examples
    if path.suffix == ".conllu":
        return [(list(t), list(g)) for t, g in read_conllu(path)]
    lines = path.read_text(encoding="utf-8").splitlines()
    if any("/" in ln for ln in lines[:5]) and not any(len(ln.split()) in (2, 3) and "/" not in ln
                                                      for ln in lines[:5] if ln.strip()):  # fmt: skip
        examples = []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            pairs = [tok.rsplit("/", 1) for tok in line.split()]
            if any(len(p) != 2 for p in pairs):
                raise ValueError(f"{path}:{lineno}: expected word/TAG tokens, got {line!r}")
            examples.append(([w for w, _ in pairs], [t for _, t in pairs]))
        return examples
    examples, words, tags = [], [], []
    for lineno, line in enumerate([*lines, ""], 1):
        if not line.strip():
            if words:
                examples.append((words, tags))
            words, tags = [], []
            continue
        cols = line.split()
        if len(cols) < 2:
            raise ValueError(f"{path}:{lineno}: expected 'word TAG ...' columns, got {line!r}")
        words.append(cols[0])
        tags.append(cols[1])
    return examples


def _batches(task, examples: list, size: int = 64):
    for s in range(0, len(examples), size):
        yield task.collate(examples[s : s + size])


def eval_command(checkpoint: str, *, data: str | None, split: str) -> int:
    from attnlab.train import load_for_inference

    task, model, cfg = load_for_inference(checkpoint, setup=data is None)
    if data is not None:
        examples = read_eval_file(task, data)
        unknown = sorted({t for _, tags in examples for t in (tags if isinstance(tags, list)
                          else []) if t not in task.labels})  # fmt: skip
        if unknown:
            raise ValueError(
                f"--data: tags {unknown[:10]} are not in the model's tag set {task.labels}"
            )
        where = str(data)
    else:
        examples = task.splits()[split]
        where = f"{cfg.task} {split} split"
    with torch.no_grad():
        metrics = task.evaluate(model, _batches(task, examples))
    print(f"{where}: " + json.dumps({k: round(v, 4) for k, v in metrics.items()}))
    return 0


def predict_command(checkpoint: str, texts: Sequence[str], *, as_json: bool) -> int:
    from attnlab.train import load_for_inference

    task, model, _ = load_for_inference(checkpoint)
    sentences = [t.split() for t in texts]
    if any(not s for s in sentences):
        raise ValueError("predict: empty text; give at least one word per text")
    for result in task.predict(model, sentences):
        if as_json:
            print(json.dumps(result))
        elif "tags" in result:
            print(" ".join(f"{w}/{t}" for w, t in zip(result["tokens"], result["tags"])))
        else:
            print(result["label"])
    return 0


def show_command(checkpoint: str, text: str, *, out: str) -> int:
    from attnlab.train import load_for_inference
    from attnlab.viz import attention_of, plot_attention

    task, model, cfg = load_for_inference(checkpoint)
    tokens = text.split()
    if not tokens:
        raise ValueError("show: empty text")
    weights = attention_of(model, task, tokens)
    path = plot_attention(weights, tokens, out, title=f"{cfg.task}: {text}")
    print(path)
    return 0
