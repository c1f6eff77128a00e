# The daily verbs. Everything a fresh machine needs is installed by these
# targets themselves (scripts/ensure-*.sh); nothing is installed by hand.

CARGO ?= cargo
# Seconds per fuzz target of `make fuzz`.
FUZZ_SECONDS ?= 300
# Cases of the schema language's differential test in `make fuzz` (`make
# test` runs its 2,000-case sample; guest-policy/README.md).
SCHEMA_DIFF_CASES ?= 100000
WARDEN_ARGS ?=
# Examples per operation and phase of the Schemathesis run against a live
# server on both databases (`make test`; `make fuzz` runs SCHEMATHESIS_FUZZ_EXAMPLES).
SCHEMATHESIS_EXAMPLES ?= 20
SCHEMATHESIS_FUZZ_EXAMPLES ?= 500
# Seconds of the soak per database (`make soak`).
SOAK_SECONDS ?= 600
# Sizes of `make growth` (1: the issue's; 0.01 for a quick look, which
# writes nothing to docs/benchmarks.md).
GROWTH_SCALE ?= 1

.PHONY: help run test guest bench soak growth lint walkthrough fuzz openapi toolchain postgres prometheus

help:
	@echo "make run     build and serve on the embedded SQLite default (127.0.0.1:8080)"
	@echo "make test    every test, on SQLite and PostgreSQL (starts PostgreSQL if needed), a short fuzz run,"
	@echo "             Schemathesis against a live server on both databases, a smoke of the load benchmark"
	@echo "             and of the soak, the official MCP SDK clients (Python, TypeScript) against /v1/mcp on both"
	@echo "             databases, and the prompt-form example in headless Chromium (screenshots in"
	@echo "             target/browser-test/)"
	@echo "make openapi regenerate docs/openapi.json from the code"
	@echo "make guest   build the default policy guest component (wasm32-wasip2)"
	@echo "make bench   sandbox figures and ratios against native; executor overhead per call;"
	@echo "             platform webhook deliveries per second and queue-to-reply latency;"
	@echo "             the dialogue set's pass rate per rule and planner (docs/conversation.md);"
	@echo "             the load benchmark: warden serve (release) on SQLite and PostgreSQL against a bare"
	@echo "             relay and the endpoint alone, closed and open loop; writes docs/benchmarks.md and"
	@echo "             docs/benchmarks-latency.svg (the load benchmark ~30 min, all of it ~50 from cold; WARDEN_BENCH_QUICK=1 for a quick look)"
	@echo "make soak    SOAK_SECONDS (600) of steady turns and contract tests per database against warden"
	@echo "             serve (release), watched for growth of memory, threads and descriptors; writes the"
	@echo "             soak section of docs/benchmarks.md (a documented run, not CI)"
	@echo "make growth  each request with little data and with a lot (1,000 earlier messages, 100,000"
	@echo "             conversations, 1,000,000 gap events), a 100,000-message platform backlog draining,"
	@echo "             the files and tables around the purge, per database against warden serve (release);"
	@echo "             writes the growth section of docs/benchmarks.md (~20 min; GROWTH_SCALE=0.01 to look)"
	@echo "make lint    rustfmt check and clippy with warnings denied, on the server and on every guest"
	@echo "make walkthrough  a three-turn conversation against the example host endpoint"
	@echo "make fuzz    the schema differential test for SCHEMA_DIFF_CASES (100000), then every fuzz target"
	@echo "             for FUZZ_SECONDS (300) each (nightly, cargo-fuzz; fuzz/README.md), then a long Schemathesis run"

toolchain:
	@scripts/ensure-toolchain.sh

postgres:
	@scripts/ensure-postgres.sh

# The metrics tests' real Prometheus server and promtool (Debian's package).
prometheus:
	@scripts/ensure-prometheus.sh

run: toolchain
	$(CARGO) run --bin warden -- serve $(WARDEN_ARGS)

test: toolchain postgres prometheus
	$(CARGO) test --workspace --no-fail-fast
	cd guest-policy && $(CARGO) test --locked -p warden-policy-rules
	scripts/fuzz-smoke.sh
	scripts/schemathesis-run.sh $(SCHEMATHESIS_EXAMPLES)
	scripts/mcp-clients-run.sh
	scripts/bench-smoke.sh
	scripts/browser-test.sh

# cd, not --manifest-path: guest-policy/.cargo/config.toml (wasm SIMD) is read from the current directory.
guest: toolchain
	cd guest-policy && $(CARGO) build --release --locked --target wasm32-wasip2

bench: toolchain postgres
	@scripts/ensure-bench-tools.sh
	$(CARGO) bench -p warden-host --bench sandbox
	$(CARGO) bench -p warden --bench executor
	$(CARGO) bench -p warden --bench platform
	WARDEN_DIALOGUE_REPORT=1 $(CARGO) test --test api -- dialogues::the_dialogue_set::case_1_sqlite --exact --nocapture
	$(CARGO) bench -p warden --bench load

soak: toolchain postgres
	@scripts/ensure-bench-tools.sh
	WARDEN_BENCH_SOAK=$(SOAK_SECONDS) WARDEN_BENCH_WRITE=1 $(CARGO) bench -p warden --bench load

growth: toolchain postgres
	@scripts/ensure-bench-tools.sh
	WARDEN_BENCH_GROWTH=1 WARDEN_BENCH_GROWTH_SCALE=$(GROWTH_SCALE) WARDEN_BENCH_WRITE=$(if $(filter 1,$(GROWTH_SCALE)),1,0) \
		$(CARGO) bench -p warden --bench load

walkthrough: toolchain
	examples/walkthrough.sh

fuzz: toolchain
	cd guest-policy && WARDEN_SCHEMA_DIFF_CASES=$(SCHEMA_DIFF_CASES) $(CARGO) test --release --locked \
		-p warden-policy-rules --test schema_differential -- --nocapture
	scripts/fuzz-run.sh $(FUZZ_SECONDS)
	scripts/schemathesis-run.sh $(SCHEMATHESIS_FUZZ_EXAMPLES)

# The OpenAPI document checked in as docs/openapi.json (tests/api/openapi.rs
# fails when it differs from what the server serves).
openapi: toolchain
	$(CARGO) run --quiet --bin warden -- openapi > docs/openapi.json

# The guests are their own workspaces, for wasm32-wasip2: each is linted as
# it is built (the rule library also natively, with its tests).
GUESTS := guest-policy examples/guests/prefixed-names tests/guests/odd-interaction

lint: toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	cd guest-policy && $(CARGO) clippy --locked -p warden-policy-rules --all-targets --all-features -- -D warnings
	for guest in $(GUESTS); do (cd $$guest && $(CARGO) fmt --all -- --check \
		&& $(CARGO) clippy --locked --target wasm32-wasip2 -- -D warnings) || exit 1; done
