#!/usr/bin/python3
"""Print the op-type histogram of ONNX models.

Usage: /usr/bin/python3 scripts/onnx_ops.py MODEL [MODEL ...]
"""

import collections
import sys

import onnx


def main(paths):
    if not paths:
        sys.exit(__doc__.strip())
    for path in paths:
        m = onnx.load(path, load_external_data=False)
        hist = collections.Counter(n.op_type if n.domain in ("", "ai.onnx") else n.domain + ":" + n.op_type
                                   for n in m.graph.node)
        opsets = ", ".join("%s=%d" % (o.domain or "ai.onnx", o.version) for o in m.opset_import)
        print("%s: %d nodes, %d initializers, ir %d, opset %s" % (
            path, len(m.graph.node), len(m.graph.initializer), m.ir_version, opsets))
        for op, n in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
            print("  %-24s %d" % (op, n))


if __name__ == "__main__":
    main(sys.argv[1:])
