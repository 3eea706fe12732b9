package profile_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/ir/irtest"
	"github.com/tsplit/tsplit/profile"
)

// convModel is x → Conv(w) → Relu with the given conv attributes.
func convModel(t *testing.T, batch int64, attrs ...ir.Attr) (conv, relu *ir.Op) {
	b := irtest.New(t)
	x := b.Input("x", ir.Float, batch, 3, 8, 8)
	w := b.Input("w", ir.Float, 4, 3, 3, 3)
	y := b.Op("Conv", irtest.V(x, w), attrs...)
	z := b.Op("Relu", irtest.V(y))
	b.Return(z)
	return y.Def, z.Def
}

// An op's key depends on its type, its values' types and shapes and its
// attributes, not on the order the attributes were given in or on the
// node's name; recomputation clones and equal micro-ops share it.
func TestOpKey(t *testing.T) {
	pads, group := irtest.Ints("pads", 1, 1, 1, 1), irtest.Int("group", 1)
	a, _ := convModel(t, 2, pads, group)
	b, _ := convModel(t, 2, group, pads)
	b.Name = "another name"
	if ka, kb := profile.OpKey(a), profile.OpKey(b); ka != kb {
		t.Errorf("the same conv has two keys:\n%s\n%s", ka, kb)
	}
	want := "Conv(f32[2,3,8,8],f32[4,3,3,3])->(f32[2,4,8,8]){group=1,pads=[1,1,1,1]}"
	if k := profile.OpKey(a); k != want {
		t.Errorf("key %s, want %s", k, want)
	}
	c, _ := convModel(t, 4, pads, group)
	d, _ := convModel(t, 2, group)
	for _, other := range []*ir.Op{c, d} {
		if profile.OpKey(other) == profile.OpKey(a) {
			t.Errorf("%s: another batch or other attributes share the key", profile.OpKey(other))
		}
	}
	// A long attribute is hashed, keeping keys short.
	e, _ := convModel(t, 2)
	e.Attrs = append(e.Attrs, ir.Attr{Name: "pads", Type: ir.AttrInts, Ints: make([]int64, 100)})
	if k := profile.OpKey(e); len(k) > 200 || !strings.Contains(k, "pads=#") {
		t.Errorf("a long attribute is not hashed: %s", k)
	}
}

// OpTime prices a measured op at the launch plus its measured time, an
// unmeasured op of a measured type at the roofline times the type's
// scale, and everything else at the roofline; TransferTime adds the
// link's latency to every copy.
func TestMeasuredCosts(t *testing.T) {
	base, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	conv, relu := convModel(t, 2)
	big, _ := convModel(t, 8)
	p := *base
	p.OpTimes = map[string]float64{profile.OpKey(conv): 0.25}
	p.TypeScale = map[string]float64{"Conv": 3}
	if got := p.OpTime(conv); got != p.Launch+0.25 {
		t.Errorf("measured conv: %v, want %v", got, p.Launch+0.25)
	}
	if got, want := p.OpTime(big), p.Launch+3*(base.OpTime(big)-base.Launch); !near(got, want) {
		t.Errorf("unmeasured conv: %v, want the roofline scaled, %v", got, want)
	}
	if got, want := p.OpTime(relu), base.OpTime(relu); got != want {
		t.Errorf("unmeasured relu: %v, want the roofline's %v", got, want)
	}
	p.LinkLatency = 1e-3
	if got, want := p.TransferTime(1000, false), 1e-3+1000/p.H2D; !near(got, want) {
		t.Errorf("transfer: %v, want %v", got, want)
	}
	if got := p.TransferTime(0, true); got != 0 {
		t.Errorf("no bytes cost %v", got)
	}
}

func near(a, b float64) bool { return a-b < 1e-12*max(1, b) && b-a < 1e-12*max(1, b) }

// A measured profile file reads back as written, and bad measured
// fields are refused with the field named.
func TestMeasuredProfileFile(t *testing.T) {
	base, err := profile.Lookup("titan-rtx")
	if err != nil {
		t.Fatal(err)
	}
	p := *base
	p.Name, p.LinkLatency = "cpu-emulated", 1e-4
	p.OpTimes = map[string]float64{"Relu(f32[2])->(f32[2])": 1e-6}
	p.TypeScale = map[string]float64{"Relu": 2}
	p.Emulation = &profile.Emulation{Of: "titan-rtx", Ratio: 0.01, H2D: 1.2e8, D2H: 1.2e8, Overhead: 1e-4}
	dir := t.TempDir()
	write := func(p *profile.Profile) string {
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "p.json")
		if err := os.WriteFile(path, js, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	got, err := profile.Lookup(write(&p))
	if err != nil {
		t.Fatal(err)
	}
	if got.OpTimes["Relu(f32[2])->(f32[2])"] != 1e-6 || got.TypeScale["Relu"] != 2 || got.Emulation == nil || got.Emulation.H2D != 1.2e8 || got.LinkLatency != 1e-4 {
		t.Errorf("read back %+v", got)
	}
	for _, c := range []struct {
		edit func(p *profile.Profile)
		want string
	}{
		{func(p *profile.Profile) { p.OpTimes = map[string]float64{"Relu": -1} }, "op_times_s"},
		{func(p *profile.Profile) { p.TypeScale = map[string]float64{"Relu": 0} }, "op_type_scale"},
		{func(p *profile.Profile) { p.LinkLatency = -1 }, "link_latency_s"},
		{func(p *profile.Profile) { p.Emulation = &profile.Emulation{H2D: 0, D2H: 1} }, "emulation"},
	} {
		q := p
		c.edit(&q)
		if _, err := profile.Load(write(&q)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %s, got %v", c.want, err)
		}
	}
}
