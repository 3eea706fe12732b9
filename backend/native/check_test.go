package native

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit/backend/native/planpb"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/plantest"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
)

// tinyStep is a small graph with every kind of command: a convolution
// (a workspace), a tensor swapped out and back in, a host view and a
// host kernel over the swapped tensor, and activations placed over the
// swapped tensor's bytes once its copy is done.
func tinyStep(t testing.TB) *ir.Model {
	b := irtest.New(t)
	x := b.Input("x", ir.Float, 2, 3, 6, 6)
	w := plantest.Weight(b, "w", 4, 3, 3, 3)
	c := b.Op("Conv", irtest.V(x, w), irtest.Ints("pads", 1, 1, 1, 1))
	a := b.Op("Relu", irtest.V(c))
	out := b.OpDomain(ir.Domain, "SwapOut", 1, irtest.V(a))[0]
	d := b.Op("Sigmoid", irtest.V(a))
	e := b.Op("Tanh", irtest.V(d))
	f := b.Op("Relu", irtest.V(e))
	// A view of the first sample, and a copy of channel 1 of both.
	first := b.Op("Slice", irtest.V(out, b.Ints("s0", 0), b.Ints("e0", 1), b.Ints("a0", 0)))
	first.Def.Host = true
	ch := b.Op("Slice", irtest.V(out, b.Ints("s1", 1), b.Ints("e1", 2), b.Ints("a1", 1)))
	ch.Def.Host = true
	in1 := b.OpDomain(ir.Domain, "SwapIn", 1, irtest.V(first))[0]
	in2 := b.OpDomain(ir.Domain, "SwapIn", 1, irtest.V(ch))[0]
	y := b.Op("Add", irtest.V(f, b.Op("Concat", irtest.V(in1, in1), irtest.Int("axis", 0))))
	z := b.Op("ReduceSum", irtest.V(in2))
	return b.Return(y, z)
}

// tinyPlan is tinyStep lowered, and its inputs.
func tinyPlan(t testing.TB) (*planpb.Plan, map[string][]byte) {
	t.Helper()
	m := tinyStep(t)
	p, err := Lower(m)
	if err != nil {
		t.Fatal(err)
	}
	return p, plantest.Inputs(t, m)
}

func TestTinyRoundTrip(t *testing.T) {
	m := tinyStep(t)
	_, l := roundTrip(t, m, plantest.Inputs(t, m))
	p := l.Plan
	for s, st := range p.Streams {
		runs := 0
		for _, c := range st.Commands {
			if _, ok := c.Kind.(*planpb.Command_Run); ok {
				runs++
			}
		}
		if runs == 0 {
			t.Errorf("stream %s runs nothing; the tiny step should use every stream", executor.StreamNames[s])
		}
	}
	if p.Events == 0 {
		t.Error("no events")
	}
	if reuseWaits(p) == 0 {
		t.Error("no compute command waits for a swap-out: the layout reuses no swapped tensor's bytes, and the reuse check goes untested")
	}
}

// reuseWaits finds the compute stream's waits for events the d2h stream
// records: compute reads nothing a swap-out writes, so each is a wait
// before reusing the bytes of a tensor being copied out.
func reuseWaits(p *planpb.Plan) int {
	byD2H := map[int32]bool{}
	for _, c := range p.Streams[executor.StreamD2H].Commands {
		if r, ok := c.Kind.(*planpb.Command_Record); ok {
			byD2H[r.Record] = true
		}
	}
	n := 0
	for _, c := range p.Streams[executor.StreamCompute].Commands {
		if w, ok := c.Kind.(*planpb.Command_Wait); ok && byD2H[w.Wait] {
			n++
		}
	}
	return n
}

// TestCheckRefuses breaks a good plan in one way at a time; Load must
// refuse each with an *Error that names the file and says what is
// wrong.
func TestCheckRefuses(t *testing.T) {
	good, _ := tinyPlan(t)
	find := func(p *planpb.Plan, s int, keep func(*planpb.Command) bool) int {
		return slices.IndexFunc(p.Streams[s].Commands, keep)
	}
	isRun := func(c *planpb.Command) bool { _, ok := c.Kind.(*planpb.Command_Run); return ok }
	isRecord := func(c *planpb.Command) bool { _, ok := c.Kind.(*planpb.Command_Record); return ok }
	drop := func(p *planpb.Plan, s, i int) {
		p.Streams[s].Commands = slices.Delete(p.Streams[s].Commands, i, i+1)
	}
	valueNamed := func(p *planpb.Plan, name string) *planpb.Value {
		for _, v := range p.Values {
			if v.Name == name {
				return v
			}
		}
		t.Fatalf("no value %q", name)
		return nil
	}
	cases := []struct {
		name   string
		want   string
		break_ func(p *planpb.Plan)
	}{
		{"allocation past the pool", "outside the", func(p *planpb.Plan) { p.Allocations[0].Offset = p.Pool }},
		{"negative pool", "pool of -1 bytes", func(p *planpb.Plan) { p.Pool = -1 }},
		{"live allocations overlap", "are live at the same time", func(p *planpb.Plan) {
			// The input and the weight are both resident from the start.
			x, w := valueNamed(p, "x"), valueNamed(p, "w")
			p.Allocations[w.Allocation-1].Offset = p.Allocations[x.Allocation-1].Offset
		}},
		{"lifetime outside the schedule", "outside the schedule", func(p *planpb.Plan) { p.Allocations[0].End = int32(len(p.Ops) + 1) }},
		{"three streams", "3 streams", func(p *planpb.Plan) { p.Streams = p.Streams[:3] }},
		{"stream misnamed", "is named", func(p *planpb.Plan) { p.Streams[1].Name = "copy" }},
		{"shape changed", "its inputs give", func(p *planpb.Plan) {
			v := valueNamed(p, "Relu2_0")
			v.Shape = []int64{2, 4, 6, 5}
		}},
		{"unknown element type", "element type 99", func(p *planpb.Plan) { valueNamed(p, "x").Dtype = 99 }},
		{"value larger than its allocation", "needs", func(p *planpb.Plan) {
			v := valueNamed(p, "Relu2_0")
			p.Allocations[v.Allocation-1].Bytes = 64
		}},
		{"weight data truncated", "needs", func(p *planpb.Plan) { w := valueNamed(p, "w"); w.Data = w.Data[:4] }},
		{"op reads a later value", "before an op defines it", func(p *planpb.Plan) {
			p.Ops[0].Inputs[0] = p.Ops[len(p.Ops)-1].Outputs[0]
		}},
		{"unknown op", "not in tsplit's op table", func(p *planpb.Plan) { p.Ops[1].Type = "NoSuchOp" }},
		{"attribute of an unknown type", "does not hold", func(p *planpb.Plan) { p.Ops[0].Attributes[0].Type = 5 }},
		{"workspace too small", "its kernel needs", func(p *planpb.Plan) {
			p.Allocations[p.Ops[0].Workspace-1].Bytes = 0
		}},
		{"graph output freed early", "read after the last op", func(p *planpb.Plan) {
			p.Allocations[p.Values[p.Outputs[0]-1].Allocation-1].End--
		}},
		{"host writes overlap", "both written", func(p *planpb.Plan) {
			// The host kernel's output written over the swapped tensor.
			v := valueNamed(p, "Slice8_0")
			o := valueNamed(p, "SwapOut3_0")
			v.HostBuffer, v.HostOffset = o.HostBuffer, 0
		}},
		{"view misplaced", "view of its input", func(p *planpb.Plan) { valueNamed(p, "Slice7_0").HostOffset += 4 }},
		{"op run twice", "runs already", func(p *planpb.Plan) {
			st := p.Streams[executor.StreamCompute]
			st.Commands = append(st.Commands, st.Commands[find(p, executor.StreamCompute, isRun)])
		}},
		{"op on the wrong stream", "belongs on stream compute", func(p *planpb.Plan) {
			i := find(p, executor.StreamCompute, isRun)
			c := p.Streams[executor.StreamCompute].Commands[i]
			drop(p, executor.StreamCompute, i)
			p.Streams[executor.StreamD2H].Commands = append(p.Streams[executor.StreamD2H].Commands, c)
		}},
		{"op never run", "no command runs it", func(p *planpb.Plan) { drop(p, executor.StreamH2D, find(p, executor.StreamH2D, isRun)) }},
		{"a view run", "runs nothing", func(p *planpb.Plan) {
			for pos, o := range p.Ops {
				if o.Host && o.Name == "Slice7" {
					st := p.Streams[executor.StreamHost]
					st.Commands = append(st.Commands, &planpb.Command{Kind: &planpb.Command_Run{Run: int32(pos)}})
				}
			}
		}},
		{"event out of range", "the plan has", func(p *planpb.Plan) {
			st := p.Streams[executor.StreamHost]
			st.Commands = append(st.Commands, &planpb.Command{Kind: &planpb.Command_Wait{Wait: p.Events}})
		}},
		{"empty command", "is empty", func(p *planpb.Plan) {
			st := p.Streams[executor.StreamHost]
			st.Commands = append(st.Commands, &planpb.Command{})
		}},
		{"record missing", "which no stream records", func(p *planpb.Plan) {
			for s := range p.Streams {
				if i := find(p, s, isRecord); i >= 0 {
					drop(p, s, i)
					return
				}
			}
		}},
		{"event recorded twice", "recorded already", func(p *planpb.Plan) {
			for s := range p.Streams {
				if i := find(p, s, isRecord); i >= 0 {
					st := p.Streams[s]
					st.Commands = append(st.Commands, st.Commands[i])
					return
				}
			}
		}},
		{"deadlock", "which no stream records", func(p *planpb.Plan) {
			e := p.Events
			p.Events++
			st := p.Streams[executor.StreamCompute]
			st.Commands = slices.Insert(st.Commands, 0, &planpb.Command{Kind: &planpb.Command_Wait{Wait: e}})
			st.Commands = append(st.Commands, &planpb.Command{Kind: &planpb.Command_Record{Record: e}})
		}},
		{"read without waiting for its write", "without waiting for", func(p *planpb.Plan) {
			// The swap-ins wait for the copies and host kernels that
			// write what they read.
			st := p.Streams[executor.StreamH2D]
			st.Commands = slices.DeleteFunc(st.Commands, func(c *planpb.Command) bool { _, ok := c.Kind.(*planpb.Command_Wait); return ok })
		}},
		{"reuse without waiting for the last use", "over bytes of", func(p *planpb.Plan) {
			byD2H := map[int32]bool{}
			for _, c := range p.Streams[executor.StreamD2H].Commands {
				if r, ok := c.Kind.(*planpb.Command_Record); ok {
					byD2H[r.Record] = true
				}
			}
			st := p.Streams[executor.StreamCompute]
			st.Commands = slices.DeleteFunc(st.Commands, func(c *planpb.Command) bool {
				w, ok := c.Kind.(*planpb.Command_Wait)
				return ok && byD2H[w.Wait]
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := proto.Clone(good).(*planpb.Plan)
			tc.break_(p)
			data, err := Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Load(data, "broken.tsplan")
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Load gave %v, want an *Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "native plan broken.tsplan: ") {
				t.Fatalf("Load: %v\nwant an error naming the file and saying %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	good, _ := tinyPlan(t)
	data, err := Encode(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"ONNX model", "not a native plan", []byte{0x08, 0x08, 0x12, 0x04}},
		{"empty", "not a native plan", nil},
		{"header only", "truncated header", []byte(Magic)},
		{"newer version", "format version 2", append(append([]byte(Magic), 2, 0, 0, 0), data[headerBytes:]...)},
		{"truncated", "corrupt plan", data[:len(data)-3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.data, "x.tsplan")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzLoad feeds Load malformed plans: mutations of a good one, whose
// bytes the fuzzer changes anywhere. Load must refuse a bad plan with
// an *Error and never panic; a plan it accepts must run without a
// kernel panic on a CPU device of its pool.
func FuzzLoad(f *testing.F) {
	good, in := tinyPlan(f)
	data, err := Encode(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:headerBytes])
	f.Add([]byte(Magic + "\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Load(data, "fuzz.tsplan")
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Load failed without an *Error: %v", err)
			}
			return
		}
		runLoaded(t, l, in)
	})
}

// runLoaded runs a loaded plan on a CPU device of its pool: it may fail,
// but no kernel may panic.
func runLoaded(t *testing.T, l *Loaded, in map[string][]byte) {
	t.Helper()
	total := l.Program.Pool
	for _, n := range l.Program.Host {
		total += n
	}
	if total > 1<<26 {
		return // too large to run in a test
	}
	dev, err := cpu.New(l.Program.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Program.Run(context.Background(), dev, executor.ProgramRun{Inputs: in}); executor.IsPanic(err) {
		t.Fatalf("a kernel panicked on a plan Load accepted: %v", err)
	}
}

// FuzzCheck breaks the tiny plan field by field rather than byte by
// byte: each 4 bytes of the input pick a part of the plan (an
// allocation, a value, an op, a command) and a new number for one of
// its fields, so most mutants decode and reach the checks. Check must
// refuse a bad plan with an *Error and never panic; a plan it accepts
// must run without a kernel panic.
func FuzzCheck(f *testing.F) {
	good, in := tinyPlan(f)
	f.Add([]byte{})
	f.Add([]byte{0, 3, 1, 7})
	f.Add([]byte{2, 5, 0, 200, 4, 1, 2, 1})
	f.Add([]byte{5, 0, 2, 9, 5, 1, 1, 3, 3, 2, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := proto.Clone(good).(*planpb.Plan)
		for len(data) >= 4 {
			mutate(p, data[0], int(data[1]), int(data[2]), int32(int8(data[3])))
			data = data[4:]
		}
		l, err := Check(p, "fuzz.tsplan")
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Check failed without an *Error: %v", err)
			}
			return
		}
		runLoaded(t, l, in)
	})
}

// mutate sets one field of one part of p: what picks the field, i the
// part (modulo their number), j an element of a list, x the new value
// (small, signed: near the boundaries a check guards).
func mutate(p *planpb.Plan, what byte, i, j int, x int32) {
	pick := func(n int) int {
		if n == 0 {
			return -1
		}
		return i % n
	}
	switch what % 12 {
	case 0:
		if k := pick(len(p.Allocations)); k >= 0 {
			p.Allocations[k].Offset += int64(x) * 64
		}
	case 1:
		if k := pick(len(p.Allocations)); k >= 0 {
			p.Allocations[k].Bytes += int64(x) * 64
		}
	case 2:
		if k := pick(len(p.Allocations)); k >= 0 {
			if j%2 == 0 {
				p.Allocations[k].Start += x % 4
			} else {
				p.Allocations[k].End += x % 4
			}
		}
	case 3:
		if k := pick(len(p.Values)); k >= 0 && len(p.Values[k].Shape) > 0 {
			p.Values[k].Shape[j%len(p.Values[k].Shape)] += int64(x % 3)
		}
	case 4:
		if k := pick(len(p.Values)); k >= 0 {
			if j%2 == 0 {
				p.Values[k].Allocation += x % 3
			} else {
				p.Values[k].HostBuffer += x % 3
			}
		}
	case 5:
		if k := pick(len(p.Ops)); k >= 0 && len(p.Ops[k].Inputs) > 0 {
			p.Ops[k].Inputs[j%len(p.Ops[k].Inputs)] += x % 4
		}
	case 6:
		if k := pick(len(p.Ops)); k >= 0 && len(p.Ops[k].Outputs) > 0 {
			p.Ops[k].Outputs[j%len(p.Ops[k].Outputs)] += x % 4
		}
	case 7:
		if k := pick(len(p.Ops)); k >= 0 && len(p.Ops[k].Attributes) > 0 {
			a := p.Ops[k].Attributes[j%len(p.Ops[k].Attributes)]
			a.I += int64(x)
			if len(a.Ints) > 0 {
				a.Ints[int(x&0x7f)%len(a.Ints)] += int64(x % 5)
			}
		}
	case 8:
		if k := pick(len(p.Ops)); k >= 0 {
			p.Ops[k].Workspace += x % 3
		}
	case 9:
		st := p.Streams[i%len(p.Streams)]
		if len(st.Commands) > 0 {
			c := st.Commands[j%len(st.Commands)]
			switch k := c.Kind.(type) {
			case *planpb.Command_Run:
				k.Run += x % 4
			case *planpb.Command_Record:
				k.Record += x % 4
			case *planpb.Command_Wait:
				k.Wait += x % 4
			}
		}
	case 10:
		// Move a command to another place or stream.
		from := p.Streams[i%len(p.Streams)]
		if len(from.Commands) > 0 {
			at := j % len(from.Commands)
			c := from.Commands[at]
			from.Commands = slices.Delete(from.Commands, at, at+1)
			to := p.Streams[int(uint32(x))%len(p.Streams)]
			to.Commands = slices.Insert(to.Commands, int(uint32(x)>>2)%(len(to.Commands)+1), c)
		}
	case 11:
		if k := pick(len(p.HostBuffers)); k >= 0 {
			p.HostBuffers[k].Bytes += int64(x) * 16
		}
		p.Events += x % 2
	}
}
