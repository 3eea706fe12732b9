#!/usr/bin/python3
"""Export models none of tsplit's tests were written for (make unseen-sweep).

Usage: /usr/bin/python3 scripts/unseen_exports.py OUTDIR [NAME ...]

Full-size torchvision families at 224² and two attention models built
from PyTorch's own modules, exported the way scripts/export_torch_models.py
exports the test models (opset 17, TRAINING mode, symbolic batch). A model
PyTorch cannot export is reported and skipped (efficientnet_b0: PyTorch
1.13 has no ONNX export of its stochastic depth).
"""

import os
import sys
import warnings

import torch
import torch.nn as nn
import torchvision.models as tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch_models as ex  # noqa: E402

warnings.filterwarnings("ignore")


class CausalDecoder(nn.Module):
    """GPT-style: nn.TransformerEncoder under a causal attn_mask, GELU
    (erf), dropout 0.1, post-norm; predicts the next token of the last
    position."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.pos = nn.Parameter(torch.randn(1, 32, 64) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=256, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)
        self.register_buffer("mask", torch.triu(torch.full((32, 32), float("-inf")), diagonal=1))
        self.head = nn.Linear(64, 1000)

    def forward(self, x):
        h = self.enc(self.emb(x) + self.pos, mask=self.mask)
        return self.head(h[:, -1])


class CrossAttention(nn.Module):
    """nn.MultiheadAttention between the first 8 and the other 16
    positions of the input, with kdim and vdim unlike d_model."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(40, 32)
        self.attn = nn.MultiheadAttention(32, 4, kdim=40, vdim=40, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 7)

    def forward(self, x):
        q = self.q(x[:, :8])
        a, _ = self.attn(q, x[:, 8:], x[:, 8:], need_weights=False)
        return self.head(self.norm(a + q).mean(dim=1))


UNSEEN = {
    "mobilenet_v3_large": (lambda: tvm.mobilenet_v3_large(weights=None), ex.image_input(224)),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(weights=None), ex.image_input(224)),
    "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(weights=None), ex.image_input(224)),
    "shufflenet_v2_x1_0": (lambda: tvm.shufflenet_v2_x1_0(weights=None), ex.image_input(224)),
    "wide_resnet50_2": (lambda: tvm.wide_resnet50_2(weights=None), ex.image_input(224)),
    "causal_decoder": (CausalDecoder, lambda: torch.randint(0, 1000, (2, 32))),
    "cross_attention": (CrossAttention, lambda: torch.randn(2, 24, 40)),
}


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out, names = argv[1], argv[2:] or list(UNSEEN)
    os.makedirs(out, exist_ok=True)
    ex.MODELS.update(UNSEEN)
    for name in names:
        if name not in UNSEEN:
            print(f"unknown model {name!r}; known: {', '.join(UNSEEN)}", file=sys.stderr)
            return 2
        path = os.path.join(out, name + ".onnx")
        if os.path.exists(path):
            print("kept", path, flush=True)
            continue
        try:
            ex.export(name, path)
            print("exported", path, flush=True)
        except Exception as err:  # a model PyTorch cannot export is a finding, not a failure
            print(f"not exported: {name}: {type(err).__name__}: {str(err)[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
