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
