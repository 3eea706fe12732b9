#!/usr/bin/python3
"""Bytes PyTorch saves for backward in one training step of a model.

Usage: /usr/bin/python3 scripts/torch_saved.py MODEL BATCH

Builds MODEL with the constructor of scripts/export_torch_models.py (seed
0; the sizes do not depend on the weights), in train() mode, runs the
forward pass and the mean cross-entropy loss on seeded inputs at BATCH
under torch.autograd.graph.saved_tensors_hooks, and prints one JSON object
on stdout:

  bytes          bytes of the distinct storages saved for backward:
                 every tensor the pack hook sees, deduplicated by the
                 data_ptr of its storage, parameters and buffers excluded
  tensors        how many distinct storages that is
  tensor_bytes   the same storages counted by the size of the saved
                 tensors (different only where a saved tensor is a view
                 of part of its storage)
  excluded_bytes storages of parameters and buffers the hook saw
  by_op          for each autograd node type (ConvolutionBackward0, ...):
                 {"count", "bytes"}: the distinct storages its nodes save,
                 each storage credited to the first node in forward order
                 that saves it (found by walking the autograd graph and
                 reading the nodes' _saved_* attributes)
  saved          one entry per such storage, in forward order: node, the
                 attribute, dtype, shape, bytes, and "shared" listing the
                 other nodes that save the same storage
  graph_bytes    the total of by_op (should equal bytes)

The dropout probabilities are the model's own (transformer_nodrop: 0).
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch_models as etm  # noqa: E402  (the model constructors)


def die(msg):
    sys.stderr.write("torch_saved.py: " + msg + "\n")
    sys.exit(1)


def storage_of(t):
    """(data_ptr, nbytes) of the storage behind t, or None."""
    try:
        s = t.storage()
    except (RuntimeError, NotImplementedError):
        return None
    if s.data_ptr() == 0 or s.nbytes() == 0:
        return None
    return s.data_ptr(), s.nbytes()


def forward_order(root):
    """Autograd nodes reachable from root, inputs before their users."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for nxt, _ in reversed(node.next_functions):
            if nxt is not None and nxt not in seen:
                stack.append((nxt, False))
    return order


def saved_attrs(node):
    """(attribute, tensor) for every tensor a node saved."""
    out = []
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            val = getattr(node, attr)
        except Exception:  # an undefined optional tensor, a released buffer
            continue
        vals = val if isinstance(val, (list, tuple)) else [val]
        for i, v in enumerate(vals):
            if isinstance(v, torch.Tensor):
                out.append((attr if len(vals) == 1 else "%s[%d]" % (attr, i), v))
    return out


def main(argv):
    if len(argv) != 2 or argv[0] not in etm.MODELS:
        die("usage: torch_saved.py MODEL BATCH (MODEL one of %s)" % ", ".join(sorted(etm.MODELS)))
    name, batch = argv[0], int(argv[1])
    if batch <= 0:
        die("BATCH must be positive")
    torch.set_num_threads(os.cpu_count() or 1)

    make_model, make_input = etm.MODELS[name]
    torch.manual_seed(0)
    model = make_model()
    model.train()
    example = make_input()
    gen = torch.Generator().manual_seed(0)
    shape = (batch,) + tuple(example.shape[1:])
    if example.is_floating_point():
        x = torch.randn(*shape, generator=gen, dtype=example.dtype)
    else:
        x = torch.randint(0, etm.VOCAB, shape, generator=gen, dtype=example.dtype)

    state = {}
    for t in list(model.parameters()) + list(model.buffers()):
        st = storage_of(t)
        if st:
            state[st[0]] = st[1]

    seen = {}  # storage ptr -> [storage bytes, tensor bytes]
    excluded = {}

    def pack(t):
        st = storage_of(t)
        if st is not None:
            ptr, nbytes = st
            if ptr in state:
                excluded[ptr] = nbytes
            else:
                e = seen.setdefault(ptr, [nbytes, 0])
                e[1] = max(e[1], t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(x)
        labels = torch.randint(0, logits.shape[-1], tuple(logits.shape[:-1]), generator=gen)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    # Attribution: walk the graph in forward order.
    owner = {}  # ptr -> index into saved
    saved = []
    by_op = {}
    for node in forward_order(loss.grad_fn):
        for attr, t in saved_attrs(node):
            st = storage_of(t)
            if st is None or st[0] in state:
                continue
            ptr, nbytes = st
            if ptr in owner:
                saved[owner[ptr]]["shared"].append("%s.%s" % (node.name(), attr))
                continue
            owner[ptr] = len(saved)
            saved.append({"node": node.name(), "attr": attr, "dtype": str(t.dtype).replace("torch.", ""),
                          "shape": list(t.shape), "bytes": nbytes, "shared": []})
            e = by_op.setdefault(node.name(), {"count": 0, "bytes": 0})
            e["count"] += 1
            e["bytes"] += nbytes
    loss.backward()  # the graph is whole: backward works as in training

    res = {
        "model": name,
        "batch": batch,
        "bytes": sum(e[0] for e in seen.values()),
        "tensors": len(seen),
        "tensor_bytes": sum(e[1] for e in seen.values()),
        "excluded_bytes": sum(excluded.values()),
        "graph_bytes": sum(e["bytes"] for e in by_op.values()),
        "by_op": dict(sorted(by_op.items(), key=lambda kv: -kv[1]["bytes"])),
        "saved": saved,
    }
    json.dump(res, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
