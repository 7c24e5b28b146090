# memd: a fresh machine needs only Node.js and npm; Bun is installed from npm into .tools/.
BUN_VERSION := 1.4.5
LOCAL_BUN   := $(CURDIR)/.tools/node_modules/.bin/bun
BUN         ?= $(or $(shell command -v bun 2>/dev/null),$(LOCAL_BUN))
export PATH := $(dir $(BUN)):$(PATH)

.PHONY: help soak deps pg-deps browser-deps python-deps screenshots run test build release bench bench-postgres bench-deps fmt lint clean

deps: node_modules/.installed ## the dependencies, at bun.lock's versions (and Bun itself into .tools/ when none is on PATH)

$(LOCAL_BUN):
	npm install --no-save --no-audit --no-fund --loglevel=error --prefix .tools bun@$(BUN_VERSION)

node_modules/.installed: package.json bun.lock | $(BUN)
	$(BUN) install --frozen-lockfile
	@touch $@

# Every target with its "## " line; `make help`.
help: ## this list
	@awk -F':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  make %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

run: deps ## start the server on ./memd-data (prints a root key on first start)
	$(BUN) run src/main.ts serve $(ARGS)

test: deps build ## the whole suite: on LMDB, again on a throwaway PostgreSQL, and against dist/memd
	@# The tools: installed when missing (apt-get, as root), then checked, naming what is still missing.
	-@$(MAKE) --no-print-directory pg-deps browser-deps python-deps
	@scripts/check-test-tools
	BUN=$(BUN) scripts/with-postgres scripts/test $(TESTS)

soak: deps pg-deps ## the fault soak for SOAK_SECONDS (default 300): 3 replicas behind PgBouncer, 32 writers, PostgreSQL and PgBouncer restarted, frozen, a replica killed
	MEMD_SOAK_SECONDS=$(or $(SOAK_SECONDS),300) BUN=$(BUN) scripts/with-postgres $(BUN) test --timeout 3600000 test/storage/exactly-once-under-faults.test.ts

pg-deps: ## PostgreSQL's server binaries, PgBouncer and runuser (Debian's postgresql, pgbouncer and util-linux packages), for the tests
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq postgresql; }
	@command -v pgbouncer >/dev/null || test -x /usr/sbin/pgbouncer || \
	  { apt-get update -qq && apt-get install -y -qq pgbouncer; }
	@command -v runuser >/dev/null || { apt-get update -qq && apt-get install -y -qq util-linux; }

python-deps: ## Debian's python3 with httpx and pytest (and pip, setuptools, wheel to install the package), for clients/python's tests
	@# Each module on its own: Debian 12's setuptools cannot be imported after pip in one process
	@# (its distutils hack asserts), so a probe importing both fails with both installed.
	@( for m in httpx pytest pip setuptools wheel; do /usr/bin/python3 -c "import $$m" >/dev/null 2>&1 || exit 1; done ) || \
	  { apt-get update -qq && apt-get install -y -qq python3 python3-httpx python3-pytest python3-pip python3-setuptools python3-wheel; }

browser-deps: ## Debian's Chromium, for the browser tests of the page at /ui (test/ui/page-in-chromium.test.ts)
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }

screenshots: deps browser-deps ## the screenshots of the page in docs/ui.md (docs/screenshots), made by test/ui/page-in-chromium.test.ts
	MEMD_UPDATE_SCREENSHOTS=1 $(BUN) test --timeout 120000 test/ui/page-in-chromium.test.ts

build: deps ## one self-contained binary: dist/memd; the client package: client/dist (ESM + .d.ts) and its tarball dist/memd-client-<version>.tgz; checks the clients' generated types
	$(BUN) run scripts/build.ts
	$(BUN) run scripts/client-types.ts --check
	$(BUN) run scripts/python-types.ts --check
	$(BUN) run client/build.ts
	scripts/pack-client dist

release: deps ## dist/memd-<version>-linux-x64 and -linux-arm64, dist/memd-client-<version>.tgz and dist/SHA256SUMS
	$(BUN) run scripts/release.ts

bench: build bench-deps pg-deps ## benchmarks (about 25 min); writes bench/results.md (PostgreSQL: a throwaway one)
	scripts/with-postgres $(BUN) run bench/run.ts

bench-postgres: deps pg-deps bench-deps ## only the PostgreSQL rows (about 7 min), on a throwaway PostgreSQL; updates bench/results.md
	BUN=$(BUN) scripts/with-postgres $(BUN) run bench/postgres.ts

bench-deps: ## the load generator (wrk, from Debian's packages) and taskset
	@command -v wrk >/dev/null && command -v taskset >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq wrk util-linux; }

fmt: deps ## format the code (biome)
	$(BUN) x biome format --write src test scripts bench client ui

# Types everywhere: the server, its tests, scripts and benches (tsconfig.json), the client
# package and its examples, and the page.
lint: deps ## check formatting and lint rules (biome), and the types everywhere (tsc)
	$(BUN) x biome check src test scripts bench client ui
	$(BUN) x tsc --noEmit -p .
	$(BUN) x tsc --noEmit -p client
	$(BUN) x tsc --noEmit -p client/examples
	$(BUN) x tsc --noEmit -p ui

clean: ## remove dist, .tools, node_modules and ./memd-data
	rm -rf dist .tools node_modules memd-data
