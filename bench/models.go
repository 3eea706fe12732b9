package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tsplit/tsplit/zoo"
)

// Model is one benchmark model: a zoo family under the name the
// benchmark uses, with the paper's numbers where the paper has the model.
type Model struct {
	// Name is the benchmark name (--models).
	Name string
	// Display is the name in tables ("VGG-16").
	Display string
	// Zoo is the zoo family built for it.
	Zoo string
	// Paper holds the paper's Table IV and Table V rows (nil: not in the
	// paper).
	Paper *PaperRow
}

// PaperRow is one model's row of the paper's Tables IV and V (24 GB TITAN
// RTX), by the paper's column; -1 marks an "x" (the policy cannot apply).
type PaperRow struct {
	SampleScale map[string]int64
	ParamScale  map[string]int64
}

// paperColumns are the policies of the paper's Tables IV and V, named as
// this repository's policies.
var paperColumns = []string{"base", "vdnn-conv", "vdnn-all", "checkpoint", "superneurons", "tsplit"}

func paperRow(sample, param [6]int64) *PaperRow {
	r := &PaperRow{SampleScale: map[string]int64{}, ParamScale: map[string]int64{}}
	for i, p := range paperColumns {
		r.SampleScale[p] = sample[i]
		r.ParamScale[p] = param[i]
	}
	return r
}

// models are the benchmark's models: the six of the paper's Tables IV
// and V, then the other zoo families under their own names.
//
// The paper's "Transformer" (trained on IWSLT 2016) is the original
// encoder–decoder Transformer; the zoo has no decoder, so the benchmark
// uses its closest encoder stack, BERT-base (12 layers, hidden 768, 12
// heads, 128 tokens): the same self-attention + FFN layer, scaled along
// the same two axes (sentences per batch, hidden size × k).
var models = []Model{
	{"vgg16", "VGG-16", "vgg16", paperRow([6]int64{67, 176, 413, 316, 462, 661}, [6]int64{4, 10, 25, 19, 28, 40})},
	{"vgg19", "VGG-19", "vgg19", paperRow([6]int64{61, 164, 411, 293, 441, 661}, [6]int64{3, 10, 25, 18, 27, 40})},
	{"resnet50", "ResNet-50", "resnet50", paperRow([6]int64{76, 201, 783, 192, 591, 1278}, [6]int64{4, 12, 48, 12, 36, 79})},
	{"resnet101", "ResNet-101", "resnet101", paperRow([6]int64{51, 138, 783, 124, 361, 1096}, [6]int64{3, 8, 48, 7, 22, 68})},
	{"inception", "InceptionV4", "inception", paperRow([6]int64{36, 131, 864, 220, 882, 1372}, [6]int64{2, 8, 54, 13, 55, 23})},
	{"transformer", "Transformer (BERT-base)", "bert-base", paperRow([6]int64{62, -1, 452, 117, -1, 730}, [6]int64{3, -1, 18, 5, -1, 30})},
}

// DefaultModels are the paper's six models.
func DefaultModels() []string {
	var out []string
	for _, m := range models {
		out = append(out, m.Name)
	}
	return out
}

// LookupModel returns a benchmark model by name: one of DefaultModels,
// or any zoo family under its zoo name.
func LookupModel(name string) (Model, error) {
	for _, m := range models {
		if m.Name == name {
			return m, nil
		}
	}
	if slices.Contains(zoo.Names(), name) {
		return Model{Name: name, Display: name, Zoo: name}, nil
	}
	return Model{}, fmt.Errorf("bench: unknown model %q (known: %s, or a zoo family: %s)", name,
		strings.Join(DefaultModels(), ", "), strings.Join(zoo.Names(), ", "))
}

// defaultPolicyOrder is the order of the table columns: the baselines as
// the paper lists them, then the later baselines, then tsplit without
// and with split. Policies registered under other names follow in
// alphabetical order; names here that are not registered are skipped.
var defaultPolicyOrder = []string{"base", "vdnn-conv", "vdnn-all", "checkpoint", "superneurons", "capuchin", "modnn", "tflms", "tsplit-nosplit", "tsplit"}

// OrderPolicies puts registered policy names in the table order.
func OrderPolicies(registered []string) []string {
	var out []string
	for _, p := range defaultPolicyOrder {
		if slices.Contains(registered, p) {
			out = append(out, p)
		}
	}
	rest := []string{}
	for _, p := range registered {
		if !slices.Contains(defaultPolicyOrder, p) {
			rest = append(rest, p)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
