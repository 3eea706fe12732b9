package launch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// The layout of ts_args (backend/cuda/ckernels/ts.h).
const (
	MaxP = 10
	MaxI = 56
	MaxF = 4
	MaxR = 8 // highest rank a strided kernel walks
)

// Args is ts_args: buffer addresses, the work-item count and the
// integer and float parameters. Every field is 8 bytes wide, so Go lays
// it out as C does (the ckernels tests check the size).
type Args struct {
	P [MaxP]uint64
	N int64
	I [MaxI]int64
	F [MaxF]float64
}

// Block is the threads per block of every launch; kernels walk their
// work items with grid-stride loops, so the grid is capped (MaxGrid).
const (
	Block   = 256
	MaxGrid = 65535
)

// Kernel is one launch.
type Kernel struct {
	Name string
	Args Args
}

// Grid is the launch's block count.
func (k *Kernel) Grid() uint32 {
	g := (k.Args.N + Block - 1) / Block
	if g > MaxGrid {
		g = MaxGrid
	}
	if g < 1 {
		g = 1
	}
	return uint32(g)
}

// Gemm is a batch of row-major float32 products
// C = Alpha·op(A)·op(B) + Beta·C, C being M×N and op(A) M×K; batch b
// uses A+b·StrideA, B+b·StrideB, C+b·StrideC (strides in elements).
// LDA, LDB, LDC are the row strides of the stored (untransposed)
// matrices. The CUDA device maps it to cublasSgemmStridedBatched on the
// transposed (column-major) problem.
type Gemm struct {
	TransA, TransB            bool
	M, N, K                   int64
	Alpha, Beta               float32
	A, B, C                   uint64
	LDA, LDB, LDC             int64
	Batch                     int64
	StrideA, StrideB, StrideC int64
}

// ColumnMajor is a batched product as a column-major BLAS (cuBLAS)
// takes it: C = Alpha·op(A)·op(B) + Beta·C with C M×N column-major.
type ColumnMajor struct {
	TransA, TransB            bool
	M, N, K                   int64
	A, B, C                   uint64
	LDA, LDB, LDC             int64
	StrideA, StrideB, StrideC int64
}

// ColumnMajor maps the row-major product to the column-major one that
// computes it: a row-major matrix with row stride ld is, read
// column-major with leading dimension ld, its own transpose, so
// row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap
// the operands (and M with N), keep the transpose flags and the leading
// dimensions. Alpha, Beta and Batch carry over.
func (g *Gemm) ColumnMajor() ColumnMajor {
	return ColumnMajor{TransA: g.TransB, TransB: g.TransA, M: g.N, N: g.M, K: g.K,
		A: g.B, B: g.A, C: g.C, LDA: g.LDB, LDB: g.LDA, LDC: g.LDC,
		StrideA: g.StrideB, StrideB: g.StrideA, StrideC: g.StrideC}
}

// Upload copies host bytes (a constant computed on the host) to Dst.
type Upload struct {
	Dst  uint64
	Data []byte
}

// Step is one unit of work; exactly one field is set.
type Step struct {
	Kernel *Kernel
	Gemm   *Gemm
	Upload *Upload
}

// Tensor is a tensor at a device address (or, for the host emulation, a
// host address).
type Tensor struct {
	Addr  uint64
	DType ir.DType
	Shape ir.Shape
}

// Op is what Plan needs about one op to run.
type Op struct {
	Op    *ir.Op
	Opset int64
	// In and Out follow the op's inputs and outputs (nil: absent).
	In, Out []*Tensor
	// Workspace is the op's scratch (Bytes 0: none), sized by the
	// reference kernel's Workspace; Conv uses it for im2col blocks.
	Workspace      uint64
	WorkspaceBytes int64
	// Scratch is the device's own scratch (ScratchBytes 0: none), outside
	// the plan's pool like cuBLAS's workspace: the partials of a split
	// reduction, used within the op's launch list only.
	Scratch      uint64
	ScratchBytes int64
	// Host returns the bytes of input i when its value decides the
	// launch (Slice's starts, Pad's pads, a reduction's axes, Dropout's
	// ratio): a constant's data, or on a GPU a synchronous read.
	Host func(i int) ([]byte, error)
	// Step counts runs of the graph (seeds Dropout's masks).
	Step int64
}

func (o *Op) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: cuda: %s", o.Op.Describe(), fmt.Sprintf(format, args...))
}

func (o *Op) in(i int) *Tensor {
	if i < len(o.In) {
		return o.In[i]
	}
	return nil
}

func (o *Op) out(i int) *Tensor {
	if i < len(o.Out) {
		return o.Out[i]
	}
	return nil
}

// hostInts reads integer input i (int64 or int32); absent: nil, false.
func (o *Op) hostInts(i int) ([]int64, bool, error) {
	t := o.in(i)
	if t == nil {
		return nil, false, nil
	}
	if o.Host == nil {
		return nil, false, o.errorf("input %d's value is needed on the host", i)
	}
	b, err := o.Host(i)
	if err != nil {
		return nil, false, o.errorf("input %d: %v", i, err)
	}
	var v []int64
	switch t.DType {
	case ir.Int64:
		for k := 0; k+8 <= len(b); k += 8 {
			v = append(v, int64(binary.LittleEndian.Uint64(b[k:])))
		}
	case ir.Int32:
		for k := 0; k+4 <= len(b); k += 4 {
			v = append(v, int64(int32(binary.LittleEndian.Uint32(b[k:]))))
		}
	default:
		return nil, false, o.errorf("input %d is %v, want an integer tensor", i, t.DType)
	}
	return v, true, nil
}

// hostFloat reads the scalar float input i (absent: def).
func (o *Op) hostFloat(i int, def float64) (float64, error) {
	t := o.in(i)
	if t == nil {
		return def, nil
	}
	if o.Host == nil {
		return 0, o.errorf("input %d's value is needed on the host", i)
	}
	b, err := o.Host(i)
	if err != nil {
		return 0, o.errorf("input %d: %v", i, err)
	}
	switch {
	case t.DType == ir.Float && len(b) >= 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case t.DType == ir.Double && len(b) >= 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case t.DType == ir.Bool && len(b) >= 1:
		if b[0] != 0 {
			return 1, nil
		}
		return 0, nil
	}
	return 0, o.errorf("input %d is %v%v, want a float scalar", i, t.DType, t.Shape)
}

// esize is the element size in bytes.
func esize(dt ir.DType) int64 { return int64((dt.Bits() + 7) / 8) }

func numel(s ir.Shape) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// bcastStrides are the strides of in read as out (right-aligned, 0 on
// broadcast dims).
func bcastStrides(in, out ir.Shape) []int64 {
	st := make([]int64, len(out))
	is := in.Strides()
	off := len(out) - len(in)
	for d := range out {
		if k := d - off; k >= 0 && in[k] != 1 {
			st[d] = is[k]
		}
	}
	return st
}

func kernel(name string, n int64) *Kernel {
	return &Kernel{Name: name, Args: Args{N: n}}
}

func one(k *Kernel) []Step { return []Step{{Kernel: k}} }

// Plan lists the work for one op. It returns an error naming the op for
// an op or case the kernels do not cover (Check says the same before a
// run).
func Plan(o *Op) ([]Step, error) {
	op := o.Op
	if op.Domain != "" && op.Domain != "ai.onnx" {
		return nil, o.errorf("no CUDA kernel for %s", quote.Name(op.QualifiedType()))
	}
	for i, t := range o.Out {
		if t != nil && len(t.Shape) > MaxR {
			return nil, o.errorf("output %d has rank %d, the kernels walk at most %d", i, len(t.Shape), MaxR)
		}
	}
	if y := o.out(0); y != nil && numel(y.Shape) == 0 {
		return nil, nil
	}
	f, ok := planners[op.Type]
	if !ok {
		return nil, o.errorf("no CUDA kernel for %s", quote.Name(op.QualifiedType()))
	}
	return f(o)
}

// Supported reports whether Plan covers the op's type (the details, such
// as a Pad mode, are checked when planning).
func Supported(op *ir.Op) error {
	if op.Domain != "" && op.Domain != "ai.onnx" {
		return fmt.Errorf("%s: cuda: no CUDA kernel for %s", op.Describe(), quote.Name(op.QualifiedType()))
	}
	if _, ok := planners[op.Type]; !ok {
		return fmt.Errorf("%s: cuda: no CUDA kernel for %s", op.Describe(), quote.Name(op.QualifiedType()))
	}
	return nil
}

// Types lists the op types Plan covers.
func Types() []string {
	var ts []string
	for t := range planners {
		ts = append(ts, t)
	}
	return ts
}

var planners map[string]func(*Op) ([]Step, error)

func init() {
	planners = map[string]func(*Op) ([]Step, error){}
	for name, code := range binaryCodes {
		planners[name] = binaryPlan(code)
	}
	for name, code := range compareCodes {
		planners[name] = comparePlan(code)
	}
	for name, code := range logicCodes {
		planners[name] = logicPlan(code)
	}
	for name, code := range unaryCodes {
		planners[name] = unaryPlan(code)
	}
	planners["Where"] = planWhere
	planners["Cast"] = planCast
	for _, name := range []string{"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"} {
		planners[name] = planCopyAll
	}
	planners["Dropout"] = planDropout
	planners["Transpose"] = planTranspose
	planners["Expand"] = planExpand
	planners["Slice"] = planSlice
	planners["Concat"] = planConcat
	planners["Split"] = planSplit
	planners["Pad"] = planPad
	planners["Gather"] = planGather
	planners["GatherElements"] = planGatherElements
	planners["ScatterElements"] = planScatterElements
	planners["ScatterND"] = planScatterND
	for name, mode := range reduceModes {
		planners[name] = reducePlan(mode)
	}
	planners["GlobalAveragePool"] = globalPoolPlan(1)
	planners["GlobalMaxPool"] = globalPoolPlan(2)
	planners["Softmax"] = softmaxPlan(false)
	planners["LogSoftmax"] = softmaxPlan(true)
	planners["LayerNormalization"] = planLayerNorm
	planners["BatchNormalization"] = planBatchNorm
	planners["MaxPool"] = poolPlan(0)
	planners["AveragePool"] = poolPlan(1)
	planners["Conv"] = planConv
	planners["ConvTranspose"] = planConvTranspose
	planners["Gemm"] = planGemm
	planners["MatMul"] = planMatMul
	for _, name := range []string{"Constant", "Shape", "ConstantOfShape", "Size"} {
		planners[name] = planHost
	}
}

// ---- elementwise ----

var binaryCodes = map[string]int64{"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Max": 4, "Min": 5, "Pow": 6}
var compareCodes = map[string]int64{"Equal": 0, "Greater": 1, "GreaterOrEqual": 2, "Less": 3, "LessOrEqual": 4}
var logicCodes = map[string]int64{"And": 0, "Or": 1, "Xor": 2}
var unaryCodes = map[string]int64{"Relu": 1, "Neg": 2, "Exp": 3, "Log": 4, "Sqrt": 5, "Reciprocal": 6,
	"Erf": 7, "Tanh": 8, "Sigmoid": 9, "Abs": 10, "Clip": 11, "LeakyRelu": 12, "HardSigmoid": 13, "HardSwish": 14}

// broadcast fills the output dims and one stride array per input of the
// elementwise layout (i[1] rank, i[2..10) dims, strides from i[10]).
func broadcast(o *Op, k *Kernel, ins ...*Tensor) error {
	y := o.out(0)
	k.Args.I[1] = int64(len(y.Shape))
	copy(k.Args.I[2:10], y.Shape)
	for j, t := range ins {
		if t == nil {
			return o.errorf("input %d is absent", j)
		}
		if len(t.Shape) > len(y.Shape) {
			return o.errorf("input %d %v does not broadcast to %v", j, t.Shape, y.Shape)
		}
		copy(k.Args.I[10+j*MaxR:10+(j+1)*MaxR], bcastStrides(t.Shape, y.Shape))
		k.Args.P[1+j] = t.Addr
	}
	k.Args.P[0] = y.Addr
	return nil
}

func binaryPlan(code int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		if len(o.In) != 2 {
			return nil, o.errorf("%d inputs, the kernel takes 2", len(o.In))
		}
		y := o.out(0)
		name := "ts_binary_f32"
		switch {
		case y.DType == ir.Float:
		case y.DType == ir.Int64 && code != 6:
			name = "ts_binary_i64"
		default:
			return nil, o.errorf("element type %v has no kernel", y.DType)
		}
		if o.in(1) != nil && o.in(0) != nil && o.in(1).DType != y.DType {
			return nil, o.errorf("mixed element types %v and %v", y.DType, o.in(1).DType)
		}
		k := kernel(name, numel(y.Shape))
		k.Args.I[0] = code
		if err := broadcast(o, k, o.in(0), o.in(1)); err != nil {
			return nil, err
		}
		return one(k), nil
	}
}

func comparePlan(code int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		a := o.in(0)
		if a == nil || o.in(1) == nil {
			return nil, o.errorf("needs two inputs")
		}
		k := kernel("ts_compare", numel(o.out(0).Shape))
		k.Args.I[0] = code
		switch a.DType {
		case ir.Float:
		case ir.Int64:
			k.Args.I[26] = 1
		default:
			return nil, o.errorf("element type %v has no kernel", a.DType)
		}
		if err := broadcast(o, k, a, o.in(1)); err != nil {
			return nil, err
		}
		return one(k), nil
	}
}

func logicPlan(code int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		k := kernel("ts_logic", numel(o.out(0).Shape))
		k.Args.I[0] = code
		if err := broadcast(o, k, o.in(0), o.in(1)); err != nil {
			return nil, err
		}
		return one(k), nil
	}
}

func planWhere(o *Op) ([]Step, error) {
	y := o.out(0)
	es := esize(y.DType)
	if es != 1 && es != 4 && es != 8 {
		return nil, o.errorf("element type %v has no kernel", y.DType)
	}
	k := kernel("ts_where", numel(y.Shape))
	if err := broadcast(o, k, o.in(0), o.in(1), o.in(2)); err != nil {
		return nil, err
	}
	k.Args.I[34] = es
	return one(k), nil
}

func unaryPlan(code int64) func(*Op) ([]Step, error) {
	return func(o *Op) ([]Step, error) {
		x, y := o.in(0), o.out(0)
		if x == nil || x.DType != ir.Float || y.DType != ir.Float {
			return nil, o.errorf("the kernel is float32 only")
		}
		k := kernel("ts_unary_f32", numel(y.Shape))
		k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
		k.Args.I[0] = code
		switch o.Op.Type {
		case "Clip":
			k.Args.F[0] = float64(o.Op.AttrFloat("min", -math.MaxFloat32))
			k.Args.F[1] = float64(o.Op.AttrFloat("max", math.MaxFloat32))
			if o.Opset >= 11 || o.Op.Attr("min") == nil && o.Op.Attr("max") == nil {
				k.Args.F[0], k.Args.F[1] = math.Inf(-1), math.Inf(1)
			}
			for j := 1; j <= 2; j++ {
				if t := o.in(j); t != nil {
					if t.DType != ir.Float {
						return nil, o.errorf("bound %d is %v, want float32", j, t.DType)
					}
					k.Args.P[1+j] = t.Addr
				}
			}
		case "LeakyRelu":
			k.Args.F[0] = float64(o.Op.AttrFloat("alpha", 0.01))
		case "HardSigmoid":
			k.Args.F[0] = float64(o.Op.AttrFloat("alpha", 0.2))
			k.Args.F[1] = float64(o.Op.AttrFloat("beta", 0.5))
		}
		return one(k), nil
	}
}

var castCodes = map[ir.DType]int64{ir.Float: 0, ir.Int64: 1, ir.Bool: 2, ir.Double: 3, ir.Int32: 4}

func planCast(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	src, ok1 := castCodes[x.DType]
	dst, ok2 := castCodes[y.DType]
	if !ok1 || !ok2 {
		return nil, o.errorf("no kernel casts %v to %v", x.DType, y.DType)
	}
	if x.DType == y.DType {
		return copyFlat(x, y), nil
	}
	k := kernel("ts_cast", numel(y.Shape))
	k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
	k.Args.I[0], k.Args.I[1] = src, dst
	return one(k), nil
}

// ---- data movement ----

// copyStrided copies dims elements from src (strides ss, offset soff)
// to dst (strides ds, offset doff).
func copyStrided(dst, src uint64, es int64, dims, ss, ds []int64, soff, doff int64) (*Kernel, error) {
	if len(dims) > MaxR {
		return nil, fmt.Errorf("rank %d is over %d", len(dims), MaxR)
	}
	k := kernel("ts_copy", numel(dims))
	k.Args.P[0], k.Args.P[1] = dst, src
	k.Args.I[0] = int64(len(dims))
	copy(k.Args.I[1:9], dims)
	copy(k.Args.I[9:17], ss)
	copy(k.Args.I[17:25], ds)
	k.Args.I[25], k.Args.I[26], k.Args.I[27] = soff, doff, es
	return k, nil
}

// copyFlat copies x's bytes to y, as words of x's element size.
func copyFlat(x, y *Tensor) []Step {
	if x.Addr == y.Addr {
		return nil
	}
	n := numel(x.Shape)
	k, _ := copyStrided(y.Addr, x.Addr, esize(x.DType), []int64{n}, []int64{1}, []int64{1}, 0, 0)
	return one(k)
}

func planCopyAll(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	if numel(x.Shape) != numel(y.Shape) || x.DType != y.DType {
		return nil, o.errorf("output %v%v is not a view of the input %v%v", y.DType, y.Shape, x.DType, x.Shape)
	}
	return copyFlat(x, y), nil
}

func fill(dst uint64, es, n int64, bits uint64) []Step {
	k := kernel("ts_fill", n)
	k.Args.P[0] = dst
	k.Args.I[0], k.Args.I[1] = es, int64(bits)
	return one(k)
}

// planDropout: inference and ratio 0 copy (the mask all true); training
// mode runs ts_dropout_f32, which draws the reference kernel's masks
// (same seed, step stream, blocks and threshold), so a planned step on
// the GPU drops the same elements as on the CPU device.
func planDropout(o *Op) ([]Step, error) {
	ratio := float64(o.Op.AttrFloat("ratio", 0.5))
	if o.Opset >= 12 {
		var err error
		if ratio, err = o.hostFloat(1, 0.5); err != nil {
			return nil, err
		}
	}
	training := 0.0
	if o.Opset >= 12 {
		var err error
		if training, err = o.hostFloat(2, 0); err != nil {
			return nil, err
		}
	}
	x, y := o.in(0), o.out(0)
	if training != 0 && ratio != 0 {
		if !(ratio > 0 && ratio < 1) {
			return nil, o.errorf("ratio is %v, must be in [0, 1)", ratio)
		}
		if x.DType != ir.Float {
			return nil, o.errorf("training-mode Dropout is float32 only")
		}
		n := numel(x.Shape)
		k := kernel("ts_dropout_f32", (n+kernels.DropoutBlock-1)/kernels.DropoutBlock)
		k.Args.P[0], k.Args.P[1] = y.Addr, x.Addr
		if m := o.out(1); m != nil {
			k.Args.P[2] = m.Addr
		}
		k.Args.I[0] = int64(kernels.DropoutSeed(o.Op))
		k.Args.I[1] = int64(kernels.DropoutStep(o.Step))
		k.Args.I[2] = int64(uint32(min(math.Round(ratio*(1<<32)), math.MaxUint32)))
		k.Args.I[3] = n
		k.Args.F[0] = 1 / (1 - ratio)
		return one(k), nil
	}
	steps := copyFlat(x, y)
	if m := o.out(1); m != nil {
		steps = append(steps, fill(m.Addr, 1, numel(m.Shape), 1)...)
	}
	return steps, nil
}

func planTranspose(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	r := len(x.Shape)
	perm := o.Op.AttrInts("perm", nil)
	if perm == nil {
		for d := r - 1; d >= 0; d-- {
			perm = append(perm, int64(d))
		}
	}
	if len(perm) != r {
		return nil, o.errorf("perm %v does not match rank %d", perm, r)
	}
	xs := x.Shape.Strides()
	ss := make([]int64, r)
	for d, p := range perm {
		if p < 0 || int(p) >= r {
			return nil, o.errorf("perm %v is out of range", perm)
		}
		ss[d] = xs[p]
	}
	k, err := copyStrided(y.Addr, x.Addr, esize(x.DType), y.Shape, ss, y.Shape.Strides(), 0, 0)
	if err != nil {
		return nil, o.errorf("%v", err)
	}
	return one(k), nil
}

func planExpand(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	if len(x.Shape) > len(y.Shape) {
		return nil, o.errorf("input %v does not broadcast to %v", x.Shape, y.Shape)
	}
	k, err := copyStrided(y.Addr, x.Addr, esize(x.DType), y.Shape, bcastStrides(x.Shape, y.Shape), y.Shape.Strides(), 0, 0)
	if err != nil {
		return nil, o.errorf("%v", err)
	}
	return one(k), nil
}

// normAxis resolves a possibly negative axis against rank r.
func normAxis(o *Op, ax int64, r int) (int, error) {
	if ax < 0 {
		ax += int64(r)
	}
	if ax < 0 || ax >= int64(r) {
		return 0, o.errorf("axis %d is out of range for rank %d", ax, r)
	}
	return int(ax), nil
}

func planSlice(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	r := len(x.Shape)
	var starts, axes, steps []int64
	if o.Opset >= 10 {
		var err error
		if starts, _, err = o.hostInts(1); err != nil {
			return nil, err
		}
		if axes, _, err = o.hostInts(3); err != nil {
			return nil, err
		}
		if steps, _, err = o.hostInts(4); err != nil {
			return nil, err
		}
	} else {
		starts, axes = o.Op.AttrInts("starts", nil), o.Op.AttrInts("axes", nil)
	}
	if axes == nil {
		for d := range starts {
			axes = append(axes, int64(d))
		}
	}
	if len(axes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return nil, o.errorf("starts %v, axes %v and steps %v differ in length", starts, axes, steps)
	}
	xs := x.Shape.Strides()
	ss := append([]int64(nil), xs...)
	var soff int64
	for j, a := range axes {
		d, err := normAxis(o, a, r)
		if err != nil {
			return nil, err
		}
		step := int64(1)
		if steps != nil {
			step = steps[j]
		}
		if step == 0 {
			return nil, o.errorf("step 0 on axis %d", d)
		}
		dim, s := x.Shape[d], starts[j]
		if s < 0 {
			s += dim
		}
		if step > 0 {
			s = max(0, min(s, dim))
		} else {
			s = max(0, min(s, dim-1))
		}
		soff += s * xs[d]
		ss[d] = step * xs[d]
	}
	k, err := copyStrided(y.Addr, x.Addr, esize(x.DType), y.Shape, ss, y.Shape.Strides(), soff, 0)
	if err != nil {
		return nil, o.errorf("%v", err)
	}
	return one(k), nil
}

func planConcat(o *Op) ([]Step, error) {
	y := o.out(0)
	ax, err := normAxis(o, o.Op.AttrInt("axis", 0), len(y.Shape))
	if err != nil {
		return nil, err
	}
	ys := y.Shape.Strides()
	var steps []Step
	var at int64
	for j, x := range o.In {
		if x == nil {
			return nil, o.errorf("input %d is absent", j)
		}
		if numel(x.Shape) > 0 {
			k, err := copyStrided(y.Addr, x.Addr, esize(x.DType), x.Shape, x.Shape.Strides(), ys, 0, at*ys[ax])
			if err != nil {
				return nil, o.errorf("%v", err)
			}
			steps = append(steps, Step{Kernel: k})
		}
		at += x.Shape[ax]
	}
	return steps, nil
}

func planSplit(o *Op) ([]Step, error) {
	x := o.in(0)
	ax, err := normAxis(o, o.Op.AttrInt("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	xs := x.Shape.Strides()
	var steps []Step
	var at int64
	for j, y := range o.Out {
		if y == nil {
			return nil, o.errorf("output %d is absent", j)
		}
		if numel(y.Shape) > 0 {
			k, err := copyStrided(y.Addr, x.Addr, esize(x.DType), y.Shape, xs, y.Shape.Strides(), at*xs[ax], 0)
			if err != nil {
				return nil, o.errorf("%v", err)
			}
			steps = append(steps, Step{Kernel: k})
		}
		at += y.Shape[ax]
	}
	return steps, nil
}

func planPad(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	if mode := o.Op.AttrString("mode", "constant"); mode != "constant" {
		return nil, o.errorf("Pad mode %q has no kernel (constant only)", mode)
	}
	r := len(x.Shape)
	pads := o.Op.AttrInts("pads", nil)
	value := float64(o.Op.AttrFloat("value", 0))
	if o.Opset >= 11 {
		var err error
		if pads, _, err = o.hostInts(1); err != nil {
			return nil, err
		}
		if value, err = o.hostFloat(2, 0); err != nil {
			return nil, err
		}
	}
	if o.in(3) != nil {
		return nil, o.errorf("Pad with axes has no kernel")
	}
	if len(pads) != 2*r {
		return nil, o.errorf("pads %v do not have %d values", pads, 2*r)
	}
	es := esize(y.DType)
	var bits uint64
	switch y.DType {
	case ir.Float:
		bits = uint64(math.Float32bits(float32(value)))
	case ir.Double:
		bits = math.Float64bits(value)
	default:
		bits = uint64(int64(value))
	}
	steps := fill(y.Addr, es, numel(y.Shape), bits)
	xs, ys := x.Shape.Strides(), y.Shape.Strides()
	dims := make([]int64, r)
	var soff, doff int64
	for d := 0; d < r; d++ {
		pb := pads[d]
		lo := max(0, -pb)
		hi := min(x.Shape[d], y.Shape[d]-pb)
		if hi <= lo {
			return steps, nil
		}
		dims[d] = hi - lo
		soff += lo * xs[d]
		doff += max(0, pb) * ys[d]
	}
	k, err := copyStrided(y.Addr, x.Addr, es, dims, xs, ys, soff, doff)
	if err != nil {
		return nil, o.errorf("%v", err)
	}
	return append(steps, Step{Kernel: k}), nil
}

func indexInput(o *Op, i int) (*Tensor, error) {
	t := o.in(i)
	if t == nil || t.DType != ir.Int64 {
		return nil, o.errorf("indices (input %d) must be int64", i)
	}
	return t, nil
}

func planGather(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	idx, err := indexInput(o, 1)
	if err != nil {
		return nil, err
	}
	ax, err := normAxis(o, o.Op.AttrInt("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	k := kernel("ts_gather", numel(y.Shape))
	k.Args.P[0], k.Args.P[1], k.Args.P[2] = y.Addr, x.Addr, idx.Addr
	k.Args.I[0], k.Args.I[1], k.Args.I[2], k.Args.I[3] = esize(x.DType), x.Shape[ax], numel(x.Shape[ax+1:]), numel(idx.Shape)
	return one(k), nil
}

// elementsLayout fills the shared layout of ts_gather_elements and
// ts_scatter_elements: rank, axis, the index dims, the data strides and
// axis dim, the element size.
func elementsLayout(o *Op, k *Kernel, data, idx *Tensor) error {
	r := len(data.Shape)
	if len(idx.Shape) != r {
		return o.errorf("indices rank %d differs from data rank %d", len(idx.Shape), r)
	}
	if r > MaxR {
		return o.errorf("rank %d is over %d", r, MaxR)
	}
	ax, err := normAxis(o, o.Op.AttrInt("axis", 0), r)
	if err != nil {
		return err
	}
	k.Args.I[0], k.Args.I[1] = int64(r), int64(ax)
	copy(k.Args.I[2:10], idx.Shape)
	copy(k.Args.I[10:18], data.Shape.Strides())
	k.Args.I[18], k.Args.I[19] = data.Shape[ax], esize(data.DType)
	return nil
}

func planGatherElements(o *Op) ([]Step, error) {
	x, y := o.in(0), o.out(0)
	idx, err := indexInput(o, 1)
	if err != nil {
		return nil, err
	}
	k := kernel("ts_gather_elements", numel(y.Shape))
	k.Args.P[0], k.Args.P[1], k.Args.P[2] = y.Addr, x.Addr, idx.Addr
	if err := elementsLayout(o, k, x, idx); err != nil {
		return nil, err
	}
	return one(k), nil
}

// scatterReduction is the code of the reduction attribute (0 none,
// 1 add; add only on float32).
func scatterReduction(o *Op, dt ir.DType) (int64, error) {
	switch r := o.Op.AttrString("reduction", "none"); {
	case r == "none":
		return 0, nil
	case r == "add" && dt == ir.Float:
		return 1, nil
	default:
		return 0, o.errorf("scatter reduction %q on %v has no kernel", r, dt)
	}
}

func planScatterElements(o *Op) ([]Step, error) {
	data, y := o.in(0), o.out(0)
	idx, err := indexInput(o, 1)
	if err != nil {
		return nil, err
	}
	upd := o.in(2)
	red, err := scatterReduction(o, data.DType)
	if err != nil {
		return nil, err
	}
	steps := copyFlat(data, y)
	if numel(idx.Shape) == 0 {
		return steps, nil
	}
	k := kernel("ts_scatter_elements", numel(idx.Shape))
	k.Args.P[0], k.Args.P[1], k.Args.P[2] = y.Addr, idx.Addr, upd.Addr
	if err := elementsLayout(o, k, data, idx); err != nil {
		return nil, err
	}
	k.Args.I[20] = red
	return append(steps, Step{Kernel: k}), nil
}

func planScatterND(o *Op) ([]Step, error) {
	data, y := o.in(0), o.out(0)
	idx, err := indexInput(o, 1)
	if err != nil {
		return nil, err
	}
	upd := o.in(2)
	red, err := scatterReduction(o, data.DType)
	if err != nil {
		return nil, err
	}
	if len(idx.Shape) == 0 {
		return nil, o.errorf("indices are a scalar")
	}
	kk := idx.Shape[len(idx.Shape)-1]
	if kk < 1 || kk > int64(len(data.Shape)) || kk > MaxR {
		return nil, o.errorf("index tuples of %d integers into rank %d", kk, len(data.Shape))
	}
	steps := copyFlat(data, y)
	n := numel(upd.Shape)
	if n == 0 {
		return steps, nil
	}
	k := kernel("ts_scatter_nd", n)
	k.Args.P[0], k.Args.P[1], k.Args.P[2] = y.Addr, idx.Addr, upd.Addr
	k.Args.I[0], k.Args.I[1] = kk, numel(data.Shape[kk:])
	copy(k.Args.I[2:2+kk], data.Shape[:kk])
	copy(k.Args.I[10:10+kk], data.Shape.Strides()[:kk])
	k.Args.I[18], k.Args.I[19] = red, esize(data.DType)
	return append(steps, Step{Kernel: k}), nil
}
