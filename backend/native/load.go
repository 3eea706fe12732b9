package native

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tsplit/tsplit/backend/native/planpb"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// Bounds on what a plan may ask for, so that a hostile file costs at
// most what its size allows: as many ops as the frontend accepts in a
// model, and a few commands per op.
const (
	maxOps      = 1 << 20
	maxValues   = 1 << 22
	maxCommands = 8 * (maxOps + 1)
	// maxFileBytes bounds a plan file: weights of a few billion
	// parameters.
	maxFileBytes = 64 << 30
)

// Loaded is a checked plan, ready to run.
type Loaded struct {
	File string
	Plan *planpb.Plan
	// Model is the plan's graph as IR, its ops in schedule order: what
	// the kernels read (attributes, shapes), with the plan's metadata
	// (the training step's description), dimensions and opsets.
	Model *ir.Model
	// Program is what a device runs.
	Program *executor.Program
}

// ReadFile reads and checks the plan at path.
func ReadFile(path string) (*Loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Reason: err.Error()}
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, &Error{File: path, Reason: err.Error()}
	} else if !fi.Mode().IsRegular() {
		return nil, &Error{File: path, Reason: "not a regular file"}
	} else if fi.Size() > maxFileBytes {
		return nil, &Error{File: path, Reason: fmt.Sprintf("%d bytes, more than the %d a plan may have", fi.Size(), int64(maxFileBytes))}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, &Error{File: path, Reason: err.Error()}
	}
	return Load(data, path)
}

// Load decodes and checks the bytes of a plan (file names it in
// errors).
func Load(data []byte, file string) (*Loaded, error) {
	p, err := Decode(data, file)
	if err != nil {
		return nil, err
	}
	return Check(p, file)
}

// Check checks a plan (see the package comment for what) and builds the
// program that runs it. Every problem is an *Error.
func Check(p *planpb.Plan, file string) (*Loaded, error) {
	c := &checker{file: file, p: p}
	steps := []func() error{c.sizes, c.allocations, c.graph, c.places, c.commands, c.order, c.reuse}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return &Loaded{File: file, Plan: p, Model: c.m, Program: c.program()}, nil
}

// checker holds what the checks share.
type checker struct {
	file string
	p    *planpb.Plan
	m    *ir.Model
	// vals and ops are the IR of the plan's values and ops, by index.
	vals []*ir.Value
	ops  []*ir.Op
	// indexOf maps a value's ID to its index in the plan.
	indexOf []int
	// valueOf[a] is the value in allocation a (-1: a workspace or none);
	// wsOf[a] the op whose workspace it is (-1: none).
	valueOf, wsOf []int
	// work[s] are stream s's work commands, cmds[s][n-1] the index in
	// the stream's list of its n-th work command; clocks[s][n-1] its
	// clock; runOf[pos] the command running op pos.
	work   [executor.NumStreams][]int32
	cmds   [executor.NumStreams][]int
	clocks [executor.NumStreams][]clock
	runOf  []cmdRef
	// first[a][t] and last[a][t] are the first and last work commands
	// of stream t that use allocation a on the device (0: none).
	first, last [][executor.NumStreams]int32
}

func (c *checker) fail(where, format string, args ...any) error {
	return &Error{File: c.file, Where: where, Reason: fmt.Sprintf(format, args...)}
}

func (c *checker) valueName(i int) string {
	return fmt.Sprintf("value %s", quote.Name(c.p.Values[i].GetName()))
}

func (c *checker) opName(pos int) string {
	o := c.p.Ops[pos]
	s := fmt.Sprintf("op %d (%s", pos, quote.Name(o.GetType()))
	if o.GetName() != "" {
		s += " " + quote.Name(o.GetName())
	}
	return s + ")"
}

// cmdName describes a work command for messages.
func (c *checker) cmdName(r cmdRef) string {
	i := c.cmds[r.s][r.n-1]
	return fmt.Sprintf("stream %s command %d (%s)", executor.StreamNames[r.s], i, c.opName(int(c.work[r.s][r.n-1])))
}

// sizes checks the counts and the four streams.
func (c *checker) sizes() error {
	p := c.p
	switch {
	case len(p.Ops) > maxOps:
		return c.fail("", "%d ops, more than the %d a plan may have", len(p.Ops), maxOps)
	case len(p.Values) > maxValues:
		return c.fail("", "%d values, more than the %d a plan may have", len(p.Values), maxValues)
	case len(p.Allocations) > len(p.Values)+len(p.Ops):
		return c.fail("", "%d allocations for %d values and %d ops", len(p.Allocations), len(p.Values), len(p.Ops))
	case len(p.HostBuffers) > len(p.Values):
		return c.fail("", "%d host buffers for %d values", len(p.HostBuffers), len(p.Values))
	case p.Pool < 0:
		return c.fail("", "pool of %d bytes", p.Pool)
	case len(p.Streams) != executor.NumStreams:
		return c.fail("", "%d streams; a plan has %d (%s)", len(p.Streams), executor.NumStreams, strings.Join(executor.StreamNames[:], ", "))
	}
	n := 0
	for s, st := range p.Streams {
		if st.GetName() != executor.StreamNames[s] {
			return c.fail(fmt.Sprintf("stream %d", s), "is named %s; stream %d is %s", quote.Name(st.GetName()), s, executor.StreamNames[s])
		}
		n += len(st.Commands)
	}
	if n > maxCommands {
		return c.fail("", "%d commands, more than the %d a plan may have", n, maxCommands)
	}
	if p.Events < 0 || int(p.Events) > n {
		return c.fail("", "%d events for %d commands", p.Events, n)
	}
	for i, b := range p.HostBuffers {
		if b.GetBytes() < 0 {
			return c.fail(fmt.Sprintf("host buffer %d", i), "has %d bytes", b.GetBytes())
		}
	}
	return nil
}

// allocations checks that every allocation lies in the pool with a
// lifetime inside the schedule, and that no two allocations live at
// the same time share a byte.
func (c *checker) allocations() error {
	p := c.p
	nops := int32(len(p.Ops))
	for i, a := range p.Allocations {
		where := fmt.Sprintf("allocation %d", i)
		if a.Bytes < 0 || a.Offset < 0 || a.Bytes > p.Pool || a.Offset > p.Pool-a.Bytes {
			return c.fail(where, "at %d+%d, outside the %d-byte pool", a.Offset, a.Bytes, p.Pool)
		}
		if a.Start < -1 || a.Start >= nops || a.End < max(a.Start, 0) || a.End > nops {
			return c.fail(where, "lives from position %d to %d, outside the schedule of %d ops", a.Start, a.End, nops)
		}
		if _, ok := planpb.Allocation_Kind_name[int32(a.Kind)]; !ok {
			return c.fail(where, "has kind %d", a.Kind)
		}
	}
	// Sweep by offset: any two allocations sharing bytes must not be
	// live at once.
	idx := make([]int, len(p.Allocations))
	for i := range idx {
		idx[i] = i
	}
	sortStable(idx, func(i int) int64 { return p.Allocations[i].Offset })
	for x, i := range idx {
		a := p.Allocations[i]
		if a.Bytes == 0 {
			continue
		}
		for _, j := range idx[x+1:] {
			b := p.Allocations[j]
			if b.Offset >= a.Offset+a.Bytes {
				break
			}
			if b.Bytes > 0 && a.Start <= b.End && b.Start <= a.End {
				return c.fail(fmt.Sprintf("allocations %d and %d", min(i, j), max(i, j)), "share bytes and are live at the same time (positions %d–%d and %d–%d)", a.Start, a.End, b.Start, b.End)
			}
		}
	}
	return nil
}

// graph builds the IR of the plan's values and ops, checking every
// reference, and every op's declared output types and shapes against
// the op table's inference.
func (c *checker) graph() error {
	p := c.p
	g := ir.NewGraph("native")
	m := &ir.Model{Graph: g, Opsets: map[string]int64{}, Dims: map[string]int64{}, Meta: map[string]string{}, Path: p.Source, Specialized: true}
	c.m = m
	for _, o := range p.Opsets {
		if _, dup := m.Opsets[o.GetDomain()]; dup {
			return c.fail("opsets", "domain %s is listed twice", quote.Name(o.GetDomain()))
		}
		m.Opsets[o.GetDomain()] = o.GetVersion()
	}
	for _, d := range p.Dims {
		m.Dims[d.GetName()] = d.GetValue()
	}
	for _, kv := range p.Meta {
		m.Meta[kv.GetKey()] = kv.GetValue()
	}
	c.valueOf = make([]int, len(p.Allocations))
	c.wsOf = make([]int, len(p.Allocations))
	for i := range c.valueOf {
		c.valueOf[i], c.wsOf[i] = -1, -1
	}
	c.vals = make([]*ir.Value, len(p.Values))
	shapes := make([]ir.Shape, len(p.Values))
	for i, pv := range p.Values {
		where := c.valueName(i)
		if pv.GetName() == "" {
			return c.fail(fmt.Sprintf("value %d", i), "has no name")
		}
		dt := ir.DType(pv.Dtype)
		if !dt.Valid() || dt == ir.String {
			return c.fail(where, "has element type %d, which the runtime does not hold", pv.Dtype)
		}
		shape := ir.Shape(pv.Shape)
		n, err := shape.Bytes(dt)
		if err != nil {
			return c.fail(where, "%v", err)
		}
		shapes[i] = shape
		if pv.Allocation < 0 || int(pv.Allocation) > len(p.Allocations) || pv.HostBuffer < 0 || int(pv.HostBuffer) > len(p.HostBuffers) {
			return c.fail(where, "refers to allocation %d or host buffer %d, which the plan does not have", pv.Allocation, pv.HostBuffer)
		}
		if a := pv.Allocation - 1; a >= 0 {
			if c.valueOf[a] >= 0 {
				return c.fail(where, "shares allocation %d with %s", a, c.valueName(c.valueOf[a]))
			}
			c.valueOf[a] = i
			if al := p.Allocations[a]; al.Bytes < n {
				return c.fail(where, "needs %d bytes; its allocation %d has %d", n, a, al.Bytes)
			}
		}
		if h := pv.HostBuffer - 1; h >= 0 {
			if hb := p.HostBuffers[h].GetBytes(); pv.HostOffset < 0 || n > hb || pv.HostOffset > hb-n {
				return c.fail(where, "lies at %d+%d in host buffer %d of %d bytes", pv.HostOffset, n, h, hb)
			}
		}
		var v *ir.Value
		switch pv.Kind {
		case planpb.Value_INPUT:
			v, err = g.AddInput(pv.Name, dt, shape)
			if err == nil {
				v.Param = pv.Param
			}
		case planpb.Value_INIT:
			var t *ir.Tensor
			if t, err = ir.NewTensor(dt, shape, pv.Data); err == nil {
				v, err = g.AddInit(pv.Name, t)
			}
		case planpb.Value_RESULT:
			continue // made by its op
		default:
			return c.fail(where, "has kind %d", pv.Kind)
		}
		if err != nil {
			return c.fail(where, "%v", err)
		}
		c.vals[i] = v
	}
	g.Inputs = g.Inputs[:0]
	for _, r := range p.Inputs {
		v, err := c.ref(r, "graph input")
		if err != nil {
			return err
		}
		if v == nil || v.Kind == ir.KindOp || v.Def != nil {
			return c.fail("graph inputs", "value %d is not an input or initializer", r-1)
		}
		g.Inputs = append(g.Inputs, v)
	}

	c.ops = make([]*ir.Op, len(p.Ops))
	for pos, po := range p.Ops {
		where := c.opName(pos)
		in := make([]*ir.Value, len(po.Inputs))
		for j, r := range po.Inputs {
			if r == 0 {
				continue
			}
			v, err := c.ref(r, where)
			if err != nil {
				return err
			}
			if v == nil {
				return c.fail(where, "reads %s before an op defines it", c.valueName(int(r-1)))
			}
			in[j] = v
		}
		outNames := make([]string, len(po.Outputs))
		for j, r := range po.Outputs {
			if r == 0 {
				continue
			}
			if r < 0 || int(r) > len(p.Values) {
				return c.fail(where, "output %d refers to value %d, which the plan does not have", j, r-1)
			}
			pv := p.Values[r-1]
			if pv.Kind != planpb.Value_RESULT || c.vals[r-1] != nil {
				return c.fail(where, "output %d is %s, which is not a result or is defined twice", j, c.valueName(int(r-1)))
			}
			outNames[j] = pv.Name
		}
		attrs := make([]ir.Attr, len(po.Attributes))
		for j, pa := range po.Attributes {
			a, err := irAttribute(pa)
			if err != nil {
				return c.fail(where, "%v", err)
			}
			attrs[j] = a
		}
		op, err := g.NewOp(po.Type, po.Domain, po.Name, in, outNames, attrs)
		if err != nil {
			return c.fail(where, "%v", err)
		}
		if po.Phase < 0 || po.Phase > int32(ir.Update) {
			return c.fail(where, "has phase %d", po.Phase)
		}
		op.Host, op.Phase, op.Origin = po.Host, ir.Phase(po.Phase), po.Origin
		c.ops[pos] = op
		for j, r := range po.Outputs {
			if r != 0 {
				c.vals[r-1] = op.Output(j)
			}
		}
		// The declared types must be what inference gives: a kernel
		// trusts them for the sizes it reads and writes.
		dts, shs, consts, err := ir.Infer(op, m.Opset(op.Domain))
		if err != nil {
			return c.fail(where, "%v", err)
		}
		for j, v := range op.Outputs() {
			if v == nil {
				continue
			}
			r := po.Outputs[j] - 1
			if dt, sh := ir.DType(p.Values[r].Dtype), shapes[r]; dt != dts[j] || !sh.Equal(shs[j]) {
				return c.fail(where, "output %s is declared %v%v; its inputs give %v%v", quote.Name(v.Name), dt, sh, dts[j], shs[j])
			}
			v.DType, v.Shape, v.Const = dts[j], shs[j], consts[j]
		}
		if _, runs := streamOf(op); runs && ir.CopyOf(op) != ir.ToHost && ir.CopyOf(op) != ir.ToDevice {
			if err := kernels.Supported(op); err != nil {
				return c.fail(where, "%v", err)
			}
		}
		if err := c.workspace(pos, op); err != nil {
			return err
		}
	}
	c.indexOf = make([]int, g.NumValueIDs())
	for i, v := range c.vals {
		if v == nil {
			return c.fail(c.valueName(i), "no op defines it")
		}
		c.indexOf[v.ID] = i
	}
	for _, r := range p.Outputs {
		v, err := c.ref(r, "graph outputs")
		if err != nil {
			return err
		}
		g.Outputs = append(g.Outputs, v)
	}
	if err := ir.Verify(m); err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		return c.fail("graph", "%s", first)
	}
	return nil
}

// workspace checks an op's scratch: an allocation of its own, live at
// its position only, as large as its kernel asks.
func (c *checker) workspace(pos int, op *ir.Op) error {
	p := c.p
	w := p.Ops[pos].Workspace - 1
	need := int64(0)
	if _, runs := streamOf(op); runs && ir.CopyOf(op) == ir.NoCopy {
		need = kernels.WorkspaceBytes(op)
	}
	if w < 0 {
		if need > 0 {
			return c.fail(c.opName(pos), "has no workspace; its kernel needs %d bytes", need)
		}
		return nil
	}
	if int(w) >= len(p.Allocations) {
		return c.fail(c.opName(pos), "its workspace is allocation %d, which the plan does not have", w)
	}
	a := p.Allocations[w]
	switch {
	case c.valueOf[w] >= 0 || c.wsOf[w] >= 0:
		return c.fail(c.opName(pos), "its workspace, allocation %d, belongs to another value or op", w)
	case a.Kind != planpb.Allocation_WORKSPACE || a.Start != int32(pos) || a.End != int32(pos):
		return c.fail(c.opName(pos), "its workspace, allocation %d, is not a workspace live at position %d only", w, pos)
	case a.Bytes < need:
		return c.fail(c.opName(pos), "its workspace has %d bytes; its kernel needs %d", a.Bytes, need)
	}
	c.wsOf[w] = pos
	return nil
}

// ref resolves a 1-based value reference: the IR value, or nil when no
// op has defined it yet.
func (c *checker) ref(r int32, where string) (*ir.Value, error) {
	if r <= 0 || int(r) > len(c.p.Values) {
		return nil, c.fail(where, "refers to value %d, which the plan does not have", r-1)
	}
	return c.vals[r-1], nil
}

// irAttribute decodes an attribute.
func irAttribute(pa *planpb.Attribute) (ir.Attr, error) {
	a := ir.Attr{Name: pa.GetName(), Type: ir.AttrType(pa.GetType())}
	switch a.Type {
	case ir.AttrFloat:
		a.Float = pa.F
	case ir.AttrInt:
		a.Int = pa.I
	case ir.AttrString:
		a.String = string(pa.S)
	case ir.AttrTensor:
		t := pa.GetT()
		if t == nil {
			return a, fmt.Errorf("attribute %s: no tensor", quote.Name(a.Name))
		}
		dt := ir.DType(t.Dtype)
		if !dt.Valid() || dt == ir.String {
			return a, fmt.Errorf("attribute %s: element type %d", quote.Name(a.Name), t.Dtype)
		}
		tt, err := ir.NewTensor(dt, ir.Shape(t.Shape), t.Data)
		if err != nil {
			return a, fmt.Errorf("attribute %s: %v", quote.Name(a.Name), err)
		}
		a.Tensor = tt
	case ir.AttrFloats:
		a.Floats = pa.Floats
	case ir.AttrInts:
		a.Ints = pa.Ints
	case ir.AttrStrings:
		for _, s := range pa.Strings {
			a.Strings = append(a.Strings, string(s))
		}
	default:
		return a, fmt.Errorf("attribute %s has type %d, which a native plan does not hold", quote.Name(a.Name), pa.GetType())
	}
	return a, nil
}
