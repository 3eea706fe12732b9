package zoo

import (
	"fmt"
	"math"
	"strings"

	"github.com/tsplit/tsplit/onnxpb"
)

// Config selects the size of a zoo model. The zero value is each family's
// default (full-size) configuration with a symbolic batch dimension.
type Config struct {
	Batch     int64   // 0: the batch dim is symbolic, named "batch"; >0: fixed
	Width     float64 // multiplier: channels × k for CNNs, hidden × k for transformers (0 means 1)
	ImageSize int64   // CNNs (0: the family default, 224; 299 for inception)
	SeqLen    int64   // transformers (0: 128)
	Layers    int     // transformers: encoder/decoder layers; 0 = family default
	Classes   int64   // 0: 1000 for CNNs, 2 for BERT; ignored by gpt, whose logits are over Vocab
	Vocab     int64   // transformers (0: 30522 for BERT, 50257 for GPT)
	Dropout   float32 // >0 inserts Dropout nodes (ratio as input, training_mode input true) where the real nets have them
	// WeightsAsInputs makes every weight a graph input without data (for huge
	// configurations: planning never needs gigabytes of weights). It is
	// enabled automatically when the weights exceed 256 MiB.
	WeightsAsInputs bool
	Seed            int64 // seeds the pseudo-random weights
}

// Limits beyond which a configuration is rejected as absurd.
const (
	maxBatch     = 1 << 24
	maxWidth     = 1024
	maxImageSize = 1 << 15
	maxSeqLen    = 1 << 20
	maxLayers    = 4096
	maxClasses   = 1 << 24
	maxVocab     = 1 << 24
)

type kind int

const (
	cnn kind = iota
	transformer
)

type family struct {
	kind  kind
	image int64 // CNNs: default image size
	// transformers: defaults
	layers   int
	hidden   int64
	heads    int64
	vocab    int64
	classes  int64
	build    func(b *builder)
	smallCfg Config
	causal   bool
}

var order = []string{"vgg16", "vgg19", "darknet19", "resnet18", "resnet50", "resnet101", "inception", "bert-base", "bert-large", "gpt"}

var families map[string]*family

func init() {
	smallCNN := Config{Width: 0.125, ImageSize: 32, Classes: 10}
	smallTF := Config{Width: 0.125, SeqLen: 16, Layers: 2, Vocab: 100}
	smallBERT := smallTF
	smallBERT.Classes = 2
	families = map[string]*family{
		"vgg16":      {kind: cnn, image: 224, build: func(b *builder) { buildVGG(b, vgg16Cfg) }, smallCfg: smallCNN},
		"vgg19":      {kind: cnn, image: 224, build: func(b *builder) { buildVGG(b, vgg19Cfg) }, smallCfg: smallCNN},
		"darknet19":  {kind: cnn, image: 224, build: buildDarkNet19, smallCfg: smallCNN},
		"resnet18":   {kind: cnn, image: 224, build: func(b *builder) { buildResNet(b, false, []int{2, 2, 2, 2}) }, smallCfg: smallCNN},
		"resnet50":   {kind: cnn, image: 224, build: func(b *builder) { buildResNet(b, true, []int{3, 4, 6, 3}) }, smallCfg: smallCNN},
		"resnet101":  {kind: cnn, image: 224, build: func(b *builder) { buildResNet(b, true, []int{3, 4, 23, 3}) }, smallCfg: smallCNN},
		"inception":  {kind: cnn, image: 299, build: buildInceptionV4, smallCfg: Config{Width: 0.125, ImageSize: 75, Classes: 10}},
		"bert-base":  {kind: transformer, layers: 12, hidden: 768, heads: 12, vocab: 30522, classes: 2, build: buildBERT, smallCfg: smallBERT},
		"bert-large": {kind: transformer, layers: 24, hidden: 1024, heads: 16, vocab: 30522, classes: 2, build: buildBERT, smallCfg: smallBERT},
		"gpt":        {kind: transformer, layers: 12, hidden: 768, heads: 12, vocab: 50257, causal: true, build: buildGPT, smallCfg: smallTF},
	}
}

// Names lists the models Build knows, CNNs first.
func Names() []string { return append([]string(nil), order...) }

// SmallConfig returns a CI-sized configuration of model name: width 1/8,
// 32×32 images (75×75 for inception) and 10 classes for CNNs; width 1/8,
// 2 layers, 16 tokens and a 100-word vocabulary for Transformers. Each such
// model is at most a few MB and runs a forward in milliseconds on a CPU. The
// batch is symbolic; weights have data. An unknown name gives the zero
// Config (Build then reports the unknown name).
func SmallConfig(name string) Config {
	if f, ok := families[name]; ok {
		return f.smallCfg
	}
	return Config{}
}

// Build returns the forward graph of model name (see Names) at cfg.
func Build(name string, cfg Config) (m *onnxpb.ModelProto, err error) {
	f, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("zoo: unknown model %q (known: %s)", name, strings.Join(order, ", "))
	}
	c, err := f.normalize(name, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			m = nil
			if e, ok := r.(errBuild); ok {
				err = fmt.Errorf("zoo: %w", e.err)
			} else {
				err = fmt.Errorf("zoo: internal error building %s: %v", name, r)
			}
		}
	}()
	b := newBuilder(name, c)
	f.build(b)
	return b.finish(c.WeightsAsInputs || b.weightBytes() > autoInputsBytes), nil
}

// ParamCount returns the number of trainable parameters of model name at
// cfg, counted (by CountParams) on the model Build returns. Weights are not
// generated, so it is fast at any size.
func ParamCount(name string, cfg Config) (int64, error) {
	cfg.WeightsAsInputs = true
	m, err := Build(name, cfg)
	if err != nil {
		return 0, err
	}
	return CountParams(m), nil
}

// CountParams counts the trainable parameters of a zoo model: the elements
// of the float32 initializers and graph inputs whose names end in ".weight"
// or ".bias" (a name that is both is counted once).
func CountParams(m *onnxpb.ModelProto) int64 {
	g := m.GetGraph()
	seen := map[string]bool{}
	var n int64
	for _, t := range g.GetInitializer() {
		if !trainable(t.GetName()) || seen[t.GetName()] || t.GetDataType() != int32(onnxpb.TensorProto_FLOAT) {
			continue
		}
		seen[t.GetName()] = true
		e := int64(1)
		for _, d := range t.GetDims() {
			e *= d
		}
		n += e
	}
	for _, in := range g.GetInput() {
		tt := in.GetType().GetTensorType()
		if !trainable(in.GetName()) || seen[in.GetName()] || tt.GetElemType() != int32(onnxpb.TensorProto_FLOAT) {
			continue
		}
		seen[in.GetName()] = true
		e := int64(1)
		for _, d := range tt.GetShape().GetDim() {
			e *= d.GetDimValue()
		}
		n += e
	}
	return n
}

func trainable(name string) bool {
	return strings.HasSuffix(name, ".weight") || strings.HasSuffix(name, ".bias")
}

// normalize validates cfg and fills in the family defaults; fields that do
// not apply to the family are zeroed so that they cannot change the model.
func (f *family) normalize(name string, c Config) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("zoo: %s: "+format, append([]any{name}, args...)...)
	}
	switch {
	case c.Batch < 0 || c.Batch > maxBatch:
		return bad("batch %d out of range [0, %d]", c.Batch, maxBatch)
	case math.IsNaN(c.Width) || c.Width < 0 || c.Width > maxWidth:
		return bad("width %g out of range (0, %d]", c.Width, maxWidth)
	case math.IsNaN(float64(c.Dropout)) || c.Dropout < 0 || c.Dropout >= 1:
		return bad("dropout %g out of range [0, 1)", c.Dropout)
	case c.ImageSize < 0 || c.ImageSize > maxImageSize:
		return bad("image size %d out of range [0, %d]", c.ImageSize, maxImageSize)
	case c.SeqLen < 0 || c.SeqLen > maxSeqLen:
		return bad("sequence length %d out of range [0, %d]", c.SeqLen, maxSeqLen)
	case c.Layers < 0 || c.Layers > maxLayers:
		return bad("layers %d out of range [0, %d]", c.Layers, maxLayers)
	case c.Classes < 0 || c.Classes > maxClasses:
		return bad("classes %d out of range [0, %d]", c.Classes, maxClasses)
	case c.Vocab < 0 || c.Vocab > maxVocab:
		return bad("vocabulary %d out of range [0, %d]", c.Vocab, maxVocab)
	}
	if c.Width == 0 {
		c.Width = 1
	}
	switch f.kind {
	case cnn:
		c.SeqLen, c.Layers, c.Vocab = 0, 0, 0
		if c.ImageSize == 0 {
			c.ImageSize = f.image
		}
		if c.Classes == 0 {
			c.Classes = 1000
		}
	case transformer:
		c.ImageSize = 0
		if c.SeqLen == 0 {
			c.SeqLen = 128
		}
		if c.Layers == 0 {
			c.Layers = f.layers
		}
		if c.Vocab == 0 {
			c.Vocab = f.vocab
		}
		if f.causal {
			c.Classes = c.Vocab
		} else if c.Classes == 0 {
			c.Classes = f.classes
		}
	}
	return c, nil
}

// ch scales a channel (or hidden) count by the width multiplier.
func (b *builder) ch(c int64) int64 {
	v := math.Round(float64(c) * b.cfg.Width)
	if v < 1 {
		failf("%s: width %g leaves %d channels with none", b.name, b.cfg.Width, c)
	}
	return int64(v)
}
