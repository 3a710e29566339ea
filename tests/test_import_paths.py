"""Modules split into packages or smaller files still export what they exported before: every
public name of the old module imports from its old path, as the very object the new module
defines (no copies that could drift apart)."""

from __future__ import annotations

import importlib

import pytest

#: old module -> (its public names before the split, the module that defines them now)
MOVED = {
    "attnlab.backends": {
        "attnlab.backends.base": ["Problem", "Backend", "BACKENDS"],
        "attnlab.backends.reference": ["ReferenceBackend"],
        "attnlab.backends.sdpa": ["SDPABackend"],
        "attnlab.backends.flex": ["FlexBackend"],
        "attnlab.backends.chunked": ["ChunkedBackend"],
        "attnlab.backends": ["select_backend", "get_backend", "run_backend", "check_backend_name"],
    },
    "attnlab.train.overrides": {
        "attnlab.train.overrides": ["apply_overrides", "parse_override"],
        "attnlab.train.merge": [
            "merge", "to_dict", "from_dict", "convert", "is_config", "chosen_by_kind",
            "field_types",
        ],
        "attnlab.train.describe": ["describe_options"],
    },
    "attnlab.data.readers": {
        "attnlab.data.readers.base": ["TaggedSentence", "LabeledSentence", "StrPath"],
        "attnlab.data.readers.tagging": [
            "CONLLU_TAG_COLUMNS", "NLTK_LAYOUTS", "iter_conllu", "read_conllu",
            "list_zip_fileids", "read_nltk_tagged_zip", "load_tagmap",
        ],
        "attnlab.data.readers.sentences": ["iter_sentences", "read_sentences"],
        "attnlab.data.readers.sniff": [
            "TEXT_FILE_FORMATS", "sniff_text_format", "read_tagging_file",
            "read_classification_file",
        ],
    },
    "attnlab.tasks.text": {
        "attnlab.tasks.text.tagging": ["PosTask", "TaggingOptions"],
        "attnlab.tasks.text.sentences": [
            "SentenceTask", "SST2Task", "SST5Task", "TRECTask", "SentenceOptions",
        ],
    },
}  # fmt: skip

CASES = [
    (old, new, name)
    for old, homes in MOVED.items()
    for new, names in homes.items()
    for name in names
]


@pytest.mark.parametrize(("old", "new", "name"), CASES, ids=[f"{o}.{n}" for o, _, n in CASES])
def test_old_import_path_gives_the_same_object(old, new, name):
    assert getattr(importlib.import_module(old), name) is getattr(
        importlib.import_module(new), name
    )


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_all_is_kept(old):
    """``from OLD import *`` gives the names it gave before (``__all__`` lists them)."""
    listed = set(getattr(importlib.import_module(old), "__all__", ()))
    public = {name for homes in MOVED[old].values() for name in homes}
    before = {  # the old modules' __all__ (readers had none: every public name above)
        "attnlab.backends": public,
        "attnlab.train.overrides": public - {"is_config", "chosen_by_kind", "field_types"},
        "attnlab.data.readers": public,
        "attnlab.tasks.text": public,
    }[old]
    assert before <= listed
