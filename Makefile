# Leasehold. `make run` starts everything on a private PostgreSQL cluster;
# `make test` runs every check and test (what CI runs).
SHELL := bash
GO ?= go
# Where `make run` listens: `make run ADDR=127.0.0.1:9090`, or
# LEASEHOLD_ADDR in the environment like every other server flag.
ADDR ?= $(or $(LEASEHOLD_ADDR),127.0.0.1:8080)
export LEASEHOLD_API_TOKEN ?= lh_dev_token_change_me
export LEASEHOLD_ADMIN_PASSWORD ?= leasehold-dev

.PHONY: run build test test-private check lint-openapi check-clients generate screenshots bench bench-river experiment release clean

build:
	$(GO) build -buildvcs=auto -o bin/ ./cmd/server ./cmd/worker

# The server (with its private cluster, unless DATABASE_URL is set) plus a
# sim worker. Ctrl-C reaches both (they share the terminal's process group)
# and each shuts down gracefully; the last one to stop the private cluster
# stops its postmaster. The shell only waits for them, so that no second
# signal makes either exit at once, and exits 0. If one of them ends by
# itself, the other is stopped too (after 5 s: when this shell cannot trap
# SIGINT, as under nohup, the other may be shutting down already).
# An address that answers before the server starts belongs to another
# program: that is said at once, and nothing starts. "Up" is announced
# only once /health/live answers as Leasehold's does, while our server
# runs, never because something else answers on the port.
run: build
	@interrupted=; pids=; \
	trap 'interrupted=1' INT; \
	trap 'interrupted=1; kill -TERM $$pids 2>/dev/null' TERM; \
	addr='$(ADDR)'; host=$${addr%:*}; host=$${host:-127.0.0.1}; port=$${addr##*:}; \
	if (exec 3<>"/dev/tcp/$$host/$$port") 2>/dev/null; then \
	  echo "make run: $$host:$$port is already taken by another program, so Leasehold cannot listen there." >&2; \
	  echo "  Stop that program, or run on another address: make run ADDR=$$host:9090" >&2; \
	  exit 1; \
	fi; \
	live() ( exec 3<>"/dev/tcp/$$host/$$port" || exit 1; \
	  printf 'GET /health/live HTTP/1.0\r\nHost: %s\r\n\r\n' "$$addr" >&3; \
	  timeout 2 cat <&3 | grep -q '"status":"live"' ); \
	LEASEHOLD_ADDR="$$addr" bin/server --demo & server=$$!; pids=$$server; \
	until [ -n "$$interrupted" ] || { kill -0 $$server 2>/dev/null && live 2>/dev/null; }; do \
	  kill -0 $$server 2>/dev/null || { wait $$server; exit; }; sleep 0.3; \
	done; \
	if [ -z "$$interrupted" ]; then \
	  echo; echo "Leasehold is up: open http://$$host:$$port and sign in as admin / $$LEASEHOLD_ADMIN_PASSWORD"; \
	  echo "  API: curl -H 'Authorization: Bearer $$LEASEHOLD_API_TOKEN' http://$$host:$$port/api/v1/stats"; \
	  echo "  Ctrl-C stops the server, the worker and the private PostgreSQL."; echo; \
	  bin/worker --id sim-worker --concurrency 4 --lease 10s --grace 3s --artifacts .leasehold/artifacts & pids="$$pids $$!"; \
	fi; \
	wait -n $$pids 2>/dev/null; \
	if [ -z "$$interrupted" ]; then \
	  for _ in $$(seq 50); do kill -0 $$pids 2>/dev/null || break; sleep 0.1; done; \
	  kill -TERM $$pids 2>/dev/null && echo "make run: a program ended by itself; stopping the rest" >&2; \
	fi; \
	while kill -0 $$pids 2>/dev/null; do wait $$pids 2>/dev/null; done; \
	[ -n "$$interrupted" ]

# Everything CI checks: formatting, vet, staticcheck, generated code in
# sync with its sources, then the tests on a real PostgreSQL.
test: check
	$(GO) test -race -count=1 -timeout 25m ./...

# The tests that use db/dbtest once more on the private cluster (as a fresh
# clone without TEST_DATABASE_URL runs them), so that a test that passes on
# only one of the two paths cannot pass unseen. CI runs it before `make test`.
# Without -race: `make test` runs the race detector over the same tests, and
# this pass checks the connection path at half the CPU, so that on a 2-core
# machine it does not starve its own timing-sensitive tests.
DBTEST_PACKAGES = $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
	awk '{ for (i = 2; i <= NF; i++) if ($$i == "github.com/leasehold/leasehold/db/dbtest") { print $$1; break } }'
test-private:
	env -u TEST_DATABASE_URL $(GO) test -count=1 -timeout 25m $$($(DBTEST_PACKAGES))

check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) tool sqlc diff
	$(GO) tool sqlc vet
	@before=$$(cat templates/*_templ.go | sha256sum); \
	$(GO) tool templ generate -path templates >/dev/null 2>&1; \
	after=$$(cat templates/*_templ.go | sha256sum); \
	test "$$before" = "$$after" || { echo "templ: generated code did not match its .templ sources (now regenerated: commit it)"; exit 1; }
	$(GO) run ./db/schemadump -compare db/schema.sql
	$(MAKE) --no-print-directory lint-openapi
	$(MAKE) --no-print-directory check-clients

# The API's OpenAPI document, with Redocly's recommended rules (from the
# npm registry; needs node and npm).
REDOCLY ?= @redocly/cli@2.77.0
lint-openapi:
	npx --yes $(REDOCLY) lint --extends=recommended web/openapi.json

# Clients generated from web/openapi.json with each generator's default
# options must compile, and so must the README's calls made through them:
# ogen and oapi-codegen (tools/apiclients, its own module, so that they
# stay out of go.mod), openapi-typescript with openapi-fetch under tsc
# (exact versions in tools/apiclients/ts/package-lock.json, from the npm
# registry). Then those calls run against a real server built from
# ./cmd/server (tools/apiclients/cmd/runclients: a fresh database on
# TEST_DATABASE_URL's server, or a private cluster in a temporary
# directory), so that a client that compiles but sends or reads the wrong
# thing fails too. Generated code goes to the gitignored gen/ folders;
# npm's cache stays in the user's cache directory.
check-clients: export GOWORK = off
check-clients: export npm_config_cache = $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/npm
check-clients:
	@cd tools/apiclients && rm -rf gen && \
	$(GO) tool ogen --target gen/ogenclient --package ogenclient --clean ../../web/openapi.json >gen.log 2>&1 || { cat gen.log; exit 1; }; \
	mkdir -p gen/oapiclient && $(GO) tool oapi-codegen -package oapiclient -o gen/oapiclient/client.gen.go ../../web/openapi.json && \
	$(GO) build ./... && rm -f gen.log && echo "ogen and oapi-codegen clients: the README's calls compile"
	@cd tools/apiclients/ts && \
	if ! cmp -s package-lock.json node_modules/.installed-lock 2>/dev/null; then \
	  npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.installed-lock; \
	fi && \
	npx --no-install openapi-typescript ../../../web/openapi.json -o gen/api.d.ts --silent && \
	rm -rf gen/js && npx --no-install tsc -p . && echo "openapi-typescript client: the README's calls type-check"
	@cd tools/apiclients && $(GO) run ./cmd/runclients -root ../.. -ts ts/gen/js/run.js

generate:
	$(GO) tool sqlc generate
	$(GO) tool templ generate -path templates
	$(GO) run ./db/schemadump -o db/schema.sql

# docs/screenshots/: every dashboard page at phone size, from the
# browser test that checks them (real Chromium, axe-core from the npm
# registry, cached in the user's cache directory).
screenshots:
	$(GO) test -count=1 -run '^TestBrowserEveryPageAtPhoneAndDesktopSize$$' ./e2e -screenshots

bench:
	$(GO) test -run '^$$' -bench . -benchtime 200x ./queue
	$(GO) test -run '^$$' -bench SubmitToRunning -benchtime 200x ./worker
	$(GO) test -run '^$$' -bench Throughput -benchtime 4x ./worker
	$(GO) test -run '^$$' -bench PagesAtScale -benchtime 100x -timeout 30m ./web
	$(MAKE) bench-river

# Leasehold against River on the same PostgreSQL ($DATABASE_URL, default
# the one on 127.0.0.1:5432): the same no-op jobs drained by each, per-job
# database work side by side. Its own module, so River stays out of go.mod.
bench-river:
	cd bench && GOWORK=off $(GO) run . -n 20000 -runs 3

# The field report's experiment, printed as a table.
experiment:
	$(GO) test -count=1 -run TestReferenceExperiment -v ./e2e | grep -v '^time='

# Static binaries for each platform a server or home worker runs on, in
# dist/ with their SHA256SUMS. VERSION defaults to the tag at HEAD, if any;
# the commit comes from Go's VCS stamp (-buildvcs=auto: this machine's go
# env may turn it off). Only the linux builds run here; darwin and windows
# are cross-compiled.
PLATFORMS := linux/amd64 linux/arm64 darwin/arm64 windows/amd64
VERSION ?= $(shell git describe --tags --exact-match 2>/dev/null)
release:
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; if [ $$os = windows ]; then ext=.exe; fi; \
	  for prog in server worker; do \
	    out=dist/leasehold-$$prog-$$os-$$arch$$ext; echo "$$out"; \
	    CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=auto \
	      -ldflags "-s -w -X github.com/leasehold/leasehold/cmd/internal/cli.version=$(VERSION)" -o $$out ./cmd/$$prog; \
	  done; \
	done
	cd dist && sha256sum leasehold-* > SHA256SUMS

clean:
	rm -rf bin dist
