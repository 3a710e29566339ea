# attnlab: `make demo` and `make test` work on a fresh machine (they create .venv and install).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export ATTNLAB_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)

.PHONY: install demo test test-all bench lint docs docs-serve clean

# Debian packages some tasks need (speech synthesis for `phones`), the headless browser of
# the viewer's tests (tests/viz), and jemalloc (training runs start on it where it is present:
# 1.03-1.17x faster steps). Installed when apt-get can run as root; otherwise those tasks and
# tests say how to install them, and training runs on glibc's malloc.
DEBS := festival festvox-kallpc16k dataset-fashion-mnist chromium chromium-driver

$(STAMP): pyproject.toml
	-@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! dpkg -s $(DEBS) >/dev/null 2>&1; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(DEBS) >/dev/null || \
		echo "apt-get could not install $(DEBS); the tasks that need them will say so"; fi
	-@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! dpkg -s libjemalloc2 >/dev/null 2>&1; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q libjemalloc2 >/dev/null || \
		echo "apt-get could not install libjemalloc2; training runs on glibc's malloc"; fi
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	# The CPU build of PyTorch; an unpinned `torch` would pull a multi-GB CUDA build.
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,peers,ray,docs,tensorboard]'
	# timm (a peer: the from_timm converters are checked against it) without its dependencies:
	# it requires torchvision, and no torchvision wheel fits the CPU torch above (pip would pull
	# a CUDA torch over it). Its other dependencies are in the peers extra; its tests import it
	# against a stub of torchvision (tests/timm_without_torchvision.py).
	$(PY) -m pip install -q --no-deps timm==1.0.31
	# `source .venv/bin/activate` then reads datasets from the mirror make found (../shared/data)
	@if [ -n "$(ATTNLAB_DATA)" ] && ! grep -q ATTNLAB_DATA $(VENV)/bin/activate; then \
		echo 'export ATTNLAB_DATA="$${ATTNLAB_DATA:-$(ATTNLAB_DATA)}"  # added by make: the data mirror' \
			>> $(VENV)/bin/activate; fi
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/attnlab demo

test: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

test-all: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/bench_core.py
	$(VENV)/bin/attnlab bench attention

# The documentation site (mkdocs.yml): built into site/ offline, every warning an error (--strict;
# not with --quiet, which silences the warnings before --strict counts them);
# docs/hooks.py generates the CLI reference and the benchmarks page from the code.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache
