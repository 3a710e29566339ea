"""The ``attnlab`` command line.

``attnlab demo | tasks | train | pretrain | eval | average | predict | show | runs | plot |
report | data | bench``. Each subcommand lives in a small function; heavy imports happen inside
them so ``attnlab --help`` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from attnlab.lab.bench.parser import add_bench_commands


def _demo(args: argparse.Namespace) -> int:
    if args.which == "speech":
        from attnlab.lab.demo import run_speech_demo

        return run_speech_demo(out_dir=args.out or "runs/demo-speech", quick=args.quick)
    from attnlab.lab.demo import run_demo

    return run_demo(out_dir=args.out or "runs/demo", quick=args.quick)


def _data(args: argparse.Namespace) -> int:
    from attnlab.lab.data import fetch, list_datasets

    if args.action == "list":
        print(_dataset_table(list_datasets()))
        return 0
    if args.action == "make":  # generated datasets (only phones so far)
        from attnlab.lab.speechgen import make_phones

        print(make_phones(args.sentences, seed=args.seed, corpus=args.corpus,
                          workers=args.workers))  # fmt: skip
        return 0
    for name in args.names:
        for key, path in fetch(name).items():
            print(f"{name}:{key}\t{path}")
    return 0


def _dataset_table(rows: Sequence) -> str:
    """``attnlab data list``: an aligned table with a header, then where the files are looked
    for (the mirror ``$ATTNLAB_DATA`` or the cache ``$ATTNLAB_CACHE``)."""
    from attnlab.lab.data import CACHE_ENV, DATA_ENV, cache_dir, mirror_dir

    header = ("NAME", "LOCAL", "LICENSE", "DESCRIPTION")
    table = [header, *((r.name, "yes" if r.available else "no", r.license, r.description)
                       for r in rows)]  # fmt: skip
    widths = [max(len(row[c]) for row in table) for c in range(len(header) - 1)]
    lines = ["  ".join([*(f"{v:<{w}}" for v, w in zip(row, widths)), row[-1]]) for row in table]
    mirror = mirror_dir()
    if mirror is not None:
        where = f"LOCAL: in the mirror {mirror} (${DATA_ENV}; nothing is downloaded)"
    else:
        where = (
            f"LOCAL: in the cache {cache_dir()} (${CACHE_ENV}); `attnlab data fetch NAME` downloads"
        )
    return "\n".join([*lines, "", where])


def _tasks(args: argparse.Namespace) -> int:
    from attnlab.lab.tasks import TASKS

    names = TASKS.names()
    width = max(map(len, names))
    for name in names:
        lines = (TASKS.get(name).__doc__ or "").strip().splitlines()
        summary = lines[0].replace("``", "") if lines else ""
        print(f"{name:<{width}}  {summary}".rstrip())
    return 0


def _train(args: argparse.Namespace, rest: list[str]) -> int:
    from attnlab.lab.commands import train_command

    if args.help or args.task is None:
        return _train_help(args, rest)
    from attnlab.lab.train import TrainingInterrupted

    overwrite = ["--train.overwrite=true"] if args.overwrite else []
    try:
        return train_command(args.task, [*rest, *overwrite], config=args.config, resume=args.resume,
                             preset=args.preset)  # fmt: skip
    except TrainingInterrupted as err:  # last.pt was saved: say how to continue
        return _interrupted(err, args, rest)
    except KeyboardInterrupt:  # before training started: nothing to save
        print("attnlab train: interrupted before training started", file=sys.stderr)
        return 130


def _interrupted(err: Exception, args: argparse.Namespace, rest: list[str]) -> int:
    """Print what a signal stopped and the exact command that resumes it (rank 0 only)."""
    import os

    from attnlab.lab.commands import normalize_overrides
    from attnlab.lab.train.errors import INTERRUPTED_EXIT_CODE
    from attnlab.lab.train.interrupt import resume_command

    if int(os.environ.get("RANK", "0")) == 0:
        config = ["--config", args.config] if args.config else []
        words = ["train", args.task, *config, *normalize_overrides(rest)]
        world = int(os.environ.get("WORLD_SIZE", "1"))
        print(f"attnlab train: {err}", file=sys.stderr)
        print(f"resume with: {resume_command(words, world_size=world)}", file=sys.stderr)
    return INTERRUPTED_EXIT_CODE


def _train_help(args: argparse.Namespace, rest: list[str]) -> int:
    """``attnlab train TASK --help``: every option of TASK, from its config dataclasses."""
    from attnlab.lab.commands import normalize_overrides
    from attnlab.lab.tasks.presets import presets_of
    from attnlab.lab.train import resolve_config
    from attnlab.lab.train.config import ALIASES
    from attnlab.lab.train.describe import describe_options

    print(args.train_parser.format_help())
    if args.task is None:
        print("Name a task to list its options: attnlab train TASK --help (see attnlab tasks)")
        return 0 if args.help else 2
    overrides = normalize_overrides(rest)
    cfg = resolve_config(task=args.task, config_file=args.config, overrides=overrides,
                         preset=args.preset)  # fmt: skip
    print(f"Presets of `attnlab train {cfg.task}` (--preset NAME, applied before --config and "
          "the options given):")  # fmt: skip
    for name, settings in presets_of(cfg.task).items():
        print(f"  {name:<8} {_preset_text(settings)}")
    print(f"\nOptions of `attnlab train {cfg.task}`, set as --NAME=VALUE (defaults: the task's, "
          "after --preset, --config and the options given):\n")  # fmt: skip
    print(describe_options(cfg, aliases=ALIASES), end="")
    return 0


def _preset_text(settings: dict) -> str:
    """A preset's settings as the options that give them (``--train.max_steps=20 ...``)."""

    def flat(tree: dict, prefix: str) -> list[str]:
        return [item for key, value in tree.items()
                for item in (flat(value, f"{prefix}{key}.") if isinstance(value, dict)
                             else [f"--{prefix}{key}={value}"])]  # fmt: skip

    return " ".join(flat(settings, "")) or "the task's defaults"


def _eval(args: argparse.Namespace) -> int:
    from attnlab.lab.commands import eval_command

    return eval_command(args.checkpoint, data=args.data, split=args.split, device=args.device)


def _average(args: argparse.Namespace) -> int:
    from attnlab.lab.commands import average_command

    return average_command(args.checkpoint, out=args.out)


def _command_help(args: argparse.Namespace, command: str) -> int:
    """``attnlab predict|show [RUN] --help``: the command's options, then those of RUN's task
    (:meth:`TaskCommands.add_arguments`, and ``--index``)."""
    print(args.parser.format_help())
    if args.checkpoint is None:
        print(f"Name a run to list its task's own flags too: attnlab {command} RUN --help")
        return 0
    from attnlab.lab.task_flags import task_flags_help

    print(task_flags_help(args.checkpoint, command))
    return 0


def _predict(args: argparse.Namespace, rest: list[str]) -> int:
    from attnlab.lab.commands import predict_command

    if args.help or args.checkpoint is None:
        return _command_help(args, "predict") if args.help else args.parser.error("give a RUN")

    return predict_command(args.checkpoint, list(args.texts), as_json=args.json, rest=rest,
                           stdin=sys.stdin, out=args.out)  # fmt: skip


def _runs(args: argparse.Namespace) -> int:
    from attnlab.lab.runs import runs_table

    print(runs_table(args.dir))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from attnlab.lab.runs import plot_runs

    print(plot_runs(args.runs, args.out))
    return 0


def _report(args: argparse.Namespace) -> int:
    from attnlab.lab.report import report_command

    return report_command(budget=args.budget, claims=args.claims, out=args.out, jobs=args.jobs,
                          shard_spec=args.shard, executor=args.executor, collect=args.collect,
                          check=args.check, from_results=args.from_results,
                          max_memory=args.max_memory)  # fmt: skip


def _show(args: argparse.Namespace, rest: list[str]) -> int:
    from attnlab.lab.commands import show_command

    if args.help or args.checkpoint is None:
        return _command_help(args, "show") if args.help else args.parser.error("give a RUN")

    return show_command(
        args.checkpoint,
        list(args.text),
        out=args.out,
        html=args.html,
        layer=args.layer,
        head=args.head,
        rest=rest,
    )


def _bench(args: argparse.Namespace) -> int:
    from attnlab.lab.bench.cli import bench_command

    return bench_command(args)


def _bench_train(args: argparse.Namespace, rest: list[str]) -> int:
    from attnlab.lab.bench.cli import bench_train_command

    return bench_train_command(args, rest)


def _train_arguments(t: argparse.ArgumentParser, **task: Any) -> None:
    """The arguments of ``train`` (and ``pretrain``); ``task``: those of its TASK argument."""
    t.add_argument("task", nargs="?", **task)
    t.add_argument("-h", "--help", action="store_true", help="list every option of TASK")
    t.add_argument("--config", help="JSON (or TOML) file of options, applied before overrides")
    t.add_argument("--preset", metavar="NAME", help="a named set of options of TASK, applied "
                   "before --config and the options given: tiny (a smoke run of seconds), "
                   "default, paper (a published recipe, where the task has one)")  # fmt: skip
    t.add_argument("--resume", action="store_true", help="continue the run in --out_dir (a "
                   "complete run is left as it is, unless --train.epochs, max_steps or max_time "
                   "are raised)")  # fmt: skip
    t.add_argument("--overwrite", action="store_true", help="replace the run in --out_dir")
    t.set_defaults(func=_train, takes_rest=True, train_parser=t)


def _run_arguments(p: argparse.ArgumentParser, command: str) -> None:
    """``RUN`` and ``-h`` of ``predict`` / ``show``, whose help names the task's own flags."""
    p.add_argument("checkpoint", nargs="?", metavar="RUN", help="a run directory or .pt file")
    p.add_argument("-h", "--help", action="store_true",
                   help=f"show this help; with RUN, also the flags of RUN's task ({command})")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="attnlab", description="A command-line lab for self-attention."
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    # -v also after the subcommand (``attnlab train pos -v``); SUPPRESS keeps one given before it
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="debug logging")  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)

    def add(parent: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return parent.add_parser(name, parents=[verbose], **kwargs)

    d = add(sub, "demo", help='train taggers and show how they tag "I saw a saw ."')
    d.add_argument(
        "which",
        nargs="?",
        choices=("text", "speech"),
        default="text",
        help="text: POS taggers (default); speech: spoken digits (FSDD)",
    )
    d.add_argument(
        "--out", default=None, help="where checkpoints and plots go (runs/demo, runs/demo-speech)"
    )
    d.add_argument("--quick", action="store_true", help="a tiny budget (smoke test)")
    d.set_defaults(func=_demo)

    add(sub, "tasks", help="list the tasks").set_defaults(func=_tasks)

    t = add(
        sub, "train", help="train a model: attnlab train TASK [--a.b=value ...]", add_help=False
    )
    _train_arguments(t, help="the task to train (attnlab tasks lists them)")
    # pretrain is train under another name, for the tasks that pre-train an encoder
    pt = add(sub, "pretrain", add_help=False, help="pre-train an encoder to fine-tune from "
             "(--model.init=RUN): attnlab pretrain mlm [--a.b=value ...] = attnlab train mlm")  # fmt: skip
    _train_arguments(pt, help="what to pre-train: mlm (a masked language model)", choices=["mlm"])

    e = add(sub, "eval", help="evaluate a checkpoint (or several: their ensemble) on its test "
            "set or on a file")  # fmt: skip
    e.add_argument("checkpoint", nargs="+", help="a run directory or .pt file; several are "
                   "evaluated as one ensemble (class probabilities averaged)")  # fmt: skip
    e.add_argument("--data", help="a file in the task's format (text: CoNLL-U, word/TAG, "
                   "'word TAG' columns, 'label sentence')")  # fmt: skip
    e.add_argument("--split", default="test", choices=["train", "dev", "test"])
    e.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None,
                   help="where to evaluate (default: the run's train.device)")  # fmt: skip
    e.set_defaults(func=_eval)

    av = add(sub, "average", help="average the weights of several checkpoints of one run "
             "(e.g. its last epochs) into one, to eval or predict with")  # fmt: skip
    av.add_argument("checkpoint", nargs="+", help="two or more .pt files or run directories")
    av.add_argument("--out", required=True, help="the averaged checkpoint (.pt) to write")
    av.set_defaults(func=_average)

    pr = add(sub, "predict", add_help=False, help="tag or classify texts ('-' reads stdin)")
    _run_arguments(pr, "predict")
    pr.add_argument("texts", nargs="*", help="inputs as the task reads them (text: a sentence); "
                    "or --index N: example N of the run's test split, with its gold answer; tasks add "
                    "their own flags, e.g. --node 12 (graphs), --beam 5 (seq2seq): "
                    "attnlab predict RUN --help lists them")  # fmt: skip
    pr.add_argument("--json", action="store_true", help="one JSON object per line")
    pr.add_argument("--out", metavar="FILE", help="write the predictions (with the class "
                    "probabilities of a classifier) to FILE.csv or FILE.jsonl instead")  # fmt: skip
    pr.set_defaults(func=_predict, takes_rest=True, parser=pr)

    s = add(sub, "show", add_help=False, help="the model's attention on one input: an interactive HTML page "
            "(--html) or a PNG figure (--out)")  # fmt: skip
    _run_arguments(s, "show")
    s.add_argument("text", nargs="*", help="one input as the task reads it (text: a sentence; "
                   "a wav path; a word; a SMILES); tasks add their own flags, e.g. --node 12, "
                   "--index 3")  # fmt: skip
    s.add_argument("--out", help="PNG file to write (a figure for papers)")
    s.add_argument("--html", help="HTML page to write: one self-contained file, no network "
                   "(head view, matrix, every layer and head, rollout, the input's picture)")  # fmt: skip
    s.add_argument("--layer", type=int, help="draw only this layer (1 = the first)")
    s.add_argument("--head", type=int, help="draw only this head (1 = the first)")
    s.set_defaults(func=_show, takes_rest=True, parser=s)

    rn = add(sub, "runs", help="a table of the runs under DIR: task, state, dev and test "
             "scores, wall time, options that differ from the task's defaults")  # fmt: skip
    rn.add_argument("dir", nargs="?", default="runs", help="where the runs are (default: runs)")
    rn.set_defaults(func=_runs)
    pl = add(sub, "plot", help="learning curves of runs (their metrics.csv) on one figure")
    pl.add_argument("runs", nargs="+", metavar="RUN", help="run directories")
    pl.add_argument("--out", required=True, help="the PNG file to write")
    pl.set_defaults(func=_plot)

    rp = add(sub, "report", help="the lecture's claims, each run as an experiment: one report "
             "(report.html, report.md, results.jsonl)")  # fmt: skip
    rp.add_argument("--budget", default="quick", choices=("smoke", "quick", "full"),
                    help="smoke: the plumbing only (about 2 min); quick: about 20 min on 2 "
                    "cores; full: the recipes, 3 seeds (days, resumable)")  # fmt: skip
    rp.add_argument("--claims", nargs="+", metavar="NAME",
                    help="only these claims (names or numbers; default: all)")  # fmt: skip
    rp.add_argument("--out", default="report", help="the report's directory (default: report)")
    rp.add_argument("--jobs", type=int, default=1,
                    help="local processes, the machine's threads divided among them")  # fmt: skip
    rp.add_argument("--shard", metavar="I/N", help="run only shard I of N (into a shared --out)")
    rp.add_argument("--executor", default="local", choices=("local", "ray"),
                    help="local processes, or a Ray cluster (RAY_ADDRESS; pip install ray)")  # fmt: skip
    rp.add_argument("--collect", metavar="DIR",
                    help="render the report in DIR from what has finished, running nothing")  # fmt: skip
    rp.add_argument("--check", action="store_true",
                    help="set up every job that has not finished (data, model, optimiser) "
                    "without training, a line each; exit 1 if one fails")  # fmt: skip
    rp.add_argument("--from-results", metavar="FILE",
                    help="count the jobs whose results FILE holds (a report's results.jsonl, "
                    "e.g. docs/report/full/results.jsonl) as finished, and run the rest")  # fmt: skip
    rp.add_argument("--max-memory", type=float, metavar="GIB",
                    help="the memory each running job may hold: over it, the job saves and "
                    "stops (default: 3/4 of this machine's, divided among --jobs; 0: no "
                    "limit)")  # fmt: skip
    rp.set_defaults(func=_report)

    da = add(sub, "data", help="datasets: list, fetch, make")
    da_sub = da.add_subparsers(dest="action", required=True)
    add(da_sub, "list", help="registered datasets and whether they are available")
    f = add(da_sub, "fetch", help="download (or locate in ATTNLAB_DATA) datasets")
    f.add_argument("names", nargs="+")
    mk = add(da_sub, "make", help="generate a dataset into the cache (phones: needs festival)")
    mk.add_argument("name", choices=["phones"])
    mk.add_argument("--sentences", type=int, default=1000, help="how many sentences")
    mk.add_argument("--seed", type=int, default=0, help="picks sentences, rate/pitch, split")
    mk.add_argument("--corpus", default="conll2000", help="text corpus the sentences come from")
    mk.add_argument("--workers", type=int, default=2, help="festival processes at once")
    da.set_defaults(func=_data)

    add_bench_commands(sub, add, attention=_bench, train=_bench_train)
    return p


#: errors that are the user's to fix (bad option, file, checkpoint, run directory, data): one
#: line and exit status 2. Anything else is a bug in attnlab and keeps its traceback.
USER_ERRORS = (ValueError, OSError, NotImplementedError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``attnlab ARGV``; return the exit status.

    A user error (:data:`USER_ERRORS`: :class:`~attnlab.lab.train.RunError`, a bad option or file,
    an unreadable checkpoint, missing data, ...) prints one line ``attnlab CMD: error: ...`` to
    stderr and returns 2; Ctrl-C outside training returns 130. Log lines go through tqdm's
    writer, so they never land on a progress bar's line.
    """
    from tqdm.contrib.logging import logging_redirect_tqdm

    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(message)s",
        stream=sys.stderr,
    )
    if rest and not getattr(args, "takes_rest", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if argv is None:  # the attnlab command itself (not a call from Python)
        from attnlab.lab.train.host_memory import restart_with_jemalloc

        restart_with_jemalloc(args.command)
    try:
        with logging_redirect_tqdm(), _warnings_as_lines(args.command):
            if getattr(args, "takes_rest", False):
                return args.func(args, rest)
            return args.func(args)
    except BrokenPipeError:  # stdout closed early (``attnlab data list | head``): not an error
        with contextlib.suppress(OSError, ValueError):  # no flush error at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left
    except USER_ERRORS as err:
        print(f"attnlab {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnlab {args.command}: interrupted", file=sys.stderr)
        return 130


@contextlib.contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """attnlab's own warnings (an input read with unseen characters, a recording upsampled,
    ...) formatted as one line ``attnlab CMD: warning: ...``, without the warning machinery's
    file name and source line; other packages' warnings keep Python's format."""
    package = os.path.dirname(os.path.abspath(__file__))
    default = warnings.formatwarning

    def formatted(message, category, filename, lineno, line=None):  # noqa: ANN001
        if not os.path.abspath(filename).startswith(package + os.sep):
            return default(message, category, filename, lineno, line)
        return f"attnlab {command}: warning: {_one_line(message)}\n"

    warnings.formatwarning = formatted
    try:
        yield
    finally:
        warnings.formatwarning = default


def _one_line(err: BaseException | Warning | str) -> str:
    """The message of ``err`` on one line; an OS error as ``FILE: reason``."""
    if isinstance(err, OSError) and err.strerror and err.filename is not None:
        text = f"{err.filename}: {err.strerror}"
    elif isinstance(err, UnicodeDecodeError):
        text = f"not a UTF-8 text file ({err.reason} at byte {err.start})"
    else:
        text = str(err) or type(err).__name__
    return " ".join(text.split("\n"))
