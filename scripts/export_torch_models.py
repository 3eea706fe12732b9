#!/usr/bin/python3
"""Export randomly initialised PyTorch models to ONNX for tsplit's tests.

Usage: /usr/bin/python3 scripts/export_torch_models.py OUTDIR [--force] [NAME ...]

Writes OUTDIR/<name>.onnx for each NAME (default: all of them). Nothing is
downloaded: every model is built with random weights after
torch.manual_seed(0), so the files are reproducible on one machine.

All models are exported with opset 17 in TRAINING mode (BatchNormalization
keeps training_mode=1 and its three outputs, Dropout keeps its ratio and
training_mode inputs), without constant folding, with a symbolic batch
dimension 'batch' on the single input ("input") and output ("output").
The *_gap models (torchvision's VGG conv body, a global average pool and
one Linear: fused-tiled training on huge images, docs/sft.md) also have
symbolic 'height' and 'width' (tsplitc --dim height=N --dim width=N).

An existing file is kept unless --force is given. Files are written to a
temporary name and renamed, so a reader never sees half a model.
"""

import argparse
import os
import sys
import time
import warnings

import torch
import torch.nn as nn
import torchvision.models as tvm
from torchvision.models import convnext, efficientnet, mnasnet, mobilenetv3, regnet, shufflenetv2
from torchvision.models.vision_transformer import VisionTransformer

# torch 1.13 warns once per BatchNorm in TRAINING export that the
# num_batches_tracked += 1 is dropped from the graph. It is harmless (the
# momentum is fixed, so the counter is never read) and drowns everything else.
warnings.filterwarnings("ignore", message=r"ONNX Preprocess - Removing mutation from node aten::add_")

OPSET = 17
SEQ_LEN = 32
VOCAB = 1000


class TokenClassifier(nn.Module):
    """Embedding + learned positions + 2-layer Transformer encoder + mean pool + linear."""

    def __init__(self, dropout):
        super().__init__()
        d_model = 128
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(torch.randn(1, SEQ_LEN, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model=d_model, nhead=4, dim_feedforward=512, dropout=dropout,
            batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        # TransformerEncoder deep-copies `layer`: give every layer its own weights.
        # (MultiheadAttention._reset_parameters leaves out_proj.weight alone
        # and zeroes the biases, so reset out_proj first.)
        for lyr in self.encoder.layers:
            lyr.self_attn.out_proj.reset_parameters()
            lyr.self_attn._reset_parameters()
            lyr.linear1.reset_parameters()
            lyr.linear2.reset_parameters()
            lyr.norm1.reset_parameters()
            lyr.norm2.reset_parameters()
        self.head = nn.Linear(d_model, 10)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        x = self.encoder(x)
        return self.head(x.mean(dim=1))


class VGGSmall(nn.Module):
    """A small VGG-style net for 32x32 images: 3x3 conv-ReLU blocks
    [16, M, 32, M, 64, 64, M] (M: 2x2 max pool), then
    Linear(64*4*4, 128)-ReLU-Dropout(0)-Linear(128, 10). No BatchNorm."""

    CFG = [16, "M", 32, "M", 64, 64, "M"]

    def __init__(self, num_classes=10):
        super().__init__()
        layers, cin = [], 3
        for c in self.CFG:
            if c == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(cin, c, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                cin = c
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(64 * 4 * 4, 128), nn.ReLU(inplace=True), nn.Dropout(p=0.0),
            nn.Linear(128, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def image_input(size):
    return lambda: torch.randn(2, 3, size, size)


def token_input():
    return torch.randint(0, VOCAB, (2, SEQ_LEN), dtype=torch.int64)


class VGGGap(nn.Module):
    """torchvision's VGG conv body (vgg.features), a global average pool
    and Linear(512, 1000): a classifier for images of any size, whose
    parameters do not grow with the image (VGG's own classifier flattens
    a 7x7 map)."""

    def __init__(self, make):
        super().__init__()
        self.features = make(weights=None).features
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class GeluMLP(nn.Module):
    """LayerNorm, Linear(64, 256), GELU (erf), Dropout(0.1), Linear(256, 10)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.fc1 = nn.Linear(64, 256)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(self.norm(x)))))


class MHABlock(nn.Module):
    """Linear(32, 64), nn.MultiheadAttention (4 heads, self-attention), a
    residual add, a mean over the 16 positions, Linear(64, 10)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(32, 64)
        self.attn = nn.MultiheadAttention(64, 4, dropout=0.0, batch_first=True)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        h = self.embed(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.head((a + h).mean(dim=1))


def efficientnet_mini():
    # EfficientNet-B0's block sequence at a quarter of its width and depth
    # (one MBConv with squeeze-excitation and SiLU per stage).
    setting, last = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return efficientnet.EfficientNet(setting, dropout=0.2, stochastic_depth_prob=0.0,
                                     num_classes=10, last_channel=last)


def convnext_mini():
    # ConvNeXt's stem, blocks (7x7 depthwise conv, LayerNorm over
    # channels, GELU, layer scale) and downsampling, one block per stage.
    stages = [convnext.CNBlockConfig(16, 32, 1), convnext.CNBlockConfig(32, 64, 1),
              convnext.CNBlockConfig(64, None, 1)]
    return convnext.ConvNeXt(stages, stochastic_depth_prob=0.0, num_classes=10)


def regnet_mini():
    # RegNetY: grouped bottleneck blocks with squeeze-excitation.
    params = regnet.BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0,
                                                 group_width=8, se_ratio=0.25)
    return regnet.RegNet(params, num_classes=10, stem_width=16)


def mobilenetv3_mini():
    # MobileNetV3-Small's blocks at half width: HardSwish and
    # HardSigmoid (squeeze-excitation), depthwise convolutions, BN with
    # eps 0.001. Its classifier's Dropout is at ratio 0 so that the
    # float32 gradients compare with PyTorch's (compiler's
    # TestGradientsMatchPyTorch); efficientnet_mini and vit_mini keep a
    # nonzero ratio.
    setting, last = mobilenetv3._mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.5)
    return mobilenetv3.MobileNetV3(setting, last, num_classes=10, dropout=0.0)


def vit_mini():
    # Two encoder layers on 4x4 patches of a 32x32 image, dropout 0.1.
    return VisionTransformer(image_size=32, patch_size=4, num_layers=2, num_heads=4,
                             hidden_dim=64, mlp_dim=128, num_classes=10, dropout=0.1)


# The symbolic axes of the input and output.
BATCH_AXES = {"input": {0: "batch"}, "output": {0: "batch"}}
IMAGE_AXES = {"input": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch"}}

# name -> (constructor, example-input maker[, symbolic axes])
MODELS = {
    "resnet18": (lambda: tvm.resnet18(weights=None), image_input(224)),
    "resnet50": (lambda: tvm.resnet50(weights=None), image_input(224)),
    "vgg16": (lambda: tvm.vgg16(weights=None), image_input(224)),
    "inception_v3": (
        lambda: tvm.inception_v3(weights=None, aux_logits=False, init_weights=True),
        image_input(299)),
    "densenet121": (lambda: tvm.densenet121(weights=None), image_input(224)),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(weights=None), image_input(224)),
    "transformer": (lambda: TokenClassifier(dropout=0.1), token_input),
    "transformer_nodrop": (lambda: TokenClassifier(dropout=0.0), token_input),
    "vgg_small": (VGGSmall, image_input(32)),
    "vgg16_gap": (lambda: VGGGap(tvm.vgg16), image_input(64), IMAGE_AXES),
    "vgg19_gap": (lambda: VGGGap(tvm.vgg19), image_input(64), IMAGE_AXES),
    # Small models of architectures the zoo does not have, for the budget
    # sweeps of every policy (bench/torch_sweep_test.go).
    "efficientnet_mini": (efficientnet_mini, image_input(32)),
    "convnext_mini": (convnext_mini, image_input(32)),
    "shufflenet_mini": (
        lambda: shufflenetv2.ShuffleNetV2([1, 2, 1], [16, 24, 48, 96, 128], num_classes=10),
        image_input(32)),
    "squeezenet_mini": (lambda: tvm.squeezenet1_1(num_classes=10), image_input(32)),
    "regnet_mini": (regnet_mini, image_input(32)),
    "mnasnet_mini": (lambda: mnasnet.MNASNet(0.25, num_classes=10), image_input(32)),
    "mobilenetv3_mini": (mobilenetv3_mini, image_input(32)),
    "vit_mini": (vit_mini, image_input(32)),
    "mha_block": (MHABlock, lambda: torch.randn(2, 16, 32)),
    "gelu_mlp": (GeluMLP, lambda: torch.randn(2, 64)),
}


def export(name, path):
    make_model, make_input = MODELS[name][:2]
    axes = MODELS[name][2] if len(MODELS[name]) > 2 else BATCH_AXES
    torch.manual_seed(0)
    model = make_model()
    example = make_input()
    model.train()
    tmp = os.path.join(os.path.dirname(path), ".%s.onnx.tmp.%d" % (name, os.getpid()))
    try:
        torch.onnx.export(
            model, (example,), tmp,
            export_params=True,
            opset_version=OPSET,
            training=torch.onnx.TrainingMode.TRAINING,
            do_constant_folding=False,
            input_names=["input"],
            output_names=["output"],
            dynamic_axes=axes,
        )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help="models to export (default: all): " + ", ".join(MODELS))
    ap.add_argument("--force", action="store_true", help="re-export existing files")
    args = ap.parse_intermixed_args(argv)

    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        ap.error("unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(MODELS)))
    names = args.names or list(MODELS)

    torch.set_num_threads(os.cpu_count() or 1)
    os.makedirs(args.outdir, exist_ok=True)
    for name in names:
        path = os.path.join(args.outdir, name + ".onnx")
        if os.path.exists(path) and not args.force:
            print("%s\t%d bytes\t(exists, skipped)" % (path, os.path.getsize(path)), flush=True)
            continue
        t0 = time.monotonic()
        export(name, path)
        dt = time.monotonic() - t0
        print("%s\t%d bytes\t%.1fs" % (path, os.path.getsize(path), dt), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
