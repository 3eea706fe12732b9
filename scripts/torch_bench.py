#!/usr/bin/python3
"""Times one PyTorch CPU training step of a torchvision model.

Usage: /usr/bin/python3 scripts/torch_bench.py MODEL BATCH ITERS [--threads N]

MODEL is a torchvision constructor name (resnet18, resnet50, vgg16,
mobilenet_v2, ...), built with random weights after torch.manual_seed(0),
as scripts/export_torch_models.py does. The step is the one
`tsplitc train` builds by default: forward in train() mode
(BatchNormalization with the batch's statistics), mean cross-entropy of the
logits against int64 labels uniform in [0, 10), backward, and a plain SGD
update (learning rate 0.01). Inputs are uniform in [-1, 1), seeded.

It runs 2 warm-up steps, then ITERS timed ones, and prints on stdout

  {"ms_per_iter": <median ms>, "mean_ms": ..., "min_ms": ...,
   "cpu_ms_per_iter": <median CPU ms of the process (user + system)>,
   "iters": ITERS, "batch": BATCH, "warmup": 2, "threads": N, "torch": "<version>"}

--threads sets torch's intra-op threads (default: os.cpu_count(); Debian's
torch starts with one).
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torchvision.models as tvm

WARMUP = 2


def main(argv):
    ap = argparse.ArgumentParser(description="time a PyTorch CPU training step")
    ap.add_argument("model")
    ap.add_argument("batch", type=int)
    ap.add_argument("iters", type=int)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args(argv)
    if a.batch < 1 or a.iters < 1 or a.threads < 1:
        ap.error("batch, iters and threads must be positive")
    ctor = getattr(tvm, a.model, None)
    if ctor is None or not callable(ctor):
        ap.error("unknown torchvision model %r" % a.model)

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = ctor(weights=None)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(12345)
    x = torch.rand(a.batch, 3, 224, 224, generator=gen) * 2 - 1
    labels = torch.randint(0, 10, (a.batch,), generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), labels)
        loss.backward()
        opt.step()

    for _ in range(WARMUP):
        step()
    wall, cpu = [], []
    for _ in range(a.iters):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    json.dump({
        "ms_per_iter": statistics.median(wall),
        "mean_ms": statistics.fmean(wall),
        "min_ms": min(wall),
        "cpu_ms_per_iter": statistics.median(cpu),
        "iters": a.iters,
        "batch": a.batch,
        "warmup": WARMUP,
        "threads": a.threads,
        "torch": torch.__version__,
    }, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
