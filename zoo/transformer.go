package zoo

import (
	"math"

	"github.com/tsplit/tsplit/onnxpb"
)

// initStd is BERT's and GPT-2's initializer range; uniform weights use the
// bound with the same standard deviation.
const initStd = 0.02

var initBound = initStd * math.Sqrt(3)

// dims of a scaled Transformer.
type tdims struct {
	t, h, heads, d, ffn int64
	layers              int
}

func (b *builder) transformerDims() tdims {
	f := families[b.name]
	heads := max(int64(1), int64(math.Round(float64(f.heads)*b.cfg.Width)))
	h := b.ch(f.hidden)
	h = max(heads, int64(math.Round(float64(h)/float64(heads)))*heads)
	return tdims{t: b.cfg.SeqLen, h: h, heads: heads, d: h / heads, ffn: 4 * h, layers: b.cfg.Layers}
}

// linear is a torch Linear on [N, T, in]: MatMul with an [in, out] weight,
// then Add of the bias.
func (b *builder) linear(name, x string, in, out int64) string {
	w := b.uniform(name+".weight", []int64{in, out}, initBound)
	bias := b.uniform(name+".bias", []int64{out}, initBound)
	y := b.op("MatMul", name+"/matmul", []string{x, w})
	return b.op("Add", name+"/add", []string{y, bias})
}

func (b *builder) layerNorm(name, x string, h int64, eps float32) string {
	w := b.fill(name+".weight", []int64{h}, 1)
	bias := b.fill(name+".bias", []int64{h}, 0)
	return b.op("LayerNormalization", name, []string{x, w, bias}, aInt("axis", -1), aFloat("epsilon", eps))
}

// gelu is the exact GELU, 0.5·x·(1 + erf(x/√2)), as torch exports it.
func (b *builder) gelu(name, x string) string {
	y := b.op("Div", name+"/div", []string{x, b.float32s("const.sqrt2", nil, float32(math.Sqrt2))})
	y = b.op("Erf", name+"/erf", []string{y})
	y = b.op("Add", name+"/add", []string{y, b.float32s("const.one", nil, 1)})
	y = b.op("Mul", name+"/mul", []string{x, y})
	return b.op("Mul", name+"/mul_1", []string{y, b.float32s("const.half", nil, 0.5)})
}

// attention is multi-head self-attention on x [N, T, H] up to (and
// including) the output projection; mask, when not empty, is an additive
// [T, T] mask. q, k, v and o name the four projections; drop the dropout
// after the softmax.
func (b *builder) attention(p, x string, dm tdims, q, k, v, o, drop, mask string) string {
	split := b.shape(0, 0, dm.heads, dm.d)
	heads := func(name string, transposed bool, in string) string {
		y := b.op("Reshape", name+"/reshape", []string{in, split})
		if transposed { // K^T: [N, heads, d, T]
			return b.op("Transpose", name+"/transpose", []string{y}, aInts("perm", 0, 2, 3, 1))
		}
		return b.op("Transpose", name+"/transpose", []string{y}, aInts("perm", 0, 2, 1, 3))
	}
	qh := heads(q, false, b.linear(q, x, dm.h, dm.h))
	kh := heads(k, true, b.linear(k, x, dm.h, dm.h))
	vh := heads(v, false, b.linear(v, x, dm.h, dm.h))
	s := b.op("MatMul", p+"/matmul_qk", []string{qh, kh})
	s = b.op("Div", p+"/div", []string{s, b.float32s("const.sqrt_head_dim", nil, float32(math.Sqrt(float64(dm.d))))})
	if mask != "" {
		s = b.op("Add", p+"/add_mask", []string{s, mask})
	}
	s = b.op("Softmax", p+"/softmax", []string{s}, aInt("axis", -1))
	s = b.dropout(drop, s)
	c := b.op("MatMul", p+"/matmul_av", []string{s, vh})
	c = b.op("Transpose", p+"/transpose", []string{c}, aInts("perm", 0, 2, 1, 3))
	c = b.op("Reshape", p+"/reshape", []string{c, b.shape(0, 0, dm.h)})
	return b.linear(o, c, dm.h, dm.h)
}

// positionIDs is the int64 [1, T] constant 0..T-1.
func (b *builder) positionIDs(name string, t int64) string {
	ids := make([]int64, t)
	for i := range ids {
		ids[i] = int64(i)
	}
	return b.int64s(name, []int64{1, t}, ids...)
}

// buildBERT is HuggingFace's BertForSequenceClassification without the
// pooler: the classifier reads the first token's final hidden state.
func buildBERT(b *builder) {
	dm := b.transformerDims()
	const eps = 1e-12
	ids := b.input("input_ids", onnxpb.TensorProto_INT64, b.batchDim(), dm.t)
	word := b.op("Gather", "embeddings.word_embeddings",
		[]string{b.uniform("embeddings.word_embeddings.weight", []int64{b.cfg.Vocab, dm.h}, initBound), ids})
	pos := b.op("Gather", "embeddings.position_embeddings",
		[]string{b.uniform("embeddings.position_embeddings.weight", []int64{dm.t, dm.h}, initBound), b.positionIDs("embeddings.position_ids", dm.t)})
	typ := b.op("Gather", "embeddings.token_type_embeddings",
		[]string{b.uniform("embeddings.token_type_embeddings.weight", []int64{2, dm.h}, initBound), b.int64s("embeddings.token_type_ids", []int64{1, dm.t}, make([]int64, dm.t)...)})
	x := b.op("Add", "embeddings/add", []string{word, typ})
	x = b.op("Add", "embeddings/add_1", []string{x, pos})
	x = b.layerNorm("embeddings.LayerNorm", x, dm.h, eps)
	x = b.dropout("embeddings.dropout", x)
	for i := range dm.layers {
		p := "encoder.layer." + itoa(i)
		a := p + ".attention"
		y := b.attention(a+".self", x, dm, a+".self.query", a+".self.key", a+".self.value", a+".output.dense", a+".self.dropout", "")
		y = b.dropout(a+".output.dropout", y)
		y = b.op("Add", a+".output/add", []string{y, x})
		x = b.layerNorm(a+".output.LayerNorm", y, dm.h, eps)
		y = b.linear(p+".intermediate.dense", x, dm.h, dm.ffn)
		y = b.gelu(p+".intermediate.intermediate_act_fn", y)
		y = b.linear(p+".output.dense", y, dm.ffn, dm.h)
		y = b.dropout(p+".output.dropout", y)
		y = b.op("Add", p+".output/add", []string{y, x})
		x = b.layerNorm(p+".output.LayerNorm", y, dm.h, eps)
	}
	first := b.op("Gather", "first_token", []string{x, b.int64s("const.zero", []int64{}, 0)}, aInt("axis", 1))
	first = b.dropout("dropout", first)
	logits := b.gemm("classifier", first, dm.h, b.cfg.Classes, 3)
	b.output(logits, b.batchDim(), b.cfg.Classes)
}

// buildGPT is HuggingFace's GPT2LMHeadModel (erf GELU, separate Q/K/V
// projections, LM head tied to the token embedding).
func buildGPT(b *builder) {
	dm := b.transformerDims()
	const eps = 1e-5
	ids := b.input("input_ids", onnxpb.TensorProto_INT64, b.batchDim(), dm.t)
	wte := b.uniform("transformer.wte.weight", []int64{b.cfg.Vocab, dm.h}, initBound)
	tok := b.op("Gather", "transformer.wte", []string{wte, ids})
	pos := b.op("Gather", "transformer.wpe",
		[]string{b.uniform("transformer.wpe.weight", []int64{dm.t, dm.h}, initBound), b.positionIDs("transformer.position_ids", dm.t)})
	x := b.op("Add", "transformer/add", []string{tok, pos})
	x = b.dropout("transformer.drop", x)

	// Additive causal mask: -1e9·relu(key_pos - query_pos), [T, T].
	qpos := make([]float32, dm.t)
	for i := range qpos {
		qpos[i] = float32(i)
	}
	mask := b.op("Sub", "transformer.causal_mask/sub", []string{
		b.float32s("transformer.causal_mask.key_pos", []int64{1, dm.t}, qpos...),
		b.float32s("transformer.causal_mask.query_pos", []int64{dm.t, 1}, qpos...),
	})
	mask = b.op("Relu", "transformer.causal_mask/relu", []string{mask})
	mask = b.op("Mul", "transformer.causal_mask/mul", []string{mask, b.float32s("const.mask_value", nil, -1e9)})

	for i := range dm.layers {
		p := "transformer.h." + itoa(i)
		y := b.layerNorm(p+".ln_1", x, dm.h, eps)
		y = b.attention(p+".attn", y, dm, p+".attn.q_proj", p+".attn.k_proj", p+".attn.v_proj", p+".attn.c_proj", p+".attn.attn_dropout", mask)
		y = b.dropout(p+".attn.resid_dropout", y)
		x = b.op("Add", p+"/add", []string{x, y})
		y = b.layerNorm(p+".ln_2", x, dm.h, eps)
		y = b.linear(p+".mlp.c_fc", y, dm.h, dm.ffn)
		y = b.gelu(p+".mlp.act", y)
		y = b.linear(p+".mlp.c_proj", y, dm.ffn, dm.h)
		y = b.dropout(p+".mlp.dropout", y)
		x = b.op("Add", p+"/add_1", []string{x, y})
	}
	x = b.layerNorm("transformer.ln_f", x, dm.h, eps)
	head := b.op("Transpose", "lm_head/transpose", []string{wte}, aInts("perm", 1, 0))
	logits := b.op("MatMul", "lm_head", []string{x, head})
	b.output(logits, b.batchDim(), dm.t, b.cfg.Vocab)
}
