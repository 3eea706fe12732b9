package conformance

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	// Must come first: lets onnx-go's copy of the ONNX protobuf schema
	// register beside package onnxpb (see its doc).

	"github.com/owulveryck/onnx-go/backend/testbackend"
	_ "github.com/owulveryck/onnx-go/backend/testbackend/onnx" // registers the ONNX node tests
	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
	"github.com/tsplit/tsplit/onnxpb"
)

var writeDoc = flag.Bool("write-doc", false, "write the conformance summary to docs/conformance.md")

// Tolerances for floating-point outputs: ours (1e-4 relative + 1e-5
// absolute), and the ONNX backend test runner's default
// (np.testing.assert_allclose with rtol 1e-3, atol 1e-7), which is looser
// for large values and stricter near zero. A value within either passes.
const (
	relTol, absTol   = 1e-4, 1e-5
	onnxRTol, onnxAT = 1e-3, 1e-7
)

// The default-domain opsets the frontend reads (compiler/import.go).
const minOpset, maxOpset = 7, ir.MaxOpset

type status int

const (
	pass status = iota
	fail
	unsupported
)

func (s status) String() string { return [...]string{"pass", "fail", "unsupported"}[s] }

// Reason categories of unsupported cases.
const (
	catNoSchema = "no schema"    // the op is not in tsplit's op table
	catNoKernel = "no kernel"    // in the op table, no reference kernel
	catDType    = "element type" // an element type tsplit does not compute
	catOpset    = "opset"        // default-domain opset outside 7..21
)

// result is the outcome of one case.
type result struct {
	Title, OpType string
	Opset         int64
	Status        status
	Category      string // unsupported: one of the cat* constants
	Reason        string
	Bound         []string // graph inputs bound as compile-time constants
	Loose         bool     // passed only within ONNX's own tolerance
	MaxErr        float64  // largest |got-want| over float outputs
	Frontend      string   // unsupported: the frontend's error, if it rejected the model too
}

// computed are the element types the reference kernels compute.
var computed = map[ir.DType]bool{
	ir.Float: true, ir.Double: true, ir.Bool: true,
	ir.Int8: true, ir.Int16: true, ir.Int32: true, ir.Int64: true,
	ir.Uint8: true, ir.Uint16: true, ir.Uint32: true, ir.Uint64: true,
}

func TestONNXNodeConformance(t *testing.T) {
	ctors := testbackend.GetAllRegisteredTests()
	if len(ctors) == 0 {
		t.Fatal("no ONNX node test registered: is onnx-go's backend/testbackend/onnx imported?")
	}
	cases := make([]*testbackend.TestCase, 0, len(ctors))
	for _, c := range ctors {
		cases = append(cases, c())
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Title < cases[j].Title })

	results := make([]result, 0, len(cases))
	for _, tc := range cases {
		var r result
		t.Run(tc.Title, func(t *testing.T) {
			r = runCase(tc)
			switch r.Status {
			case fail:
				t.Errorf("%s (%s, opset %d): %s", tc.Title, r.OpType, r.Opset, r.Reason)
			case unsupported:
				t.Skipf("unsupported (%s): %s", r.Category, r.Reason)
			default:
				if len(r.Bound) > 0 {
					t.Logf("inputs bound as compile-time constants: %s", strings.Join(r.Bound, ", "))
				}
				if r.Loose {
					t.Logf("passes within ONNX's tolerance (rtol %g, atol %g) only; max |diff| %.3g", onnxRTol, onnxAT, r.MaxErr)
				}
			}
		})
		results = append(results, r)
	}
	sum := summarize(results)
	t.Log("\n" + sum)
	if *writeDoc {
		path := filepath.Join("..", "docs", "conformance.md")
		if err := os.WriteFile(path, []byte(sum), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}

// runCase runs one ONNX node test through tsplit and classifies it.
func runCase(tc *testbackend.TestCase) (r result) {
	r.Title, r.OpType = tc.Title, tc.OpType
	defer func() {
		if p := recover(); p != nil {
			r.Status, r.Reason = fail, fmt.Sprintf("panic: %v", p)
		}
	}()
	failf := func(format string, args ...any) result {
		r.Status, r.Reason = fail, fmt.Sprintf(format, args...)
		return r
	}
	unsup := func(cat, format string, args ...any) result {
		r.Status, r.Category, r.Reason = unsupported, cat, fmt.Sprintf(format, args...)
		return r
	}

	mp, err := compiler.DecodeModel(tc.ModelB)
	if err != nil {
		return failf("decoding the model: %v", err)
	}
	gp := mp.GetGraph()
	if len(gp.GetNode()) == 0 {
		return failf("the model has no node")
	}
	node := gp.GetNode()[0]
	r.Opset = -1
	for _, imp := range mp.GetOpsetImport() {
		if d := imp.GetDomain(); d == "" || d == "ai.onnx" {
			r.Opset = imp.GetVersion()
		}
	}
	if r.Opset >= 0 && (r.Opset < minOpset || r.Opset > maxOpset) {
		return unsup(catOpset, "default-domain opset %d is outside %d..%d", r.Opset, minOpset, maxOpset)
	}

	// The op table and the kernel table, for every node.
	for _, n := range gp.GetNode() {
		if ir.LookupSchema(n.GetDomain(), n.GetOpType()) == nil {
			return unsup(catNoSchema, "%s is not in tsplit's op table", n.GetOpType())
		}
	}
	noKernel := ""
	for _, n := range gp.GetNode() {
		if kernels.Lookup(n.GetDomain(), n.GetOpType()) == nil {
			noKernel = n.GetOpType()
			break
		}
	}
	declared := map[string]*onnxpb.ValueInfoProto{}
	for _, vi := range append(append([]*onnxpb.ValueInfoProto(nil), gp.GetInput()...), gp.GetOutput()...) {
		declared[vi.GetName()] = vi
		dt := ir.DType(vi.GetType().GetTensorType().GetElemType())
		if !computed[dt] {
			return unsup(catDType, "%q is %v", vi.GetName(), dt)
		}
	}

	// The case's inputs as raw bytes of the declared types. The node's
	// inputs are the graph's inputs (onnx-go exported input_i of the node).
	raw := map[string][]byte{}
	for i, name := range node.GetInput() {
		if name == "" || i >= len(tc.Input) {
			continue
		}
		vi, ok := declared[name]
		if !ok {
			continue // an initializer
		}
		tt := vi.GetType().GetTensorType()
		dims := dimsOf(tt)
		b, err := encode(ir.DType(tt.GetElemType()), dims, tc.Input[i].Data())
		if err != nil {
			return failf("harness: input %q: %v", name, err)
		}
		raw[name] = b
	}

	// Import, binding the inputs the frontend needs at compile time.
	var m *ir.Model
	for {
		m, err = fromProto(mp)
		if err == nil {
			break
		}
		name := constInput(err, gp, raw, r.Bound)
		if name == "" {
			if noKernel != "" {
				// Not run anyway; the frontend error is kept as a note
				// for whoever adds the kernel.
				r.Frontend = err.Error()
				return unsup(catNoKernel, "%s has no reference kernel", noKernel)
			}
			return failf("frontend: %v", err)
		}
		vi := declared[name]
		tt := vi.GetType().GetTensorType()
		dt := tt.GetElemType()
		gp.Initializer = append(gp.Initializer, &onnxpb.TensorProto{
			Name: proto.String(name), DataType: proto.Int32(dt), Dims: dimsOf(tt), RawData: raw[name],
		})
		r.Bound = append(r.Bound, name)
	}

	if noKernel != "" {
		return unsup(catNoKernel, "%s has no reference kernel", noKernel)
	}
	probe, err := executor.New(m, mustDev(0), executor.Options{})
	if err != nil {
		for _, op := range m.Graph.Order() {
			if kernels.Lookup(op.Domain, op.Type) != nil && kernels.Supported(op) != nil {
				return unsup(catDType, "%v", kernels.Supported(op))
			}
		}
		return failf("executor: %v", err)
	}
	x, err := executor.New(m, safeDevice{mustDev(probe.Mem.Need())}, executor.Options{})
	if err != nil {
		return failf("executor: %v", err)
	}
	inputs := map[string][]byte{}
	for _, v := range m.Graph.Inputs {
		if v.Kind != ir.KindInput {
			continue
		}
		b, ok := raw[v.Name]
		if !ok {
			return failf("harness: no data for graph input %q", v.Name)
		}
		inputs[v.Name] = b
	}
	res, err := x.Run(inputs)
	if err != nil {
		return failf("run: %v", err)
	}

	var problems []string
	for i, name := range node.GetOutput() {
		if name == "" || i >= len(tc.ExpectedOutput) {
			continue
		}
		var v *ir.Value
		for _, o := range m.Graph.Outputs {
			if o.Name == name {
				v = o
			}
		}
		if v == nil {
			return failf("output %q is not a graph output", name)
		}
		got, ok := res.Outputs[name]
		if !ok {
			return failf("the run returned no output %q", name)
		}
		want := tc.ExpectedOutput[i]
		if p := compare(v, got, want.Shape(), want.Data(), &r); p != "" {
			problems = append(problems, fmt.Sprintf("output %q: %s", name, p))
		}
	}
	if len(problems) > 0 {
		return failf("%s", strings.Join(problems, "; "))
	}
	r.Status = pass
	return r
}

// fromProto imports a copy of mp with tsplit's frontend, turning a panic
// into an error.
func fromProto(mp *onnxpb.ModelProto) (m *ir.Model, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("frontend panicked: %v", p)
		}
	}()
	return compiler.FromProto(proto.Clone(mp).(*onnxpb.ModelProto), "", compiler.Options{})
}

// quoted finds the value names an error message quotes.
var quoted = regexp.MustCompile(`"([^"]*)"`)

// constInput returns the graph input that a frontend error says must be
// a compile-time constant, if it is one the case gives and not yet
// bound; "" otherwise.
func constInput(err error, gp *onnxpb.GraphProto, raw map[string][]byte, bound []string) string {
	msg := err.Error()
	if !strings.Contains(msg, "constant") {
		return ""
	}
	for _, q := range quoted.FindAllStringSubmatch(msg, -1) {
		name := q[1]
		if _, ok := raw[name]; !ok {
			continue
		}
		already := false
		for _, b := range bound {
			already = already || b == name
		}
		for _, tp := range gp.GetInitializer() {
			already = already || tp.GetName() == name
		}
		if !already {
			return name
		}
	}
	return ""
}

func dimsOf(tt *onnxpb.TypeProto_Tensor) []int64 {
	var dims []int64
	for _, d := range tt.GetShape().GetDim() {
		dims = append(dims, d.GetDimValue())
	}
	return dims
}

func mustDev(pool int64) *cpu.Device {
	d, err := cpu.New(pool)
	if err != nil {
		panic(err)
	}
	return d
}

// safeDevice is the CPU device with kernel panics turned into errors, so
// one broken kernel fails its case instead of the whole test binary (the
// executor runs kernels on its compute-stream goroutine).
type safeDevice struct{ *cpu.Device }

func (d safeDevice) Launch(l *executor.Launch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: kernel panicked: %v", l.Op.Describe(), p)
		}
	}()
	return d.Device.Launch(l)
}

// elems reads a gorgonia backing (a slice, or a scalar) as float64s and,
// for integer backings, exact int64s.
func elems(data any) (f []float64, n []int64, isInt bool, err error) {
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Slice {
		v = reflect.Append(reflect.MakeSlice(reflect.SliceOf(v.Type()), 0, 1), v)
	}
	f = make([]float64, v.Len())
	n = make([]int64, v.Len())
	for i := range f {
		e := v.Index(i)
		switch e.Kind() {
		case reflect.Float32, reflect.Float64:
			f[i] = e.Float()
			n[i] = clampInt(f[i])
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			isInt = true
			n[i] = e.Int()
			f[i] = float64(n[i])
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			isInt = true
			n[i] = int64(e.Uint())
			f[i] = float64(e.Uint())
		case reflect.Bool:
			isInt = true
			if e.Bool() {
				n[i], f[i] = 1, 1
			}
		default:
			return nil, nil, false, fmt.Errorf("unsupported element kind %v", e.Kind())
		}
	}
	return f, n, isInt, nil
}

// clampInt converts a float to int64, saturating (onnx-go stores
// one-element integer tensors as float32, e.g. INT64_MAX for "to the
// end" as 9.223372e18).
func clampInt(x float64) int64 {
	switch {
	case math.IsNaN(x):
		return 0
	case x >= math.MaxInt64:
		return math.MaxInt64
	case x <= math.MinInt64:
		return math.MinInt64
	}
	return int64(x)
}

// encode writes data as raw little-endian bytes of dt. onnx-go exported
// one-element tensors as float32 whatever their type, so the declared
// type, not the backing's, decides the encoding.
func encode(dt ir.DType, dims []int64, data any) ([]byte, error) {
	f, n, _, err := elems(data)
	if err != nil {
		return nil, err
	}
	count, err := ir.Shape(dims).NumElements()
	if err != nil {
		return nil, err
	}
	if int64(len(f)) != count {
		return nil, fmt.Errorf("%d values for the declared shape %v", len(f), dims)
	}
	size := dt.Bits() / 8
	b := make([]byte, len(f)*size)
	for i := range f {
		switch dt {
		case ir.Float:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f[i])))
		case ir.Double:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f[i]))
		case ir.Int64, ir.Uint64:
			binary.LittleEndian.PutUint64(b[8*i:], uint64(n[i]))
		case ir.Int32, ir.Uint32:
			binary.LittleEndian.PutUint32(b[4*i:], uint32(n[i]))
		case ir.Int16, ir.Uint16:
			binary.LittleEndian.PutUint16(b[2*i:], uint16(n[i]))
		case ir.Int8, ir.Uint8:
			b[i] = byte(n[i])
		case ir.Bool:
			if n[i] != 0 || f[i] != 0 {
				b[i] = 1
			}
		default:
			return nil, fmt.Errorf("no encoding for %v", dt)
		}
	}
	return b, nil
}

// decode reads raw bytes of dt as float64s (floats) or int64s.
func decode(dt ir.DType, b []byte) (f []float64, n []int64) {
	t := &ir.Tensor{DType: dt, Shape: ir.Shape{int64(len(b) / max(dt.Bits()/8, 1))}, Raw: b}
	if dt.IsFloat() {
		return t.Float64s(), nil
	}
	return nil, t.Int64s()
}

// compare checks one output against the expected tensor; "" when it
// matches.
func compare(v *ir.Value, got []byte, wantShape []int, wantData any, r *result) string {
	count, _ := v.Shape.NumElements()
	wantCount := int64(1)
	for _, d := range wantShape {
		wantCount *= int64(d)
	}
	// onnx-go exported one-element (and scalar) tensors with shape (1).
	oneElem := len(wantShape) == 1 && wantShape[0] == 1
	if count != wantCount || (!oneElem && !v.Shape.Equal(toShape(wantShape))) {
		return fmt.Sprintf("shape %v, want %v", v.Shape, wantShape)
	}
	wf, wn, wantInt, err := elems(wantData)
	if err != nil {
		return "harness: " + err.Error()
	}
	if int64(len(wf)) != count {
		return fmt.Sprintf("harness: %d expected values for shape %v", len(wf), wantShape)
	}
	gf, gn := decode(v.DType, got)
	var bad []string
	nbad := 0
	if gf != nil {
		for i, g := range gf {
			w := wf[i]
			if math.IsNaN(w) && math.IsNaN(g) || math.IsInf(w, 0) && g == w {
				continue
			}
			d := math.Abs(g - w)
			if !math.IsNaN(d) && !math.IsInf(d, 0) {
				r.MaxErr = max(r.MaxErr, d)
			}
			if d <= absTol+relTol*math.Abs(w) {
				continue
			}
			if d <= onnxAT+onnxRTol*math.Abs(w) {
				r.Loose = true
				continue
			}
			if nbad < 3 {
				bad = append(bad, fmt.Sprintf("[%d] = %.7g, want %.7g", i, g, w))
			}
			nbad++
		}
	} else {
		for i, g := range gn {
			w := wn[i]
			if !wantInt && v.DType == ir.Bool {
				w = 0
				if wf[i] != 0 {
					w = 1
				}
			}
			if g != w {
				if nbad < 3 {
					bad = append(bad, fmt.Sprintf("[%d] = %d, want %d", i, g, w))
				}
				nbad++
			}
		}
	}
	if nbad > 0 {
		return fmt.Sprintf("%d of %d values differ (%v%v): %s", nbad, count, v.DType, v.Shape, strings.Join(bad, ", "))
	}
	return ""
}

func toShape(s []int) ir.Shape {
	out := make(ir.Shape, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// summarize renders the results as the Markdown of docs/conformance.md.
func summarize(results []result) string {
	var b strings.Builder
	count := map[status]int{}
	type opRow struct {
		cases, pass, fail, unsup int
		cats                     map[string]bool
		reasons                  map[string]bool
	}
	ops := map[string]*opRow{}
	for _, r := range results {
		count[r.Status]++
		o := ops[r.OpType]
		if o == nil {
			o = &opRow{cats: map[string]bool{}, reasons: map[string]bool{}}
			ops[r.OpType] = o
		}
		o.cases++
		switch r.Status {
		case pass:
			o.pass++
		case fail:
			o.fail++
		case unsupported:
			o.unsup++
			o.cats[r.Category] = true
			o.reasons[r.Category+": "+r.Reason] = true
		}
	}
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)

	fmt.Fprintf(&b, "# ONNX node conformance\n\n")
	fmt.Fprintf(&b, "Generated by `go test ./conformance -args -write-doc` (package `conformance`, see its doc.go).\n")
	fmt.Fprintf(&b, "The cases are the ONNX backend node tests as exported by onnx-go v0.5.0\n")
	fmt.Fprintf(&b, "(`github.com/owulveryck/onnx-go/backend/testbackend/onnx`): %d cases over %d op types.\n", len(results), len(ops))
	fmt.Fprintf(&b, "Each is imported with tsplit's frontend and run by the executor on the CPU device with a pool of exactly\n")
	fmt.Fprintf(&b, "`Mem.Need()` bytes. Floats match within 1e-4 relative + 1e-5 absolute (or ONNX's rtol 1e-3, atol 1e-7);\n")
	fmt.Fprintf(&b, "integers and booleans exactly. The numbers below are those of the kernels present when the file was written;\n")
	fmt.Fprintf(&b, "rerun the command after kernels land.\n\n")

	fmt.Fprintf(&b, "| outcome | cases |\n| --- | ---: |\n")
	for _, s := range []status{pass, fail, unsupported} {
		fmt.Fprintf(&b, "| %s | %d |\n", s, count[s])
	}
	fmt.Fprintf(&b, "| total | %d |\n\n", len(results))

	fmt.Fprintf(&b, "## Unsupported, by reason\n\n")
	for _, cat := range []string{catNoSchema, catNoKernel, catDType, catOpset} {
		var list []string
		n := 0
		for _, name := range names {
			k := 0
			for _, r := range results {
				if r.OpType == name && r.Status == unsupported && r.Category == cat {
					k++
				}
			}
			if k > 0 {
				list = append(list, fmt.Sprintf("%s (%d)", name, k))
				n += k
			}
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(&b, "- **%s** — %d cases, %s: %s\n", cat, n, catMeaning[cat], strings.Join(list, ", "))
	}
	b.WriteString("\n")

	fmt.Fprintf(&b, "## Failures\n\n")
	nf := 0
	causes := map[string]bool{}
	for _, r := range results {
		if r.Status == fail {
			fmt.Fprintf(&b, "- `%s` (%s, opset %d): %s\n", r.Title, r.OpType, r.Opset, oneLine(r.Reason))
			nf++
			if c := diagnose(r); c != "" {
				causes[c] = true
			}
		}
	}
	if nf == 0 {
		b.WriteString("None.\n")
	}
	if len(causes) > 0 {
		list := make([]string, 0, len(causes))
		for c := range causes {
			list = append(list, c)
		}
		sort.Strings(list)
		b.WriteString("\nLikely causes:\n\n")
		for _, c := range list {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	b.WriteString("\n")

	fmt.Fprintf(&b, "## By op type\n\n| op | cases | pass | fail | unsupported | why unsupported |\n| --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, name := range names {
		o := ops[name]
		var why []string
		for reason := range o.reasons {
			why = append(why, oneLine(reason))
		}
		sort.Strings(why)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", name, o.cases, o.pass, o.fail, o.unsup, strings.Join(why, "; "))
	}
	b.WriteString("\n")

	var fe []string
	for _, r := range results {
		if r.Status == unsupported && r.Frontend != "" {
			fe = append(fe, fmt.Sprintf("- `%s` (%s): %s\n", r.Title, r.OpType, oneLine(r.Frontend)))
		}
	}
	if len(fe) > 0 {
		fmt.Fprintf(&b, "## Frontend errors on ops without a kernel\n\n")
		fmt.Fprintf(&b, "These cases are counted as unsupported (no kernel), but the frontend rejects them too; a kernel alone\n")
		fmt.Fprintf(&b, "will not make them pass.\n\n%s\n", strings.Join(fe, ""))
	}

	var boundLines []string
	for _, r := range results {
		if len(r.Bound) > 0 && r.Status != unsupported {
			boundLines = append(boundLines, fmt.Sprintf("`%s` (%s)", r.Title, strings.Join(r.Bound, ", ")))
		}
	}
	if len(boundLines) > 0 {
		fmt.Fprintf(&b, "## Inputs bound as compile-time constants\n\n")
		fmt.Fprintf(&b, "tsplit infers static shapes, so these graph inputs, which decide an output shape, were given to the\n")
		fmt.Fprintf(&b, "frontend as initializers holding the case's values: %s.\n\n", strings.Join(boundLines, ", "))
	}
	var loose []string
	for _, r := range results {
		if r.Status == pass && r.Loose {
			loose = append(loose, fmt.Sprintf("`%s` (max |diff| %.2g)", r.Title, r.MaxErr))
		}
	}
	if len(loose) > 0 {
		fmt.Fprintf(&b, "## Passing only within ONNX's tolerance\n\n%s.\n", strings.Join(loose, ", "))
	}
	return b.String()
}

// diagnose explains a failure whose cause is known (shown in the doc
// only while the case fails).
func diagnose(r result) string {
	switch {
	case (r.OpType == "Softmax" || r.OpType == "LogSoftmax") && r.Opset < 13:
		return "Softmax/LogSoftmax before opset 13 coerce the input to 2-D at `axis` (default 1) and normalise " +
			"over the flattened trailing dimensions; the kernel (kernels/nn_softmax.go, runSoftmax → softmaxDims(…, legacy=false), " +
			"default axis -1) always applies the opset-13 reading and ignores kernels.Ctx.Opset; the two readings agree " +
			"only when axis is the last dimension."
	case r.OpType == "Hardmax" && r.Opset < 13:
		return "Hardmax before opset 13 has the same 2-D coercion; kernels/reduce_arg.go (hardmaxAxis, default -1, " +
			"hardmaxRun over one axis) implements opset 13 only and ignores kernels.Ctx.Opset."
	}
	return ""
}

var catMeaning = map[string]string{
	catNoSchema: "the op is not in tsplit's op table (package ir)",
	catNoKernel: "the op is in the op table but has no reference kernel (package kernels)",
	catDType:    "an element type the reference kernels do not compute",
	catOpset:    fmt.Sprintf("the model imports a default-domain opset outside the %d..%d the frontend reads", minOpset, maxOpset),
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
