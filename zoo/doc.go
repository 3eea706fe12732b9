// Package zoo builds the forward (inference-graph) ONNX models that tsplit's
// tests and benchmarks plan: the model families of the TSplit paper's
// evaluation (ICDE'22, §VI, Tables IV–V: VGG, ResNet, Inception-V4 and
// Transformers), scaled along the two axes the paper scales them — the
// sample scale (Config.Batch) and the parameter scale (Config.Width: channels
// × k for CNNs, hidden size × k for Transformers).
//
// The models are written directly as onnxpb protobufs, so no Python, PyTorch
// or downloaded weights are needed:
//
//	m, err := zoo.Build("resnet50", zoo.Config{Batch: 16, Width: 2})
//	small, err := zoo.Build("bert-base", zoo.SmallConfig("bert-base"))
//
// # Families
//
//   - vgg16, vgg19: torchvision's VGG without batch norm (features.N convs
//     with bias + ReLU + MaxPool, classifier fc-ReLU-Dropout-fc-ReLU-Dropout-fc).
//     AdaptiveAvgPool2d((7,7)) is emitted as an AveragePool when the final
//     feature map is a multiple of 7 (an identity kernel-1 pool at 224); for
//     other image sizes the classifier takes the flattened feature map as is,
//     so its first layer has C·s·s inputs. The classifier's hidden size
//     (4096) scales with Width too.
//   - resnet18, resnet50, resnet101: torchvision's layout (BasicBlock or
//     Bottleneck, stride on the 3x3 conv as in v1.5, BatchNormalization after
//     every conv, downsample conv1x1+BN, GlobalAveragePool, Flatten, Gemm).
//   - inception: Inception-V4 (Szegedy et al. 2016, the layout of Cadene's
//     pretrainedmodels.inceptionv4): stem with Mixed_3a/4a/5a, 4×Inception-A,
//     Reduction-A, 7×Inception-B (1x7/7x1 branches), Reduction-B,
//     3×Inception-C (1x3/3x1 split branches), every conv a conv+BN+ReLU,
//     branches joined by Concat, GlobalAveragePool, Dropout (when
//     Config.Dropout > 0), FC. Default image 299.
//   - bert-base (12 layers, hidden 768, 12 heads, FFN 3072), bert-large (24,
//     1024, 16, 4096): HuggingFace BertForSequenceClassification's encoder
//     (post-LayerNorm, exact erf GELU) with word, position and token-type
//     embeddings. There is no pooler (it needs Tanh, which the zoo's op set
//     leaves out): the classifier is a Gemm on the first token's hidden
//     state. The position table has exactly SeqLen rows.
//   - gpt: GPT-2 small (12 layers, hidden 768, 12 heads, FFN 3072,
//     pre-LayerNorm, final ln_f, LM head tied to the token embedding, erf
//     GELU) with a causal mask, output logits [N, T, Vocab]. Q, K and V are
//     three projections (parameter count identical to GPT-2's fused c_attn).
//     The additive causal mask is computed in the graph from two length-T
//     position vectors (Sub, Relu, Mul), so no T×T constant is stored.
//
// Config.Layers overrides a Transformer's layer count and Config.Width its
// hidden size; the head count scales with the width (round(heads·Width),
// at least 1) and the hidden size is rounded to a multiple of it, so the head
// dimension stays 64 whenever 768·Width (1024·Width) is a multiple of 64.
// Fields that do not apply to a family (ImageSize for Transformers, SeqLen,
// Layers and Vocab for CNNs, Classes for gpt) are ignored, but negative
// values are always errors.
//
// # Conventions
//
// The graphs look like PyTorch's TRAINING-mode exports: IR version 8, the
// default ONNX domain at opset 17 only; BatchNormalization with
// training_mode=1 and three outputs (Y, running_mean, running_var); Dropout
// (only when Config.Dropout > 0) with its ratio and training_mode=true as
// inputs and two outputs (output, mask). The op set is Conv,
// BatchNormalization, Relu, MaxPool, AveragePool, GlobalAveragePool,
// Flatten, Gemm, MatMul, Add, Mul, Div, Sub, Concat, Reshape, Transpose,
// Softmax, LayerNormalization, Erf, Gather and Dropout.
//
// The single input is "input" (float32 [batch, 3, H, W], NCHW) for CNNs and
// "input_ids" (int64 [batch, seq]) for Transformers; the single output is
// "output" ([batch, classes] logits, or [batch, seq, vocab] for gpt). The
// batch dimension is the symbolic "batch" when Config.Batch is 0. Node names
// are module paths ("layer1.0.conv1", "encoder.layer.3.attention.self.query"),
// parameter names follow torchvision/HuggingFace ("layer1.0.conv1.weight",
// "layer1.0.bn1.running_var"), and every value name is unique; the first
// output of a node is named like the node.
//
// Trainable parameters are exactly the float tensors whose names end in
// ".weight" or ".bias" (conv/linear weights and biases, BatchNormalization
// and LayerNormalization scale and bias, embedding tables); BatchNormalization
// running statistics end in ".running_mean"/".running_var" and are not
// trainable. Structural constants (Reshape shapes, Dropout ratio, the
// attention scale, position ids) have other names. CountParams and
// ParamCount rely on this convention. MatMul weights are stored [in, out]
// (transposed relative to torch's Linear), Gemm weights [out, in] with
// transB=1, as torch exports them.
//
// # Weights
//
// Weights are deterministic pseudo-random numbers: each parameter tensor
// draws from its own PCG stream seeded from Config.Seed and the tensor's
// name, so identical Configs give byte-identical models. Convolution and
// hidden linear layers followed by ReLU get He-uniform weights
// (U(±√(6/fan_in))), classifiers LeCun-uniform (U(±√(3/fan_in))), biases
// U(±1/√fan_in), Transformer linears and embeddings a uniform with standard
// deviation 0.02 (BERT's initializer range); BatchNormalization and
// LayerNormalization start at scale 1, bias 0, running mean 0, variance 1.
// Activations stay finite through every net at width 1. Data is stored as
// little-endian float32 raw_data.
//
// With Config.WeightsAsInputs, or automatically when the weights (parameters
// and BatchNormalization statistics) would take more than 256 MiB, every
// weight becomes a graph input (after the data input, in creation order)
// with its full static shape and no data: planning only needs the shapes,
// and a width-40 VGG would otherwise be hundreds of gigabytes.
package zoo
