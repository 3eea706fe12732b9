package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
	"github.com/tsplit/tsplit/memory"
)

// Options configure an Executor.
type Options struct {
	// Placement, when set, gives a fixed pool offset for every interval
	// of the memory model (a plan's static layout); otherwise tensors are
	// placed by the best-fit allocator.
	Placement []int64
	// Memory overrides the memory-model options (workspace sizes).
	Memory memory.Options
	// CheckFinite stops the run at the first op output, fed input or
	// weight that holds a NaN or ±Inf (finite.go): a *NonFiniteError,
	// inside an *OpError naming the op when an op computed it.
	CheckFinite bool
	// Link paces the copy streams (link.go; zero: as fast as the device
	// copies).
	Link Link
}

// Executor runs one graph on one device. It assumes it is the only user
// of the device's pool (it leaves weights there between runs).
type Executor struct {
	Model *ir.Model
	Mem   *memory.Model
	Dev   Device
	opts  Options
	step  int64
	// kept remembers, per weight interval, what the previous run left in
	// the pool: the offset and the host data it was uploaded from. A
	// weight whose offset and source are unchanged is still in place
	// (weights are allocated first, in the same order, every run, and
	// nothing else writes the pool between runs), so it is not copied
	// again — as a GPU runtime keeps weights resident across steps.
	kept map[int]upload
}

type upload struct {
	off  int64
	data *byte
	n    int
}

// New checks that the device can run every op and builds the memory
// model of the graph's order.
func New(m *ir.Model, dev Device, opts Options) (*Executor, error) {
	for _, op := range m.Graph.Order() {
		switch ir.CopyOf(op) {
		case ir.NoCopy:
			if err := dev.Check(op); err != nil {
				return nil, fmt.Errorf("executor: %w", err)
			}
		case ir.OnHost:
			if err := kernels.Supported(op); err != nil {
				return nil, fmt.Errorf("executor: host op: %w", err)
			}
		}
	}
	mem, err := memory.Analyze(m.Graph, opts.Memory)
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if opts.Placement != nil && len(opts.Placement) != len(mem.Intervals) {
		return nil, fmt.Errorf("executor: placement has %d offsets, the memory model %d tensors", len(opts.Placement), len(mem.Intervals))
	}
	return &Executor{Model: m, Mem: mem, Dev: dev, opts: opts}, nil
}

// Stream names, as recorded in the timeline.
const (
	Compute = "compute"
	D2H     = "d2h"
	H2D     = "h2d"
	// Host runs host-placed ops (rearranging swapped pieces in host
	// memory) with the reference kernels, whatever the device.
	Host = "host"
)

// Record is the timeline entry of one op.
type Record struct {
	Pos    int
	Op     *ir.Op
	Stream string
	// Issued is when the op was handed to its stream, Start and End
	// when it ran, all relative to the start of Run.
	Issued, Start, End time.Duration
	// Live is the device bytes allocated while the op runs; HighWater the
	// most allocated so far; Fragmentation 1 − largest free block / free.
	Live, HighWater int64
	Fragmentation   float64
}

// Result is what one run returns.
type Result struct {
	// Outputs holds the graph outputs by name, as host bytes.
	Outputs map[string][]byte
	// Timeline has one record per op, in order.
	Timeline []Record
	// HighWater is the most device bytes allocated at once (measured).
	HighWater int64
	// Reach is the highest pool offset used.
	Reach    int64
	Duration time.Duration
}

// AllocError is an allocation that did not fit the pool.
type AllocError struct {
	Op     string // the op being prepared, or "setup"
	Tensor string
	*memory.AllocError
}

func (e *AllocError) Error() string {
	return fmt.Sprintf("out of device memory at %s: tensor %s: %v", e.Op, e.Tensor, e.AllocError)
}

// Run executes one step. inputs maps graph input names to host bytes;
// missing inputs are an error. A weight may be given too: it replaces
// the initializer's data (training state fed back between steps).
func (x *Executor) Run(inputs map[string][]byte) (*Result, error) {
	return x.RunContext(context.Background(), inputs)
}

// RunContext is Run that stops between ops once ctx is done: no op
// starts after that, the ops already running finish, and the step
// fails with the context's error (the weights kept on the device stay
// valid for the next run).
func (x *Executor) RunContext(ctx context.Context, inputs map[string][]byte) (*Result, error) {
	g := x.Model.Graph
	mem := x.Mem
	t0 := time.Now()
	compute, d2h, h2d, hostS := newStream(ctx, Compute, t0), newStream(ctx, D2H, t0), newStream(ctx, H2D, t0), newStream(ctx, Host, t0)
	streams := []*stream{compute, d2h, h2d, hostS}
	defer func() {
		for _, s := range streams {
			s.close()
		}
	}()

	pool := memory.NewBestFit(x.Dev.PoolBytes())
	offs := make([]int64, len(mem.Intervals))
	placed := make([]bool, len(mem.Intervals))
	var fixed struct{ used, high, reach int64 }
	alloc := func(idx int, at string) error {
		iv := &mem.Intervals[idx]
		if x.opts.Placement != nil {
			off := x.opts.Placement[idx]
			if pool := x.Dev.PoolBytes(); off < 0 || iv.Bytes > pool || off > pool-iv.Bytes {
				return &AllocError{Op: at, Tensor: iv.Name(), AllocError: &memory.AllocError{Asked: iv.Bytes, Free: x.Dev.PoolBytes() - fixed.used, Pool: x.Dev.PoolBytes()}}
			}
			offs[idx] = off
			fixed.used += iv.Bytes
			fixed.high = max(fixed.high, fixed.used)
			fixed.reach = max(fixed.reach, off+iv.Bytes)
		} else {
			off, err := pool.Alloc(iv.Bytes)
			if err != nil {
				var ae *memory.AllocError
				errors.As(err, &ae)
				return &AllocError{Op: at, Tensor: iv.Name(), AllocError: ae}
			}
			offs[idx] = off
		}
		placed[idx] = true
		return nil
	}
	free := func(idx int) {
		if x.opts.Placement != nil {
			fixed.used -= mem.Intervals[idx].Bytes
		} else {
			pool.Free(offs[idx], mem.Intervals[idx].Bytes)
		}
		placed[idx] = false
	}
	used := func() (int64, int64, float64) {
		if x.opts.Placement != nil {
			return fixed.used, fixed.high, 0
		}
		return pool.Used(), pool.HighWater(), pool.Fragmentation()
	}

	ref := func(v *ir.Value) *Ref {
		if v == nil {
			return nil
		}
		idx := mem.ByValue[v.ID]
		if idx < 0 {
			return nil
		}
		b, _ := v.Shape.Bytes(v.DType)
		return &Ref{DType: v.DType, Shape: v.Shape, Off: offs[idx], Bytes: b}
	}

	nv := g.NumValueIDs()
	ready := make([]*event, nv) // when each value's data is available
	host := make([][]byte, nv)  // host-resident values (swapped out)
	// touched[interval] lists the events of every task that reads or
	// writes it; a free waits for all of them.
	touched := make([][]*event, len(mem.Intervals))
	doneEvent := func() *event {
		e := newEvent()
		close(e.done)
		return e
	}

	ev := mem.Events
	k := 0
	// Setup: place and fill weights and inputs.
	for ; k < len(ev) && ev[k].Pos < 0; k++ {
		if err := alloc(ev[k].Interval, "setup"); err != nil {
			return nil, err
		}
		iv := &mem.Intervals[ev[k].Interval]
		v := iv.Value
		data, given := inputs[v.Name]
		switch {
		case given && v.Kind == ir.KindInit:
			// A weight fed as an input: the state of a training step
			// carried over from the previous step.
		case v.Kind == ir.KindInit:
			t, err := v.Data()
			if err != nil || t == nil {
				return nil, fmt.Errorf("executor: weight %q: no data (%v)", v.Name, err)
			}
			data = t.Raw
		default:
			if !given {
				return nil, fmt.Errorf("executor: no data for graph input %q", v.Name)
			}
		}
		r := ref(v)
		if int64(len(data)) != r.Bytes {
			return nil, fmt.Errorf("executor: input %q has %d bytes, its type %v%v needs %d", v.Name, len(data), v.DType, v.Shape, r.Bytes)
		}
		idx := ev[k].Interval
		var src *byte
		if len(data) > 0 {
			src = &data[0]
		}
		if u, ok := x.kept[idx]; !ok || v.Kind != ir.KindInit || u.off != r.Off || u.data != src || u.n != len(data) {
			if x.opts.CheckFinite {
				if err := checkInput(v, data); err != nil {
					return nil, fmt.Errorf("executor: %w", err)
				}
			}
			if err := x.Dev.ToDevice(*r, data); err != nil {
				return nil, fmt.Errorf("executor: uploading %q: %w", v.Name, err)
			}
		}
		if v.Kind == ir.KindInit && mem.Intervals[idx].End >= len(g.Order()) {
			// Only weights that stay to the end keep their bytes between
			// runs; a replaced weight's slot is reused within the step.
			if x.kept == nil {
				x.kept = map[int]upload{}
			}
			x.kept[idx] = upload{off: r.Off, data: src, n: len(data)}
		}
		ready[v.ID] = doneEvent()
	}

	// Host-resident weights (memory.HostResident: parameters and
	// optimizer state a plan offloaded) are never on the device: their
	// data stays in host memory, where the swap-ins that bring them in
	// before each use read it.
	for _, v := range hostState(g) {
		data, given := inputs[v.Name]
		if !given {
			if v.Kind != ir.KindInit {
				return nil, fmt.Errorf("executor: no data for graph input %q", v.Name)
			}
			t, err := v.Data()
			if err != nil || t == nil {
				return nil, fmt.Errorf("executor: weight %q: no data (%v)", v.Name, err)
			}
			data = t.Raw
		}
		if int64(len(data)) != v.Bytes() {
			return nil, fmt.Errorf("executor: input %q has %d bytes, its type %v%v needs %d", v.Name, len(data), v.DType, v.Shape, v.Bytes())
		}
		if x.opts.CheckFinite {
			if err := checkInput(v, data); err != nil {
				return nil, fmt.Errorf("executor: %w", err)
			}
		}
		host[v.ID] = data
		ready[v.ID] = doneEvent()
	}

	order := g.Order()
	timeline := make([]Record, len(order))
	opDone := make([]*event, len(order))
	var firstErr error
	waitAll := func(evs []*event) {
		for _, e := range evs {
			if e == nil {
				continue // an op not issued: the loop stopped early
			}
			if err := e.wait(); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}

	// In-place merges (TSPLIT §V-C): each piece's swap-out writes into
	// its part of the merged host buffer, so the host Concat copies
	// nothing.
	inPlace := map[ir.OpID]bool{}
	for _, op := range order {
		if !ir.InPlaceConcat(op) {
			continue
		}
		inPlace[op.ID] = true
		y := op.Output(0)
		buf := make([]byte, y.Bytes())
		host[y.ID] = buf
		var off int64
		for _, v := range op.Inputs() {
			n := v.Bytes()
			host[v.ID] = buf[off : off+n : off+n]
			off += n
		}
	}

	for i, op := range order {
		if err := ctx.Err(); err != nil {
			firstErr = err
			break
		}
		for ; k < len(ev) && ev[k].Pos == i && !ev[k].Free; k++ {
			if err := alloc(ev[k].Interval, op.Describe()); err != nil {
				for _, e := range opDone[:i] {
					e.wait()
				}
				return nil, err
			}
		}
		rec := &timeline[i]
		rec.Pos, rec.Op = i, op
		rec.Live, rec.HighWater, rec.Fragmentation = used()

		var deps []*event
		for _, v := range op.Inputs() {
			if v == nil {
				continue
			}
			if ready[v.ID] == nil {
				return nil, fmt.Errorf("executor: %s reads %q before it is computed", op.Describe(), v.Name)
			}
			deps = append(deps, ready[v.ID])
		}
		done := newEvent()
		rec.Issued = time.Since(t0)
		t := &task{op: op, deps: deps, done: done, start: &rec.Start, end: &rec.End}
		switch ir.CopyOf(op) {
		case ir.ToHost:
			src, out := op.Input(0), op.Output(0)
			r := ref(src)
			if r == nil {
				return nil, fmt.Errorf("executor: %s: %q is not in device memory", op.Describe(), src.Name)
			}
			buf := host[out.ID] // part of an in-place merge
			if buf == nil {
				buf = make([]byte, r.Bytes)
				host[out.ID] = buf
			}
			rr := *r
			t.run = func() error {
				start := time.Now()
				err := x.Dev.ToHost(buf, rr)
				x.opts.Link.Pace(start, rr.Bytes, true)
				return err
			}
			rec.Stream = D2H
			d2h.submit(t)
		case ir.OnHost:
			if inPlace[op.ID] {
				// Its pieces are already in place: the task only orders
				// the readers of the merge after every piece.
				t.run = func() error { return nil }
				rec.Stream = Host
				hostS.submit(t)
				break
			}
			if off, ok := ir.ViewOf(op); ok {
				// A view of a host tensor (ir.ViewOf: a contiguous Slice): no
				// copy (TSPLIT §V-C). The task only orders its readers
				// after the input's producer.
				src, out := op.Input(0), op.Output(0)
				buf := host[src.ID]
				if buf == nil && src.Kind == ir.KindInit {
					if t, err := src.Data(); err == nil && t != nil {
						buf = t.Raw
					}
				}
				if buf == nil || off+out.Bytes() > int64(len(buf)) {
					return nil, fmt.Errorf("executor: %s: %q is not in host memory", op.Describe(), src.Name)
				}
				host[out.ID] = buf[off : off+out.Bytes() : off+out.Bytes()]
				t.run = func() error { return nil }
				rec.Stream = Host
				hostS.submit(t)
				break
			}
			in := make([]*kernels.Tensor, len(op.Inputs()))
			for j, v := range op.Inputs() {
				if v == nil {
					continue
				}
				buf := host[v.ID]
				if buf == nil && v.Kind == ir.KindInit {
					t, err := v.Data() // a constant, read from the model
					if err != nil || t == nil {
						return nil, fmt.Errorf("executor: %s: constant %q has no data (%v)", op.Describe(), v.Name, err)
					}
					buf = t.Raw
				}
				if buf == nil {
					return nil, fmt.Errorf("executor: %s: %q is not in host memory", op.Describe(), v.Name)
				}
				in[j] = &kernels.Tensor{DType: v.DType, Shape: v.Shape, Data: buf}
			}
			out := make([]*kernels.Tensor, len(op.Outputs()))
			over := ir.InPlaceHost(op)
			for j, v := range op.Outputs() {
				if v != nil {
					var buf []byte
					if over >= 0 {
						buf = in[over].Data // written over its input (ir.InPlaceHost)
					} else {
						buf = make([]byte, v.Bytes())
					}
					host[v.ID] = buf
					out[j] = &kernels.Tensor{DType: v.DType, Shape: v.Shape, Data: buf}
				}
			}
			k := kernels.Lookup(op.Domain, op.Type)
			if k == nil {
				return nil, fmt.Errorf("executor: %s: no host kernel", op.Describe())
			}
			c := &kernels.Ctx{Op: op, In: in, Out: out, Step: x.step, Opset: x.Model.Opset(op.Domain)}
			t.run = func() error { return k.Run(c) }
			rec.Stream = Host
			hostS.submit(t)
		case ir.ToDevice:
			src, out := op.Input(0), op.Output(0)
			buf := host[src.ID]
			if buf == nil {
				return nil, fmt.Errorf("executor: %s: %q is not in host memory", op.Describe(), src.Name)
			}
			rr := *ref(out)
			t.run = func() error {
				start := time.Now()
				err := x.Dev.ToDevice(rr, buf)
				x.opts.Link.Pace(start, rr.Bytes, false)
				return err
			}
			rec.Stream = H2D
			h2d.submit(t)
		default:
			in := make([]*Ref, len(op.Inputs()))
			for j, v := range op.Inputs() {
				in[j] = ref(v)
				if v != nil && in[j] == nil {
					return nil, fmt.Errorf("executor: %s: input %q is not in device memory (swapped out without a swap-in?)", op.Describe(), v.Name)
				}
			}
			out := make([]*Ref, len(op.Outputs()))
			for j, v := range op.Outputs() {
				out[j] = ref(v)
			}
			var ws Ref
			if w := mem.WorkspaceAt[i]; w >= 0 {
				ws = Ref{Off: offs[w], Bytes: mem.Intervals[w].Bytes}
				touched[w] = append(touched[w], done)
			}
			l := &Launch{Op: op, Opset: x.Model.Opset(op.Domain), In: in, Out: out, Workspace: ws, Step: x.step}
			t.run = func() error { return x.Dev.Launch(l) }
			if x.opts.CheckFinite {
				t.run = func() error {
					if err := x.Dev.Launch(l); err != nil {
						return err
					}
					return x.checkOutputs(l)
				}
			}
			if emptyOutputs(out) {
				// Nothing to write (an output shape such as [4,0]): the
				// kernel is not launched, so no kernel has to guard
				// against empty tensors for ops whose results are empty.
				t.run = func() error { return nil }
			}
			rec.Stream = Compute
			compute.submit(t)
		}
		opDone[i] = done
		for _, v := range op.Inputs() {
			if v != nil {
				if idx := mem.ByValue[v.ID]; idx >= 0 {
					touched[idx] = append(touched[idx], done)
				}
			}
		}
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			ready[v.ID] = done
			if idx := mem.ByValue[v.ID]; idx >= 0 {
				touched[idx] = append(touched[idx], done)
			}
		}
		// Frees after op i: wait for every task touching the tensor.
		for ; k < len(ev) && ev[k].Pos == i && ev[k].Free; k++ {
			idx := ev[k].Interval
			waitAll(touched[idx])
			touched[idx] = nil
			free(idx)
		}
		if firstErr != nil {
			break
		}
	}
	waitAll(opDone)
	if firstErr != nil {
		var sk errSkipped
		if errors.As(firstErr, &sk) {
			firstErr = sk.cause
		}
		return nil, fmt.Errorf("executor: %w", firstErr)
	}

	res := &Result{Outputs: map[string][]byte{}, Timeline: timeline}
	for _, v := range g.Outputs {
		if buf := host[v.ID]; buf != nil {
			res.Outputs[v.Name] = buf
			continue
		}
		r := ref(v)
		if r == nil {
			return nil, fmt.Errorf("executor: graph output %q is not in device memory", v.Name)
		}
		buf := make([]byte, r.Bytes)
		if err := x.Dev.ToHost(buf, *r); err != nil {
			return nil, fmt.Errorf("executor: reading output %q: %w", v.Name, err)
		}
		res.Outputs[v.Name] = buf
	}
	_, res.HighWater, _ = used()
	if x.opts.Placement != nil {
		res.Reach = fixed.reach
	} else {
		res.Reach = pool.Reach()
	}
	res.Duration = time.Since(t0)
	x.step++
	return res, nil
}

// hostState lists g's host-resident weights (memory.HostResident):
// Param graph inputs, then initializers, in declaration order.
func hostState(g *ir.Graph) []*ir.Value {
	var out []*ir.Value
	for _, v := range g.Inputs {
		if v.Kind != ir.KindInit && v.Param && memory.HostResident(v) {
			out = append(out, v)
		}
	}
	for _, v := range g.Inits {
		if memory.HostResident(v) {
			out = append(out, v)
		}
	}
	return out
}

// emptyOutputs reports whether an op's outputs hold no bytes at all.
func emptyOutputs(out []*Ref) bool {
	for _, r := range out {
		if r != nil && r.Bytes > 0 {
			return false
		}
	}
	return true
}
