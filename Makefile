# tessera: `make demo` installs what is missing, builds and runs the main job;
# `make test` installs, builds and runs every test.
BUILD ?= build
JOBS ?= 2

.PHONY: all deps configure build test demo bench clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

demo: build
	@$(BUILD)/tessera eval --time examples/logistic_regression.tsl

bench: build
	@bench/run-all $(BUILD)

clean:
	rm -rf $(BUILD)
