#!/usr/bin/python3
"""Shapes that ONNX's own shape inference finds for a model at a fixed batch.

Usage: /usr/bin/python3 scripts/onnx_shapes.py MODEL BATCH[,BATCH...] OUT.json

Every symbolic (dim_param) or missing dimension of every graph input is set to
BATCH, the model's stored value_info is dropped, and
onnx.shape_inference.infer_shapes(strict_mode=False, data_prop=True) is run.
OUT.json gets

    {"values": {"<name>": [d0, d1, ...]}}

for every graph input, output and value_info whose shape (rank) is known,
with null for a dimension that inference could not pin to a number.

With several batches the model is read once and inferred at each; OUT must
then contain "{batch}", replaced by each batch.

Floating-point initializers over 64 KiB (the weights) lose their data before
inference: inference needs their type and dims, which stay, and no shape is
computed from float weight values; infer_shapes copies the whole model
several times, which for a 550 MB export took most of the time.
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


FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def drop_weight_data(g):
    """Clears the data of floating-point initializers over 64 KiB."""
    for t in g.initializer:
        if t.data_type in FLOAT_TYPES and t.ByteSize() > 64 << 10:
            for field in ("raw_data", "float_data", "double_data", "int32_data"):
                t.ClearField(field)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip())
    path, batches, out = argv[0], [int(b) for b in argv[1].split(",")], argv[2]
    if len(batches) > 1 and "{batch}" not in out:
        sys.exit('onnx_shapes.py: with several batches OUT must contain "{batch}"')

    model = onnx.load(path)
    g = model.graph
    drop_weight_data(g)
    initializers = {i.name for i in g.initializer}
    # The input dimensions to bind: symbolic or missing ones.
    bind = []
    for vi in g.input:
        if vi.name in initializers or vi.type.WhichOneof("value") != "tensor_type":
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue  # rank unknown: nothing to bind
        for d in tt.shape.dim:
            if not d.HasField("dim_value") or d.dim_value <= 0:
                bind.append(d)

    # Forget shapes stored by the exporter so that the result is what
    # inference itself derives; declared output dims become unknown.
    del g.value_info[:]
    for vi in g.output:
        if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                if not d.HasField("dim_value"):
                    d.Clear()

    for batch in batches:
        for d in bind:
            d.Clear()
            d.dim_value = batch
        inferred = shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)

        values = {}
        ig = inferred.graph
        for vi in list(ig.input) + list(ig.value_info) + list(ig.output):
            if vi.name in initializers:
                continue
            dims = dims_of(vi)
            if dims is not None:
                values[vi.name] = dims

        with open(out.replace("{batch}", str(batch)), "w") as f:
            json.dump({"values": values}, f)
            f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
