"""The festival generator of the ``phones`` dataset (:mod:`attnlab.lab.speechgen`).

Tests that speak need Debian's ``festival`` and ``festvox-kallpc16k`` (``make test`` installs
them as root) and skip, saying so, without them; the framing and error tests always run.
"""

from __future__ import annotations

import json
import shutil
import wave

import pytest

from attnlab.lab.cli import main
from attnlab.lab.speechgen import (
    PHONES,
    FestivalUnavailable,
    Segment,
    Utterance,
    find_phones,
    frame_labels,
    frames_to_segments,
    load_manifest,
    make_phones,
    num_frames,
    read_segs,
    synthesize,
)
from attnlab.lab.speechgen import festival as festival_module
from attnlab.lab.speechgen.festival import scheme_string

needs_festival = pytest.mark.skipif(
    shutil.which("festival") is None
    or not festival_module.Path("/usr/share/festival/voices/english/kal_diphone").exists(),
    reason="festival or its kal_diphone voice is not installed: "
    "apt-get install festival festvox-kallpc16k",
)


# ---------------------------------------------------------------- framing (no festival)
def test_num_frames_is_whole_windows_every_hop():
    assert num_frames(399) == 0  # shorter than one 25 ms window at 16 kHz
    assert num_frames(400) == 1
    assert num_frames(559) == 1
    assert num_frames(560) == 2
    assert num_frames(16000) == 1 + (16000 - 400) // 160  # 98 frames in a second


def test_frame_labels_take_the_phone_at_each_frame_centre():
    # centres at 12.5 ms, 22.5 ms, 32.5 ms, ...: frame t's centre is (t * 160 + 200) / 16000
    segments = [Segment("pau", 0.0, 0.02), Segment("s", 0.02, 0.0325), Segment("iy", 0.0325, 0.05)]
    # 0.0325 is frame 2's centre exactly: it belongs to the next segment (ends are exclusive)
    assert frame_labels(segments, 6) == ["pau", "s", "iy", "iy", "iy", "iy"]


def test_frames_to_segments_merges_runs_and_inverts_frame_labels_to_a_hop():
    segments = [Segment("pau", 0.0, 0.2), Segment("hh", 0.2, 0.27), Segment("ow", 0.27, 0.5)]
    frames = num_frames(round(0.5 * 16000))
    merged = frames_to_segments(frame_labels(segments, frames))
    assert [s.phone for s in merged] == ["pau", "hh", "ow"]
    for got, want in zip(merged[:-1], segments[:-1]):
        assert abs(got.end - want.end) <= 0.01
    assert all(a.end == b.start for a, b in zip(merged, merged[1:]))
    assert merged[-1].end == pytest.approx(((frames - 1) * 160 + 400) / 16000)


def test_frame_labels_refuse_unordered_or_missing_segments():
    with pytest.raises(ValueError, match="at least one"):
        frame_labels([], 3)
    with pytest.raises(ValueError, match="increase"):
        frame_labels([Segment("a", 0, 0.2), Segment("b", 0.2, 0.1)], 3)


def test_phone_set_is_the_radio_set_with_pau():
    assert len(PHONES) == len(set(PHONES)) == 48
    assert PHONES[-1] == "pau" and {"aa", "iy", "sh", "ng", "zh"} <= set(PHONES)


def test_read_segs_checks_the_file(tmp_path):
    good = tmp_path / "a.segs"
    good.write_text("#\n0.2200 100 pau\n0.3000 100 hh\n0.3000 100 ax\n0.5000 100 pau\n")
    # the zero-length ax holds no frame and is dropped
    assert read_segs(good) == [Segment("pau", 0.0, 0.22), Segment("hh", 0.22, 0.3),
                               Segment("pau", 0.3, 0.5)]  # fmt: skip
    bad = tmp_path / "b.segs"
    bad.write_text("#\n0.2 100 QQ\n")
    with pytest.raises(ValueError, match=r"b\.segs:2: phone 'QQ'"):
        read_segs(bad)
    (tmp_path / "c.segs").write_text("hello\n")
    with pytest.raises(ValueError, match="not a festival segs file"):
        read_segs(tmp_path / "c.segs")


def test_scheme_string_escapes_quotes_and_backslashes():
    assert scheme_string('say "hi" \\ now\n') == '"say \\"hi\\" \\\\ now"'


def test_without_festival_the_error_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(festival_module.shutil, "which", lambda name: None)
    with pytest.raises(FestivalUnavailable, match="apt-get install festival festvox-kallpc16k"):
        synthesize([Utterance("a", "hello")], tmp_path)
    assert main(["data", "make", "phones", "--sentences", "3"]) == 2
    assert "apt-get install festival festvox-kallpc16k" in capsys.readouterr().err


def test_find_phones_names_the_command_that_makes_the_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="attnlab data make phones --sentences 7 --seed 3"):
        find_phones(sentences=7, seed=3, root=tmp_path)


def test_make_phones_refuses_too_few_sentences(tmp_path):
    with pytest.raises(ValueError, match="sentences must be an integer >= 3, got 2"):
        make_phones(2, root=tmp_path)


# ---------------------------------------------------------------- speaking (festival)
@needs_festival
def test_synthesize_is_deterministic_and_labels_align_with_the_audio(tmp_path):
    utterances = [
        Utterance("a", 'She said "yes".', stretch=1.2, f0_mean=140.0, f0_std=20.0),
        Utterance("b", "Cats sleep.", stretch=0.85),
    ]
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        synthesize(utterances, tmp_path / run, workers=2)
    for u in utterances:
        one, two = tmp_path / "one", tmp_path / "two"
        assert (one / f"{u.key}.wav").read_bytes() == (two / f"{u.key}.wav").read_bytes()
        segments = read_segs(one / f"{u.key}.segs")
        assert segments == read_segs(two / f"{u.key}.segs")
        assert segments[0].phone == segments[-1].phone == "pau"
        assert all(s.start < s.end for s in segments)
        assert all(a.end == b.start for a, b in zip(segments, segments[1:]))
        with wave.open(str(one / f"{u.key}.wav")) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            samples = w.getnframes()
        # festival's last phone ends within a few ms of the audio's end
        assert abs(segments[-1].end - samples / 16000) < 0.05
        labels = frame_labels(segments, num_frames(samples))
        assert len(labels) == num_frames(samples) == 1 + (samples - 400) // 160
        assert set(labels) <= set(PHONES)
    # the slower utterance is longer than the same text would be at the faster rate
    a = read_segs(tmp_path / "one" / "a.segs")
    assert a[-1].end > 1.0


@needs_festival
def test_make_phones_is_versioned_by_seed_and_deterministic(tmp_path, data_mirror):
    first = make_phones(3, seed=5, root=tmp_path / "x", workers=1, mirror=data_mirror)
    again = make_phones(3, seed=5, root=tmp_path / "y", workers=1, mirror=data_mirror)
    other = make_phones(3, seed=6, root=tmp_path / "x", workers=1, mirror=data_mirror)
    assert first.name == again.name != other.name
    assert first.parent == tmp_path / "x" / "phones"
    m1, m2 = load_manifest(first), load_manifest(again)
    assert m1["utterances"] == m2["utterances"]
    assert (m1["seed"], m1["sentences"], m1["voice"], m1["version"]) == (5, 3, "kal_diphone",
                                                                         first.name)  # fmt: skip
    assert "festival" in m1["festival"].lower()
    keys = [u["key"] for u in m1["utterances"]]
    splits = m1["splits"]
    assert sorted(splits["train"] + splits["dev"] + splits["test"]) == sorted(keys)
    assert all(splits[s] for s in ("train", "dev", "test"))
    for u in m1["utterances"]:
        ends = [end for _, end in u["segments"]]
        assert ends == sorted(ends) and len(set(ends)) == len(ends)
        assert (first / "wav" / f"{u['key']}.wav").exists()
        assert 0.8 <= u["stretch"] <= 1.25 and 80 <= u["f0_mean"] <= 160
    assert not list((tmp_path / "x" / "phones").glob(".tmp-*"))  # nothing half-made left
    assert find_phones(sentences=3, seed=5, root=tmp_path / "x") == first
    # made once: a second call finds it without speaking again
    stamp = (first / "manifest.json").stat().st_mtime_ns
    assert make_phones(3, seed=5, root=tmp_path / "x") == first
    assert (first / "manifest.json").stat().st_mtime_ns == stamp
    assert json.loads((first / "manifest.json").read_text())["phones"] == list(PHONES)
