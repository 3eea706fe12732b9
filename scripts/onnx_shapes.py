#!/usr/bin/python3
"""Shapes that ONNX's own shape inference finds for a model at a fixed batch.

Usage: /usr/bin/python3 scripts/onnx_shapes.py MODEL BATCH OUT.json

Every symbolic (dim_param) or missing dimension of every graph input is set to
BATCH, the model's stored value_info is dropped, and
onnx.shape_inference.infer_shapes(strict_mode=False, data_prop=True) is run.
OUT.json gets

    {"values": {"<name>": [d0, d1, ...]}}

for every graph input, output and value_info whose shape (rank) is known,
with null for a dimension that inference could not pin to a number.
"""

import json
import sys

import onnx
from onnx import shape_inference


def dims_of(value_info):
    """Dimensions of a tensor-typed ValueInfoProto, or None when its rank is unknown."""
    t = value_info.type
    if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim]


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip())
    path, batch, out = argv[0], int(argv[1]), argv[2]

    model = onnx.load(path)
    g = model.graph
    initializers = {i.name for i in g.initializer}
    for vi in g.input:
        if vi.name in initializers or vi.type.WhichOneof("value") != "tensor_type":
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue  # rank unknown: nothing to bind
        for d in tt.shape.dim:
            if not d.HasField("dim_value") or d.dim_value <= 0:
                d.Clear()
                d.dim_value = batch

    # Forget shapes stored by the exporter so that the result is what
    # inference itself derives; declared output dims become unknown.
    del g.value_info[:]
    for vi in g.output:
        if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                if not d.HasField("dim_value"):
                    d.Clear()

    inferred = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)

    values = {}
    ig = inferred.graph
    for vi in list(ig.input) + list(ig.value_info) + list(ig.output):
        if vi.name in initializers:
            continue
        dims = dims_of(vi)
        if dims is not None:
            values[vi.name] = dims

    with open(out, "w") as f:
        json.dump({"values": values}, f)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
