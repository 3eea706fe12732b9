package passes

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/memory"
	"github.com/tsplit/tsplit/zoo"
)

func scratchModel(t *testing.T, name string, batch int64) *ir.Model {
	mp, err := zoo.Build(name, zoo.SmallConfig(name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := compiler.FromProto(mp, "", compiler.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{}); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScratch(t *testing.T) {
	for _, name := range []string{"resnet50", "vgg16"} {
		t0 := time.Now()
		m := scratchModel(t, name, 8)
		s := NewState(m, &Options{})
		if err := s.Run(Schedule); err != nil {
			t.Fatal(err)
		}
		mem, _ := memory.Analyze(m.Graph, memory.Options{})
		types := map[string]int{}
		phases := map[ir.Phase]int{}
		for _, op := range m.Graph.Order() {
			types[op.Phase.String()+":"+op.Type]++
			phases[op.Phase]++
		}
		var ks []string
		for k := range types {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			fmt.Println(name, k, types[k])
		}
		var w int64
		for _, iv := range mem.Intervals {
			if iv.Kind == memory.Weight {
				w += iv.Bytes
			}
		}
		fmt.Println(name, "ops", len(mem.Order), phases, "peak", mem.Peak, "at", mem.PeakAt, "weights", w, "resident", mem.Resident, time.Since(t0))
	}
}

func TestScratch2(t *testing.T) {
	m := scratchModel(t, "resnet50", 8)
	s := NewState(m, &Options{})
	if err := s.Run(Schedule); err != nil {
		t.Fatal(err)
	}
	mem, _ := memory.Analyze(m.Graph, memory.Options{})
	pos := m.Graph.Position()
	for i, op := range mem.Order {
		if op.Phase != ir.Forward {
			continue
		}
		for _, v := range op.Outputs() {
			if v == nil {
				continue
			}
			var fw, bw []int
			bt := map[string]int{}
			for _, u := range v.Uses() {
				if u.Op.Phase == ir.Forward {
					fw = append(fw, pos[u.Op.ID])
				} else {
					bw = append(bw, pos[u.Op.ID])
					bt[u.Op.Type]++
				}
			}
			sort.Ints(bw)
			fmt.Println(i, op.Type, v.Name, v.Shape, v.Bytes(), "fw", fw, "bw", bw, bt)
		}
		if i > 40 {
			break
		}
	}
}

func TestScratch3(t *testing.T) {
	m := scratchModel(t, "resnet50", 8)
	s := NewState(m, &Options{})
	if err := s.Run(Schedule); err != nil {
		t.Fatal(err)
	}
	mem, _ := memory.Analyze(m.Graph, memory.Options{})
	line := []byte{}
	for i, op := range mem.Order {
		line = append(line, "FLBU"[op.Phase])
		if i%100 == 99 {
			fmt.Println(string(line))
			line = line[:0]
		}
	}
	fmt.Println(string(line))
	for i := 0; i < 60; i++ {
		op := mem.Order[i]
		var ins []string
		for _, v := range op.Inputs() {
			if v != nil {
				ins = append(ins, v.Name)
			}
		}
		fmt.Println(i, op.Phase, op.Type, op.Name, ins, "->", op.Output(0).Name, mem.Live[i])
	}
}

func TestScratch4(t *testing.T) {
	for _, name := range []string{"resnet50", "vgg16"} {
		m := scratchModel(t, name, 8)
		base := NewState(m, &Options{})
		base.Run(Schedule)
		mem, _ := memory.Analyze(m.Graph, memory.Options{})
		for _, frac := range []float64{0.9, 0.7, 0.6, 0.5} {
			m := scratchModel(t, name, 8)
			budget := int64(float64(mem.Peak) * frac)
			s := NewState(m, &Options{Budget: budget})
			t0 := time.Now()
			err := s.Run(Pipeline...)
			el := time.Since(t0)
			if err != nil {
				fmt.Println(name, frac, "ERR", err)
				continue
			}
			r := s.Report
			fmt.Println(name, frac, budget, "peak", r.Peak, "pool", r.Pool, "swap", r.Swapped, "rec", r.Recomputed, "rounds", r.Rounds, el)
			t1 := time.Now()
			res, _ := runPlanned(t, m, r.Pool)
			fmt.Println("  run", time.Since(t1), "hw", res.HighWater)
		}
	}
}

func TestScratch5(t *testing.T) {
	for _, name := range []string{"resnet50", "vgg16"} {
		m := scratchModel(t, name, 8)
		s := NewState(m, &Options{})
		s.Run(Schedule)
		mem, _ := memory.Analyze(m.Graph, memory.Options{})
		c := &PolicyContext{State: s, G: m.Graph, Mem: mem}
		f, err := newFmaps(c)
		if err != nil {
			t.Fatal(err)
		}
		var tot int64
		cnt := 0
		for _, v := range f.crossing() {
			a, q := f.gap(v)
			var os []string
			for _, o := range f.origins(v) {
				typ := "input"
				if o.Def != nil {
					typ = o.Def.Type
				}
				os = append(os, o.Name+"("+typ+")")
			}
			tot += f.bytes(v)
			cnt++
			if cnt < 40 {
				fmt.Println(name, v.Def.Phase, v.Def.Type, v.Name, v.Bytes(), a, q, os)
			}
		}
		fmt.Println(name, "turn", f.turn, "crossing", cnt, tot, "peak", mem.Peak, mem.PeakAt)
	}
}

func TestScratch6(t *testing.T) {
	for _, name := range []string{"resnet50", "vgg16"} {
		for _, pol := range []string{"vdnn-conv", "vdnn-all", "checkpoint", "superneurons"} {
			m := scratchModel(t, name, 32)
			s := NewState(m, &Options{})
			s.Run(Schedule)
			mem, _ := memory.Analyze(m.Graph, memory.Options{})
			p := profileOf(s)
			tl := Simulate(m.Graph, mem, p)
			f, _ := LookupPolicy(pol)
			plan, err := f(&PolicyContext{State: s, G: m.Graph, Mem: mem, TL: tl, Prof: p, Budget: mem.Peak - 1})
			if err != nil {
				t.Fatal(err)
			}
			nsw, nrc, nz := 0, 0, 0
			for _, d := range plan.Decisions {
				if d.Option == Swap {
					nsw++
				} else {
					nrc++
				}
				if d.DeltaM == 0 {
					nz++
				}
			}
			if err := InsertSwapRecompute(m, plan); err != nil {
				t.Fatal(pol, err)
			}
			if err := ir.Verify(m); err != nil {
				t.Fatal(pol, err)
			}
			mem2, _ := memory.Analyze(m.Graph, memory.Options{})
			tl2 := Simulate(m.Graph, mem2, p)
			l := mem2.MakeLayout()
			fmt.Println(name, pol, "base", mem.Peak, "->", mem2.Peak, "pool", l.Pool, "swaps", nsw, "rec", nrc, "transitive", nz, "time", tl.StepTime*1e3, "->", tl2.StepTime*1e3, "at", mem2.Order[mem2.PeakAt].Describe())
		}
	}
}

func TestScratch7(t *testing.T) {
	m := scratchModel(t, "vgg16", 32)
	s := NewState(m, &Options{})
	s.Run(Schedule)
	mem, _ := memory.Analyze(m.Graph, memory.Options{})
	i := mem.PeakAt
	fmt.Println("peak at", i, mem.Order[i].Describe(), mem.Live[i])
	for _, iv := range mem.Intervals {
		if iv.Start <= i && iv.End >= i && iv.Bytes > 20000 {
			name := ""
			if iv.Value != nil {
				name = iv.Value.Name
			}
			fmt.Println("  ", iv.Kind, name, iv.Bytes, iv.Start, iv.End)
		}
	}
	for j := 0; j < len(mem.Order); j += 1 {
		fmt.Printf("%d:%s:%d ", j, mem.Order[j].Type, mem.Live[j]/1000)
	}
	fmt.Println()
}

func TestScratch8(t *testing.T) {
	for _, name := range []string{"resnet50", "vgg16"} {
		m0 := scratchModel(t, name, 32)
		s0 := NewState(m0, &Options{})
		s0.Run(Schedule)
		mem, _ := memory.Analyze(m0.Graph, memory.Options{})
		for _, pol := range []string{"vdnn-conv", "vdnn-all", "checkpoint", "superneurons", "capuchin", "modnn", "tflms"} {
			for _, frac := range []float64{0.9, 0.8, 0.7, 0.6, 0.5, 0.4} {
				m := scratchModel(t, name, 32)
				budget := int64(float64(mem.Peak) * frac)
				s := NewState(m, &Options{Budget: budget, Policy: pol})
				t0 := time.Now()
				err := s.Run(Pipeline...)
				el := time.Since(t0)
				if err != nil {
					fmt.Println(name, pol, frac, "ERR", el, err)
					break
				}
				r := s.Report
				fmt.Println(name, pol, frac, budget, "peak", r.Peak, "pool", r.Pool, "swap", r.Swapped, "rec", r.Recomputed, "rounds", r.Rounds, "time", r.BaseTime*1e3, r.Time*1e3, el)
			}
		}
	}
}

func TestScratch9(t *testing.T) {
	m := scratchModel(t, "vgg16", 32)
	s := NewState(m, &Options{})
	s.Run(Schedule)
	mem, _ := memory.Analyze(m.Graph, memory.Options{})
	p := profileOf(s)
	tl := Simulate(m.Graph, mem, p)
	f, _ := LookupPolicy("vdnn-all")
	plan, _ := f(&PolicyContext{State: s, G: m.Graph, Mem: mem, TL: tl, Prof: p, Budget: mem.Peak - 1})
	InsertSwapRecompute(m, plan)
	mem, _ = memory.Analyze(m.Graph, memory.Options{})
	i := mem.PeakAt
	fmt.Println("peak at", i, mem.Order[i].Describe(), mem.Live[i])
	var tot = map[memory.Kind]int64{}
	for _, iv := range mem.Intervals {
		if iv.Start <= i && iv.End >= i {
			tot[iv.Kind] += iv.Bytes
			if iv.Bytes > 100000 {
				name := ""
				if iv.Value != nil {
					name = iv.Value.Name
				}
				fmt.Println("  ", iv.Kind, name, iv.Bytes, iv.Start, iv.End)
			}
		}
	}
	fmt.Println(tot)
}
