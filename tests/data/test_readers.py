"""Tests of attnlab.lab.data.readers on small synthetic files and, where present, the data mirror."""

import zipfile
from pathlib import Path

import pytest

from attnlab.lab.data.readers import (
    iter_conllu,
    list_zip_fileids,
    load_tagmap,
    read_conllu,
    read_nltk_tagged_zip,
    read_sentences,
)


def _row(*cols: str) -> str:
    return "\t".join(cols) + "\n"


def _token(i: str, form: str, upos: str, xpos: str = "_") -> str:
    return _row(i, form, "_", upos, xpos, "_", "0", "dep", "_", "_")


# -- CoNLL-U ------------------------------------------------------------------------------------

CONLLU = (
    "# sent_id = 1\n"
    "# text = I don't know.\n"
    + _token("1", "I", "PRON", "PRP")
    + _row("2-3", "don't", "_", "_", "_", "_", "_", "_", "_", "_")
    + _token("2", "do", "AUX", "VBP")
    + _token("3", "n't", "PART", "RB")
    + _token("3.1", "know", "VERB", "VB")  # an empty node: skipped
    + _token("4", "know", "VERB", "VB")
    + _token("5", ".", "PUNCT", ".")
    + "\n"
    + "# sent_id = 2\n"
    + _token("1", "Yes", "INTJ", "UH")
    + "\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_conllu_skips_multiword_tokens_and_empty_nodes(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.conllu", CONLLU)
    assert read_conllu(path) == [
        (("I", "do", "n't", "know", "."), ("PRON", "AUX", "PART", "VERB", "PUNCT")),
        (("Yes",), ("INTJ",)),
    ]
    assert read_conllu(path, column="xpos")[0][1] == ("PRP", "VBP", "RB", "VB", ".")


def test_conllu_without_trailing_blank_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.conllu", CONLLU.rstrip("\n") + "\n")
    assert len(read_conllu(path)) == 2


def test_conllu_streams(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.conllu", CONLLU + _token("1", "bad", "NOUN")[:-4] + "\n\n")
    sentences = iter_conllu(path)
    assert next(sentences)[0][0] == "I"  # the malformed third sentence is not read yet
    next(sentences)
    with pytest.raises(ValueError):
        next(sentences)


def test_conllu_wrong_column_count_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.conllu", CONLLU + "1\tonly\tfour\tcolumns\n")
    with pytest.raises(ValueError, match=r"x\.conllu:14: expected 10 tab-separated"):
        read_conllu(path)


def test_conllu_bad_id_names_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.conllu", _token("one", "I", "PRON") + "\n")
    with pytest.raises(ValueError, match=r"x\.conllu:1: malformed CoNLL-U"):
        read_conllu(path)


def test_conllu_empty_tag_column_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.conllu", "# c\n" + _token("1", "a", "DET") + _token("2", "b", "X"))
    with pytest.raises(ValueError, match=r"x\.conllu:2: .*no 'xpos'"):
        read_conllu(path, column="xpos")


def test_conllu_unknown_column(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="column must be one of .* got 'pos'"):
        read_conllu(_write(tmp_path, "x.conllu", CONLLU), column="pos")


# -- NLTK tagged zips -----------------------------------------------------------------------------

BROWN_DOC = (
    "\n\n\tThe/at Fulton/np-tl Jury/nn-tl said/vbd 1/2/cd ./.\n\n"
    "\n\tIt/pps said/vbd ``/`` so/rb ''/'' ./.\n"
    "\tNo/at ,/, he's/pps+bez not/*\n"
)


def _zip(tmp_path: Path, members: dict[str, str]) -> Path:
    path = tmp_path / "corpus.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


def test_slash_layout_sentences_are_lines(tmp_path: Path) -> None:
    path = _zip(tmp_path, {"brown/": "", "brown/ca01": BROWN_DOC, "brown/README": "not tagged"})
    docs = read_nltk_tagged_zip(path, "brown", ["ca01"])
    assert list(docs) == ["ca01"]
    first, second, third = docs["ca01"]
    assert first == (
        ("The", "Fulton", "Jury", "said", "1/2", "."),
        ("AT", "NP-TL", "NN-TL", "VBD", "CD", "."),  # upper-cased, like NLTK's str2tuple
    )
    assert second[1] == ("PPS", "VBD", "``", "RB", "''", ".")
    assert third == (("No", ",", "he's", "not"), ("AT", ",", "PPS+BEZ", "*"))


def test_slash_layout_with_tagmap(tmp_path: Path) -> None:
    path = _zip(tmp_path, {"brown/ca01": "The/at Jury/nn-tl ./.\n"})
    tagmap = {"AT": "DET", "NN-TL": "NOUN", ".": "."}
    assert read_nltk_tagged_zip(path, "brown/", tagmap=tagmap)["ca01"] == [
        (("The", "Jury", "."), ("DET", "NOUN", "."))
    ]
    with pytest.raises(ValueError, match=r"corpus\.zip:brown/ca01:1: tag 'NN-TL' is not in"):
        read_nltk_tagged_zip(path, "brown", tagmap={"AT": "DET"})


@pytest.mark.parametrize("token", ["word", "/tag", "word/"])
def test_slash_layout_malformed_token_names_member_and_line(tmp_path: Path, token: str) -> None:
    path = _zip(tmp_path, {"brown/ca01": f"The/at\n\nA/at {token} ./.\n"})
    with pytest.raises(ValueError, match=r"corpus\.zip:brown/ca01:3: expected word/tag"):
        read_nltk_tagged_zip(path, "brown")


def test_columns_layout(tmp_path: Path) -> None:
    text = "Confidence NN B-NP\nin IN B-PP\n\n\nIt PRP B-NP\n. . O\n"
    path = _zip(tmp_path, {"conll2000/train.txt": text, "conll2000/README": "x"})
    docs = read_nltk_tagged_zip(path, "conll2000", ["train.txt"], layout="columns")
    assert docs["train.txt"] == [(("Confidence", "in"), ("NN", "IN")), (("It", "."), ("PRP", "."))]
    chunks = read_nltk_tagged_zip(path, "conll2000", ["train.txt"], layout="columns", column=2)
    assert chunks["train.txt"][0][1] == ("B-NP", "B-PP")


def test_columns_layout_malformed_line(tmp_path: Path) -> None:
    path = _zip(tmp_path, {"c/train.txt": "a DT B-NP\n\nb\n"})
    with pytest.raises(ValueError, match=r"c/train\.txt:3: expected at least 2 columns"):
        read_nltk_tagged_zip(path, "c", layout="columns")


def test_zip_argument_errors(tmp_path: Path) -> None:
    path = _zip(tmp_path, {"brown/ca01": "a/at\n"})
    with pytest.raises(ValueError, match="no member 'brown/zz99'"):
        read_nltk_tagged_zip(path, "brown", ["zz99"])
    with pytest.raises(ValueError, match="layout must be one of"):
        read_nltk_tagged_zip(path, "brown", layout="tsv")


def test_list_zip_fileids(tmp_path: Path) -> None:
    members = {"brown/": "", "brown/cb02": "", "brown/ca01": "", "brown/README": "", "x/ca03": ""}
    path = _zip(tmp_path, members)
    assert list_zip_fileids(path, "brown") == ["README", "ca01", "cb02"]
    assert list_zip_fileids(path, "brown/", r"c[a-r]\d\d") == ["ca01", "cb02"]


def test_load_tagmap(tmp_path: Path) -> None:
    path = _zip(tmp_path, {"m/en.map": "AT\tDET\n\nNN-TL\tNOUN\n"})
    assert load_tagmap(path, "m/en.map") == {"AT": "DET", "NN-TL": "NOUN"}
    path = _zip(tmp_path, {"m/en.map": "AT\tDET\nAT\tNOUN\n"})
    with pytest.raises(ValueError, match=r"en\.map:2: tag 'AT' is mapped twice"):
        load_tagmap(path, "m/en.map")


# -- sentence classification ----------------------------------------------------------------------


def test_sentences(tmp_path: Path) -> None:
    path = _write(tmp_path, "s.train", "1 a stirring , funny film\n\n0 dull .\n")
    assert read_sentences(path) == [
        (("a", "stirring", ",", "funny", "film"), 1),
        (("dull", "."), 0),
    ]


@pytest.mark.parametrize("line", ["pos a good film", "1", "-1 bad", "1.0 so so"])
def test_sentences_malformed_line_names_file_and_line(tmp_path: Path, line: str) -> None:
    path = _write(tmp_path, "s.train", f"1 fine\n{line}\n")
    with pytest.raises(ValueError, match=r"s\.train:2: expected 'label<space>tokenized"):
        read_sentences(path)


def test_sentences_latin1_fallback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.train"
    path.write_bytes(b"4 a sister\xf0city ?\n5 caf\xc3\xa9 ?\n")
    assert read_sentences(path) == [(("a", "sister\xf0city", "?"), 4), (("caf\xe9", "?"), 5)]
    assert "s.train:1: not valid UTF-8" in caplog.text


# -- the real files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "n_sentences", "n_tokens"),
    [
        ("en_atis-ud-train", 4274, 48655),
        ("en_atis-ud-dev", 572, 6644),
        ("en_ewt-ud-dev", 2001, 25147),  # 359 multiword tokens and 4 empty nodes skipped
    ],
)
def test_real_conllu_counts(data_mirror: Path, name: str, n_sentences: int, n_tokens: int) -> None:
    sentences = read_conllu(data_mirror / "ud" / f"{name}.conllu")
    assert len(sentences) == n_sentences
    assert sum(len(tokens) for tokens, _ in sentences) == n_tokens
    assert all(len(tokens) == len(tags) for tokens, tags in sentences)


def test_real_brown_map_covers_twelve_tags(data_mirror: Path) -> None:
    tagmap = load_tagmap(
        data_mirror / "nltk" / "universal_tagset.zip", "universal_tagset/en-brown.map"
    )
    assert len(tagmap) == 472
    assert len(set(tagmap.values())) == 12
    assert tagmap["NP-TL"] == "NOUN" and tagmap["*"] == "ADV"


def test_real_conll2000_counts(data_mirror: Path) -> None:
    docs = read_nltk_tagged_zip(data_mirror / "nltk" / "conll2000.zip", "conll2000", layout="columns",
                                fileids=["train.txt", "test.txt"])  # fmt: skip
    assert (len(docs["train.txt"]), len(docs["test.txt"])) == (8936, 2012)


def test_real_trec_has_one_non_utf8_line(
    data_mirror: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pairs = read_sentences(data_mirror / "sentences" / "TREC.train.all")
    assert len(pairs) == 5452
    assert "TREC.train.all:66: not valid UTF-8" in caplog.text
