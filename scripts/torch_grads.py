#!/usr/bin/python3
"""PyTorch reference for one training step: loss and parameter gradients.

Usage: /usr/bin/python3 scripts/torch_grads.py MODEL OUT_DIR --batch N
           [--onnx PATH] [--seed S] [--float64] [--export-onnx PATH]
           [--sgd-steps K --lr LR]

Builds MODEL with the constructor of scripts/export_torch_models.py, loads
its weights from the exported ONNX file (testdata/torch/MODEL.onnx by
default: every floating-point ONNX initializer must be a state_dict entry
of the same shape and vice versa, else the script fails listing the names
that do not match), puts it in train() mode with every dropout probability
set to 0, makes seeded inputs (images N(0, 1), token ids uniform in
[0, 1000)) and int64 labels uniform in [0, classes), computes the mean
cross-entropy of the logits and back-propagates it. It writes

  OUT_DIR/inputs.json    the input tensor(s), named as the ONNX graph
                         inputs, and "labels" (the logits' shape minus the
                         class axis)
  OUT_DIR/expected.json  "loss" (a float32 scalar) and the float32
                         gradient of every parameter, keyed by its ONNX
                         initializer name

in the JSON tensor format of internal/tensorfile:
  {"<name>": {"type": "float32", "dims": [2, 3], "data_b64": "<base64>"}}

--float64 computes in double precision and writes the float inputs, the
loss and the gradients as float64 (the inputs hold the same values as
without it), with the constants the ONNX file holds as float32 attributes
(BatchNorm epsilon, HardSigmoid's 1/6) rounded to float32, as a runtime of
the file computes them. --export-onnx PATH also exports the model as it runs (the
loaded weights, dropout 0, float64 with --float64) to PATH, with the settings
of scripts/export_torch_models.py (opset 17, TRAINING mode, no constant
folding, the graph input names of the source file, output "output", a
symbolic batch): a runtime can then be checked in double precision, where
no ReLU input lies close enough to zero for rounding to flip its sign.
--sgd-steps K also runs K plain SGD steps (learning rate --lr, default
0.01) on the same batch from the loaded weights, after the gradients above,
and adds their losses to expected.json as "sgd_losses" ([K]).

BatchNormalization layers normalise with the batch's statistics in train()
mode; their running statistics (loaded from the ONNX file too) do not
affect the step. "transformer" keeps Dropout nodes with ratio 0.1 in its
ONNX export, which this script zeroes in PyTorch only: compare with
"transformer_nodrop", whose export has ratio 0.
"""

import argparse
import base64
import json
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch_models as etm  # noqa: E402  (the model constructors)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ONNX_TO_TORCH = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
}

JSON_TYPES = {
    np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
    np.dtype(np.int64): "int64", np.dtype(np.int32): "int32",
    np.dtype(np.bool_): "bool", np.dtype(np.uint8): "uint8",
}


def die(msg):
    sys.stderr.write("torch_grads.py: " + msg + "\n")
    sys.exit(1)


def tensor_json(t):
    """One entry of a tensor file: type, dims and base64 little-endian data."""
    a = t.detach().cpu().contiguous().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    typ = JSON_TYPES.get(a.dtype)
    if typ is None:
        die("no tensor-file type for %s" % a.dtype)
    # (np.ascontiguousarray would make a scalar 1-D.)
    a = np.require(a.astype(a.dtype.newbyteorder("<"), copy=False), requirements="C")
    return {"type": typ, "dims": [int(d) for d in a.shape],
            "data_b64": base64.b64encode(a.tobytes()).decode("ascii")}


def write_tensors(path, tensors):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(tensors, f)
        f.write("\n")
    os.replace(tmp, path)


def load_onnx_weights(model, mp, path):
    """Copies every floating-point ONNX initializer into the state_dict
    entry of the same name; fails listing the names that do not match.
    Returns how many were loaded and how many parameters differ from the
    model as built (buffers such as BatchNormalization running statistics
    do differ: the export's trace ran a training-mode forward)."""
    inits = {i.name: i for i in mp.graph.initializer}
    sd = model.state_dict()
    float_inits = {n for n, i in inits.items()
                   if i.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                      onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)}
    float_sd = {k for k, v in sd.items() if v.is_floating_point()}
    only_onnx = sorted(float_inits - float_sd)
    only_torch = sorted(float_sd - float_inits)
    bad_shape = sorted("%s (ONNX %s, torch %s)" % (n, list(inits[n].dims), list(sd[n].shape))
                       for n in float_inits & float_sd
                       if tuple(inits[n].dims) != tuple(sd[n].shape))
    if only_onnx or only_torch or bad_shape:
        lines = ["the weights of %s do not match the PyTorch model's state_dict:" % path]
        if only_onnx:
            lines.append("  ONNX initializers with no state_dict entry (%d): %s" % (len(only_onnx), ", ".join(only_onnx)))
        if only_torch:
            lines.append("  state_dict entries with no ONNX initializer (%d): %s" % (len(only_torch), ", ".join(only_torch)))
        if bad_shape:
            lines.append("  shapes differ (%d): %s" % (len(bad_shape), ", ".join(bad_shape)))
        die("\n".join(lines))
    params = {n for n, _ in model.named_parameters()}
    new_sd = dict(sd)
    changed = 0
    for n in sorted(float_inits):
        w = torch.from_numpy(numpy_helper.to_array(inits[n]).copy()).to(sd[n].dtype)
        if n in params and not torch.equal(w, sd[n]):
            changed += 1
        new_sd[n] = w
    model.load_state_dict(new_sd, strict=True)
    return len(float_inits), changed


def graph_inputs(mp):
    """The ONNX graph inputs that are not initializers: (name, dtype, dims)."""
    inits = {i.name for i in mp.graph.initializer}
    out = []
    for vi in mp.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        out.append((vi.name, tt.elem_type, dims))
    return out


def make_inputs(mp, batch, gen):
    feeds = {}
    for name, elem, dims in graph_inputs(mp):
        shape = [batch] + dims[1:]
        if any(d is None for d in shape):
            die("input %r has a symbolic dimension other than the batch: %s" % (name, dims))
        if elem == onnx.TensorProto.FLOAT:
            feeds[name] = torch.randn(*shape, generator=gen)
        elif elem == onnx.TensorProto.INT64:
            feeds[name] = torch.randint(0, etm.VOCAB, shape, generator=gen, dtype=torch.int64)
        else:
            die("input %r has ONNX element type %d; only float32 images and int64 tokens are made" % (name, elem))
    if not feeds:
        die("the ONNX graph has no inputs besides its initializers")
    return feeds


def export_as_run(model, feeds, names, path):
    """Exports the model as it will run (its dtype, dropout 0, the loaded
    weights) with the settings of scripts/export_torch_models.py."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), ".%s.tmp.%d" % (os.path.basename(path), os.getpid()))
    try:
        torch.onnx.export(
            model, tuple(feeds[n] for n in names), tmp,
            export_params=True,
            opset_version=etm.OPSET,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
            input_names=names,
            output_names=["output"],
            dynamic_axes=dict({n: {0: "batch"} for n in names}, output={0: "batch"}),
        )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def zero_dropout(model):
    """Sets every dropout probability to 0; returns how many were not 0."""
    changed = 0
    for mod in model.modules():
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            changed += mod.p != 0
            mod.p = 0.0
        if isinstance(mod, nn.MultiheadAttention):
            changed += mod.dropout != 0
            mod.dropout = 0.0
    return changed


class HardSigmoidAs(nn.Module):
    """max(0, min(1, alpha*x + beta)) with the given constants."""

    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x):
        return torch.clamp(x * self.alpha + self.beta, 0.0, 1.0)


def float32_attributes(model):
    """Makes the model compute with the constants its ONNX export holds.
    ONNX float attributes are float32, so the file's BatchNormalization
    epsilon and HardSigmoid alpha are PyTorch's double 0.001 and 1/6
    rounded to float32: 4.7e-8 and 3e-8 off, which moves a float64 step
    (MobileNetV3: BN eps 0.001 over small variances, HardSigmoid in every
    squeeze-excitation) by 1e-7 relative, ten times the float64 check's
    tolerance. Returns how many constants it changed."""
    changed = 0
    for mod in model.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            eps = float(np.float32(mod.eps))
            changed += eps != mod.eps
            mod.eps = eps
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Hardsigmoid):
                setattr(parent, name, HardSigmoidAs(float(np.float32(1.0 / 6)), 0.5))
                changed += 1
    return changed


def cross_entropy(logits, labels):
    c = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, c), labels.reshape(-1), reduction="mean")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=sorted(etm.MODELS))
    ap.add_argument("outdir")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--onnx", help="exported model (default testdata/torch/MODEL.onnx)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the inputs and labels")
    ap.add_argument("--float64", action="store_true", help="compute in double precision, write float64")
    ap.add_argument("--export-onnx", metavar="PATH", help="also export the model as run to PATH")
    ap.add_argument("--sgd-steps", type=int, default=0, help="also run K SGD steps and record their losses")
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args(argv)
    if args.batch <= 0:
        ap.error("--batch must be positive")

    torch.set_num_threads(os.cpu_count() or 1)
    os.makedirs(args.outdir, exist_ok=True)
    path = args.onnx or os.path.join(REPO, "testdata", "torch", args.model + ".onnx")
    if not os.path.exists(path):
        die("%s does not exist; export it with scripts/export_torch_models.py testdata/torch %s" % (path, args.model))
    mp = onnx.load(path)
    t0 = time.monotonic()

    make_model, _ = etm.MODELS[args.model]
    torch.manual_seed(0)
    model = make_model()
    nw, changed = load_onnx_weights(model, mp, path)
    dropped = zero_dropout(model)
    if dropped:
        sys.stderr.write("torch_grads.py: %s: set %d nonzero dropout probabilities to 0 (its ONNX export keeps them)\n"
                         % (args.model, dropped))
    dtype = torch.float64 if args.float64 else torch.float32
    model.to(dtype)
    model.train()
    state = {k: v.clone() for k, v in model.state_dict().items()}

    gen = torch.Generator().manual_seed(args.seed)
    feeds = make_inputs(mp, args.batch, gen)
    feeds = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in feeds.items()}
    names = list(feeds)
    if args.export_onnx:
        os.makedirs(os.path.dirname(os.path.abspath(args.export_onnx)), exist_ok=True)
        export_as_run(model, feeds, names, args.export_onnx)
        model.load_state_dict(state)  # the export's trace ran a forward pass
    if args.float64:
        float32_attributes(model)

    def forward():
        return model(*[feeds[n] for n in names])

    logits = forward()
    labels = torch.randint(0, logits.shape[-1], tuple(logits.shape[:-1]), generator=gen, dtype=torch.int64)
    model.zero_grad(set_to_none=True)
    loss = cross_entropy(logits, labels)
    loss.backward()

    expected = {"loss": tensor_json(loss.detach().reshape(()))}
    params = dict(model.named_parameters())
    no_grad = []
    for n, p in params.items():
        if n in expected:
            die("parameter %r collides with the loss's name" % n)
        g = p.grad
        if g is None:
            no_grad.append(n)
            g = torch.zeros_like(p)
        expected[n] = tensor_json(g)
    if no_grad:
        sys.stderr.write("torch_grads.py: parameters the loss does not depend on (zero gradients written): %s\n"
                         % ", ".join(no_grad))

    if args.sgd_steps > 0:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr)
        losses = []
        for _ in range(args.sgd_steps):
            opt.zero_grad(set_to_none=True)
            step_loss = cross_entropy(forward(), labels)
            losses.append(step_loss.item())
            step_loss.backward()
            opt.step()
        expected["sgd_losses"] = tensor_json(np.array(losses, dtype=np.float64 if args.float64 else np.float32))

    inputs = {n: tensor_json(feeds[n]) for n in names}
    if "labels" in inputs:
        die("the model has an input named 'labels'")
    inputs["labels"] = tensor_json(labels)
    write_tensors(os.path.join(args.outdir, "inputs.json"), inputs)
    write_tensors(os.path.join(args.outdir, "expected.json"), expected)
    print("%s batch %d (%s): loss %.6f, %d parameters, %d weights loaded from %s (%d parameters differ from a fresh seed-0 build), %.1fs"
          % (args.model, args.batch, "float64" if args.float64 else "float32", loss.item(), len(params), nw,
             path, changed, time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
