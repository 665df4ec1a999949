# The two commands of the README:
#   make run    installs what is missing, builds, and runs folio on the bundled tiny model
#   make test   installs what is missing, builds, and runs every test
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup configure build run test clean

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	bash scripts/run_demo.sh $(BUILD)/src/tools/folio

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

clean:
	rm -rf $(BUILD)
