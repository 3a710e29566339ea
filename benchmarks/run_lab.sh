#!/usr/bin/env bash
# The lab's full-size runs behind BENCHMARKS.md (issue: the lab). Sequential; about 30 minutes
# on 2 cores. Needs ATTNLAB_DATA (or network access for downloads). Every run replaces the one
# its directory holds (--overwrite): a rerun refreshes the numbers instead of being refused.
#   bash benchmarks/run_lab.sh runs      # the full-size accuracy runs
#   bash benchmarks/run_lab.sh compare   # throughput vs nn.TransformerEncoder (fp32/bf16, eager and
#                                        # compiled, one run), then the side-by-side table
#   bash benchmarks/run_lab.sh compile   # the Brown tagger run again under --train.compile=true
set -euo pipefail
cd "$(dirname "$0")/.."
A=".venv/bin/attnlab"
COMMON="--train.precision=bf16 --train.lr=3e-3 --train.warmup_fraction=0.05 --train.batch_size=64"
case "${1:-runs}" in
runs)
    $A train pos --task_options.corpus=brown --train.epochs=4 $COMMON --out_dir=runs/pos-brown --overwrite
    $A train pos --task_options.corpus=conll2000 --train.epochs=10 $COMMON --out_dir=runs/pos-conll2000 --overwrite
    $A train trec --train.epochs=15 $COMMON --train.patience=4 --out_dir=runs/trec --overwrite
    $A train sst2 --train.epochs=10 $COMMON --train.patience=3 --out_dir=runs/sst2 --overwrite
    ;;
compare)
    .venv/bin/python benchmarks/bench_pos.py speed --steps 30
    .venv/bin/python benchmarks/bench_pos.py table --corpus brown --sentences 8000 --epochs 2
    ;;
compile)
    $A train pos --task_options.corpus=brown --train.epochs=4 $COMMON --train.compile=true \
        --out_dir=runs/pos-brown-compiled --overwrite
    ;;
*)
    echo "usage: bash benchmarks/run_lab.sh [runs|compare|compile]" >&2
    exit 2
    ;;
esac
