# dbos-agent: durable workflows for any language, served by a per-host agent.
# `make help` lists the targets.

GO            ?= go
BIN           := bin
AGENT         := $(BIN)/dbos-agent
# The local database `make test` and `make run` prepare (scripts/ensure-postgres.sh).
DATABASE_URL  ?= postgres://postgres:dbos@localhost:5432/dbos_agent_example?sslmode=disable
export DBOS_TEST_DATABASE_URL ?= postgres://postgres:dbos@localhost:5432/dbos_agent_test?sslmode=disable

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the agent binary into bin/
	$(GO) build -o $(AGENT) ./cmd/dbos-agent

.PHONY: postgres
postgres: ## Install (apt-get) and start a local PostgreSQL when it is missing or down
	bash scripts/ensure-postgres.sh

.PHONY: run
run: build postgres ## The main job: migrate a local system database and show its schema version
	$(AGENT) migrate --database-url '$(DATABASE_URL)'

.PHONY: test
test: postgres ## Run every test against a real PostgreSQL
	$(GO) test -race -count=1 -timeout 30m ./...

.PHONY: bench
bench: postgres ## Run the benchmarks
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

.PHONY: lint
lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1)
	$(GO) vet ./...

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN)
