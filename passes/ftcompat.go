package passes

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/tsplit/tsplit/ir"
)

// FT-compatibility: along which dimensions an op can be split into
// micro-ops (TSPLIT §IV-B "Split"; the FT-compatible operators of
// Fused-Tiled training, SFT §4.1.1).
//
// An op is FT-compatible along a dimension of its output when a slice
// [lo, hi) of the output along that dimension can be computed from
// slices of its inputs: for each input, either one input dimension
// follows the split through an affine map with a halo,
//
//	in_start = σ·lo − δlo          in_end = σ·(hi−1) + 1 + δhi
//
// (clamped to the input; what falls outside is the op's padding), or the
// input is read whole (a weight when splitting the batch). This is SFT's
// i.size = σ·T + δ with δ = δlo + δhi + 1 − σ, in ranges rather than
// sizes, so that stride and begin padding say where a tile starts. The
// micro-outputs are concatenated along the split dimension. A second
// kind of split cuts a dimension the op contracts or reduces (MatMul's K,
// Conv's input channels, a ReduceSum axis): every micro-op then produces
// a partial output of the full shape and the partials add ("sum" merge).
//
// Sliding windows (Conv, MaxPool, AveragePool, LpPool) along spatial
// dimension d with kernel k, dilation r, stride s and resolved pads
// (pb, pe), effective kernel ek = (k−1)·r + 1: output position o reads
// input positions o·s − pb … o·s − pb + ek − 1, so
//
//	σ = s, δlo = pb, δhi = ek − 1 − pb
//	in_start = s·lo − pb,  in_end = s·(hi−1) − pb + ek   (before clamping)
//
// and the micro-op pads with PadLo' = max(0, pb − s·lo) and
// PadHi' = max(0, in_end − in) (InputMap.Range), so that its padded
// input spans exactly s·(hi−lo−1) + ek positions and it computes hi−lo
// outputs under floor or ceil mode alike. PadHi' exceeds pe only for the
// last window of a ceil_mode pool that runs past the end padding; there
// the extra padding changes nothing (MaxPool ignores it, LpPool adds
// zeros, AveragePool without count_include_pad divides by the input
// taps), except for AveragePool with count_include_pad, whose split of
// such a dimension is not claimed. A window split is claimed only when
// both pads are smaller than ek, so every window overlaps the input and
// no micro-input is empty.
//
// Each split is labelled, following TSPLIT Fig. 6, a sample split
// (batch, sequence length, height, width) or a parameter split
// (channels, hidden size, heads). The label is not a property of the op
// alone (an elementwise op on [N, C, H, W] does not know which dimension
// is a channel), so the analysis propagates it: every dimension of a
// weight (a floating-point initializer, or an input the model lists as a
// parameter) is a parameter dimension; an op's output dimension is a
// parameter dimension when an input dimension that follows it is one.

// SplitKind labels a split (TSPLIT Fig. 6).
type SplitKind string

// Split kinds.
const (
	SampleSplit    SplitKind = "sample"    // batch, sequence length, height, width
	ParameterSplit SplitKind = "parameter" // channels, hidden size, heads
)

// Merge says how the micro-outputs recombine.
type Merge string

// Merges.
const (
	// MergeConcat concatenates the micro-outputs along the split
	// dimension of each output.
	MergeConcat Merge = "concat"
	// MergeSum adds the micro-outputs, each of the full output shape: the
	// split cuts a contracted or reduced dimension.
	MergeSum Merge = "sum"
)

// Rewrite says what a micro-op changes besides reading input slices.
type Rewrite string

// Rewrites.
const (
	// RewriteNone: the micro-op is the op with the same attributes and
	// the same non-split inputs.
	RewriteNone Rewrite = ""
	// RewritePads: a sliding-window split. The micro-op takes explicit
	// pads (auto_pad dropped): the op's resolved pads (ir.WindowOf),
	// except on the split spatial dimension, which gets input 0's
	// Range.PadLo and Range.PadHi. Other attributes, ceil_mode included,
	// stay.
	RewritePads Rewrite = "pads"
	// RewriteShape: a Reshape or Expand whose shape input (input 1)
	// becomes the micro-output's shape.
	RewriteShape Rewrite = "shape"
	// RewriteGroup: a depthwise Conv (one output channel per group) split
	// along its channels; the micro-op's group is its channel count hi−lo.
	RewriteGroup Rewrite = "group"
)

// InputMap says which part of one input a micro-op reads.
type InputMap struct {
	// Dim is the input dimension that follows the split; -1: the input
	// is read whole (or is absent).
	Dim int
	// Scale is σ: an output step moves Scale input positions.
	Scale int64
	// HaloLo and HaloHi are δlo and δhi: the input range of output range
	// [lo, hi) is [Scale·lo − HaloLo, Scale·(hi−1) + 1 + HaloHi).
	HaloLo, HaloHi int64
	// PadLo and PadHi bound a micro-op's padding on Dim (sliding
	// windows): the op's pads, the end one extended by how far the last
	// window of a ceil_mode pool runs past it.
	PadLo, PadHi int64
	// Once marks, in a sum merge, an additive input (a bias) that only
	// the first micro-op reads; the others leave it out.
	Once bool
}

// Whole reports whether the input is read whole.
func (m InputMap) Whole() bool { return m.Dim < 0 }

// Range is the part of one input dimension a micro-op reads: elements
// [Start, End), and PadLo and PadHi positions of padding the micro-op
// adds before and after them.
type Range struct {
	Start, End   int64
	PadLo, PadHi int64
}

// Range returns what output range [lo, hi) of the split dimension reads
// of an input dimension of extent size. A whole input reads [0, size).
func (m InputMap) Range(lo, hi, size int64) Range {
	if m.Dim < 0 {
		return Range{Start: 0, End: size}
	}
	a := m.Scale*lo - m.HaloLo
	b := m.Scale*(hi-1) + 1 + m.HaloHi
	r := Range{Start: min(max(a, 0), size), End: min(max(b, 0), size)}
	r.PadLo = min(max(0, -a), m.PadLo)
	r.PadHi = min(max(0, b-size), m.PadHi)
	return r
}

// OutputMap says how one output of the op is split.
type OutputMap struct {
	// Dim is the output dimension that follows the split (concat merge);
	// -1 for an absent output, and for every output of a sum merge.
	Dim int
	// IndexStride, when not 0, marks an output of flat indices into input
	// 0 (MaxPool's Indices): a micro-op's indices count from the start of
	// its input slice, so the merge adds Start·IndexStride, Start being
	// where the micro-op's input 0 range begins.
	IndexStride int64
}

// DimMap is one way to split an op.
type DimMap struct {
	// OutDim is the dimension of output 0 being split; -1 for a sum
	// merge (the split dimension is contracted and not in the output).
	OutDim int
	// Extent is the size of the split dimension: output 0's extent on
	// OutDim, or the contracted extent of a sum merge.
	Extent int64
	Kind   SplitKind
	Merge  Merge
	// Inputs has one entry per op input (absent inputs: read whole).
	Inputs []InputMap
	// Outputs has one entry per op output.
	Outputs []OutputMap
	// Rewrite is what the micro-op changes besides its inputs.
	Rewrite Rewrite
	// Random marks a Dropout in training mode: micro-ops draw a mask of
	// the same distribution as, but not equal to, the whole op's slice;
	// their mask outputs are merged like Y, so the backward pass, which
	// reads the mask, stays consistent. A recomputed micro-op must redraw
	// exactly its own mask (same node name and step).
	Random bool
}

// InputDims lists, per input, the dimension that follows the split (-1:
// whole).
func (m *DimMap) InputDims() []int {
	out := make([]int, len(m.Inputs))
	for i, in := range m.Inputs {
		out[i] = in.Dim
	}
	return out
}

// Simple reports whether the split is a plain slicing of output 0 and
// of the following inputs, at the same positions: one output,
// concatenation, σ = 1, no halo, no rewrite, nothing random.
func (m *DimMap) Simple() bool {
	if m.Merge != MergeConcat || m.Rewrite != RewriteNone || m.Random || len(m.Outputs) != 1 {
		return false
	}
	for _, in := range m.Inputs {
		if in.Dim >= 0 && (in.Scale != 1 || in.HaloLo != 0 || in.HaloHi != 0) {
			return false
		}
	}
	return true
}

// Parts cuts [0, n) into p contiguous ranges whose sizes differ by at
// most one, the larger ones first: the micro-tensors of a p-way split.
func Parts(n int64, p int) [][2]int64 {
	return AppendParts(nil, n, p)
}

// AppendParts appends Parts(n, p) to dst: a caller that asks for the
// parts of many splits (the planner's cost of each candidate split)
// reuses one buffer.
func AppendParts(dst [][2]int64, n int64, p int) [][2]int64 {
	lo := int64(0)
	for k := 0; k < p && lo < n; k++ {
		hi := lo + (n-lo+int64(p-k)-1)/int64(p-k)
		dst = append(dst, [2]int64{lo, hi})
		lo = hi
	}
	return dst
}

// MicroAttrs returns the attributes of the micro-op of op computing
// [lo, hi) of the split dimension: op's own, changed as the split's
// Rewrite says (explicit pads for a sliding-window split, the group count
// of a depthwise channel split).
func (m *DimMap) MicroAttrs(op *ir.Op, lo, hi int64) ([]ir.Attr, error) {
	attrs := append([]ir.Attr(nil), op.Attrs...)
	set := func(a ir.Attr) {
		for i := range attrs {
			if attrs[i].Name == a.Name {
				attrs[i] = a
				return
			}
		}
		attrs = append(attrs, a)
	}
	switch m.Rewrite {
	case RewritePads:
		win, err := ir.WindowOf(op)
		if err != nil {
			return nil, err
		}
		n := len(win.Kernel)
		sd := m.OutDim - 2
		if sd < 0 || sd >= n {
			return nil, fmt.Errorf("ftcompat: %s: split dimension %d is not spatial", op.Describe(), m.OutDim)
		}
		pads := append([]int64(nil), win.Pads...)
		x := op.Input(0)
		r := m.Inputs[0].Range(lo, hi, x.Shape[m.Inputs[0].Dim])
		pads[sd], pads[sd+n] = r.PadLo, r.PadHi
		kept := attrs[:0]
		for _, a := range attrs {
			if a.Name != "auto_pad" {
				kept = append(kept, a)
			}
		}
		attrs = kept
		set(ir.Attr{Name: "pads", Type: ir.AttrInts, Ints: pads})
	case RewriteGroup:
		set(ir.Attr{Name: "group", Type: ir.AttrInt, Int: hi - lo})
	}
	return attrs, nil
}

// MicroShape is the shape of output 0 of the micro-op computing [lo, hi)
// of a concat split: what a RewriteShape micro-op's shape input says.
func (m *DimMap) MicroShape(op *ir.Op, lo, hi int64) ir.Shape {
	s := op.Output(0).Shape.Clone()
	if m.OutDim >= 0 {
		s[m.OutDim] = hi - lo
	}
	return s
}

// FTResult is the FT-compatibility of every op.
type FTResult struct {
	// ByOp lists the splits of each op, indexed by ir.OpID: the concat
	// splits in increasing OutDim, then the sum splits. An op missing
	// from the table, or a dimension missing from its list, cannot be
	// split. Dimensions of extent 1 are never listed.
	ByOp [][]DimMap
}

// Of returns the splits of op.
func (r *FTResult) Of(op *ir.Op) []DimMap {
	if r == nil || int(op.ID) >= len(r.ByOp) {
		return nil
	}
	return r.ByOp[op.ID]
}

// Along returns the concat split of op along dimension d of its output
// 0, if there is one.
func (r *FTResult) Along(op *ir.Op, d int) (DimMap, bool) {
	for _, m := range r.Of(op) {
		if m.Merge == MergeConcat && m.OutDim == d {
			return m, true
		}
	}
	return DimMap{}, false
}

// FTCompat is the FT-compatibility analysis: an *FTResult.
var FTCompat = &Pass{
	Name: "ftcompat",
	Doc:  "find the dimensions along which each op splits into micro-ops (FT-compatible dimensions, σ/δ maps)",
	Run: func(s *State) (any, error) {
		return AnalyzeFT(s.Model), nil
	},
}

// AnalyzeFT computes the FT-compatibility of every op of m.
func AnalyzeFT(m *ir.Model) *FTResult { return (*FTCache)(nil).analyze(m) }

// FTCache keeps each op's split maps from one planning round to the
// next. A round rewrites a few ops (splits replace them, swaps and
// recomputes rewire a consumer's input), and an op's maps depend only on
// the op and the values it reads and writes, so an op whose inputs and
// outputs are the values they were keeps its maps. Recomputing them for
// every op every round was a quarter of a plan's time. The parameter
// labels (SampleSplit or ParameterSplit) are global and are derived
// afresh each time. The zero value is empty; a nil *FTCache keeps
// nothing.
type FTCache struct {
	mu sync.Mutex
	// ops is indexed by OpID (IDs are dense); an entry holds for the op
	// it names only (op), as a map keyed by the op would.
	ops []ftEntry
	// slab is where entries' value lists are cut from: one allocation
	// for many ops (each fork's first round fills an entry per op).
	slab []*ir.Value
	// shared is what the forks of one root state have mapped (Fork): a
	// search plans many copies of one graph, and each copy's first round
	// used to map every op again (tsplit's search on BERT-large: a
	// quarter of its planning).
	shared *ftShared
}

type ftEntry struct {
	op     *ir.Op
	values []*ir.Value // the op's inputs, then its outputs, when mapped
	maps   []DimMap
	// shared: maps is the shared store's (ftShared.get), which no one
	// writes: analyze copies it before setting a Kind that differs.
	shared bool
	// put: maps was made here for the shared store, which analyze gives
	// it once the Kinds are set (so that other copies, whose labels give
	// the same Kinds, need not copy it).
	put bool
}

// ftShared keeps op maps across copies of a graph, by op ID: ir.Graph
// clones keep the IDs of ops and values. An entry holds for an op of
// another copy only where that op has the same name and type and reads
// and writes values of the same IDs, types and shapes — what the maps
// are a function of. Only ops and values of the graph the copies were
// taken from (IDs below ops and values) are shared: two copies number
// what they insert from the same next ID, so an inserted op of one copy
// can match another copy's in name, IDs and shapes while its attributes
// or constant inputs (a Slice's bounds) differ.
type ftShared struct {
	mu       sync.Mutex
	ops      []ftSharedEntry // by OpID, below opIDs
	opIDs    ir.OpID         // ops with a smaller ID are the source graph's
	valueIDs ir.ValueID      // likewise for values
}

// newFTShared shares the maps of the ops of m's graph, the source of the
// copies a search plans.
func newFTShared(m *ir.Model) *ftShared {
	return &ftShared{opIDs: ir.OpID(m.Graph.NumOpIDs()), valueIDs: ir.ValueID(m.Graph.NumValueIDs())}
}

type ftSharedEntry struct {
	set               bool
	name, typ, domain string
	values            []ftValueKey
	maps              []DimMap
}

type ftValueKey struct {
	id    ir.ValueID
	dtype ir.DType
	shape ir.Shape
}

func ftKeys(op *ir.Op) []ftValueKey {
	var out []ftValueKey
	for _, list := range [][]*ir.Value{op.Inputs(), op.Outputs()} {
		for _, v := range list {
			if v == nil {
				out = append(out, ftValueKey{id: -1})
				continue
			}
			out = append(out, ftValueKey{id: v.ID, dtype: v.DType, shape: v.Shape})
		}
	}
	return out
}

// get returns op's maps where another copy of the graph mapped the same
// op, read only (ftEntry.shared). It compares op's values with the entry's keys in place (ftKeys of op,
// without building them: every fork's first round asks for every op).
func (sh *ftShared) get(op *ir.Op) ([]DimMap, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if int(op.ID) >= len(sh.ops) {
		return nil, false
	}
	e := &sh.ops[op.ID]
	ins, outs := op.Inputs(), op.Outputs()
	if !e.set || e.name != op.Name || e.typ != op.Type || e.domain != op.Domain || len(e.values) != len(ins)+len(outs) {
		return nil, false
	}
	for i, k := range e.values {
		var v *ir.Value
		if i < len(ins) {
			v = ins[i]
		} else {
			v = outs[i-len(ins)]
		}
		if v == nil {
			if k.id != -1 {
				return nil, false
			}
			continue
		}
		if k.id != v.ID || k.dtype != v.DType || !k.shape.Equal(v.Shape) {
			return nil, false
		}
	}
	return e.maps, true
}

// sourceOp says op and the values it reads and writes are the source
// graph's.
func (sh *ftShared) sourceOp(op *ir.Op) bool {
	if op.ID >= sh.opIDs {
		return false
	}
	for _, list := range [][]*ir.Value{op.Inputs(), op.Outputs()} {
		for _, v := range list {
			if v != nil && v.ID >= sh.valueIDs {
				return false
			}
		}
	}
	return true
}

func (sh *ftShared) put(op *ir.Op, keys []ftValueKey, maps []DimMap) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if int(op.ID) >= len(sh.ops) {
		sh.ops = append(sh.ops, make([]ftSharedEntry, int(sh.opIDs)-len(sh.ops))...)
	}
	sh.ops[op.ID] = ftSharedEntry{set: true, name: op.Name, typ: op.Type, domain: op.Domain, values: keys, maps: slices.Clone(maps)}
}

// maps returns op's valid split maps (ftMaps, ftValid), from the cache
// when op still reads and writes the values it did. A cached slice is
// the cache's: analyze sets its Kinds only through own, which copies a
// slice of the shared store first, and one state's rounds analyze one
// at a time.
func (c *FTCache) maps(op *ir.Op, opset int64) []DimMap {
	if c == nil {
		return ftValid(op, ftMaps(op, opset))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ins, outs := op.Inputs(), op.Outputs()
	id := int(op.ID)
	if id < len(c.ops) {
		if e := &c.ops[id]; e.op == op && len(e.values) == len(ins)+len(outs) &&
			slices.Equal(e.values[:len(ins)], ins) && slices.Equal(e.values[len(ins):], outs) {
			return e.maps
		}
	}
	k := len(ins) + len(outs)
	if len(c.slab) < k {
		c.slab = make([]*ir.Value, max(k, 4096))
	}
	e := ftEntry{op: op, values: c.slab[:0:k]}
	c.slab = c.slab[k:]
	e.values = append(append(e.values, ins...), outs...)
	if c.shared != nil && c.shared.sourceOp(op) {
		var ok bool
		if e.maps, ok = c.shared.get(op); !ok {
			e.maps, e.put = ftValid(op, ftMaps(op, opset)), true
		}
		e.shared = ok
	} else {
		e.maps = ftValid(op, ftMaps(op, opset))
	}
	if n := len(c.ops); id >= n {
		c.ops = slices.Grow(c.ops, id+1-n)[:id+1]
		clear(c.ops[n:])
	}
	c.ops[id] = e
	return e.maps
}

// own returns op's cached maps, which analyze may write: a copy where
// they are the shared store's (the entry keeps the copy).
func (c *FTCache) own(op *ir.Op, maps []DimMap) []DimMap {
	if c == nil {
		return maps // made for this analysis
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.ops[op.ID]
	if e.shared {
		e.maps, e.shared = slices.Clone(e.maps), false
	}
	return e.maps
}

// share gives the shared store op's maps where this cache made them
// for it (ftEntry.put), once analyze has set their Kinds.
func (c *FTCache) share(op *ir.Op) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := &c.ops[op.ID]; e.put {
		c.shared.put(op, ftKeys(op), e.maps)
		e.put = false
	}
}

func (c *FTCache) analyze(m *ir.Model) *FTResult {
	g := m.Graph
	res := &FTResult{ByOp: make([][]DimMap, g.NumOpIDs())}
	labels := make([][]bool, g.NumValueIDs()) // parameter dimensions, by ValueID
	params := map[string]bool{}
	if names := m.Meta[ir.ParamInputsKey]; names != "" {
		for _, n := range strings.Split(names, ",") {
			params[n] = true
		}
	}
	seed := func(v *ir.Value) {
		if v == nil || labels[v.ID] != nil {
			return
		}
		l := make([]bool, len(v.Shape))
		if v.DType.IsFloat() && (v.Kind == ir.KindInit || params[v.Name]) {
			for i := range l {
				l[i] = true
			}
		}
		labels[v.ID] = l
	}
	for _, v := range g.Inputs {
		seed(v)
	}
	for _, v := range g.Inits {
		seed(v)
	}
	label := func(v *ir.Value, d int) bool {
		if v == nil || d < 0 {
			return false
		}
		seed(v)
		l := labels[v.ID]
		return d < len(l) && l[d]
	}
	for _, op := range g.Order() {
		maps := c.maps(op, m.Opset(op.Domain))
		for i := range maps {
			kind := SampleSplit
			for j, in := range maps[i].Inputs {
				if in.Dim >= 0 && label(op.Input(j), in.Dim) {
					kind = ParameterSplit
				}
			}
			if maps[i].Kind != kind {
				maps = c.own(op, maps)
				maps[i].Kind = kind
			}
		}
		c.share(op)
		if len(maps) > 0 {
			res.ByOp[op.ID] = maps
		}
		for k, v := range op.Outputs() {
			if v == nil {
				continue
			}
			l := make([]bool, len(v.Shape))
			done := make([]bool, len(v.Shape))
			for _, dm := range maps {
				if dm.Merge != MergeConcat || k >= len(dm.Outputs) {
					continue
				}
				if d := dm.Outputs[k].Dim; d >= 0 && d < len(l) {
					l[d], done[d] = dm.Kind == ParameterSplit, true
				}
			}
			x := op.Input(0)
			grp := ftReshapeGroups(op)
			for d := range l {
				switch {
				case done[d]:
				case grp != nil && k == 0:
					for _, gr := range grp {
						if ftContains(gr.out, d) {
							for _, i := range gr.in {
								l[d] = l[d] || label(x, i)
							}
						}
					}
				case x != nil && len(x.Shape) == len(v.Shape) && x.Shape[d] == v.Shape[d]:
					l[d] = label(x, d)
				}
			}
			labels[v.ID] = l
		}
	}
	return res
}

// ftValid drops splits that cannot be used or would not be sound: a
// dimension of extent < 2, an input map outside its input's rank, an op
// with dynamic shapes.
func ftValid(op *ir.Op, maps []DimMap) []DimMap {
	for _, v := range append(append([]*ir.Value{}, op.Inputs()...), op.Outputs()...) {
		if v == nil {
			continue
		}
		for _, d := range v.Shape {
			if d < 0 {
				return nil
			}
		}
	}
	out := maps[:0]
next:
	for _, dm := range maps {
		if dm.Extent < 2 || len(dm.Inputs) != len(op.Inputs()) || len(dm.Outputs) != len(op.Outputs()) {
			continue
		}
		for j, in := range dm.Inputs {
			x := op.Input(j)
			if in.Dim >= 0 && (x == nil || in.Dim >= len(x.Shape) || in.Scale <= 0) {
				continue next
			}
		}
		for k, o := range dm.Outputs {
			y := op.Output(k)
			if y == nil {
				if o.Dim >= 0 {
					continue next
				}
				continue
			}
			if o.Dim >= len(y.Shape) {
				continue next
			}
			if dm.Merge == MergeConcat && (o.Dim < 0 || y.Shape[o.Dim] != dm.Extent) {
				continue next
			}
		}
		out = append(out, dm)
	}
	return out
}

// ftBuilder accumulates the splits of one op.
type ftBuilder struct {
	op    *ir.Op
	opset int64 // of the op's domain in its model
	maps  []DimMap
}

// concat starts a concat split along output dimension d, every input
// whole and every output following d.
func (b *ftBuilder) concat(d int) *DimMap {
	y := b.op.Output(0)
	if y == nil || d < 0 || d >= len(y.Shape) {
		return &DimMap{} // not recorded: edits to it go nowhere
	}
	dm := DimMap{OutDim: d, Extent: y.Shape[d], Merge: MergeConcat,
		Inputs: make([]InputMap, len(b.op.Inputs())), Outputs: make([]OutputMap, len(b.op.Outputs()))}
	for j := range dm.Inputs {
		dm.Inputs[j] = InputMap{Dim: -1}
	}
	for k, v := range b.op.Outputs() {
		dm.Outputs[k] = OutputMap{Dim: -1}
		if v != nil {
			dm.Outputs[k].Dim = d
		}
	}
	b.maps = append(b.maps, dm)
	return &b.maps[len(b.maps)-1]
}

// sum starts a sum split of a contracted dimension of extent n.
func (b *ftBuilder) sum(n int64) *DimMap {
	dm := DimMap{OutDim: -1, Extent: n, Merge: MergeSum,
		Inputs: make([]InputMap, len(b.op.Inputs())), Outputs: make([]OutputMap, len(b.op.Outputs()))}
	for j := range dm.Inputs {
		dm.Inputs[j] = InputMap{Dim: -1}
	}
	for k := range dm.Outputs {
		dm.Outputs[k] = OutputMap{Dim: -1}
	}
	b.maps = append(b.maps, dm)
	return &b.maps[len(b.maps)-1]
}

// follow is an input dimension that follows the split one to one.
func ftFollow(d int) InputMap { return InputMap{Dim: d, Scale: 1} }

// elementwise adds a split along every output dimension of a
// multidirectionally broadcasting op: an input follows where its
// (right-aligned) extent equals the output's, and is read whole where
// it is 1 or absent. Inputs listed in skip are always read whole.
func (b *ftBuilder) elementwise(skip ...int) {
	y := b.op.Output(0)
	r := len(y.Shape)
	for d := 0; d < r; d++ {
		dm := b.concat(d)
		for j, x := range b.op.Inputs() {
			if x == nil || ftContains(skip, j) {
				continue
			}
			e := d - (r - len(x.Shape))
			if e >= 0 && x.Shape[e] == y.Shape[d] {
				dm.Inputs[j] = ftFollow(e)
			}
		}
	}
}

// splitRule is an op's entry in the op registry's split slot (the
// FT-compatibility rule of the op, cf. MLIR's TilingInterface): it adds
// the op's candidate splits to a builder. reshape marks the row-major
// reshapes, whose output dimensions take their sample/parameter labels
// from groups of input dimensions (ftReshapeGroups) rather than one to
// one.
type splitRule struct {
	maps    func(b *ftBuilder)
	reshape bool
}

// splitRules is the split slot. Rules are registered per op in
// ftcompat_rules.go; elementwise ops (ir.Schema.Elementwise) share the
// slot's declared default, a split along every dimension.
var splitRules = ir.NewSlot[splitRule]("split")

func init() {
	splitRules.Derive("elementwise: every dimension, inputs following where their broadcast extent matches",
		func(s *ir.Schema) (splitRule, bool) {
			return splitRule{maps: func(b *ftBuilder) { b.elementwise() }}, s.Elementwise
		})
}

// ftMaps lists the candidate splits of op (before validation and
// labelling): its split rule's. Ops without one have none.
func ftMaps(op *ir.Op, opset int64) []DimMap {
	r, ok := splitRules.Of(op)
	if !ok || op.Output(0) == nil || op.Input(0) == nil {
		return nil
	}
	b := &ftBuilder{op: op, opset: opset}
	r.maps(b)
	return b.maps
}

// dropout: every dimension; the mask (output 1) is split like Y.
func (b *ftBuilder) dropout() {
	op := b.op
	random := false
	if t := op.Input(2); t != nil {
		c := ftConstInts(t)
		random = c == nil || c[0] != 0
		if r := op.Input(1); r != nil {
			if rt, _ := r.Data(); rt != nil && rt.Len() == 1 && rt.Float64s()[0] == 0 {
				random = false
			}
		}
	}
	for d := range op.Output(0).Shape {
		dm := b.concat(d)
		dm.Inputs[0] = ftFollow(d)
		dm.Random = random
	}
}

// conv: batch (sample, σ = 1), output channels (the weight follows its
// dimension 0, the bias too), spatial dimensions (sliding window), and,
// for group 1, the input channels as a sum.
func (b *ftBuilder) conv() {
	op := b.op
	x, w := op.Input(0), op.Input(1)
	if w == nil || len(w.Shape) != len(x.Shape) {
		return
	}
	group := op.AttrInt("group", 1)
	m, c := w.Shape[0], x.Shape[1]
	b.concat(0).Inputs[0] = ftFollow(0)
	switch {
	case group == 1:
		dm := b.concat(1)
		dm.Inputs[1] = ftFollow(0)
		if op.Input(2) != nil {
			dm.Inputs[2] = ftFollow(0)
		}
	case group == m && c%group == 0:
		// Depthwise: output channel o reads input channels
		// [o·C/g, (o+1)·C/g) and weight row o.
		k := c / group
		dm := b.concat(1)
		dm.Inputs[0] = InputMap{Dim: 1, Scale: k, HaloHi: k - 1}
		dm.Inputs[1] = ftFollow(0)
		if op.Input(2) != nil {
			dm.Inputs[2] = ftFollow(0)
		}
		dm.Rewrite = RewriteGroup
	}
	b.window()
	if group == 1 {
		dm := b.sum(c)
		dm.Inputs[0], dm.Inputs[1] = ftFollow(1), ftFollow(1)
		if op.Input(2) != nil {
			dm.Inputs[2].Once = true
		}
	}
}

// window adds the spatial splits of a Conv or pool.
func (b *ftBuilder) window() {
	win, err := ir.WindowOf(b.op)
	if err != nil {
		return
	}
	x, y := b.op.Input(0), b.op.Output(0)
	n := len(win.Kernel)
	if len(x.Shape) != n+2 || len(y.Shape) != n+2 {
		return
	}
	countPad := b.op.Type == "AveragePool" && b.op.AttrInt("count_include_pad", 0) != 0
	for i := 0; i < n; i++ {
		d := 2 + i
		s, ek := win.Strides[i], (win.Kernel[i]-1)*win.Dilations[i]+1
		pb, pe := win.Pads[i], win.Pads[i+n]
		if pb >= ek || pe >= ek {
			continue // windows lying wholly in the padding: not claimed
		}
		// Under ceil_mode the last window may run past the end padding:
		// the micro-op pads that far, which changes nothing for a max,
		// a sum of zeros, or an average over the input taps, but would
		// count for AveragePool's count_include_pad.
		over := (y.Shape[d]-1)*s - pb + ek - x.Shape[d]
		if over > pe && countPad {
			continue
		}
		dm := b.concat(d)
		dm.Inputs[0] = InputMap{Dim: d, Scale: s, HaloLo: pb, HaloHi: ek - 1 - pb, PadLo: pb, PadHi: max(pe, over)}
		dm.Rewrite = RewritePads
	}
}

// pool: batch and channels, and the spatial dimensions. With MaxPool's
// Indices output (flat indices into the whole input) only a leading
// dimension splits, the indices shifted by the start of the slice.
func (b *ftBuilder) pool() {
	op, x := b.op, b.op.Input(0)
	if op.Output(1) == nil {
		b.concat(0).Inputs[0] = ftFollow(0)
		b.concat(1).Inputs[0] = ftFollow(1)
		b.window()
		return
	}
	for d := 0; d < 2; d++ {
		if d == 1 && x.Shape[0] != 1 {
			break
		}
		stride := int64(1)
		for _, e := range x.Shape[d+1:] {
			stride *= e
		}
		dm := b.concat(d)
		dm.Inputs[0] = ftFollow(d)
		dm.Outputs[1].IndexStride = stride
	}
}

// convTranspose: batch, and for group 1 the output channels (W is
// [C, M/g, k...]: it follows its dimension 1) and the input channels as
// a sum.
func (b *ftBuilder) convTranspose() {
	op := b.op
	x, w := op.Input(0), op.Input(1)
	if w == nil || len(w.Shape) != len(x.Shape) {
		return
	}
	b.concat(0).Inputs[0] = ftFollow(0)
	if op.AttrInt("group", 1) != 1 {
		return
	}
	dm := b.concat(1)
	dm.Inputs[1] = ftFollow(1)
	if op.Input(2) != nil {
		dm.Inputs[2] = ftFollow(0)
	}
	dm = b.sum(x.Shape[1])
	dm.Inputs[0], dm.Inputs[1] = ftFollow(1), ftFollow(0)
	if op.Input(2) != nil {
		dm.Inputs[2].Once = true
	}
}

// batchNorm: channels (X follows dimension 1, scale, B, mean and var
// their dimension 0, the running statistics outputs theirs). Training
// mode normalises with statistics over the whole batch and the spatial
// dimensions, so only the channels split; inference mode is a
// per-channel affine map, so every dimension does.
func (b *ftBuilder) batchNorm() {
	op, x := b.op, b.op.Input(0)
	training := ir.BatchNormTraining(op)
	for d := range x.Shape {
		if d != 1 && training {
			continue
		}
		dm := b.concat(d)
		dm.Inputs[0] = ftFollow(d)
		if d == 1 {
			for j := 1; j < len(dm.Inputs); j++ {
				dm.Inputs[j] = ftFollow(0)
			}
			for k := 1; k < len(dm.Outputs); k++ {
				if op.Output(k) != nil {
					dm.Outputs[k].Dim = 0
				}
			}
		} else {
			for k := 1; k < len(dm.Outputs); k++ {
				dm.Outputs[k].Dim = -1
			}
		}
	}
}

// gemm: Y[M, N] = α·A'·B' + β·C. M (A follows, C where it has M rows),
// N (B follows, C where it has N columns) and K as a sum, C added once.
func (b *ftBuilder) gemm() {
	op := b.op
	a, bb, c := op.Input(0), op.Input(1), op.Input(2)
	if a == nil || bb == nil || len(a.Shape) != 2 || len(bb.Shape) != 2 {
		return
	}
	ta, tb := op.AttrInt("transA", 0) != 0, op.AttrInt("transB", 0) != 0
	am, ak := 0, 1
	if ta {
		am, ak = 1, 0
	}
	bk, bn := 0, 1
	if tb {
		bk, bn = 1, 0
	}
	y := op.Output(0)
	dm := b.concat(0)
	dm.Inputs[0] = ftFollow(am)
	if c != nil && len(c.Shape) == 2 && c.Shape[0] == y.Shape[0] {
		dm.Inputs[2] = ftFollow(0)
	}
	dm = b.concat(1)
	dm.Inputs[1] = ftFollow(bn)
	if c != nil && len(c.Shape) >= 1 && c.Shape[len(c.Shape)-1] == y.Shape[1] {
		dm.Inputs[2] = ftFollow(len(c.Shape) - 1)
	}
	dm = b.sum(a.Shape[ak])
	dm.Inputs[0], dm.Inputs[1] = ftFollow(ak), ftFollow(bk)
	if c != nil {
		dm.Inputs[2].Once = true
	}
}

// matmul (numpy semantics): the broadcast batch dimensions, M (A's
// row dimension), N (B's column dimension), and K as a sum.
func (b *ftBuilder) matmul() {
	op := b.op
	a, bb, y := op.Input(0), op.Input(1), op.Output(0)
	if a == nil || bb == nil {
		return
	}
	ra, rb, ro := len(a.Shape), len(bb.Shape), len(y.Shape)
	if ra == 0 || rb == 0 {
		return
	}
	nb := ro
	if ra >= 2 {
		nb--
	}
	if rb >= 2 {
		nb--
	}
	if nb < 0 {
		return
	}
	for d := 0; d < nb; d++ {
		dm := b.concat(d)
		if ra >= 2 {
			if e := d - (nb - (ra - 2)); e >= 0 && a.Shape[e] == y.Shape[d] {
				dm.Inputs[0] = ftFollow(e)
			}
		}
		if rb >= 2 {
			if e := d - (nb - (rb - 2)); e >= 0 && bb.Shape[e] == y.Shape[d] {
				dm.Inputs[1] = ftFollow(e)
			}
		}
	}
	if ra >= 2 {
		b.concat(nb).Inputs[0] = ftFollow(ra - 2)
	}
	if rb >= 2 {
		b.concat(ro - 1).Inputs[1] = ftFollow(rb - 1)
	}
	bk := 0
	if rb >= 2 {
		bk = rb - 2
	}
	dm := b.sum(a.Shape[ra-1])
	dm.Inputs[0], dm.Inputs[1] = ftFollow(ra-1), ftFollow(bk)
}

// ftGroup is one group of a reshape: input dimensions in and output
// dimensions out (extent-1 dimensions left out) of equal element count.
// sigma is not 0 when out[0] splits: an output step is sigma steps of
// in[0].
type ftGroup struct {
	in, out []int
	sigma   int64
}

// ftReshapeGroups pairs the dimensions of a row-major reshape (Reshape,
// Flatten, Squeeze, Unsqueeze) into groups of equal element count,
// ignoring extent-1 dimensions, which do not move data. The leading
// output dimension of a group splits when the product of the group's
// other output dimensions is a multiple of the product of its other
// input dimensions: a slice [lo, hi) of it is then the slice
// [σ·lo, σ·hi) of the leading input dimension, σ their quotient (a
// dimension kept as it is has σ = 1; heads split off a hidden dimension
// have σ = head size).
func ftReshapeGroups(op *ir.Op) []ftGroup {
	if r, ok := splitRules.Of(op); !ok || !r.reshape {
		return nil
	}
	x, y := op.Input(0), op.Output(0)
	if x == nil || y == nil {
		return nil
	}
	nonUnit := func(s ir.Shape) []int {
		var out []int
		for i, d := range s {
			if d <= 0 {
				return nil
			}
			if d != 1 {
				out = append(out, i)
			}
		}
		return out
	}
	ii, oo := nonUnit(x.Shape), nonUnit(y.Shape)
	var groups []ftGroup
	i, j := 0, 0
	for i < len(ii) && j < len(oo) {
		g := ftGroup{in: []int{ii[i]}, out: []int{oo[j]}}
		pi, po := x.Shape[ii[i]], y.Shape[oo[j]]
		i, j = i+1, j+1
		for pi != po {
			if pi < po {
				if i >= len(ii) {
					return nil
				}
				g.in = append(g.in, ii[i])
				pi *= x.Shape[ii[i]]
				i++
			} else {
				if j >= len(oo) {
					return nil
				}
				g.out = append(g.out, oo[j])
				po *= y.Shape[oo[j]]
				j++
			}
		}
		innerIn, innerOut := pi/x.Shape[g.in[0]], po/y.Shape[g.out[0]]
		if innerOut%innerIn == 0 {
			g.sigma = innerOut / innerIn
		}
		groups = append(groups, g)
	}
	if i != len(ii) || j != len(oo) {
		return nil
	}
	return groups
}

func ftContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ftNormAxis normalises a possibly negative axis of a rank-r tensor.
func ftNormAxis(a int64, r int) (int, bool) {
	if a < 0 {
		a += int64(r)
	}
	return int(a), a >= 0 && a < int64(r)
}

// ftConstInts returns a constant integer input's values, or nil.
func ftConstInts(v *ir.Value) []int64 {
	if v == nil {
		return nil
	}
	t, err := v.Data()
	if err != nil || t == nil {
		return nil
	}
	return t.Int64s()
}

// Dump writes the result one line per op, in order, for golden files:
//
//	%7 = Conv "c1" f32[2,8,16,16]: d0 sample (0 - -); d1 parameter (- 0 0); d2 sample pads (2*2-3+3p3,3 - -); ...
//
// Each split is d<OutDim> (concat) or k/<Extent> (sum), its kind, its
// rewrite if any, then per input "-" (whole), the followed dimension,
// "*σ" when σ ≠ 1, "-δlo+δhi" with a halo, "pPadLo,PadHi" for a window,
// "once" for an input of a sum read by one micro-op. An op with several
// outputs adds "-> (dims)" (i<stride> for an index output), a random op
// "random".
func (r *FTResult) Dump(w io.Writer, g *ir.Graph) error {
	var sb strings.Builder
	for _, op := range g.Order() {
		var outs []string
		for _, v := range op.Outputs() {
			if v == nil {
				outs = append(outs, "_")
			} else {
				outs = append(outs, v.String())
			}
		}
		y := op.Output(0)
		fmt.Fprintf(&sb, "%s = %s %q", strings.Join(outs, ","), op.QualifiedType(), op.Name)
		if y != nil {
			fmt.Fprintf(&sb, " %v%v", y.DType, y.Shape)
		}
		sb.WriteString(":")
		maps := r.Of(op)
		if len(maps) == 0 {
			sb.WriteString(" none")
		}
		for i, dm := range maps {
			if i > 0 {
				sb.WriteString(";")
			}
			sb.WriteString(" " + dm.String())
		}
		sb.WriteString("\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// String renders a split as Dump does.
func (m DimMap) String() string {
	var sb strings.Builder
	if m.Merge == MergeSum {
		fmt.Fprintf(&sb, "k/%d %s", m.Extent, m.Kind)
	} else {
		fmt.Fprintf(&sb, "d%d %s", m.OutDim, m.Kind)
	}
	if m.Rewrite != RewriteNone {
		sb.WriteString(" " + string(m.Rewrite))
	}
	if m.Random {
		sb.WriteString(" random")
	}
	sb.WriteString(" (")
	for j, in := range m.Inputs {
		if j > 0 {
			sb.WriteString(" ")
		}
		sb.WriteString(in.String(m.Rewrite == RewritePads))
	}
	sb.WriteString(")")
	if len(m.Outputs) > 1 {
		sb.WriteString(" -> (")
		for k, o := range m.Outputs {
			if k > 0 {
				sb.WriteString(" ")
			}
			switch {
			case o.Dim < 0:
				sb.WriteString("-")
			case o.IndexStride != 0:
				fmt.Fprintf(&sb, "%di%d", o.Dim, o.IndexStride)
			default:
				fmt.Fprintf(&sb, "%d", o.Dim)
			}
		}
		sb.WriteString(")")
	}
	return sb.String()
}

// String renders an input map as Dump does.
func (m InputMap) String(window bool) string {
	if m.Dim < 0 {
		if m.Once {
			return "once"
		}
		return "-"
	}
	s := fmt.Sprint(m.Dim)
	if m.Scale != 1 {
		s += fmt.Sprintf("*%d", m.Scale)
	}
	if m.HaloLo != 0 || m.HaloHi != 0 {
		s += fmt.Sprintf("-%d+%d", m.HaloLo, m.HaloHi)
	}
	if window {
		s += fmt.Sprintf("p%d,%d", m.PadLo, m.PadHi)
	}
	return s
}
