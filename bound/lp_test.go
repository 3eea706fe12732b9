package bound

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tsplit/tsplit/internal/oracle"
)

// knapsack is a small covering LP with known optima: cover 10 bytes
// with items of 8, 5 and 6 bytes costing 6, 5 and 3, each at most once.
// Fractional: all of c and half of a, 6. Integer: c and b, 8.
func knapsack() *problem {
	p := &problem{}
	a := p.col("a", 6)
	b := p.col("b", 5)
	c := p.col("c", 3)
	p.add(row{name: "cover", cols: []int{a, b, c}, coefs: []float64{8, 5, 6}, ge: true, rhs: 10})
	for _, j := range []int{a, b, c} {
		p.add(row{name: "ub_" + p.names[j], cols: []int{j}, coefs: []float64{1}, rhs: 1})
	}
	return p
}

func TestSolveSimplex(t *testing.T) {
	opt, x, err := solveSimplex(knapsack())
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(opt-6) > 1e-6 || math.Abs(x[0]-0.5) > 1e-6 || math.Abs(x[2]-1) > 1e-6 || x[1] > 1e-9 {
		t.Errorf("optimum %g at %v, want 6 at [0.5 0 1]", opt, x)
	}
	// The perturbation only loosens: the optimum is not above the exact one.
	if opt > 6+1e-12 {
		t.Errorf("optimum %.15g above 6", opt)
	}
}

// The LP file of the knapsack, solved by CBC as a MILP, has the integer
// optimum 8 (items b and c).
func TestWriteLPSolvedByCBC(t *testing.T) {
	var buf bytes.Buffer
	p := knapsack()
	if err := p.writeLP(&buf, []bool{true, true, true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Minimize", "Subject To", " cover: + 8 a + 5 b + 6 c >= 10", "Binaries", "End"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("LP file lacks %q:\n%s", want, buf.String())
		}
	}
	var again bytes.Buffer
	if err := knapsack().writeLP(&again, []bool{true, true, true}); err != nil || !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Errorf("the LP file is not deterministic (%v)", err)
	}
	bin := oracle.MILPSolver(t)
	dir := t.TempDir()
	model, sol := filepath.Join(dir, "k.lp"), filepath.Join(dir, "k.sol")
	if err := os.WriteFile(model, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, model, "solve", "solu", sol).CombinedOutput()
	if err != nil {
		t.Fatalf("cbc: %v: %s", err, out)
	}
	v, optimal, err := readCBC(sol, out)
	if err != nil || !optimal || math.Abs(v-8) > 1e-6 {
		t.Errorf("cbc: %g (optimal %v, %v), want 8", v, optimal, err)
	}
	if v > 8 {
		t.Errorf("the bound read back, %s, is above the optimum", strconv.FormatFloat(v, 'g', -1, 64))
	}
}
