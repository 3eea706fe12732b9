package native

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tsplit/tsplit/backend/native/planpb"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/internal/quote"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
)

// places checks where every value lives: a device value in an
// allocation that starts with it (before the first op for weights and
// inputs, at its op otherwise), a host value in a host buffer, a host
// view inside its input's bytes, a piece of an in-place merge in its
// part of the merged buffer, and no two values written into host
// memory sharing a byte.
func (c *checker) places() error {
	p := c.p
	nops := int32(len(p.Ops))
	pos := c.m.Graph.Position()
	for i, pv := range p.Values {
		v := c.vals[i]
		where := c.valueName(i)
		onHost := c.onHost(i)
		switch {
		case onHost && (pv.HostBuffer == 0 || pv.Allocation != 0):
			return c.fail(where, "is a host tensor: it needs a host buffer and no allocation")
		case !onHost && pv.Allocation == 0:
			return c.fail(where, "is a device tensor without an allocation")
		case !onHost && pv.HostBuffer != 0 && v.Kind != ir.KindInit:
			return c.fail(where, "is a device tensor with a host buffer (only constants that host ops read have both)")
		}
		if onHost {
			continue
		}
		a := p.Allocations[pv.Allocation-1]
		kind := planpb.Allocation_ACTIVATION
		start := int32(-1)
		switch {
		case v.Kind == ir.KindInit || v.Param:
			kind = planpb.Allocation_WEIGHT
		case v.Kind == ir.KindInput:
			kind = planpb.Allocation_INPUT
		default:
			start = int32(pos[v.Def.ID])
		}
		if a.Kind != kind || a.Start != start {
			return c.fail(where, "its allocation %d is a %v from position %d; a %v from position %d is expected", pv.Allocation-1, a.Kind, a.Start, kind, start)
		}
	}
	for _, v := range c.m.Graph.Outputs {
		i := c.index(v)
		if a := p.Values[i].Allocation - 1; a >= 0 && p.Allocations[a].End != nops {
			return c.fail(c.valueName(i), "is a graph output, read after the last op, but its allocation %d ends at position %d", a, p.Allocations[a].End)
		}
	}

	// Host values that run nothing must be where their op puts them.
	for pos, op := range c.ops {
		if ir.CopyOf(op) != ir.OnHost {
			continue
		}
		for _, v := range op.Inputs() {
			if v != nil && p.Values[c.index(v)].HostBuffer == 0 {
				return c.fail(c.opName(pos), "runs on the host, but its input %s has no host buffer", quote.Name(v.Name))
			}
		}
		if _, runs := streamOf(op); runs {
			continue
		}
		y := p.Values[c.index(op.Output(0))]
		if ir.InPlaceConcat(op) {
			off := y.HostOffset
			for _, v := range op.Inputs() {
				pv := p.Values[c.index(v)]
				if pv.HostBuffer != y.HostBuffer || pv.HostOffset != off {
					return c.fail(c.opName(pos), "merges in place, but its piece %s is not at its part of the merged buffer", quote.Name(v.Name))
				}
				off += v.Bytes()
			}
			continue
		}
		off, _ := ir.ViewOf(op)
		x := p.Values[c.index(op.Input(0))]
		if x.HostBuffer == 0 || y.HostBuffer != x.HostBuffer || y.HostOffset != x.HostOffset+off {
			return c.fail(c.opName(pos), "is a view of its input on the host, but its output is not at the input's bytes plus %d", off)
		}
	}

	// Host bytes are written once: by setup (constants) or by the
	// command that defines the value.
	type region struct {
		lo, hi int64
		value  int
	}
	written := make([][]region, len(p.HostBuffers))
	for i, pv := range p.Values {
		v := c.vals[i]
		if pv.HostBuffer == 0 {
			continue
		}
		if v.Kind != ir.KindInit && v.Def != nil {
			if _, runs := streamOf(v.Def); !runs {
				continue // a view or a merge: written by others
			}
			if j := ir.InPlaceHost(v.Def); j >= 0 {
				if x := p.Values[c.index(v.Def.Input(j))]; x.HostBuffer == pv.HostBuffer && x.HostOffset == pv.HostOffset {
					continue // written over its input, which it alone reads
				}
			}
		}
		h := pv.HostBuffer - 1
		written[h] = append(written[h], region{pv.HostOffset, pv.HostOffset + v.Bytes(), i})
	}
	for h, rs := range written {
		slices.SortStableFunc(rs, func(a, b region) int { return cmp.Compare(a.lo, b.lo) })
		for k := 1; k < len(rs); k++ {
			if rs[k].lo < rs[k-1].hi && rs[k].hi > rs[k].lo {
				return c.fail(fmt.Sprintf("host buffer %d", h), "%s and %s are both written to its bytes %d–%d", c.valueName(rs[k-1].value), c.valueName(rs[k].value), rs[k].lo, rs[k-1].hi)
			}
		}
	}
	return nil
}

// index is the plan's index of an IR value.
func (c *checker) index(v *ir.Value) int { return c.indexOf[v.ID] }

// commands checks the command lists: every op that runs has exactly one
// command, on its stream; every event is recorded exactly once.
func (c *checker) commands() error {
	p := c.p
	c.runOf = make([]cmdRef, len(p.Ops))
	recorded := make([]bool, p.Events)
	for s, st := range p.Streams {
		for i, cmd := range st.Commands {
			where := fmt.Sprintf("stream %s command %d", executor.StreamNames[s], i)
			switch k := cmd.Kind.(type) {
			case *planpb.Command_Run:
				pos := k.Run
				if pos < 0 || int(pos) >= len(p.Ops) {
					return c.fail(where, "runs op %d; the schedule has %d", pos, len(p.Ops))
				}
				want, runs := streamOf(c.ops[pos])
				switch {
				case !runs:
					return c.fail(where, "runs %s, which runs nothing (a host view or merge, or no output bytes)", c.opName(int(pos)))
				case want != s:
					return c.fail(where, "runs %s, which belongs on stream %s", c.opName(int(pos)), executor.StreamNames[want])
				case c.runOf[pos].n != 0:
					return c.fail(where, "runs %s, which %s runs already", c.opName(int(pos)), c.cmdName(c.runOf[pos]))
				}
				c.work[s] = append(c.work[s], pos)
				c.cmds[s] = append(c.cmds[s], i)
				c.runOf[pos] = cmdRef{s, int32(len(c.work[s]))}
			case *planpb.Command_Record:
				if k.Record < 0 || k.Record >= p.Events {
					return c.fail(where, "records event %d; the plan has %d", k.Record, p.Events)
				}
				if recorded[k.Record] {
					return c.fail(where, "records event %d, recorded already", k.Record)
				}
				recorded[k.Record] = true
			case *planpb.Command_Wait:
				if k.Wait < 0 || k.Wait >= p.Events {
					return c.fail(where, "waits for event %d; the plan has %d", k.Wait, p.Events)
				}
			default:
				return c.fail(where, "is empty")
			}
		}
	}
	for pos, op := range c.ops {
		if _, runs := streamOf(op); runs && c.runOf[pos].n == 0 {
			return c.fail(c.opName(pos), "no command runs it")
		}
	}
	return nil
}

// order runs the streams symbolically, as a device would, to give every
// work command its clock (which commands of other streams have surely
// completed when it starts); a wait whose event no reachable record
// signals is a deadlock. Then every read must come after its writes and
// every use of the pool inside its allocation's lifetime.
func (c *checker) order() error {
	p := c.p
	var at [executor.NumStreams]int // next command per stream
	var now [executor.NumStreams]clock
	signalled := make([]*clock, p.Events)
	for s := range c.clocks {
		c.clocks[s] = make([]clock, 0, len(c.work[s]))
	}
	// advance runs stream s until it ends or waits for an event not
	// yet signalled; it reports whether it ran anything.
	advance := func(s int) bool {
		st := p.Streams[s]
		start := at[s]
		for ; at[s] < len(st.Commands); at[s]++ {
			switch k := st.Commands[at[s]].Kind.(type) {
			case *planpb.Command_Wait:
				e := signalled[k.Wait]
				if e == nil {
					return at[s] > start
				}
				now[s].join(*e)
			case *planpb.Command_Record:
				e := now[s]
				signalled[k.Record] = &e
			case *planpb.Command_Run:
				now[s][s]++
				c.clocks[s] = append(c.clocks[s], now[s])
			}
		}
		return at[s] > start
	}
	for {
		moved := false
		for s := range p.Streams {
			moved = advance(s) || moved
		}
		if moved {
			continue
		}
		for s, st := range p.Streams {
			if at[s] < len(st.Commands) {
				e := st.Commands[at[s]].GetWait()
				return c.fail(fmt.Sprintf("stream %s command %d", executor.StreamNames[s], at[s]), "waits for event %d, which no stream records before waiting itself (a deadlock or a missing record)", e)
			}
		}
		break
	}

	// Reads after writes. writers[v] are the commands whose completion
	// makes v's data available.
	writers := make([][]cmdRef, c.m.Graph.NumValueIDs())
	for pos, op := range c.ops {
		r := c.runOf[pos]
		if r.n == 0 {
			inheritWriters(op, writers)
			continue
		}
		now := c.clocks[r.s][r.n-1]
		for _, v := range op.Inputs() {
			if v == nil {
				continue
			}
			if v.Def != nil && len(writers[v.ID]) == 0 && v.Bytes() > 0 {
				return c.fail(c.cmdName(r), "reads %s, which no command writes", quote.Name(v.Name))
			}
			for _, w := range writers[v.ID] {
				if !w.before(now) {
					return c.fail(c.cmdName(r), "reads %s without waiting for %s, which writes it", quote.Name(v.Name), c.cmdName(w))
				}
			}
		}
		for _, v := range op.Outputs() {
			if v != nil {
				writers[v.ID] = []cmdRef{r}
			}
		}
	}
	for _, v := range c.m.Graph.Outputs {
		if v.Def != nil && len(writers[v.ID]) == 0 && v.Bytes() > 0 {
			return c.fail(c.valueName(c.index(v)), "is a graph output that no command writes")
		}
	}

	// Uses of the pool, inside their allocations' lifetimes.
	c.first = make([][executor.NumStreams]int32, len(p.Allocations))
	c.last = make([][executor.NumStreams]int32, len(p.Allocations))
	for s := range c.work {
		for k, pos := range c.work[s] {
			r := cmdRef{s, int32(k + 1)}
			use := func(a int32) error {
				al := p.Allocations[a]
				if al.Start > pos || pos > al.End {
					return c.fail(c.cmdName(r), "uses allocation %d, which lives from position %d to %d only", a, al.Start, al.End)
				}
				if c.first[a][s] == 0 {
					c.first[a][s] = r.n
				}
				c.last[a][s] = r.n
				return nil
			}
			op, po := c.ops[pos], p.Ops[pos]
			var refs []int32
			if ir.CopyOf(op) != ir.OnHost {
				refs = append(refs, po.Inputs...)
			}
			refs = append(refs, po.Outputs...)
			for _, vr := range refs {
				if vr == 0 || c.onHost(int(vr-1)) {
					continue
				}
				if err := use(p.Values[vr-1].Allocation - 1); err != nil {
					return err
				}
			}
			if w := po.Workspace - 1; w >= 0 {
				if err := use(w); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// reuse checks that every command taking over bytes of the pool comes
// after every use of the allocation that held them before: the
// allocations in the order they start, each against the last earlier
// user of each of its bytes (owners).
func (c *checker) reuse() error {
	p := c.p
	idx := make([]int, 0, len(p.Allocations))
	for a, al := range p.Allocations {
		used := al.Start < 0 // setup data is in place before anything runs
		for _, n := range c.first[a] {
			used = used || n != 0
		}
		if used && al.Bytes > 0 {
			idx = append(idx, a)
		}
	}
	sortStable(idx, func(a int) int64 { return int64(p.Allocations[a].Start) })
	var own owners
	for _, b := range idx {
		al := p.Allocations[b]
		for _, a := range own.take(al.Offset, al.Offset+al.Bytes, b) {
			for t, lastA := range c.last[a] {
				if lastA == 0 {
					continue
				}
				for u, firstB := range c.first[b] {
					if firstB == 0 {
						continue
					}
					rb := cmdRef{u, firstB}
					if !(cmdRef{t, lastA}).before(c.clocks[u][firstB-1]) {
						return c.fail(c.cmdName(rb), "writes %s over bytes of %s without waiting for %s, its last use", c.allocName(b), c.allocName(a), c.cmdName(cmdRef{t, lastA}))
					}
				}
			}
		}
	}
	return nil
}

func (c *checker) allocName(a int) string {
	switch {
	case c.valueOf[a] >= 0:
		return fmt.Sprintf("allocation %d (%s)", a, c.valueName(c.valueOf[a]))
	case c.wsOf[a] >= 0:
		return fmt.Sprintf("allocation %d (workspace of %s)", a, c.opName(c.wsOf[a]))
	}
	return fmt.Sprintf("allocation %d", a)
}

// sortStable orders xs by key, ties kept in their order.
func sortStable(xs []int, key func(int) int64) {
	slices.SortStableFunc(xs, func(a, b int) int { return cmp.Compare(key(a), key(b)) })
}

// program builds what a device runs from a checked plan.
func (c *checker) program() *executor.Program {
	p := c.p
	prog := &executor.Program{Pool: p.Pool, Events: int(p.Events)}
	for _, h := range p.HostBuffers {
		prog.Host = append(prog.Host, h.GetBytes())
	}
	device := func(i int) *executor.Arg {
		v, pv := c.vals[i], p.Values[i]
		a := p.Allocations[pv.Allocation-1]
		return &executor.Arg{Ref: executor.Ref{DType: v.DType, Shape: v.Shape, Off: a.Offset, Bytes: v.Bytes()}, Buf: -1, Block: a.Bytes}
	}
	host := func(i int) *executor.Arg {
		v, pv := c.vals[i], p.Values[i]
		return &executor.Arg{Ref: executor.Ref{DType: v.DType, Shape: v.Shape, Off: pv.HostOffset, Bytes: v.Bytes()}, Buf: int(pv.HostBuffer - 1)}
	}
	for i, pv := range p.Values {
		if pv.Kind == planpb.Value_RESULT {
			continue
		}
		if pv.Allocation != 0 {
			prog.Setup = append(prog.Setup, executor.Binding{Name: pv.Name, Arg: *device(i), Default: pv.Data})
		}
		if pv.HostBuffer != 0 {
			prog.Setup = append(prog.Setup, executor.Binding{Name: pv.Name, Arg: *host(i), Default: pv.Data})
		}
	}
	for _, r := range p.Outputs {
		arg := host
		if p.Values[r-1].Allocation != 0 {
			arg = device
		}
		prog.Outputs = append(prog.Outputs, executor.Binding{Name: p.Values[r-1].Name, Arg: *arg(int(r - 1))})
	}
	kinds := [executor.NumStreams]executor.CmdKind{executor.CmdLaunch, executor.CmdToHost, executor.CmdToDevice, executor.CmdHostKernel}
	for s, st := range p.Streams {
		cmds := make([]executor.Command, 0, len(st.Commands))
		for _, cmd := range st.Commands {
			switch k := cmd.Kind.(type) {
			case *planpb.Command_Record:
				cmds = append(cmds, executor.Command{Kind: executor.CmdRecord, Event: int(k.Record)})
			case *planpb.Command_Wait:
				cmds = append(cmds, executor.Command{Kind: executor.CmdWait, Event: int(k.Wait)})
			case *planpb.Command_Run:
				op, po := c.ops[k.Run], p.Ops[k.Run]
				x := executor.Command{Kind: kinds[s], Op: op, Opset: c.m.Opset(op.Domain), Pos: int(k.Run)}
				args := func(refs []int32) []*executor.Arg {
					out := make([]*executor.Arg, len(refs))
					for j, r := range refs {
						switch {
						case r == 0:
						case c.onHost(int(r-1)) || (s == executor.StreamHost && c.vals[r-1].Kind == ir.KindInit):
							out[j] = host(int(r - 1))
						default:
							out[j] = device(int(r - 1))
						}
					}
					return out
				}
				x.In, x.Out = args(po.Inputs), args(po.Outputs)
				if w := po.Workspace - 1; w >= 0 {
					a := p.Allocations[w]
					x.Workspace = executor.Ref{Off: a.Offset, Bytes: a.Bytes}
				}
				cmds = append(cmds, x)
			}
		}
		prog.Streams[s] = cmds
	}
	return prog
}

// onHost reports whether value i of the plan lives in host memory: a
// swap-out's or host op's output, or a weight the plan keeps on the host
// all step — one it gives a host buffer and no allocation (a plan read
// back has no Value.Next, by which memory.HostResident knows optimizer
// state that only a host-side update reads).
func (c *checker) onHost(i int) bool {
	v, pv := c.vals[i], c.p.Values[i]
	return hostTensor(v) || (memory.Resident(v) && pv.Allocation == 0 && pv.HostBuffer != 0)
}
