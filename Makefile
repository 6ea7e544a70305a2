# dbos-agent: durable workflows for any language, served by a per-host agent.
# `make help` lists the targets.

GO            ?= go
BIN           := bin
AGENT         := $(BIN)/dbos-agent
# The version `dbos-agent --version` and dbos_version report, and `make dist`
# names its archive with: the nearest tag
# (with the commits since it and -dirty for uncommitted changes), or the commit
# when there is no tag, or "dev" outside a git checkout. `make VERSION=1.2.3`
# sets it.
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS       := -X main.version=$(VERSION) -X github.com/dbos-agent/dbos-agent/internal/libdbos.Version=$(VERSION)
# How long `make fuzz` runs each fuzz target; `make fuzz-short` (part of
# `make test`) runs each for FUZZ_SHORT_TIME, a count of executions (about
# 15 s each on an idle 2-core machine) rather than a duration: Go before 1.27
# can fail a duration-bounded run with a bare "context deadline exceeded" and
# no failing input when a worker is still busy as the time runs out
# (go.dev/issue/75804), which a loaded CI machine hits.
FUZZTIME        ?= 5m
FUZZ_SHORT_TIME ?= 300000x
# The system database `make run` uses: empty, a SQLite file of the run's own
# (nothing to install); a postgres:// URL runs the example on that server
# instead. `make test` uses DBOS_TEST_DATABASE_URL's server (and SQLite files
# of its own). scripts/ensure-postgres.sh starts the server a Postgres URL
# names (installing it when missing) and creates the database.
export DATABASE_URL ?=
export DBOS_TEST_DATABASE_URL ?= postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable
# DATABASE_URL when it names a Postgres database, else nothing.
POSTGRES_EXAMPLE_URL = $(if $(filter postgres%,$(DATABASE_URL)),'$(DATABASE_URL)')

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: lib ## Build the agent binary into bin/ (and the library, make lib)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(AGENT) ./cmd/dbos-agent

# The library is built into bin/lib/ (where go build also writes the header
# cgo generates, which is not the contract) and copied beside the
# hand-written header, cgo/libdbos.h, which is.
LIB := cgo/libdbos.so

.PHONY: lib
lib: ## Build the agent as a C library: cgo/libdbos.so, whose header is cgo/libdbos.h
	$(GO) build -buildmode=c-shared -ldflags "$(LDFLAGS)" -o $(BIN)/lib/libdbos.so ./cgo
	cp $(BIN)/lib/libdbos.so $(LIB)

# make dist: one archive for a host, dbos-agent-<version>-<os>-<arch>.tar.gz
# in DIST_DIR, holding bin/dbos-agent, lib/libdbos.so, include/libdbos.h,
# the systemd unit(s) (packaging/systemd), README.md and LICENSE under one
# top directory of the same name. The architecture is the build's
# (GOARCH=... cross-builds the binary; the library then needs a C
# cross-compiler, CC=...). Recursive (=): `go env` runs only for `make dist`.
DIST_DIR  ?= dist
DIST_OS    = $(shell $(GO) env GOOS)
DIST_ARCH  = $(shell $(GO) env GOARCH)
DIST_NAME  = dbos-agent-$(VERSION)-$(DIST_OS)-$(DIST_ARCH)

.PHONY: dist
dist: build ## A versioned archive for a host: dist/dbos-agent-$(VERSION)-linux-<arch>.tar.gz (the binary, libdbos.so and its header, the systemd unit, README, LICENSE)
	@set -e; stage="$$(mktemp -d)"; trap 'rm -rf "$$stage"' EXIT; top="$$stage/$(DIST_NAME)"; \
	  mkdir -p "$$top/bin" "$$top/lib" "$$top/include" "$$top/systemd" '$(DIST_DIR)'; \
	  cp $(AGENT) "$$top/bin/"; cp $(LIB) "$$top/lib/"; cp cgo/libdbos.h "$$top/include/"; \
	  cp packaging/systemd/*.service "$$top/systemd/"; cp README.md LICENSE "$$top/"; \
	  tar -C "$$stage" --owner=0 --group=0 --numeric-owner -czf '$(DIST_DIR)/$(DIST_NAME).tar.gz' '$(DIST_NAME)'; \
	  echo '$(DIST_DIR)/$(DIST_NAME).tar.gz'

.PHONY: postgres
postgres: ## Start (installing if missing) the PostgreSQL the URLs name and create their databases
	bash scripts/ensure-postgres.sh '$(DBOS_TEST_DATABASE_URL)' $(POSTGRES_EXAMPLE_URL)

.PHONY: run
run: ## The main job: start the agent on a SQLite file and run the order-pipeline example through it from Python (DATABASE_URL=postgres://... for Postgres; KEEP=1 keeps the file and the agent to inspect)
	bash examples/python/run.sh

.PHONY: run-node
run-node: ## The order-pipeline example from Node (the dbos-agent npm package, examples/node) through the agent; its shop's tables are in Postgres
	bash examples/node/run.sh

.PHONY: run-embedded
run-embedded: ## The same example with the agent inside the Python process (libdbos.so, embedded mode): no dbos-agent process
	bash examples/python/run-embedded.sh

.PHONY: demo-crash
demo-crash: ## The example surviving a kill -9 of its worker mid-workflow
	bash examples/python/crash-demo.sh

.PHONY: migrate
migrate: build ## Migrate the system database DATABASE_URL names (default: the agent's default SQLite file) and print its schema version
	$(if $(POSTGRES_EXAMPLE_URL),bash scripts/ensure-postgres.sh $(POSTGRES_EXAMPLE_URL))
	$(AGENT) migrate $(if $(DATABASE_URL),--database-url '$(DATABASE_URL)')

.PHONY: test
test: postgres test-go test-python test-node fuzz-short ## Run every test (Go, with the fault suite's short form; Python; Node; each fuzz target 300000 executions)

.PHONY: chromium
chromium: ## Install Debian's chromium when missing (the dashboard's browser test drives it headless)
	bash scripts/ensure-chromium.sh >/dev/null

.PHONY: test-go
test-go: postgres chromium build ## The Go tests: sysdb conformance and parity, protocol, end-to-end on the real binary
	DBOS_TEST_PYTHON="$${DBOS_TEST_PYTHON:-$$(bash scripts/dbos-python.sh)}" $(GO) test -race -count=1 -timeout 30m ./...

.PHONY: test-python
test-python: postgres lib ## The Python binding's tests against the real agent: the whole suite over the socket, then again over libdbos.so (connect mode), then the official-dbos interop modules on a SQLite file
	bash scripts/python-test.sh
	DBOS_AGENT_TEST_TRANSPORT=library bash scripts/python-test.sh
	DBOS_AGENT_TEST_SYSTEM_DB=sqlite bash scripts/python-test.sh

.PHONY: test-node
test-node: postgres build lib ## The Node binding's tests against the real agent: the whole suite over the socket, then again over libdbos.so (connect mode); the package packed and installed
	bash scripts/node-test.sh
	DBOS_AGENT_TEST_TRANSPORT=library bash scripts/node-test.sh

.PHONY: dbos-suite
dbos-suite: ## The drop-in measure (not in `make test`): DBOS Python 3.4's own tests, only their imports on dbos_agent, against the real agent (DBOS_SUITE_FILES, DBOS_SUITE_ARGS select)
	DBOS_SUITE_FILES='$(DBOS_SUITE_FILES)' DBOS_SUITE_ARGS='$(DBOS_SUITE_ARGS)' bash scripts/dbos-suite.sh

.PHONY: chaos
chaos: postgres ## The fault suite, long form: 2,000 workflows through worker and agent SIGKILLs, Postgres restarts, a 2-minute outage (CHAOS_* scale it); then the SIGKILLs on SQLite
	CHAOS=long $(GO) test -race -count=1 -run '^TestChaos(SQLite)?$$' -v -timeout 90m ./e2e/

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 5m; e.g. make fuzz FUZZTIME=1h)
	@set -e; for file in $$(git grep -l '^func Fuzz' -- '*_test.go'); do \
	  pkg=./$$(dirname $$file); \
	  for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "fuzz $$pkg $$target for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: fuzz-short
fuzz-short: ## Run each fuzz target for FUZZ_SHORT_TIME (default 300000 executions), as `make test` does
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SHORT_TIME)

# BenchmarkCompare needs the Node binding built: `make bench-compare` builds
# it and runs it.
.PHONY: bench
bench: postgres ## Run the benchmarks (but BenchmarkCompare: make bench-compare)
	$(GO) test -run '^$$' -bench . -skip '^BenchmarkCompare$$' -benchmem -count=1 ./...

# bench-transports: each variant's system database is this URL's database
# name plus _<variant>, created fresh and dropped at the end.
DBOS_BENCH_DATABASE_URL ?= postgres://postgres:dbos@localhost:5432/bench_transports?sslmode=disable
.PHONY: bench-transports
bench-transports: lib ## The 10-step workload via the Python binding (socket; libdbos.so embedded, sidecar, connect) beside DBOS Python and DBOS Go: interleaved rounds, medians, ratios, CPU per step (not in `make test`; DBOS_BENCH_TRANSPORTS_* size it)
	bash scripts/ensure-postgres.sh '$(DBOS_BENCH_DATABASE_URL)'
	cd e2e && DBOS_BENCH_DATABASE_URL='$(DBOS_BENCH_DATABASE_URL)' $(GO) test -run '^$$' -bench '^BenchmarkTransports$$' -benchtime 1x -timeout 120m .

# bench-compare: each variant's system database, and pgbench's, is this
# URL's database name plus _<variant>, created fresh and dropped at the end.
DBOS_BENCH_COMPARE_DATABASE_URL ?= postgres://postgres:dbos@localhost:5432/bench_compare?sslmode=disable
.PHONY: bench-compare
bench-compare: lib ## The 10-step workload via the Python and Node bindings (socket; libdbos.so connect) beside DBOS Python, DBOS Go and DBOS TypeScript, with pgbench's one-insert commits as the ceiling, in one run: interleaved rounds, medians, ratios, CPU per step (not in `make test`; DBOS_BENCH_COMPARE_* size it)
	bash scripts/ensure-postgres.sh '$(DBOS_BENCH_COMPARE_DATABASE_URL)'
	bash scripts/node-deps.sh
	cd bindings/node && node scripts/build.mjs
	cd e2e && DBOS_BENCH_DATABASE_URL='$(DBOS_BENCH_COMPARE_DATABASE_URL)' $(GO) test -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 120m .

# bench-node: each variant's system database is this URL's database name
# plus _<variant>, created fresh and dropped at the end.
DBOS_BENCH_NODE_DATABASE_URL ?= postgres://postgres:dbos@localhost:5432/bench_node?sslmode=disable
.PHONY: bench-node
bench-node: lib ## The 10-step workload via the Node binding (socket; libdbos.so connect) beside DBOS TypeScript 5.3: interleaved rounds, medians, ratios (not in `make test`; DBOS_BENCH_NODE_* size it)
	DBOS_BENCH_DATABASE_URL='$(DBOS_BENCH_NODE_DATABASE_URL)' bash scripts/node-bench.sh

.PHONY: lint
lint: ## gofmt and go vet; the Python binding's mypy --strict and ruff
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1)
	$(GO) vet ./...
	bash scripts/python-venv.sh test
	cd bindings/python && ../../.venv/bin/mypy dbos_agent && ../../.venv/bin/ruff check dbos_agent

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN) $(LIB) dist
