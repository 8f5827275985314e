# tessera: `make demo` installs what is missing, builds and runs the main job;
# `make test` installs, builds and runs every test (a short run of each fuzz
# target, then C++ by ctest, then Python by pytest in JOBS processes, with
# pytest-xdist); `make test-install` runs
# only the install test: `pip install .` into a fresh virtual environment and
# the `tessera` command it gives (tests/install/, 1 to 2 minutes).
BUILD ?= build
FUZZ_BUILD ?= build-fuzz
JOBS ?= 2
PYTHON := $(CURDIR)/.venv/bin/python

.PHONY: all deps configure build fuzz-build fuzz test test-install demo bench clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTESSERA_PYTHON=ON -DPython_EXECUTABLE=$(PYTHON) \
	  -Dpybind11_DIR="$$($(PYTHON) -m pybind11 --cmakedir)" >/dev/null

# After building, `import tessera` works from any directory with the venv's
# python: a tessera.pth in its site-packages names this checkout's python/.
build: configure
	@cmake --build $(BUILD) -j$(JOBS)
	@site="$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
	  if [ "$$(cat "$$site/tessera.pth" 2>/dev/null)" != "$(CURDIR)/python" ]; then \
	    echo "$(CURDIR)/python" > "$$site/tessera.pth"; \
	  fi

# The fuzz targets (fuzz/, docs/fuzzing.md): a clang build of their own with
# libFuzzer and the sanitizers; `make fuzz` runs each for a few seconds.
fuzz-build: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz

fuzz: fuzz-build
	@cd $(FUZZ_BUILD) && ctest --output-on-failure -j$(JOBS) -L fuzz

test: build fuzz
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	@$(PYTHON) -m pytest tests/python -q -n $(JOBS)

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
