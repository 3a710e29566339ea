"""The readers of a user's own files (issue 37): CoNLL-U (UPOS or XPOS), ``word<TAB>tag``,
``word/TAG``, and CSV / TSV / JSON-lines tables of labelled sentences; each format read well,
and each malformed file refused in one line naming the file, the line and what was expected."""

from __future__ import annotations

import pytest

from attnlab.lab.data.readers import read_labelled_table, read_tagging_file, tag_line

CONLLU = (
    "# sent_id = 1\n"
    "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n"
    "2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
    "3\truns\trun\tVERB\tVBZ\t_\t0\troot\t_\t_\n"
    "\n"
    "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n"
    "2\tcat\tcat\tNOUN\tNN\t_\t0\troot\t_\t_\n"
)


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_conllu_reads_upos_or_xpos(tmp_path):
    path = _write(tmp_path, "train.conllu", CONLLU)
    upos = read_tagging_file(path)
    assert upos == [
        (("The", "dog", "runs"), ("DET", "NOUN", "VERB")),
        (("A", "cat"), ("DET", "NOUN")),
    ]
    assert read_tagging_file(path, "xpos")[0][1] == ("DT", "NN", "VBZ")


def test_tsv_slash_and_columns_read_the_same_sentences(tmp_path):
    expected = [(("New York", "is", "big"), ("PROPN", "AUX", "ADJ")), (("Go",), ("VERB",))]
    tsv = _write(tmp_path, "t.tsv", "New York\tPROPN\nis\tAUX\nbig\tADJ\n\nGo\tVERB\n")
    assert read_tagging_file(tsv) == expected  # a word may hold a space
    tsv_any = _write(tmp_path, "t.txt", "New York\tPROPN\nis\tAUX\nbig\tADJ\n\n\nGo\tVERB\n")
    assert read_tagging_file(tsv_any) == expected  # sniffed: one tab per line
    slash = _write(tmp_path, "s.txt", "the/DET dog/NOUN\nruns/VERB\n")
    assert read_tagging_file(slash) == [(("the", "dog"), ("DET", "NOUN")), (("runs",), ("VERB",))]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.conllu", CONLLU.replace("2\tdog\tdog", "2 dog\tdog"),
         r"bad.conllu:3: expected 10 tab-separated CoNLL-U columns, got 9"),
        ("bad.tsv", "the\tDET\ndog NOUN\n", r"bad.tsv:2: expected 'word<TAB>tag', got 'dog NOUN'"),
        ("bad.txt", "the/DET dog/NOUN runs/VERB\nruns VERB\n",
         r"bad.txt is not a tagging file: expected .*; line 2 is not word/TAG tokens like line 1: "
         r"'runs VERB'"),
        ("empty.tsv", "", r"empty.tsv: no sentences"),
        ("empty.txt", "\n\n", r"empty.txt: empty file"),
        ("labels.txt", "1 a fine film\n0 a bad one\n", r"labels.txt is not a tagging file: it holds"),
    ],
)  # fmt: skip
def test_malformed_tagging_files_name_the_file_and_line(tmp_path, name, text, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(ValueError, match=message) as err:
        read_tagging_file(path)
    assert "\n" not in str(err.value)


def test_xpos_missing_names_the_line(tmp_path):
    path = _write(tmp_path, "x.conllu", CONLLU.replace("NOUN\tNN", "NOUN\t_"))
    with pytest.raises(ValueError, match=r"x.conllu:3: token has no form or no 'xpos'"):
        read_tagging_file(path, "xpos")


def test_tag_line_finds_a_tag_in_any_format(tmp_path):
    assert tag_line(_write(tmp_path, "a.conllu", CONLLU), "VERB") == 4
    assert tag_line(_write(tmp_path, "a.tsv", "a\tX\nb\tY\n"), "Y") == 2
    assert tag_line(_write(tmp_path, "a.txt", "a/X b/X\nc/Z\n"), "Z") == 2


def test_tables_read_text_and_label_columns(tmp_path):
    csv = _write(tmp_path, "r.csv", 'id,review,stars\n1,"great, fun film",5\n2,dull,1\n')
    rows = read_labelled_table(csv, "review", "stars")
    assert [(r.tokens, r.label, r.line) for r in rows] == [
        (("great,", "fun", "film"), "5", 2), (("dull",), "1", 3)]  # fmt: skip
    tsv = _write(tmp_path, "r.tsv", "text\tlabel\na fine film\tpositive\n\nbad\tnegative\n")
    assert [(r.label, r.line) for r in read_labelled_table(tsv)] == [
        ("positive", 2),
        ("negative", 4),
    ]
    jsonl = _write(
        tmp_path, "r.jsonl", '{"text": "ok then", "label": 3}\n\n{"text": "no", "label": "x"}\n'
    )
    assert [(r.tokens, r.label, r.line) for r in read_labelled_table(jsonl)] == [
        (("ok", "then"), "3", 1), (("no",), "x", 3)]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("e.csv", "", r"e.csv: empty file: expected a header row naming the columns \(text,label\)"),
        ("h.csv", "text,label\n", r"h.csv: no sentences"),
        ("c.csv", "sentence,label\nhi,1\n",
         r"c.csv:1: the header has no column 'text' \(columns: sentence, label\); name the right "
         r"one with --data.text_column"),
        ("f.csv", "text,label\nhi,1\nho,2,3\n", r"f.csv:3: expected 2 fields like the header"),
        ("t.tsv", "text\tlabel\n\t1\n", r"t.tsv:2: expected a sentence in 'text', got ''"),
        ("l.csv", "text,label\nhi,\n", r"l.csv:2: expected a label in 'label'"),
        ("j.jsonl", '{"text": "a", "label": 1}\n{"text": "b"\n', r"j.jsonl:2: not valid JSON"),
        ("k.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n',
         r"k.jsonl:2: no key 'label' \(keys: text\); name the right one with --data.label_column"),
        ("a.jsonl", '["a", 1]\n', r"a.jsonl:1: expected a JSON object"),
        ("x.txt", "text,label\n", r"x.txt: expected a table .*a .csv, .tsv or .jsonl file"),
    ],
)  # fmt: skip
def test_malformed_tables_name_the_file_and_line(tmp_path, name, text, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(ValueError, match=message) as err:
        read_labelled_table(path)
    assert "\n" not in str(err.value)
