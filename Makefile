# The one command that runs every check: make test
# (.ci/run calls exactly this.)

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
MODULES     := . bench cmd/sluice promsluice redisstore
GOFLAGS_TEST ?= -race -count=1 -timeout=8m

.PHONY: test vet staticcheck gotest lab bench redis-server tools seed004 chromium

test: tools vet staticcheck gotest seed004

# Tools the tests measure against, installed outside the root module when
# missing: seed 004 compares sluice load with hey. A failed install fails
# make test.
HEY := github.com/rakyll/hey@v0.1.5

tools:
	@command -v hey >/dev/null 2>&1 || test -x "$$(go env GOBIN)/hey" || test -x "$$(go env GOPATH)/bin/hey" \
		|| (echo "== go install $(HEY)" && cd "$${TMPDIR:-/tmp}" && GOWORK=off go install $(HEY))

# Seed 004 on real sockets, without -race: under the race detector it would
# measure the instrumentation (cmd/sluice/internal/load/seed004_test.go).
seed004: tools
	@echo "== seed 004 (cmd/sluice, no -race)"
	cd cmd/sluice && go test -count=1 -run '^TestSeed004$$' -v ./internal/load/

vet:
	@for m in $(MODULES); do echo "== go vet ($$m)"; (cd $$m && go vet ./...) || exit 1; done

staticcheck:
	@for m in $(MODULES); do echo "== staticcheck ($$m)"; (cd $$m && go run $(STATICCHECK) ./...) || exit 1; done

gotest: redis-server chromium
	@for m in $(MODULES); do echo "== go test ($$m)"; (cd $$m && go test $(GOFLAGS_TEST) ./...) || exit 1; done

# The lab's tour of the seeds (README: the main command).
lab:
	go run ./cmd/sluice lab

# The lab's report is checked in a real browser (cmd/sluice/internal/lab,
# TestReportInBrowser): install Debian's chromium when it is missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update && apt-get install -y chromium; }

# Comparison benchmarks, side by side, and the sluice/anchor ratio table
# (see docs/benchmarks.md); raw output for benchstat in bench/bench.txt.
bench:
	cd bench && go run ./cmd/ratios -count 6 -cpu 2,4,8 -benchtime 300ms -out bench.txt

# redisstore's tests start their own redis-server processes (never port
# 6379); install the binaries when they are missing.
redis-server:
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq redis-server redis-tools)
