#!/usr/bin/env bash
# The lab's full-size runs behind BENCHMARKS.md (issue: the lab). Sequential; about 30 minutes
# on 2 cores. Needs ATTNLAB_DATA (or network access for downloads).
#   bash benchmarks/run_lab.sh runs      # the full-size accuracy runs
#   bash benchmarks/run_lab.sh compare   # throughput vs nn.TransformerEncoder, the side-by-side table
set -euo pipefail
cd "$(dirname "$0")/.."
A=".venv/bin/attnlab"
COMMON="--train.bf16=true --train.lr=3e-3 --train.warmup_fraction=0.05 --train.batch_size=64"
if [ "${1:-runs}" = runs ]; then
    $A train pos --task_options.corpus=brown --train.epochs=4 $COMMON --out_dir=runs/pos-brown
    $A train pos --task_options.corpus=conll2000 --train.epochs=10 $COMMON --out_dir=runs/pos-conll2000
    $A train trec --train.epochs=15 $COMMON --train.patience=4 --out_dir=runs/trec
    $A train sst2 --train.epochs=10 $COMMON --train.patience=3 --out_dir=runs/sst2
else
    .venv/bin/python benchmarks/bench_pos.py speed --steps 30
    .venv/bin/python benchmarks/bench_pos.py table --corpus brown --sentences 8000 --epochs 2
fi
