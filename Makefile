# Diskless Sidecar. `make run` starts the sidecar on the embedded default
# (local-directory store under ./data, embedded coordinators, port 9092);
# `make test` runs every test, the integration tests included.
GO      ?= go
ARGS    ?=
PKGS    := ./...

.PHONY: run build image test test-short bench bench-ci lint staticcheck-install clean

# Builds, then runs the binary in the foreground (exec: Ctrl-C reaches the
# sidecar itself, which stops gracefully).
run: build
	exec ./bin/sidecar $(ARGS)

build:
	$(GO) build -o bin/sidecar ./cmd/sidecar

# The container image, without a container engine (internal/tools/image):
# a static linux binary for IMAGE_ARCH on an empty base with passwd, group
# and CA certificates; writes the OCI layout bin/image and the docker-load
# tarball bin/sidecar-image.tar.
IMAGE_TAG  ?= diskless-sidecar:dev
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags='-s -w' -o bin/linux-$(IMAGE_ARCH)/sidecar ./cmd/sidecar
	$(GO) run ./internal/tools/image -binary bin/linux-$(IMAGE_ARCH)/sidecar -arch $(IMAGE_ARCH) -tag $(IMAGE_TAG) -oci bin/image -tar bin/sidecar-image.tar

# -timeout bounds each package. The longest is e2e, whose tests run two at a
# time (t.Parallel, -parallel = GOMAXPROCS; see e2e/harness_test.go): 1,202 s
# in a full make test of 1acd27b on 2 cores, where one test at a time it had
# taken 1,828 s (f81eeac) and, on a loaded machine, 2,277 s.
test:
	$(GO) test -race -count=1 -timeout 40m $(PKGS)

# Unit tests only: skips the tests that start sidecar processes.
test-short:
	$(GO) test -short -count=1 $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m ./...

# Every benchmark once, so they keep compiling and running (CI).
bench-ci:
	$(GO) test -run '^$$' -bench . -benchtime=1x -count=1 -timeout 10m ./...

# staticcheck, pinned; `make lint` installs it into $(go env GOPATH)/bin when
# that version is not there (.ci/run installs the same version first).
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

# gofmt, vet, staticcheck, the layering test, every SPEC/DESIGN/docs
# reference in comments and Markdown resolving to a heading in this
# repository (internal/tools/refcheck), and DESIGN.md's import graph being
# the real one (internal/tools/importgraph).
lint: staticcheck-install
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) build $(PKGS)
	GOOS=windows $(GO) build $(PKGS)
	$(STATICCHECK) $(PKGS)
	$(GO) test -count=1 ./internal/layering
	$(GO) run ./internal/tools/refcheck
	$(GO) run ./internal/tools/importgraph -check DESIGN.md

staticcheck-install:
	@$(GO) version -m $(STATICCHECK) 2>/dev/null | grep -q 'mod.*honnef.co/go/tools.*$(STATICCHECK_VERSION)' || \
		{ echo "installing staticcheck $(STATICCHECK_VERSION)"; $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }

clean:
	rm -rf bin
