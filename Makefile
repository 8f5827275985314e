# tessera: `make demo` installs what is missing, builds and runs the main job;
# `make test` installs, builds and runs every test (a short run of each fuzz
# target, C++ by ctest, then Python by pytest in JOBS processes,
# with pytest-xdist); `make test-install` runs
# only the install test: `pip install .` into a fresh virtual environment and
# the `tessera` command it gives (tests/install/, 1 to 2 minutes).
BUILD ?= build
FUZZ_BUILD ?= build-fuzz
JOBS ?= 2
PYTHON := $(CURDIR)/.venv/bin/python

.PHONY: all deps configure build fuzz-build fuzz fuzz-build-only fuzz-run test test-install demo bench clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTESSERA_PYTHON=ON -DPython_EXECUTABLE=$(PYTHON) \
	  -Dpybind11_DIR="$$($(PYTHON) -m pybind11 --cmakedir)" >/dev/null

# After building, `import tessera` works from any directory with the venv's
# python: a tessera.pth in its site-packages names this checkout's python/.
# The Python sources are compiled to bytecode here: where PYTHONDONTWRITEBYTECODE
# is set (this machine's image sets it), every process would otherwise compile
# all of tessera at its import (7 s instead of 1.3 s on a loaded machine: each
# rank of a distributed test, each documented example run by the tests).
# Python checks each .pyc against its source, so a stale one is never used.
build: configure
	@cmake --build $(BUILD) -j$(JOBS)
	@$(PYTHON) -m compileall -q -j $(JOBS) python/tessera tests bench examples >/dev/null
	@site="$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
	  if [ "$$(cat "$$site/tessera.pth" 2>/dev/null)" != "$(CURDIR)/python" ]; then \
	    echo "$(CURDIR)/python" > "$$site/tessera.pth"; \
	  fi

# The fuzz targets (fuzz/, docs/fuzzing.md): a clang build of their own with
# libFuzzer and the sanitizers (the readers they fuzz; the rest of the library
# is the normal build's libtessera.so); `make fuzz` runs each for a few seconds.
fuzz-build: build
	@$(MAKE) --no-print-directory fuzz-build-only

fuzz: fuzz-build
	@$(MAKE) --no-print-directory fuzz-run

# The two steps alone, after `make build` (make test runs them before ctest).
fuzz-build-only:
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF \
	  -DTESSERA_FUZZ_LIBRARY=$(CURDIR)/$(BUILD)/libtessera.so >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz

fuzz-run: fuzz-build-only
	@cd $(FUZZ_BUILD) && ctest --output-on-failure -j$(JOBS) -L fuzz

# The fuzz build (clang with the sanitizers: the readers only, ~70 CPU s)
# and its short runs come first, on their own (about a minute): beside ctest
# they slowed the multi-process tests it starts with, whose ranks wait for each
# other (ctest 961 s with them beside it, 802 s alone, 2026-12-07). The run
# fails if any of the three fails.
# Each phase's wall time is printed (CI keeps the run under 30 minutes; the
# slowest tests are listed by pytest's --durations above its summary line).
# ctest runs one test more than the cores: the resilience tests mostly wait
# (heartbeats, restarts: 38% of 2 cores busy over dist_ckpt|cluster|failure),
# so a third test fills their idle time (1028 tests in 623 s at -j3 against
# 669 s at -j2, 2026-12-06). Counting a test of 4 ranks or more as two slots
# (ctest's PROCESSORS) ran them one at a time: ctest 1054 s, too slow.
# pytest's two workers steal queued tests from each other (--dist worksteal):
# neither sits idle at the end while the other still holds a batch.
test: build
	@start=$$(date +%s); \
	  $(MAKE) --no-print-directory fuzz-run; fuzz_status=$$?; fuzz_end=$$(date +%s); \
	  (cd $(BUILD) && ctest --output-on-failure -j$$(($(JOBS) + 1))); ctest_status=$$?; \
	  ctest_end=$$(date +%s); \
	  echo "== make fuzz: $$((fuzz_end - start)) s; ctest: $$((ctest_end - fuzz_end)) s"; \
	  $(PYTHON) -m pytest tests/python -q -n $(JOBS) --dist worksteal --durations=30; pytest_status=$$?; \
	  [ $$ctest_status -eq 0 ] && [ $$fuzz_status -eq 0 ] && [ $$pytest_status -eq 0 ]

# The wheel is built in build-wheel/ (beside build/, so ccache serves `make
# build`'s objects); the environment is made from the machine's python3.
test-install: build
	@cd $(BUILD) && ctest --output-on-failure -L install

# The HAR CNN trained data-parallel on two localities (MPI ranks).
demo: build
	@TESSERA_PYTHON=$(PYTHON) $(BUILD)/tessera run -n 2 examples/har_cnn.py

bench: build
	@cmake --build $(BUILD) -j$(JOBS) --target benches
	@bench/run-all $(BUILD)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) build-wheel
