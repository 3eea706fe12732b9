# tsplit — build, test and benchmark.
#
#   make build         build bin/tsplitc
#   make test          install test oracles if missing, export torch models, run all tests
#   make test-long     the long tier: checks that take minutes each (TSPLIT_LONG)
#   make bench         benchmarks (go test -bench): first the CPU device vs PyTorch and ONNX Runtime
#   make budget-sweep  predicted overhead vs budget of every policy (docs/benchmarks/budget_sweep*; -small: CI size)
#   make bench-measured  every policy's plan run on the CPU device with an emulated link: measured vs predicted step
#   make fuzz          fuzz the ONNX decoder, the runtime, the planner and the native plan loader (FUZZTIME=60s each by default)
#   make lint          go vet + gofmt check
#   make proto         regenerate onnxpb/onnx.pb.go and backend/native/planpb/plan.pb.go from their .proto
#   make models        regenerate the small zoo models in testdata/onnx
#   make torch-models  export torchvision / transformer models to testdata/torch
#   make ptx           compile the CUDA kernels to backend/cuda/ptx/kernels.ptx (nvcc, installed on demand)
#   make cuda-check    build and vet every package with the cuda tag (CUDA headers installed on demand; no GPU needed)
#   make test-gpu      on a machine with an NVIDIA GPU: planned steps on the CUDA device vs the CPU device
#   make gpu-test-binary  the same test as a binary (.gpu/cuda.test) for a GPU machine without Go
#   make deps          install the outside oracles (python3-torch, python3-onnx, onnxruntime-node, protoc, coinor-cbc)

GO       ?= go
PYTHON   ?= /usr/bin/python3
FUZZTIME ?= 60s
GOBIN    := $(shell $(GO) env GOPATH)/bin
# The float32 matrix products use OpenBLAS through cgo when its
# development files are installed (6–8× gonum's pure-Go BLAS, see
# docs/blas.md); otherwise the pure-Go default. Override with GOTAGS=.
CUBLAS_SONAME ?= libcublas.so.13
GOTAGS   ?= $(shell [ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] && echo openblas)
export PATH := $(GOBIN):$(PATH)

.PHONY: all build test test-go test-long fuzz bench lint proto models torch-models deps clean ptx cuda-check test-gpu gpu-test-binary unseen-sweep

all: build

build:
	$(GO) build -tags '$(GOTAGS)' -o bin/tsplitc ./cmd/tsplitc

deps:
	bash scripts/install-deps.sh

torch-models: deps
	$(PYTHON) scripts/export_torch_models.py testdata/torch

# The whole suite: oracles installed by the project's own script, real
# PyTorch exports, every Go test (the integration tier too:
# TSPLIT_INTEGRATION), and a short fuzz run of the decoder, the runtime
# and the planner. Oracle results are cached outside the repository
# (internal/oracle).
test: torch-models
	TSPLIT_REQUIRE_ORACLES=1 TSPLIT_INTEGRATION=1 $(GO) test -tags '$(GOTAGS)' -timeout 9m ./...
	$(MAKE) fuzz FUZZTIME=3s

# Tests without installing anything and without the outside oracles
# (PyTorch, ONNX Runtime, CBC, Chromium: off in a plain go test, see
# internal/oracle) or the integration tier: the default tier, about a
# minute on 2 cores.
test-go:
	$(GO) test ./...

# The long tier: inception's budget sweep, bert-base's exact model and
# the runs of the CI-sized benchmark's plans above batch 512, ONNX
# Runtime on the torch resnet18/densenet121 plans of every policy at
# 65/80 % where half the peak does not fit, and the native plans of
# the four largest torch exports and the two *_gap VGGs: the same
# claims make test checks on the other families, cases and plans, at
# minutes of CPU each.
test-long: torch-models
	TSPLIT_REQUIRE_ORACLES=1 TSPLIT_INTEGRATION=1 TSPLIT_LONG=1 $(GO) test -tags '$(GOTAGS)' -timeout 30m -run 'TestBudgetSweep$$|TestExactBetweenBoundAndPlans|TestBoundBelowEveryPlan|TestSmallBenchmark$$|TestSmallPlansRun|TestORTRunsEveryPolicysPlan|TestTorchRoundTrip|TestTorchShapes' ./bench ./bound ./policy ./backend/native ./compiler

# The decoder and frontend on arbitrary bytes; the runtime on random
# small graphs of supported ops with random data (executor/cpu FuzzRun);
# every policy on random training steps at random budgets, each plan run
# capped and compared with the unplanned step (policy FuzzPlan).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./compiler
	$(GO) test -tags '$(GOTAGS)' -run '^$$' -fuzz '^FuzzRun$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./executor/cpu
	$(GO) test -tags '$(GOTAGS)' -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./policy
	$(GO) test -tags '$(GOTAGS)' -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./backend/native
	$(GO) test -tags '$(GOTAGS)' -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./backend/native

# First the CPU device against the reference runtimes, side by side:
# resnet18 at batch 8, the training step vs PyTorch (target <= 1.5x) and
# the forward step vs ONNX Runtime (target <= 2x), medians of 5 steps
# (docs/benchmarks/cpu_device.md); then every other benchmark.
REFBENCH := ResNet18(Train|Forward)Batch8
bench: torch-models
	TSPLIT_ORACLES=1 $(GO) test -tags '$(GOTAGS)' -run '^$$' -bench '$(REFBENCH)' -benchtime 5x ./executor/cpu
	TSPLIT_ORACLES=1 $(GO) test -tags '$(GOTAGS)' -run '^$$' -bench . -skip '$(REFBENCH)' -benchmem ./...

# The paper's scale and throughput benchmarks (Tables IV–V, Figs. 12
# and 14a) by real planning of the full-size models on the titan-rtx
# profile; tables, plots and README in docs/benchmarks. Then Table V
# alone again with tsplit's parameters allowed on the host (--offload,
# issue 14): param_scale.{md,csv}.
.PHONY: benchmarks
benchmarks: build
	./bin/tsplitc bench -j 2 -o docs/benchmarks
	./bin/tsplitc bench -j 2 --tables param-scale --offload -o docs/benchmarks

# Predicted overhead vs memory budget, every policy, each model at Table
# IV's base batch (issue 11's Pareto picture): budget_sweep* in
# docs/benchmarks, with the lower bound of tsplit's order. budget-sweep-small
# is the CI-sized variant (about 1½ minutes on 2 cores), budget-sweep the
# full-size one.
.PHONY: budget-sweep budget-sweep-small
budget-sweep: build
	./bin/tsplitc bench --budget-sweep -j 2 -o docs/benchmarks
budget-sweep-small: build
	./bin/tsplitc bench --budget-sweep --small -j 2 -o docs/benchmarks

# Every policy over a budget sweep on exports no test was written for
# (torchvision families at 224², a causal decoder, cross-attention):
# fails when a compared policy beats tsplit, tsplit is not monotone, or
# anything crashes. Long: about an hour on two cores.
UNSEEN = mobilenet_v3_large:64 regnet_y_400mf:64 shufflenet_v2_x1_0:64 wide_resnet50_2:32 causal_decoder:64 cross_attention:64 efficientnet_b0:64
unseen-sweep: build deps
	$(PYTHON) scripts/unseen_exports.py testdata/unseen
	$(PYTHON) scripts/policy_sweep.py ./bin/tsplitc docs/benchmarks/unseen_sweep.md $(addprefix testdata/unseen/,$(subst :,.onnx:,$(UNSEEN)))

# Measured vs predicted step time (issue 13): the torchvision ResNet-18
# and MobileNetV2 exports and the CI-sized transformer, profiled on the
# CPU device with titan-rtx's link emulated, every policy's plan at 70 %
# and 50 % of the unplanned peak run in turn (docs/benchmarks/measured*,
# about 25 minutes on 2 loaded cores), then tsplit's plans alone, more
# rounds, three times (docs/benchmarks/measured-tsplit, about 6 minutes).
.PHONY: bench-measured
bench-measured: build torch-models
	./bin/tsplitc bench --measured --repeat 2 -o docs/benchmarks
	./bin/tsplitc bench --measured --policies tsplit --rounds 6 --repeat 3 -o docs/benchmarks/measured-tsplit

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

proto:
	@command -v protoc >/dev/null || bash scripts/install-deps.sh
	@command -v protoc-gen-go >/dev/null || $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.10
	$(GO) generate ./onnxpb ./backend/native/planpb

# Small zoo models for golden and round-trip tests: weights as graph
# inputs (a few KB each) except resnet18-small, which keeps its weights
# for the README's first command and the fuzz corpus.
models: build
	./bin/tsplitc zoo --small --all --weights-as-inputs -o testdata/onnx
	./bin/tsplitc zoo resnet18 --small -o testdata/onnx/resnet18-small.onnx

clean:
	rm -rf bin

# The CUDA device (docs/cuda.md). ptx rewrites the committed PTX from
# the .cu sources (byte-identical on unchanged sources); a default test
# (backend/cuda/ckernels) fails when the PTX is older than the sources.
ptx:
	bash scripts/ptx.sh

# Every package built with the cuda tag against the CUDA headers and
# stub libraries (from Debian's nvidia-cuda-dev, non-free), and the
# packages the tag changes (backend/cuda, which nothing else imports)
# vetted with their tests: compiles the CUDA device without a GPU. CI
# runs it after make test (.ci/run).
cuda-check:
	bash scripts/install-cuda.sh
	$(GO) build -tags '$(GOTAGS) cuda' ./...
	$(GO) vet -tags '$(GOTAGS) cuda' ./backend/cuda/...

# Needs an NVIDIA GPU and its driver: the test models' training steps,
# unplanned and planned, as native plans on the CUDA device and on the
# CPU device; results within 1e-3 and the same high-water.
test-gpu: cuda-check
	TSPLIT_GPU=1 $(GO) test -tags '$(GOTAGS) cuda' -count=1 -v -timeout 30m -run TestGPUMatchesCPU ./backend/cuda

# The same test as a binary built here, for a GPU machine without Go
# whose cuBLAS is another version (scripts/gpu-test-binary.sh).
gpu-test-binary:
	GO=$(GO) bash scripts/gpu-test-binary.sh $(CUBLAS_SONAME) .gpu/cuda.test
