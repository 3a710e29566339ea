"""One's own graph, no code (issue 37): ``node-classify`` reads a node CSV and an edge CSV, a
``.npz`` or a ``.pt`` dict of tensors (a pickled PyG ``Data`` refused by the safe loader); the
split column, ``none`` and the seeded cut of the labelled nodes left blank; the graph kept in
the run; train -> eval -> predict -> show from the run alone; a bad file is one line naming it,
and nothing is written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.lab.tasks.graph.files import GraphDataOptions, read_graph
from attnlab.lab.tasks.graph.generic import NodeClassifyOptions, NodeClassifyTask

TINY = ["--model.hidden=4", "--model.heads=2", "--train.max_steps=3", "--train.eval_every=3",
        "--train.device=cpu", "--train.log_every=0"]  # fmt: skip


def two_communities(root: Path, n: int = 30) -> tuple[Path, Path]:
    """Nodes ``n0..`` in two communities (``ring``, ``star``), 3 features, a split column with
    train / val / test / none values, blanks, and one unlabelled node; edges within each."""
    rng = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    lines = ["id,f0,f1,f2,label,split"]
    for i in range(n):
        label = "ring" if i % 2 else "star"
        split = ["train", "train", "val", "test", "", "", "none"][i % 7]
        features = [1.0 if label == "ring" else 0.0, rng.random(), 1.0]
        lines.append(f"n{i},{','.join(map(str, features))},{label if i != n - 1 else ''},"
                     f"{split if i != n - 1 else ''}")  # fmt: skip
    (root / "nodes.csv").write_text("\n".join(lines) + "\n")
    edges = ["source,target"] + [f"n{i},n{(i + 2) % n}" for i in range(n)]
    (root / "edges.csv").write_text("\n".join(edges) + "\n")
    return root / "nodes.csv", root / "edges.csv"


def test_the_split_column_and_the_cut_of_blank_nodes(tmp_path):
    nodes, edges = two_communities(tmp_path / "g")
    task = NodeClassifyTask()
    task.setup(NodeClassifyOptions(data=GraphDataOptions(nodes=str(nodes), edges=str(edges),
                                                         split=(0.25, 0.25), seed=3)))  # fmt: skip
    g = task.graph
    raw = read_graph(GraphDataOptions(nodes=str(nodes), edges=str(edges)))
    named = {s: {i for i, v in enumerate(raw.split) if v == s and raw.labels[i]}
             for s in ("train", "dev", "test")}  # fmt: skip
    blank = {i for i, v in enumerate(raw.split) if v == "" and raw.labels[i]}
    held = {s: set(g.splits[s].tolist()) for s in ("train", "dev", "test")}
    for s in held:
        assert named[s] <= held[s] and held[s] - named[s] <= blank
    assert sum(len(h) for h in held.values()) == sum(map(len, named.values())) + len(blank)
    assert task.classes == ["ring", "star"] and g.edge_index.shape == (2, 60)  # symmetric
    assert int(g.y[29]) == -1  # the unlabelled node: in the graph, in no split
    again = NodeClassifyTask()
    again.setup({"data": {"nodes": str(nodes), "edges": str(edges), "split": [0.25, 0.25],
                          "seed": 3}})  # fmt: skip
    assert all(torch.equal(again.graph.splits[s], g.splits[s]) for s in held)


def test_npz_and_pt_read_as_the_csvs_do_and_a_pyg_pickle_is_refused(tmp_path):
    nodes, edges = two_communities(tmp_path / "g")
    raw = read_graph(GraphDataOptions(nodes=str(nodes), edges=str(edges)))
    y = np.array([{"ring": 0, "star": 1}.get(label, -1) for label in raw.labels])
    masks = {f"{s}_mask": np.array([v == s for v in raw.split]) for s in ("train", "test")}
    np.savez(tmp_path / "g.npz", x=raw.x.numpy(), edge_index=raw.edge_index.numpy(), y=y,
             val_mask=np.array([v == "dev" for v in raw.split]), **masks)  # fmt: skip
    read = read_graph(GraphDataOptions(nodes=str(tmp_path / "g.npz")))
    assert torch.equal(read.x, raw.x) and torch.equal(read.edge_index, raw.edge_index)
    assert read.split == [v or "none" for v in raw.split]  # masks given: blanks in no split
    tensors = {"x": raw.x, "edge_index": raw.edge_index, "y": torch.from_numpy(y)}
    torch.save(tensors, tmp_path / "g.pt")
    assert read_graph(GraphDataOptions(nodes=str(tmp_path / "g.pt"))).labels[:2] == ["1", "0"]
    torch.save(Data(tensors), tmp_path / "data.pt")
    with pytest.raises(ValueError, match=r"data\.pt: not a dict of tensors .*PyG Data object is "
                       r"refused .*torch\.save\(data\.to_dict\(\), FILE\)"):  # fmt: skip
        read_graph(GraphDataOptions(nodes=str(tmp_path / "data.pt")))


class Data:
    """Stands for PyG's ``Data``: a pickled object of a class the safe loader does not know."""

    def __init__(self, tensors: dict) -> None:
        self.tensors = tensors


def test_node_classify_round_trip_from_the_run_alone(cli, tmp_path):
    nodes, edges = two_communities(tmp_path / "g")
    run = tmp_path / "run"
    ran = cli("train", "node-classify", f"--data.nodes={nodes}", f"--data.edges={edges}",
              *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    manifest = json.loads((run / "data" / "splits.json").read_text())
    assert sum(manifest["examples"].values()) == 25  # 30 nodes, 4 'none', 1 unlabelled
    assert (run / "data" / "train.txt").read_text().startswith("n0\nn1\n")
    (tmp_path / "g").rename(tmp_path / "elsewhere")  # the run must not need the files

    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith("node-classify test split: {"), ran.err
    ran = cli("predict", run, "--node", "n3", "n29", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert [r["node"] for r in records] == ["n3", "n29"] and records[1]["gold"] == "none"
    assert records[0]["gold"] == "ring" and records[0]["split"] == "test"
    ran = cli("show", run, "n5", "--out", tmp_path / "g.png")
    assert ran.rc == 0 and (tmp_path / "g.png").is_file(), ran.err
    cli("predict", run, "n99").user_error("predict", "no node 'n99' in the graph")


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (["--data.edges={root}/bad_edges.csv"],
         ["bad_edges.csv: row 2 (line 3): target 'n77' is not a node id of", "nodes.csv"]),
        (["--data.nodes={root}/unseen.csv"],
         ["unseen.csv: row 4 (line 5): label 'cube' of the test split is not one of the labels"]),
        (["--data.label_column=class"], ["nodes.csv: no column 'class' (the header has id, f0"]),
        (["--data.nodes={root}/text.csv"], ["text.csv: row 2 (line 3): feature 'f1': expected a "
                                            "number, got 'high'"]),
        (["--data.nodes={root}/odd.csv"], ["odd.csv: row 1 (line 2): split 'holdout': expected"]),
        (["--data.nodes={root}/noy.npz", "--data.edges="],
         ["noy.npz: no array 'y' (it holds edge_index, x)"]),
        (["--data.nodes={root}/far.npz", "--data.edges="],
         ["far.npz: edge_index column 1 (1 -> 7) names a node outside 0..2"]),
        (["--data.nodes="], ["'node-classify' trains on your own graph: give --data.nodes"]),
    ],
)  # fmt: skip
def test_bad_graph_files_are_one_line_and_nothing_is_written(cli, tmp_path, options, fragments):
    root = tmp_path / "g"
    nodes, edges = two_communities(root)
    text = nodes.read_text().splitlines()
    (root / "bad_edges.csv").write_text("source,target\nn0,n1\nn1,n77\n")
    (root / "unseen.csv").write_text("\n".join([*text[:4], "n3,0,0,1,cube,test", *text[5:]]))
    (root / "text.csv").write_text("\n".join([*text[:2], "n1,1,high,1,ring,train", *text[3:]]))
    (root / "odd.csv").write_text("\n".join([text[0], "n0,1,1,1,ring,holdout", *text[2:]]))
    np.savez(root / "noy.npz", x=np.zeros((3, 2)), edge_index=np.array([[0, 1], [1, 2]]))
    np.savez(root / "far.npz", x=np.zeros((3, 2)), edge_index=np.array([[0, 1], [1, 7]]),
             y=np.array([0, 1, 0]))  # fmt: skip
    given = [o.format(root=root) for o in options]
    run = tmp_path / "run"
    cli("train", "node-classify", f"--data.nodes={nodes}", f"--data.edges={edges}", *given,
        *TINY, f"--out_dir={run}").user_error("train", *fragments)  # fmt: skip
    assert not run.exists()
