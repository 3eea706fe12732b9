package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// A Program is a step lowered ahead of time for a device: every tensor
// at a fixed place (an offset in the pool, or a part of a host buffer),
// and one command list per stream whose order and events already say
// everything the Executor decides while it issues ops: which copy waits
// for which kernel, and when a block of the pool may be written again.
// It is the in-memory form of a native plan (backend/native), the one
// form a GPU runtime runs; Run executes it on any Device with the same
// streams, kernels and copies as the Executor.
//
// A Program must be checked before it runs (backend/native does, on
// every plan it lowers or loads): Run trusts that every wait has a
// record that the streams reach, and that commands writing a block of
// the pool are ordered after every earlier use of its bytes.
type Program struct {
	// Pool is the device memory the program needs, in bytes.
	Pool int64
	// Host are the sizes of the host buffers, allocated at each run.
	Host []int64
	// Streams are the command lists, indexed by StreamCompute…StreamHost.
	Streams [NumStreams][]Command
	// Events is the number of events the commands record and wait for.
	Events int
	// Setup fills tensors before the streams start (weights, graph
	// inputs, constants that host ops read); Outputs are read after the
	// streams end.
	Setup   []Binding
	Outputs []Binding
}

// Stream indexes of a Program.
const (
	StreamCompute = iota
	StreamD2H
	StreamH2D
	StreamHost
	NumStreams
)

// StreamNames are the streams' names, by index (the Executor's
// timeline uses the same).
var StreamNames = [NumStreams]string{Compute, D2H, H2D, Host}

// CmdKind is what a command does.
type CmdKind uint8

// Command kinds.
const (
	// CmdLaunch runs a compute kernel on the device (compute stream).
	CmdLaunch CmdKind = iota
	// CmdToHost copies In[0] (device) to Out[0] (host) (d2h stream).
	CmdToHost
	// CmdToDevice copies In[0] (host) to Out[0] (device) (h2d stream).
	CmdToDevice
	// CmdHostKernel runs a reference kernel over host buffers (host
	// stream).
	CmdHostKernel
	// CmdRecord signals Event once the stream's earlier commands are done.
	CmdRecord
	// CmdWait holds the stream until Event is signalled.
	CmdWait
)

// Command is one entry of a stream.
type Command struct {
	Kind CmdKind
	// Op is the op a launch, copy or host kernel performs: kernels read
	// its attributes, errors name it. Opset is its domain's version and
	// Pos its position in the schedule.
	Op    *ir.Op
	Opset int64
	Pos   int
	// In and Out follow the op's inputs and outputs (nil: absent).
	In, Out   []*Arg
	Workspace Ref
	// Event is the event a record or wait names.
	Event int
}

// Arg is a tensor a command reads or writes: a Ref into the device pool
// (Buf < 0) or into host buffer Buf (Ref.Off is the offset in it).
type Arg struct {
	Ref
	Buf int
	// Block is the size of a device tensor's allocation (alignment
	// makes it at least Bytes): the pool bytes the tensor occupies.
	Block int64
}

// OnDevice reports whether the argument is in the device pool.
func (a *Arg) OnDevice() bool { return a.Buf < 0 }

// end is the pool offset just past a device argument's bytes (0 for
// none, a host argument or an empty tensor).
func (a *Arg) end() int64 {
	if a == nil || !a.OnDevice() || a.Block == 0 {
		return 0
	}
	return a.Off + a.Block
}

// Binding ties a tensor to a graph name: a graph input or weight filled
// before the streams start (Default is a weight's or constant's data,
// used when the run is not given the name), or an output read after.
type Binding struct {
	Name    string
	Arg     Arg
	Default []byte
}

// ProgramResult is what one run of a Program returns.
type ProgramResult struct {
	// Outputs holds the graph outputs by name, as host bytes.
	Outputs map[string][]byte
	// Reach is the device high-water: the highest pool byte a command
	// touched (the pool never grows, so this is all a device can use).
	Reach int64
	// Timeline has a record per launch, copy and host kernel run, each
	// stream's in its order (Summarize sums it per stream). A record's
	// Issued is when its stream turned to it, before the waits in
	// front of it: the time from Issued to Start is what it waited for
	// other streams.
	Timeline []Record
	Duration time.Duration
}

// ProgramRun is what one run of a Program is given.
type ProgramRun struct {
	// Inputs gives graph inputs, and weights to replace, by name.
	Inputs map[string][]byte
	// Step counts runs of the step (random ops draw from it).
	Step int64
	// CheckFinite is the Executor's finite check (Options.CheckFinite):
	// the run stops at the first launch whose output holds a NaN, or a
	// ±Inf none of its inputs holds, or at a fed input holding one.
	CheckFinite bool
	// Link paces the copies of the d2h and h2d streams (the Executor's
	// Options.Link).
	Link Link
}

// Run executes one step of p on dev: setup fills, then the four
// streams concurrently, then the outputs. It stops between commands
// once ctx is done. The device's pool must hold p.Pool bytes.
func (p *Program) Run(ctx context.Context, dev Device, r ProgramRun) (*ProgramResult, error) {
	if have := dev.PoolBytes(); have < p.Pool {
		return nil, fmt.Errorf("executor: the program needs a pool of %d bytes, the device has %d", p.Pool, have)
	}
	t0 := time.Now()
	host := make([][]byte, len(p.Host))
	for i, n := range p.Host {
		host[i] = make([]byte, n)
	}
	hostBytes := func(a *Arg) []byte { return host[a.Buf][a.Off : a.Off+a.Bytes : a.Off+a.Bytes] }
	res := &ProgramResult{Outputs: map[string][]byte{}}

	for _, f := range p.Setup {
		data, given := r.Inputs[f.Name]
		if !given {
			data = f.Default
		}
		if data == nil && f.Arg.Bytes > 0 {
			return nil, fmt.Errorf("executor: no data for graph input %q", f.Name)
		}
		if int64(len(data)) != f.Arg.Bytes {
			return nil, fmt.Errorf("executor: input %q has %d bytes, its type %v%v needs %d", f.Name, len(data), f.Arg.DType, f.Arg.Shape, f.Arg.Bytes)
		}
		if r.CheckFinite {
			// Fed data must be finite; a weight may hold ±Inf (a mask
			// constant), never NaN (checkInput).
			fed := f.Default == nil
			if i, x := firstNonFinite(f.Arg.DType, data, fed); i >= 0 {
				return nil, fmt.Errorf("executor: %w", &NonFiniteError{Value: f.Name, Input: true, Index: i, Elem: x})
			}
		}
		if !f.Arg.OnDevice() {
			copy(hostBytes(&f.Arg), data)
			continue
		}
		res.Reach = max(res.Reach, f.Arg.end())
		if err := dev.ToDevice(f.Arg.Ref, data); err != nil {
			return nil, fmt.Errorf("executor: uploading %q: %w", f.Name, err)
		}
	}

	events := make([]*event, p.Events)
	for i := range events {
		events[i] = newEvent()
	}
	// Reach and the timeline are kept per stream and joined after the
	// run: the streams run concurrently.
	var reach [NumStreams]int64
	var timelines [NumStreams][]Record
	var failed [NumStreams]error
	var wg sync.WaitGroup
	for s := range p.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// err is the stream's first failure, or that of a stream it
			// waited for: the commands after it are skipped, and the
			// events it records carry it, so the streams waiting on them
			// stop too instead of computing with missing data.
			var err error
			issued := time.Since(t0)
			for i := range p.Streams[s] {
				c := &p.Streams[s][i]
				switch c.Kind {
				case CmdRecord:
					e := events[c.Event]
					e.err = err
					close(e.done)
					continue
				case CmdWait:
					if werr := events[c.Event].wait(); werr != nil && err == nil {
						err = errSkipped{werr}
					}
					continue
				}
				if err != nil {
					continue
				}
				if err = ctx.Err(); err != nil {
					continue
				}
				for _, a := range c.In {
					reach[s] = max(reach[s], a.end())
				}
				for _, a := range c.Out {
					reach[s] = max(reach[s], a.end())
				}
				if c.Workspace.Bytes > 0 {
					reach[s] = max(reach[s], c.Workspace.Off+c.Workspace.Bytes)
				}
				rec := Record{Pos: c.Pos, Op: c.Op, Stream: StreamNames[s], Issued: issued}
				t := &task{op: c.Op, run: c.runner(dev, r, hostBytes)}
				rec.Start = time.Since(t0)
				err = t.perform()
				rec.End = time.Since(t0)
				timelines[s] = append(timelines[s], rec)
				issued = rec.End
			}
			failed[s] = err
		}()
	}
	wg.Wait()
	for _, tl := range timelines {
		res.Timeline = append(res.Timeline, tl...)
	}
	// The first failure that is not a skip is the cause; a skip alone
	// (a failed setup of another stream) reports what it skipped for.
	var first error
	for _, err := range failed {
		var sk errSkipped
		if err != nil && !errors.As(err, &sk) {
			first = err
			break
		}
		if err != nil && first == nil {
			first = sk.cause
		}
	}
	if first != nil {
		return nil, fmt.Errorf("executor: %w", first)
	}
	for _, r := range reach {
		res.Reach = max(res.Reach, r)
	}

	for _, o := range p.Outputs {
		if !o.Arg.OnDevice() {
			res.Outputs[o.Name] = hostBytes(&o.Arg)
			continue
		}
		buf := make([]byte, o.Arg.Bytes)
		if err := dev.ToHost(buf, o.Arg.Ref); err != nil {
			return nil, fmt.Errorf("executor: reading output %q: %w", o.Name, err)
		}
		res.Outputs[o.Name] = buf
	}
	res.Duration = time.Since(t0)
	return res, nil
}

// runner is the work of a launch, copy or host kernel.
func (c *Command) runner(dev Device, r ProgramRun, hostBytes func(*Arg) []byte) func() error {
	step := r.Step
	switch c.Kind {
	case CmdToHost:
		src, dst := c.In[0], c.Out[0]
		return func() error {
			start := time.Now()
			err := dev.ToHost(hostBytes(dst), src.Ref)
			r.Link.Pace(start, src.Bytes, true)
			return err
		}
	case CmdToDevice:
		src, dst := c.In[0], c.Out[0]
		return func() error {
			start := time.Now()
			err := dev.ToDevice(dst.Ref, hostBytes(src))
			r.Link.Pace(start, dst.Bytes, false)
			return err
		}
	case CmdHostKernel:
		return func() error {
			k := kernels.Lookup(c.Op.Domain, c.Op.Type)
			if k == nil {
				return fmt.Errorf("no host kernel")
			}
			kc := &kernels.Ctx{Op: c.Op, In: hostTensors(c.In, hostBytes), Out: hostTensors(c.Out, hostBytes), Step: step, Opset: c.Opset}
			return k.Run(kc)
		}
	}
	l := &Launch{Op: c.Op, Opset: c.Opset, In: refs(c.In), Out: refs(c.Out), Workspace: c.Workspace, Step: step}
	if r.CheckFinite {
		return func() error {
			if err := dev.Launch(l); err != nil {
				return err
			}
			return checkLaunch(dev, l)
		}
	}
	return func() error { return dev.Launch(l) }
}

func refs(args []*Arg) []*Ref {
	out := make([]*Ref, len(args))
	for i, a := range args {
		if a != nil {
			out[i] = &a.Ref
		}
	}
	return out
}

func hostTensors(args []*Arg, hostBytes func(*Arg) []byte) []*kernels.Tensor {
	out := make([]*kernels.Tensor, len(args))
	for i, a := range args {
		if a != nil {
			out[i] = &kernels.Tensor{DType: a.DType, Shape: a.Shape, Data: hostBytes(a)}
		}
	}
	return out
}
