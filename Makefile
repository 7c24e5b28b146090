# memd: a fresh machine needs only Node.js and npm; Bun is installed from npm into .tools/.
BUN_VERSION := 1.4.5
LOCAL_BUN   := $(CURDIR)/.tools/node_modules/.bin/bun
BUN         ?= $(or $(shell command -v bun 2>/dev/null),$(LOCAL_BUN))
export PATH := $(dir $(BUN)):$(PATH)

.PHONY: deps run test test-binary build bench bench-deps fmt lint check clean

# The HTTP contract suite: every file here also runs against the compiled binary (test-binary),
# each server a child process, so a defect of the bundle cannot hide behind the source.
HTTP_TESTS := test/auth-matrix.test.ts test/diff.test.ts test/errors.test.ts test/fuzz.test.ts \
  test/keys.test.ts test/keys-cli.test.ts test/lifecycle.test.ts test/operator.test.ts test/ops.test.ts \
  test/rate-limit.test.ts test/shutdown.test.ts test/smart-store.test.ts test/smoke.test.ts \
  test/store.test.ts test/ttl.test.ts
BINARY_TESTS = $(if $(TESTS),$(filter $(HTTP_TESTS),$(TESTS)),$(HTTP_TESTS))

deps: node_modules/.installed

$(LOCAL_BUN):
	npm install --no-save --no-audit --no-fund --loglevel=error --prefix .tools bun@$(BUN_VERSION)

node_modules/.installed: package.json bun.lock | $(BUN)
	$(BUN) install --frozen-lockfile
	@touch $@

run: deps ## start the server on ./memd-data (prints a root key on first start)
	$(BUN) run src/main.ts serve $(ARGS)

test: deps ## the whole suite: against the source, then the HTTP suite against dist/memd
	$(BUN) test --timeout 120000 $(TESTS)
	$(if $(BINARY_TESTS),$(MAKE) --no-print-directory test-binary TESTS="$(TESTS)")

test-binary: build ## the HTTP contract suite against the compiled dist/memd
	MEMD_TEST_BINARY=$(CURDIR)/dist/memd $(BUN) test --timeout 120000 $(BINARY_TESTS)

build: deps ## one self-contained binary: dist/memd
	$(BUN) run scripts/build.ts

bench: build bench-deps ## benchmarks (about 10 min); writes bench/results.md
	$(BUN) run bench/run.ts

bench-deps: ## the load generator (wrk, from Debian's packages) and taskset
	@command -v wrk >/dev/null && command -v taskset >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq wrk util-linux; }

fmt: deps
	$(BUN) x biome format --write src test scripts bench

lint: deps
	$(BUN) x biome check src test scripts bench

clean:
	rm -rf dist .tools node_modules memd-data
