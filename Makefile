# Grackle build targets. `make help` lists them.
GO        ?= go
BIN       ?= bin
PROTO_SRC := $(shell find proto -name '*.proto')

.PHONY: help build test test-short race proto run bench vet fmt clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/grackle (static)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/grackle ./cmd/grackle

test: ## the test suite CI runs (race detector on)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

run: build ## one single-node Grackle with every default
	$(BIN)/grackle server

bench: ## state-machine benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./fsm/

# protoc comes from Debian's protobuf-compiler; the plugins are pinned as
# `tool` dependencies in go.mod, so the output is reproducible byte for byte.
proto: ## regenerate proto/**/*.pb.go
	$(GO) build -o $(BIN)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	$(GO) build -o $(BIN)/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc
	protoc -I proto \
	  --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --go_out=proto --go_opt=paths=source_relative \
	  --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
	  $(PROTO_SRC)

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

clean:
	rm -rf $(BIN)
