"""Tests of attnlab.lab.data.registry and .resolve: mirror, cache, download, checksums. No network."""

import hashlib
import io
import re
import urllib.error
from pathlib import Path

import pytest

from attnlab.lab.data import registry, resolve
from attnlab.lab.data.registry import (
    CACHE_ENV,
    DATA_ENV,
    DATASETS,
    ChecksumError,
    DataFile,
    Dataset,
    DatasetUnavailable,
    dataset_path,
    fetch,
    get_dataset,
    list_datasets,
)

GOOD = b"hello attention\n"
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


class FakeResponse(io.BytesIO):
    """What urlopen returns: a readable, closable body with headers."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.headers = {"Content-Length": str(len(body))}


class FakeOpener:
    """Stands in for urllib.request.urlopen: serves fixed bytes, or raises, and counts calls."""

    def __init__(self, body: bytes = GOOD, error: Exception | None = None) -> None:
        self.body, self.error, self.calls = body, error, []

    def __call__(self, url: str, timeout: float) -> FakeResponse:
        self.calls.append(url)
        if self.error is not None:
            raise self.error
        return FakeResponse(self.body)


def _no_network(url: str, timeout: float) -> None:
    raise AssertionError(f"the network was touched: {url}")


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No mirror, a fresh cache, no network, and an empty checksum memo for every test."""
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(resolve, "_urlopen", _no_network)
    monkeypatch.setattr(resolve, "_SHA256_MEMO", {})
    return tmp_path / "cache"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Dataset:
    """Replace the registry by one toy dataset: a pinned file and a trust-on-first-use file."""
    files = {
        "pinned": DataFile("toy/pinned.txt", "https://example.org/pinned.txt", GOOD_SHA),
        "tofu": DataFile("toy/tofu.txt", "https://example.org/tofu.txt", None),
    }
    dataset = Dataset("toy", "a toy dataset", "CC0", files)
    monkeypatch.setattr(registry, "DATASETS", {"toy": dataset})
    return dataset


# -- the registry itself ------------------------------------------------------------------------

REQUIRED = ("ud-ewt", "ud-atis", "brown", "conll2000", "sst2", "sst5", "trec", "treebank", "masc")


def test_required_datasets_are_registered() -> None:
    assert set(REQUIRED) <= set(DATASETS)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_dataset_entries_are_well_formed(name: str) -> None:
    dataset = get_dataset(name)
    assert dataset.name == name and dataset.description and dataset.license and dataset.files
    for file in dataset.files.values():
        assert not Path(file.path).is_absolute() and ".." not in Path(file.path).parts
        assert file.url.startswith("https://")
        assert file.url.endswith("/" + Path(file.path).name)
        assert file.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", file.sha256)


def test_only_the_unmirrored_ewt_train_file_is_trust_on_first_use() -> None:
    tofu = [f.path for d in DATASETS.values() for f in d.files.values() if f.sha256 is None]
    assert tofu == ["ud/en_ewt-ud-train.conllu"]


def test_unknown_dataset_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown dataset 'nope'.*brown.*ud-atis"):
        get_dataset("nope")


def test_unknown_file_key_lists_valid_keys() -> None:
    with pytest.raises(ValueError, match="no file 'valid'.*train, dev, test"):
        dataset_path("sst2", "valid", mirror="/nonexistent")


def test_checksums_match_the_mirror_sha256sums(data_mirror: Path) -> None:
    sums = {}
    for line in (data_mirror / "SHA256SUMS").read_text().splitlines():
        sha, path = line.split(maxsplit=1)
        sums[path.removeprefix("./")] = sha
    for dataset in DATASETS.values():
        for file in dataset.files.values():
            if file.sha256 is not None and file.path in sums:
                assert sums[file.path] == file.sha256, file.path
            elif file.sha256 is not None:  # from a package manifest (fsdd): hash the file
                where = [data_mirror / file.path, *map(Path, file.installed)]
                found = [p for p in where if p.is_file()]
                if not found and file.installed:  # a system package's file, not installed here
                    continue
                digest = hashlib.sha256(found[0].read_bytes() if found else b"").hexdigest()
                assert digest == file.sha256, file.path


# -- mirror --------------------------------------------------------------------------------------


def test_fetch_reads_the_mirror_given_by_env(
    data_mirror: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATA_ENV, str(data_mirror))
    paths = fetch("sst2")
    assert set(paths) == {"train", "dev", "test"}
    assert paths["train"] == data_mirror / "sentences" / "stsa.binary.train"


def test_mirror_argument_overrides_env(
    data_mirror: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "elsewhere"))
    assert (
        dataset_path("trec", "test", mirror=data_mirror)
        == data_mirror / "sentences" / "TREC.test.all"
    )


def test_mirror_checksum_is_computed_once(
    data_mirror: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = resolve._sha256_of
    monkeypatch.setattr(resolve, "_sha256_of", lambda p: calls.append(p) or real(p))
    for _ in range(3):
        dataset_path("brown", "corpus", mirror=data_mirror)
    assert len(calls) == 1


def test_mirror_checksum_mismatch_raises(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "sentences").mkdir(parents=True)
    (mirror / "sentences" / "TREC.test.all").write_text("0 not the real file\n")
    with pytest.raises(ChecksumError, match="expected 92a6a3ce.*got"):
        dataset_path("trec", "test", mirror=mirror)


def test_missing_mirror_file_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(DATA_ENV, str(empty))
    with pytest.raises(DatasetUnavailable) as info:
        fetch("sst2")
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for part in ("sentences/stsa.binary.train", str(empty), get_dataset("sst2").files["train"].url):
        assert part in message
    assert f"unset {DATA_ENV}" in message


def test_ewt_train_is_not_in_the_shared_mirror(data_mirror: Path) -> None:
    with pytest.raises(DatasetUnavailable, match="ud/en_ewt-ud-train.conllu"):
        dataset_path("ud-ewt", "train", mirror=data_mirror)
    assert dataset_path("ud-ewt", "dev", mirror=data_mirror).is_file()


def test_list_datasets_reports_availability(data_mirror: Path) -> None:
    rows = {row.name: row for row in list_datasets(mirror=data_mirror)}
    assert set(rows) == set(DATASETS)
    assert rows["sst2"].available and rows["brown"].available
    assert not rows["ud-ewt"].available  # its train file is not mirrored
    assert all(row.description and row.license for row in rows.values())


def test_list_datasets_with_an_empty_cache() -> None:
    assert not any(row.available for row in list_datasets())


# -- cache and download --------------------------------------------------------------------------


def test_download_verifies_and_caches(
    toy: Dataset, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    opener = FakeOpener()
    monkeypatch.setattr(resolve, "_urlopen", opener)
    path = dataset_path("toy", "pinned")
    assert path == isolated / "toy" / "pinned.txt"
    assert path.read_bytes() == GOOD
    assert opener.calls == ["https://example.org/pinned.txt"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["pinned.txt"]  # no temp file left
    assert dataset_path("toy", "pinned") == path  # now from the cache
    assert len(opener.calls) == 1


def test_download_with_bad_checksum_is_deleted(
    toy: Dataset, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    bad = b"tampered\n"
    monkeypatch.setattr(resolve, "_urlopen", FakeOpener(bad))
    with pytest.raises(ChecksumError) as info:
        dataset_path("toy", "pinned")
    assert GOOD_SHA in str(info.value) and hashlib.sha256(bad).hexdigest() in str(info.value)
    assert not any((isolated / "toy").iterdir())


def test_corrupt_cached_file_is_downloaded_again(
    toy: Dataset, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    cached = isolated / "toy" / "pinned.txt"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"corrupt")
    opener = FakeOpener()
    monkeypatch.setattr(resolve, "_urlopen", opener)
    assert dataset_path("toy", "pinned").read_bytes() == GOOD
    assert len(opener.calls) == 1


def test_valid_cached_file_needs_no_network(toy: Dataset, isolated: Path) -> None:
    cached = isolated / "toy" / "pinned.txt"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(GOOD)
    assert dataset_path("toy", "pinned") == cached  # _urlopen would fail the test


def test_offline_error_names_file_url_and_env_vars(
    toy: Dataset, monkeypatch: pytest.MonkeyPatch, isolated: Path
) -> None:
    error = urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
    monkeypatch.setattr(resolve, "_urlopen", FakeOpener(error=error))
    with pytest.raises(DatasetUnavailable) as info:
        dataset_path("toy", "pinned")
    message = str(info.value)
    for part in ("toy/pinned.txt", "https://example.org/pinned.txt", DATA_ENV, CACHE_ENV):
        assert part in message
    assert not (isolated / "toy" / "pinned.txt").exists()


def test_http_error_is_unavailable(toy: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://example.org/pinned.txt"
    error = urllib.error.HTTPError(url, 404, "Not Found", {}, None)  # type: ignore[arg-type]
    monkeypatch.setattr(resolve, "_urlopen", FakeOpener(error=error))
    with pytest.raises(DatasetUnavailable, match="HTTP 404"):
        dataset_path("toy", "pinned")


def test_trust_on_first_use(toy: Dataset, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> None:
    opener = FakeOpener()
    monkeypatch.setattr(resolve, "_urlopen", opener)
    path = dataset_path("toy", "tofu")
    record = path.with_name("tofu.txt.sha256")
    assert record.read_text().split()[0] == GOOD_SHA  # recorded at first download
    assert dataset_path("toy", "tofu") == path and len(opener.calls) == 1
    path.write_bytes(b"changed behind our back\n")
    with pytest.raises(ChecksumError, match=f"expected {GOOD_SHA}.*trust on first use"):
        dataset_path("toy", "tofu")


def test_download_of_a_real_dataset_from_a_fake_server(
    data_mirror: Path,
    monkeypatch: pytest.MonkeyPatch,
    isolated: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    by_url = {f.url: data_mirror / f.path for f in get_dataset("trec").files.values()}
    monkeypatch.setattr(
        resolve, "_urlopen", lambda url, timeout: FakeResponse(by_url[url].read_bytes())
    )
    paths = fetch("trec")
    assert paths == {"train": isolated / "sentences" / "TREC.train.all",
                     "test": isolated / "sentences" / "TREC.test.all"}  # fmt: skip
    assert paths["test"].read_bytes() == by_url[get_dataset("trec").files["test"].url].read_bytes()
    assert "sentences/TREC.train.all" in capsys.readouterr().err  # the progress bar
