# Leasehold. `make run` starts everything on a private PostgreSQL cluster;
# `make test` runs every check and test (what CI runs).
SHELL := bash
GO ?= go
ADDR ?= 127.0.0.1:8080
export LEASEHOLD_API_TOKEN ?= lh_dev_token_change_me
export LEASEHOLD_ADMIN_PASSWORD ?= leasehold-dev

.PHONY: run build test check generate bench bench-river experiment clean

build:
	$(GO) build -o bin/ ./cmd/server ./cmd/worker

# The server (with its private cluster, unless DATABASE_URL is set) plus a
# sim worker; Ctrl-C stops both.
run: build
	@trap 'kill 0' EXIT; \
	LEASEHOLD_ADDR=$(ADDR) bin/server --demo & \
	until (exec 3<>/dev/tcp/$(subst :,/,$(ADDR))) 2>/dev/null; do sleep 0.3; done; \
	echo; echo "Leasehold is up: open http://$(ADDR) and sign in as admin / $$LEASEHOLD_ADMIN_PASSWORD"; \
	echo "  API: curl -H 'Authorization: Bearer $$LEASEHOLD_API_TOKEN' http://$(ADDR)/api/v1/stats"; echo; \
	bin/worker --id sim-worker --concurrency 4 --lease 10s --artifacts .leasehold/artifacts & \
	wait

# Everything CI checks: formatting, vet, staticcheck, generated code in
# sync with its sources, then the tests on a real PostgreSQL.
test: check
	$(GO) test -race -count=1 -timeout 15m ./...

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

generate:
	$(GO) tool sqlc generate
	$(GO) tool templ generate -path templates

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

clean:
	rm -rf bin
