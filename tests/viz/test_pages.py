"""``attnlab show RUN INPUT --html`` for every modality, driven in headless Chromium: the page
loads with no console error and no network request, a screenshot is not blank, the weight the
page shows for a pair is the model's (to the page's stated bound), the layer and head selectors
work, choosing a query changes what is highlighted, and the model and rollout views open.

Each modality trains a tiny run once (a few seconds). ``ATTNLAB_SCREENSHOTS=DIR`` keeps the
screenshots (the README's pictures: ``ATTNLAB_SCREENSHOTS=docs/images pytest tests/viz``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.lab.cli import main
from attnlab.viz import view

from .browser import console_errors, network_requests, not_blank, open_page, screenshot_png

DATA = Path(__file__).resolve().parents[1] / "tasks" / "data"
SMILES = ["C", "CC", "CCO", "CC(C)O", "c1ccccc1", "Cc1ccccc1", "Oc1ccccc1", "CC(=O)O", "CCN",
          "ClCC", "OCCO", "CCOCC", "C=C", "CC#N", "c1ccncc1", "CCCl"]  # fmt: skip
QUIET = ["--train.device=cpu", "--train.log_every=0"]
TEXT = ["--model.input.dim=16", "--model.encoder.depth=2", "--model.encoder.heads=2",
        "--model.encoder.ff_hidden=32", "--train.epochs=1", "--train.batch_size=8"]  # fmt: skip


def _train_args(name: str, root: Path) -> list[str]:
    if name == "freesolv":
        rows = [f"{s},{0.4 * k - 3:.2f},{0.4 * k - 2.8:.2f}" for k, s in enumerate(SMILES)]
        (root / "mol.csv").write_text("smiles,expt,calc\n" + "\n".join(rows) + "\n")
    return {
        "pos": ["pos", "--task_options.corpus=files",
                f"--task_options.train_file={DATA / 'tagged.train.txt'}",
                f"--task_options.dev_file={DATA / 'tagged.dev.conllu'}",
                f"--task_options.test_file={DATA / 'tagged.test.txt'}", *TEXT],
        "listops": ["listops", "--task_options.train=32", "--task_options.dev=8",
                    "--task_options.test=8", "--task_options.max_depth=3",
                    "--task_options.min_length=10", "--task_options.max_length=30", *TEXT],
        "g2p": ["g2p", f"--task_options.dict_file={DATA / 'cmudict.tiny.dict'}", "--model.dim=16",
                "--model.heads=2", "--model.encoder_depth=2", "--model.decoder_depth=2",
                "--train.epochs=1", "--train.batch_size=8"],
        "freesolv": ["freesolv", f"--task_options.file={root / 'mol.csv'}", "--model.dim=16",
                     "--model.depth=2", "--model.heads=2", "--model.structure=mask",
                     "--train.epochs=1", "--train.batch_size=8"],
        "karate": ["karate", "--train.epochs=3", "--model.hidden=4", "--model.heads=2"],
        "digits": ["digits", "--train.epochs=1", "--train.batch_size=64",
                   "--task_options.train_size=128", "--model.encoder.dim=16",
                   "--model.encoder.depth=2"],
        "fsdd": ["fsdd", "--task_options.limit=16", "--model.dim=16", "--model.encoder.depth=2",
                 "--model.encoder.heads=2", "--model.encoder.ff_hidden=16",
                 "--model.frontend.n_mels=20", "--model.encoder.window=4", "--train.epochs=1",
                 "--train.batch_size=8"],
    }[name] + QUIET  # fmt: skip


#: task -> (the input as `show` takes it, the view's keyword flags, the modality)
INPUTS = {
    "pos": (["I", "saw", "a", "saw", "."], {}, "text"),
    "listops": (["[MAX 2 9 [MIN 4 7 ] 0 ]"], {}, "text"),
    "g2p": (["cats"], {}, "text"),
    "freesolv": (["CC(=O)Oc1ccccc1C(=O)O"], {}, "molecule"),
    "karate": (["--node", "0"], {"node": 0}, "graph"),
    "digits": (["--index", "3"], {"index": 3}, "image"),
    "fsdd": ([], {}, "speech"),  # a recording of the mirror
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_mirror_or_none):
    """Train each modality's tiny run on first use."""
    root = tmp_path_factory.mktemp("viewer-runs")
    done: dict[str, Path] = {}
    threads = torch.get_num_threads()

    def get(name: str) -> Path:
        if name == "fsdd" and data_mirror_or_none is None:
            pytest.skip("no data mirror: the fsdd page reads recordings from it")
        if name not in done:
            torch.set_num_threads(1)
            try:
                with pytest.MonkeyPatch.context() as mp:
                    if data_mirror_or_none is not None:
                        mp.setenv("ATTNLAB_DATA", str(data_mirror_or_none))
                    mp.setenv("ATTNLAB_CACHE", str(root / "cache"))
                    out = root / name
                    assert main(["train", *_train_args(name, root), f"--out_dir={out}"]) == 0
            finally:
                torch.set_num_threads(threads)
            done[name] = out
        return done[name]

    return get


@pytest.fixture(params=list(INPUTS), scope="module")
def page(request, runs, data_mirror_or_none, tmp_path_factory):
    """``(name, path of the page, the run's AttentionView, modality)`` written by the CLI."""
    name = request.param
    run = runs(name)
    words, flags, kind = INPUTS[name]
    if name == "fsdd":
        words = [str(sorted((data_mirror_or_none / "fsdd" / "recordings").glob("*.wav"))[0])]
    path = tmp_path_factory.mktemp("pages") / f"{name}.html"
    with pytest.MonkeyPatch.context() as mp:
        if data_mirror_or_none is not None:
            mp.setenv("ATTNLAB_DATA", str(data_mirror_or_none))
        assert main(["show", str(run), *words, "--html", str(path)]) == 0
        text = "" if flags else " ".join(words)  # karate's node and digits' index are flags
        shown = view(run, text, **flags)
    return name, path, shown, kind


def _readout(driver) -> dict:
    return driver.execute_script(
        "return Object.assign({}, document.getElementById('readout').dataset)"
    )


def _hover(driver, element, x: float, y: float) -> None:
    """Move the real mouse to ``(x, y)`` pixels from ``element``'s top-left corner."""
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("arguments[0].scrollIntoView({block: 'start', inline: 'start'})", element)
    size = element.size
    ActionChains(driver).move_to_element_with_offset(
        element, int(x - size["width"] / 2), int(y - size["height"] / 2)
    ).perform()


def _check_pair(read: dict, shown, family: str, layer: int) -> None:
    """The readout's weights of ``(i, j)`` are the model's, head by head, within the bound."""
    i, j = int(read["i"]), int(read["j"])
    want = shown.weights[family][layer]
    heads = [int(h) for h in read["heads"].split(",")]
    masked = shown.attentions[[a.name for a in shown.attentions].index(family)].masked[layer]
    for h, got, bound in zip(heads, read["weights"].split(","), read["bounds"].split(",")):
        if masked is not None and masked[h, i, j]:
            assert got == "masked"
        else:
            assert abs(float(got) - want[h, i, j]) <= float(bound) + 1e-6, (h, i, j)


def test_the_page_loads_offline_and_draws(browser, page):
    name, path, _, _ = page
    open_page(browser, path)
    assert console_errors(browser) == []
    assert network_requests(browser) == []
    shot = screenshot_png(browser, path.with_suffix(".png"))
    assert not_blank(shot)
    keep = os.environ.get("ATTNLAB_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / f"viewer-{name}.png")


def test_the_matrix_shows_the_models_weight_and_the_selectors_work(browser, page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    name, path, shown, _ = page
    open_page(browser, path)
    family = browser.execute_script("return window.attnlab.families[0].name")
    browser.find_element(By.ID, "tab-matrix").click()
    canvas = browser.find_element(By.CSS_SELECTOR, "canvas.matrix")
    layers = len(shown.weights[family])
    n_i, n_j = shown.weights[family][0].shape[1:]
    for i, j in ((n_i - 1, 0), (0, n_j - 1)):
        x, y = browser.execute_script("return arguments[0].cellCenter(arguments[1], arguments[2])",
                                      canvas, i, j)  # fmt: skip
        _hover(browser, canvas, x, y)
        read = _readout(browser)
        assert (int(read["i"]), int(read["j"]), read["layer"]) == (i, j, "0")
        _check_pair(read, shown, family, 0)
    # the last layer, one head: the readout follows
    Select(browser.find_element(By.ID, "layer")).select_by_value(str(layers - 1))
    heads = shown.weights[family][layers - 1].shape[0]
    badge = browser.find_element(By.CSS_SELECTOR, f".heads .head[data-head='{heads - 1}']")
    ActionChains(browser).double_click(badge).perform()
    canvas = browser.find_element(By.CSS_SELECTOR, "canvas.matrix")
    x, y = browser.execute_script("return arguments[0].cellCenter(0, 0)", canvas)
    _hover(browser, canvas, x, y)
    read = _readout(browser)
    assert read["layer"] == str(layers - 1) and read["heads"] == str(heads - 1)
    _check_pair(read, shown, family, layers - 1)
    assert console_errors(browser) == []


def _fingerprint(driver) -> str:
    """What the stage draws: its markup and every canvas's pixels."""
    return driver.execute_script(
        "const s = document.getElementById('stage');"
        "return s.innerHTML + [...s.querySelectorAll('canvas')].map(c => c.toDataURL()).join();"
    )


def test_choosing_a_query_changes_what_is_highlighted(browser, page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    _, path, shown, kind = page
    open_page(browser, path)
    before = _fingerprint(browser)
    if kind == "text":
        toks = browser.find_elements(By.CSS_SELECTOR, "#headview .tok.q")
        toks[-1].click()  # pin the last query: only its lines remain
        lines = browser.find_elements(By.CSS_SELECTOR, "#lines line")
        assert lines and {ln.get_attribute("data-i") for ln in lines} == {str(len(toks) - 1)}
    elif kind in ("graph", "molecule"):
        selector = "g.node" if kind == "graph" else "g.atom"
        browser.find_elements(By.CSS_SELECTOR, selector)[1].click()
    elif kind == "image":
        canvas = browser.find_element(By.ID, "image-attention")
        prefix = browser.execute_script("return window.attnlab.meta.modality.prefix")
        x, y = browser.execute_script("return arguments[0].patchCenter(arguments[1])", canvas,
                                      prefix + 5)  # fmt: skip
        _hover(browser, canvas, x, y)
        ActionChains(browser).click().perform()
        assert browser.execute_script("return window.attnlab.state.query") == prefix + 5
    elif kind == "speech":
        canvas = browser.find_element(By.ID, "speech")
        x = browser.execute_script("return arguments[0].positionX(1)", canvas)
        _hover(browser, canvas, x, 40)
        ActionChains(browser).click().perform()
        assert browser.execute_script("return window.attnlab.state.query") == 1
        # the weights under the curve are the model's
        canvas = browser.find_element(By.ID, "speech")  # redrawn for the new query
        _hover(browser, canvas, browser.execute_script("return arguments[0].positionX(2)", canvas),
               250)  # fmt: skip
        _check_pair(_readout(browser), shown, "self-attention", 0)
    assert _fingerprint(browser) != before
    assert console_errors(browser) == []


def test_the_model_view_and_rollout_open(browser, page):
    from selenium.webdriver.common.by import By

    _, path, shown, _ = page
    open_page(browser, path)
    first = shown.attentions[0]
    browser.find_element(By.ID, "tab-model").click()
    thumbs = browser.find_elements(By.CSS_SELECTOR, ".grid-model figure canvas")
    assert len(thumbs) == sum(w.shape[0] for w in first.weights)
    thumbs[-1].click()  # opens that layer and head in the matrix view
    assert browser.execute_script("return window.attnlab.state.mode") == "matrix"
    assert browser.execute_script("return window.attnlab.state.layer") == len(first.weights) - 1
    browser.find_element(By.ID, "tab-rollout").click()
    has = first.rollout() is not None
    assert bool(browser.find_elements(By.CSS_SELECTOR, "canvas.matrix")) == has
    if has:  # the page's rollout is the one computed from the model's weights
        got = np.array(browser.execute_script(
            "return Array.from(window.attnlab.families[0].rollout.w)"))  # fmt: skip
        np.testing.assert_allclose(got.reshape(first.rollout().shape), first.rollout(),
                                   atol=1e-3 * first.rollout().max())  # fmt: skip
    assert console_errors(browser) == []


@pytest.mark.parametrize(
    ("name", "words", "message"),
    [
        ("karate", ["--node", "99"], "node 99"),
        ("freesolv", ["C1CC"], "SMILES"),
        ("pos", [], "no inputs given"),
    ],
)
def test_bad_inputs_get_one_line(runs, tmp_path, capsys, name, words, message):
    run = runs(name)
    capsys.readouterr()  # the training's output, if it trained now
    page = tmp_path / "page.html"
    assert main(["show", str(run), *words, "--html", str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not page.exists() and not list(tmp_path.glob("*.tmp"))


def test_an_unreadable_wav_gets_one_line(runs, tmp_path, capsys):
    run = runs("fsdd")
    capsys.readouterr()
    wav = tmp_path / "noise.wav"
    wav.write_bytes(b"not a wav file at all")
    assert main(["show", str(run), str(wav), "--html", str(tmp_path / "page.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "noise.wav" in err, err


def test_a_model_without_attention_says_so_in_one_line(tmp_path, capsys):
    run = tmp_path / "window"
    args = [a for a in _train_args("pos", tmp_path) if not a.startswith("--model.encoder.")]
    args += ["--model.encoder.kind=fc", f"--out_dir={run}"]
    assert main(["train", *args]) == 0
    capsys.readouterr()
    assert main(["show", str(run), "I saw a saw", "--html", str(tmp_path / "p.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "has no attention weights to show" in err, err


def test_show_needs_an_output(runs, capsys):
    run = runs("pos")
    capsys.readouterr()
    assert main(["show", str(run), "I saw"]) == 2
    assert "--html PAGE.html" in capsys.readouterr().err


def test_the_notebook_rendering_works_inline_from_a_saved_notebook(browser, tmp_path):
    """``_repr_html_`` (what Jupyter stores in the notebook) opened from disk: the page runs
    inside its sandboxed frame, offline."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from attnlab.blocks import TransformerEncoder

    torch.manual_seed(0)
    shown = view(TransformerEncoder(16, 2, 2), torch.randn(1, 4, 16), tokens=list("abcd"))
    notebook = tmp_path / "cell.html"
    notebook.write_text(f"<!DOCTYPE html><html><body>{shown._repr_html_()}</body></html>")
    open_page(browser, notebook, ready=False)
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    try:
        WebDriverWait(browser, 10).until(lambda d: d.execute_script("return window.attnlabReady"))
        assert browser.find_elements(By.CSS_SELECTOR, "#headview .tok.q")
    finally:
        browser.switch_to.default_content()
    assert console_errors(browser) == [] and network_requests(browser) == []
