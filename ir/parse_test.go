package ir_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/ir"
)

func dumpModel(t testing.TB, m *ir.Model) string {
	t.Helper()
	var b bytes.Buffer
	if err := ir.DumpModel(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// roundTrip parses a model's dump and checks that the parsed model
// verifies and dumps identically.
func roundTrip(t *testing.T, m *ir.Model) *ir.Model {
	t.Helper()
	text := dumpModel(t, m)
	p, err := ir.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(p); err != nil {
		t.Fatalf("parsed model does not verify: %v", err)
	}
	if got := dumpModel(t, p); got != text {
		firstDiff(t, "dump of the parsed model", got, text)
	}
	return p
}

func firstDiff(t *testing.T, what, got, want string) {
	t.Helper()
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s", what, i+1, g, w)
		}
	}
}

// TestParseRoundTrip parses the dump of every model of testdata/onnx,
// imported at batch 2, and of its training step (SGD with momentum, so
// optimizer state and [next] links appear).
func TestParseRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "onnx", "*.onnx"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no models in testdata/onnx: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			m, err := compiler.Import(f, compiler.Options{Batch: 2})
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, m)
			if _, err := compiler.BuildTrainingStep(m, compiler.TrainOptions{Optimizer: "momentum"}); err != nil {
				t.Fatal(err)
			}
			p := roundTrip(t, m)
			// What the memory model reads but the names do not show.
			for _, v := range m.Graph.Values() {
				w := p.Graph.Value(v.ID)
				if w == nil || w.Param != v.Param || (w.Next == nil) != (v.Next == nil) || v.Next != nil && w.Next.ID != v.Next.ID {
					t.Fatalf("value %v (%q): param/next not kept", v, v.Name)
				}
			}
			if a, b := m.Meta[ir.ParamInputsKey], p.Meta[ir.ParamInputsKey]; a != b {
				t.Fatalf("param inputs %q, parsed %q", a, b)
			}
		})
	}
}

// TestParseHandWritten reads the forms a person writes: comments,
// output types left out (inferred), a parameter whose successor is
// defined later, absent optional inputs and outputs, attributes of
// every printed kind.
func TestParseHandWritten(t *testing.T) {
	src := `# a small training-like graph
opsets ai.onnx=17
graph "hand"   # the name
  %0 = input "x" f32[2,8]
  %1 = init "w" f32[8,8] [param] [next %6]
  %2 = init "shape" i64[2]=[4 4]
  %3 = MatMul %0 %1 "mm"
  %4 = Reshape %3 %2 "rs" [backward]
  %5, _ = Dropout %4 "drop" [backward] [recompute]
  %6 = Sub %1 %1 "upd" [update] : f32[8,8]
  %7 = LeakyRelu %5 {alpha=1.0} "lr" [backward] [origin="host"]
  %8 = ConstantOfShape %2 {value=f32[1][2.5]} "c"
  %9 = Clip %8 _ _ "clip"
  return %7 %6 %9
`
	m, err := ir.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	g := m.Graph
	w := g.Lookup("w")
	if !w.Param || w.Next == nil || w.Next.Def.Name != "upd" {
		t.Fatalf("w: param %v next %v", w.Param, w.Next)
	}
	if d, err := w.Data(); err != nil || d == nil || d.Len() != 64 {
		t.Fatalf("w has no made-up data: %v", err)
	}
	rs := g.Lookup("rs_0")
	if rs == nil || !rs.Shape.Equal(ir.Shape{4, 4}) || rs.Def.Phase != ir.Backward {
		t.Fatalf("reshape output: %+v", rs)
	}
	lr := g.Lookup("lr_0").Def
	if lr.Origin != "host" || lr.Host || lr.Phase != ir.Backward || lr.AttrFloat("alpha", 0) != 1 {
		t.Fatalf("LeakyRelu: origin %q host %v phase %v attrs %+v", lr.Origin, lr.Host, lr.Phase, lr.Attrs)
	}
	if got := g.Lookup("c_0").Shape; !got.Equal(ir.Shape{4, 4}) {
		t.Fatalf("ConstantOfShape shape %v", got)
	}
	if len(g.Lookup("clip_0").Def.Inputs()) != 3 {
		t.Fatal("absent inputs dropped")
	}
	// A second round trip is exact, and the origin that reads like a
	// flag stays quoted.
	text := dumpModel(t, m)
	if !strings.Contains(text, `[backward] [origin="host"] :`) {
		t.Fatalf("origin not quoted:\n%s", text)
	}
	p, err := ir.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := dumpModel(t, p); got != text {
		firstDiff(t, "second round", got, text)
	}
}

// TestParseErrors: every error names the line and column of the problem.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		src       string
		line, col int
		msg       string
	}{
		{"", 1, 1, "no `graph"},
		{"  %0 = input \"x\" f32[2]\n", 1, 3, "want `graph"},
		{"graph \"g\"\n  %0 = input \"x\" f33[2]\n  return %0\n", 2, 18, `unknown element type "f33"`},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %7 \"r\"\n  return %1\n", 3, 13, "%7 is not defined"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %0 = Relu %0\n  return %0\n", 3, 3, "%0 is defined twice (first on line 2)"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %0 {alpha=x} \"r\"\n  return %1\n", 3, 23, `attribute "alpha": bad number "x"`},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %0 \"r\" [bogus] [split]\n  return %1\n", 3, 28, `unexpected or repeated flag "[split"`},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %0 : f32[2], f32[2]\n  return %1\n", 3, 32, "2 output types for 1 outputs"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = NoSuchOp %0\n  return %1\n", 3, 3, "not in the op table"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %2\n  %2 = Relu %0\n  return %1\n", 3, 13, "has none yet"},
		{"graph \"g\"\n  %0 = init \"x\" f32[3]=[1 2]\n  return %0\n", 2, 24, "has 3 elements, the data 2"},
		{"graph \"g\"\n  %0 = input \"x\" f32[-1]\n  return %0\n", 2, 21, "negative"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  return %0\n  %1 = Relu %0\n", 4, 3, "nothing may follow"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %0 \"unterminated\n  return %1\n", 3, 16, "want a quoted string"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %1 = Relu %0 {value=f32[100000000]} \"r\"\n  return %1\n", 3, 23, "more than the"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n  %99999999 = Relu %0\n  return %0\n", 3, 3, "implausibly large"},
		{"graph \"g\"\n  %0 = input \"x\" f32[2]\n", 3, 1, "no return line"},
	} {
		_, err := ir.Parse([]byte(c.src))
		var pe *ir.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want a *ParseError", c.src, err)
			continue
		}
		if pe.Line != c.line || pe.Col != c.col || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("%q:\n got %d:%d %s\nwant %d:%d …%s…", c.src, pe.Line, pe.Col, pe.Msg, c.line, c.col, c.msg)
		}
	}
}

// FuzzParse: Parse never panics; what it reads dumps to text it reads
// back to the same dump; what it refuses is a *ParseError with a
// position inside the input.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "onnx", "*.ir"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 20000 {
			f.Add(b)
		}
	}
	f.Add([]byte("opsets ai.onnx=17 ai.tsplit=1\ngraph \"g\"\n  %0 = input \"x\" f32[2,3] [param] [next %1]\n  %1, _ = Dropout %0 {seed=1} \"d\" [backward] [split] [host] : f32[2,3], _\n  %2 = ai.tsplit:SwapOut %1 : f32[2,3]=[1 2 3 4 5 6]\n  return %1\n"))
	f.Add([]byte("graph \"g\"\n %0 = init \"c\" i64[2]=[1 -2]\n %1 = Constant {value=f32[2][0.5 -1] strs=[\"a\",\"b\"] fl=floats[] s=strings[] g=<graph> t=tensor} : f32[2]\n return %0 %1 # end\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m, err := ir.Parse(src)
		if err != nil {
			var pe *ir.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		text := dumpModel(t, m)
		p, err := ir.Parse([]byte(text))
		if err != nil {
			t.Fatalf("the dump of a parsed model does not parse: %v\n%s", err, text)
		}
		if again := dumpModel(t, p); again != text {
			t.Fatalf("dump changed on a second round:\n%s\n---\n%s", text, again)
		}
	})
}
