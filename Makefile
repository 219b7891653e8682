# Grackle build targets. `make help` lists them.
GO        ?= go
BIN       ?= bin
PROTO_SRC := $(shell find proto -name '*.proto')

.PHONY: help build test proto run bench failover-bench compare-bench secure-bench profile-bench idle-bench jepsen jepsen-ci fuzz fuzz-api fuzz-snapshot vet fmt clean image cluster-up cluster-down compose-test secure-cluster-up secure-cluster-down compose-secure-test

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

# The version and VCS revision stamped into the binary (grackle version,
# /status, grackle_build_info); without them the binary says "unknown".
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X github.com/grackle-coord/grackle/version.version=$(VERSION) -X github.com/grackle-coord/grackle/version.revision=$(REVISION)

build: ## build bin/grackle (static, version stamped)
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/grackle ./cmd/grackle

test: ## the test suite CI runs (race detector on)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

run: build ## one single-node Grackle with every default
	$(BIN)/grackle server

bench: ## state-machine benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./fsm/

.PHONY: bench-large
bench-large: ## 1M leases: fsm snapshot/restore/heap per lease, then a real node's RSS and a new node's catch-up by snapshot (tens of minutes)
	GRACKLE_BENCH_LARGE=1 $(GO) test -run '^$$' -bench 'Snapshot1M|Restore1M|HeapPerLease' -benchtime 1x -benchmem -timeout 30m ./fsm/
	GRACKLE_BENCH_LARGE=1 $(GO) test -run '^$$' -bench LargeState -benchtime 1x -timeout 90m ./e2e/

# protoc comes from Debian's protobuf-compiler; the plugins are pinned as
# `tool` dependencies in go.mod, so the output is reproducible byte for byte.
proto: ## regenerate proto/**/*.pb.go (protobuf, gRPC, and vtprotobuf's reflection-free codecs)
	$(GO) build -o $(BIN)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	$(GO) build -o $(BIN)/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc
	$(GO) build -o $(BIN)/protoc-gen-go-vtproto github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto
	protoc -I proto \
	  --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --go_out=proto --go_opt=paths=source_relative \
	  --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
	  --plugin=protoc-gen-go-vtproto=$(BIN)/protoc-gen-go-vtproto --go-vtproto_out=proto \
	  --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size \
	  $(PROTO_SRC)

failover-bench: ## leader SIGKILL -> first write, 10 trials on 3 processes
	$(GO) test -run '^$$' -bench Failover -benchtime 1x -timeout 20m ./e2e/

compare-bench: ## every bench workload on 3-node Grackle, 3-node etcd and a 3-server ZooKeeper in one invocation, one table (DUR, WARMUP, RUNS, WORKLOADS, ETCD, ZOOKEEPER)
	bash bench/compare.sh

secure-bench: ## pairs and handoff on plain, TLS and TLS+ACL 3-node clusters in one invocation, one table with ratios (DUR, WARMUP, RUNS, WORKLOADS)
	bash bench/secure.sh

profile-bench: ## CPU profiles of a 3-node Grackle's leader under each bench workload, top entries (DUR, WARMUP, WORKLOADS)
	bash bench/profile.sh

idle-bench: ## memory per idle client connection on the leader and a follower of a 3-node cluster, with and without the multiplexed stream (CONNS=1000,10000, RUNS, MEMBERS=leader,follower, MODES, BEFORE=rev)
	bash bench/idleconns.sh

JEPSEN_NODES    ?= 3
JEPSEN_DURATION ?= 120s
JEPSEN_NEMESIS  ?= all
JEPSEN_SEED     ?= 0
JEPSEN_FAULT    ?=
JEPSEN_SECURE   ?=

jepsen: ## fault-injection run (root): JEPSEN_NODES, _DURATION, _NEMESIS, _SEED, _FAULT, _SECURE=1 (mutual TLS, peer TLS, acl)
	$(GO) run ./jepsen/cmd/jepsen -nodes $(JEPSEN_NODES) -duration $(JEPSEN_DURATION) -nemesis $(JEPSEN_NEMESIS) -seed $(JEPSEN_SEED) -fault "$(JEPSEN_FAULT)" -secure=$(if $(filter 1 true yes,$(JEPSEN_SECURE)),true,false)

jepsen-ci: ## the short fault-injection runs of CI (clean run + each fault caught)
	bash jepsen/ci.sh

fuzz: ## fuzz the state machine for 60 s
	$(GO) test -run '^$$' -fuzz=FuzzApply -fuzztime=60s ./fsm/

fuzz-api: ## fuzz every request type through a node's gRPC handler path for 60 s
	$(GO) test -run '^$$' -fuzz=FuzzHandlers -fuzztime=60s ./server/

fuzz-snapshot: ## fuzz the snapshot's bbolt page-graph check (and bbolt reading what it accepts) for 60 s
	$(GO) test -run '^$$' -fuzz=FuzzCheckPageGraph -fuzztime=60s ./fsm/

CLUSTER ?= 3
IMAGE   ?= grackle:dev
# Compose v2 plugin when present, else the v1 docker-compose (Debian's).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_FILE = deploy/compose/docker-compose.$(CLUSTER).yml

image: ## the FROM scratch image of deploy/Dockerfile
	mkdir -p deploy/build
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o deploy/build/grackle ./cmd/grackle
	cp deploy/passwd deploy/build/passwd
	mkdir -p deploy/build/data
	docker build -q -t $(IMAGE) -f deploy/Dockerfile deploy/build

cluster-up: image build ## start the compose cluster (CLUSTER=3 or 5) and wait for a leader
	GRACKLE_IMAGE=$(IMAGE) $(COMPOSE) -p grackle$(CLUSTER) -f $(COMPOSE_FILE) up -d
	@for i in $$(seq 120); do $(BIN)/grackle namespace list --endpoints 127.0.0.1:7420 >/dev/null 2>&1 && exit 0; sleep 0.5; done; \
	  echo "no serving leader after 60 s"; exit 1

cluster-down: ## stop the compose cluster and remove its volumes
	GRACKLE_IMAGE=$(IMAGE) $(COMPOSE) -p grackle$(CLUSTER) -f $(COMPOSE_FILE) down -v

secure-cluster-up: image build ## the 3-node compose cluster with mutual TLS, peer TLS and --acl (certificates by deploy/gen-certs.sh)
	bash deploy/gen-certs.sh deploy/compose/certs n1 n2 n3
	GRACKLE_IMAGE=$(IMAGE) $(COMPOSE) -p grackle-secure -f deploy/compose/docker-compose.3-secure.yml up -d

secure-cluster-down: ## stop the secure compose cluster and remove its volumes
	GRACKLE_IMAGE=$(IMAGE) $(COMPOSE) -p grackle-secure -f deploy/compose/docker-compose.3-secure.yml down -v

compose-secure-test: image build ## TLS + ACL compose cluster end to end (openssl-made certificates)
	IMAGE=$(IMAGE) GRACKLE=$(BIN)/grackle COMPOSE="$(COMPOSE)" bash deploy/compose/test-secure.sh

compose-test: image build ## the README tour + leader loss on the 3-node compose cluster
	IMAGE=$(IMAGE) GRACKLE=$(BIN)/grackle COMPOSE="$(COMPOSE)" bash deploy/compose/test.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

clean:
	rm -rf $(BIN)
