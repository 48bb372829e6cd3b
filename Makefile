# Thin wrapper over CMake. `make` builds the release binary in build/;
# `make test` is the whole test suite (what .ci/run calls): it installs what it
# needs, builds with ASan+UBSan in build-asan/, and runs CTest.
JOBS ?= $(shell nproc)
CMAKE ?= cmake

.PHONY: all release asan test test-fast deps fuzz-build fuzz fuzz-long bench clean

all: release

release:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(CMAKE) --build build -j $(JOBS)

asan:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCV_SANITIZE=ON >/dev/null
	$(CMAKE) --build build-asan -j $(JOBS)

deps:
	scripts/install-deps.sh

# The suite: sanitizer build for every C test, plus the release binary that the
# end-to-end tests drive (speed-sensitive checks run against it).
test: deps release asan
	cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 900

# A developer's loop of a few minutes: the tests labelled quick (every test
# that takes under a minute with the sanitizers; tests/CMakeLists.txt), no
# dependency install. `make test` stays the whole suite.
test-fast: release asan
	cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 900 -L quick

# libFuzzer (clang) builds of fuzz/fuzz_*.c in build-fuzz/. `make fuzz` runs
# each target for FUZZ_SECONDS (60); `make fuzz-long` runs each for
# FUZZ_RUNS executions (10M), one target at a time, logging the counts to
# build-fuzz/fuzz-long.log (docs/fuzzing.md records them). Debug (asserts
# kept), the layers optimised but the kernels (CMakeLists.txt, CV_FUZZ). The
# suite runs every target over its seeds either way (fuzz/CMakeLists.txt).
fuzz-build:
	$(CMAKE) -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DCV_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
	$(CMAKE) --build build-fuzz -j $(JOBS) --target fuzz_targets

fuzz: fuzz-build
	scripts/run-fuzz.sh time

fuzz-long: fuzz-build
	scripts/run-fuzz.sh long

clean:
	rm -rf build build-asan build-fuzz
