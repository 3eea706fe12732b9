package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/compiler"
	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/policy"
)

func TestMaxPassing(t *testing.T) {
	for _, c := range []struct{ limit, boundary, want int64 }{
		{65536, 0, 0}, {65536, 1, 1}, {65536, 2, 2}, {65536, 3, 3}, {65536, 661, 661}, {65536, 1024, 1024},
		{65536, 1025, 1025}, {65536, 65535, 65535}, {65536, 1 << 20, 65536}, {100, 1 << 20, 100}, {1, 5, 1},
	} {
		var asked []int64
		s, err := maxPassing(c.limit, func(x int64) (*Probe, bool, error) {
			if x < 1 || x > c.limit || slices.Contains(asked, x) {
				t.Fatalf("limit %d, boundary %d: asked for %d (asked before: %v)", c.limit, c.boundary, x, asked)
			}
			asked = append(asked, x)
			return &Probe{Batch: x}, x <= c.boundary, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if s.Max != c.want || s.Capped != (c.boundary >= c.limit) {
			t.Errorf("limit %d, boundary %d: got max %d capped %v, want %d", c.limit, c.boundary, s.Max, s.Capped, c.want)
		}
		if !s.Capped && (s.Stop == nil || s.Stop.Batch != s.Max+1) {
			t.Errorf("limit %d, boundary %d: the stop probe is %+v, want the one at %d", c.limit, c.boundary, s.Stop, s.Max+1)
		}
		if s.Max > 0 && (s.At == nil || s.At.Batch != s.Max) {
			t.Errorf("limit %d, boundary %d: the probe at the maximum is %+v", c.limit, c.boundary, s.At)
		}
		if n := int64(len(asked)); n > 2*int64(math.Log2(float64(c.limit)))+2 {
			t.Errorf("limit %d, boundary %d: %d probes", c.limit, c.boundary, n)
		}
	}
}

func TestSweepBatches(t *testing.T) {
	for _, c := range []struct {
		from, top int64
		steps     int
		want      []int64
	}{
		{16, 100, 2, []int64{16, 24, 32, 48, 64, 96, 100}},
		{16, 128, 1, []int64{16, 32, 64, 128}},
		{16, 64, 4, []int64{16, 20, 24, 28, 32, 40, 48, 56, 64}},
		{16, 5, 2, []int64{1, 2, 3, 4, 5}},
		{16, 0, 2, nil},
	} {
		if got := sweepBatches(c.from, c.top, c.steps); !slices.Equal(got, c.want) {
			t.Errorf("sweepBatches(%d, %d, %d) = %v, want %v", c.from, c.top, c.steps, got, c.want)
		}
	}
}

func TestOrderPolicies(t *testing.T) {
	got := OrderPolicies([]string{"tsplit", "zz-new", "base", "a-new", "vdnn-all", "tsplit-nosplit"})
	want := []string{"base", "vdnn-all", "tsplit-nosplit", "tsplit", "a-new", "zz-new"}
	if !slices.Equal(got, want) {
		t.Errorf("OrderPolicies = %v, want %v", got, want)
	}
	if got := OrderPolicies(policy.Names()); len(got) != len(policy.Names()) {
		t.Errorf("OrderPolicies dropped registered policies: %v of %v", got, policy.Names())
	}
}

// The same flags give the same files, whatever -j. Batch 128 is past
// base's largest batch of the CI-sized transformer (83), so tsplit's
// searches plan under memory pressure.
func TestDeterministic(t *testing.T) {
	t.Parallel() // bench is the longest package of make test: its big tests share both cores
	cfg := Config{Small: true, Models: []string{"transformer"}, Policies: []string{"base", "tsplit"}, SweepSteps: 1, MaxBatch: 128, Command: "test"}
	var outs [2]string
	for i, jobs := range []int{1, 3} {
		c := cfg
		c.Jobs = jobs
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = t.TempDir()
		if _, err := Write(outs[i], r); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := os.ReadDir(outs[0])
	if len(files) == 0 {
		t.Fatal("nothing written")
	}
	for _, f := range files {
		a, _ := os.ReadFile(filepath.Join(outs[0], f.Name()))
		b, err := os.ReadFile(filepath.Join(outs[1], f.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between -j 1 and -j 3", f.Name())
		}
	}
}

var (
	smallOnce sync.Once
	small     *Results
	smallErr  error
)

// smallModels are the models of the tests' CI-sized benchmark in make
// test: VGG-16 (split plans), ResNet-18 (residual blocks, batch norm)
// and the transformer. ResNet-50's CI build repeats what ResNet-18 shows
// at four times its planning cost (72 s of CPU against 18 s for the
// benchmark of that model alone), so it joins in the long tier
// (smallModelsFor); VGG-19 and ResNet-101 are deeper builds of the same
// families, and Inception, whose many small ops made it the slowest
// once tsplit searched orders, is planned at every budget by
// TestBudgetSweep; `make benchmarks` plans all six.
var smallModels = []string{"vgg16", "resnet18", "transformer"}

// smallModelsFor is smallModels, with ResNet-50 in the long tier.
func smallModelsFor() []string {
	if oracle.LongOn() {
		return append(slices.Clip(smallModels), "resnet50")
	}
	return smallModels
}

// smallRun is the CI-sized benchmark of smallModels with every
// registered policy, run once for the tests that read it.
func smallRun(t *testing.T) *Results {
	t.Helper()
	oracle.Integration(t, "the CI-sized benchmark plans about 1000 times")
	smallOnce.Do(func() {
		models := smallModelsFor()
		small, smallErr = Run(Config{Small: true, Models: models, Jobs: runtime.GOMAXPROCS(0), SweepSteps: 1,
			Command: "tsplitc bench --small --sweep-steps 1 --models " + strings.Join(models, ",")})
	})
	if smallErr != nil {
		t.Fatal(smallErr)
	}
	return small
}

// The CI-sized benchmark writes every table, plot and the README, and
// tsplit reaches at least every other policy's maximum batch and
// parameter scale on every model, and its largest batch at each
// throughput threshold (Fig. 14a).
func TestSmallBenchmark(t *testing.T) {
	t.Parallel() // bench is the longest package of make test: its big tests share both cores
	r := smallRun(t)
	t.Logf("%d plans in %v", r.Probes, r.Elapsed)
	dir := t.TempDir()
	written, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range written {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", p, err)
		}
	}
	for _, name := range []string{SampleScaleFile, ParamScaleFile, ThroughputFile, ThresholdFile, LimitsFile} {
		md, err := os.ReadFile(filepath.Join(dir, name+".md"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(dir, name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s.csv: %v", name, err)
		}
		if len(rows) < 1+len(r.Models) {
			t.Errorf("%s.csv has %d rows", name, len(rows))
		}
		for _, m := range r.Models {
			if !strings.Contains(string(md), m.Display) && !strings.Contains(string(md), m.Name) {
				t.Errorf("%s.md does not mention %s", name, m.Name)
			}
		}
	}
	for _, m := range r.Models {
		for _, ext := range []string{".png", ".svg"} {
			if _, err := os.Stat(filepath.Join(dir, PlotPrefix+m.Name+ext)); err != nil {
				t.Error(err)
			}
		}
	}
	readme, _ := os.ReadFile(filepath.Join(dir, ReadmeFile))
	// 9.9× is the paper's best sample-scale gain among the models run
	// (Table IV); 38.1× (Inception) appears when Inception is run.
	for _, want := range []string{r.Config.Command, "Table IV", "Table V", "Fig. 12", "Fig. 14a", "9.9×"} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README lacks %q", want)
		}
	}
	ts := r.column("tsplit")
	if ts < 0 {
		t.Fatal("tsplit is not registered")
	}
	for i, m := range r.Models {
		if r.SampleScale[i][ts].Max < 1 || r.ParamScale[i][ts].Max < 1 {
			t.Errorf("%s: tsplit plans nothing (batch %d, k %d)", m.Name, r.SampleScale[i][ts].Max, r.ParamScale[i][ts].Max)
		}
	}
	for _, v := range r.ThresholdViolations() {
		t.Errorf("%s, %s: %s reaches batch %d, tsplit only %d", v.Table, v.Model, v.Policy, v.Value, v.Tsplit)
	}
	if len(r.Diagnoses) != len(r.Violations()) {
		t.Errorf("%d violations, %d diagnosed", len(r.Violations()), len(r.Diagnoses))
	}
	for _, d := range r.Diagnoses {
		tab := r.SampleScale
		if d.Table == ParamScaleTable {
			tab = r.ParamScale
		}
		i := slices.IndexFunc(r.Models, func(m Model) bool { return m.Name == d.Model })
		why := "search cap"
		if s := tab[i][ts]; s.Stop != nil {
			why = s.Stop.Err
		}
		t.Errorf("%s, %s: %s reaches %d, tsplit only %d (%s); tsplit stops because: %s",
			d.Table, d.Model, d.Policy, d.Value, d.Tsplit, d.swapOnlyNote(), why)
	}
}

// Every plan the CI-sized benchmark found feasible at a policy's maximum
// batch and maximum parameter scale — for every policy, not only tsplit —
// runs on the CPU device with a pool of exactly the budget, at the
// planned static layout: the benchmark's feasibility is real, not only
// simulated. The measured high-water mark stays within the budget and
// equals the planned peak (the memory model is exact, as the acceptance
// tests check), and the re-planned step is the one the benchmark
// recorded (same peak and pool). Only points the benchmark itself
// recorded as infeasible (Max 0) are skipped.
//
// Policies often produce the very same planned step (nothing to evict at
// their maximum, so the unplanned step, at the same batch): such a step
// runs once and every policy that produced it is checked against that
// run (smallPlanRuns): a third of the runs, if only a tenth of the time
// (the shared steps are the small ones).
func TestSmallPlansRun(t *testing.T) {
	r := smallRun(t)
	if r.column("tsplit") < 0 {
		t.Fatal("tsplit is not registered")
	}
	t.Logf("the benchmark: %d plans in %v", r.Probes, r.Elapsed)
	budget := r.Profile.Budget()
	runs := &smallPlanRuns{m: map[[32]byte]*smallPlanRun{}}
	for i, m := range r.Models {
		for j, pol := range r.Policies {
			for _, c := range []struct {
				what         string
				batch, width int64
				at           *Probe
			}{
				{"max-batch", r.SampleScale[i][j].Max, 1, r.SampleScale[i][j].At},
				{"max-width", r.Config.ParamBatch, r.ParamScale[i][j].Max, r.ParamScale[i][j].At},
			} {
				if c.batch < 1 || c.width < 1 {
					continue // the benchmark found nothing feasible here
				}
				t.Run(m.Name+"/"+pol+"/"+c.what, func(t *testing.T) {
					t.Parallel()
					runSmallPlan(t, runs, c.batch, c.width, c.at, budget, func() (*tsplit.Result, error) {
						g, _, err := Build(m, c.batch, c.width, true, r.Config.Optimizer)
						if err != nil {
							return nil, err
						}
						return Plan(g, r.Profile, pol)
					})
				})
			}
		}
		// modnn with sub-batching: the accumulated step at its largest
		// batch, as the benchmark planned it.
		if sb := r.SubBatched[i]; sb.Max >= 1 {
			t.Run(m.Name+"/modnn-subbatched/max-batch", func(t *testing.T) {
				t.Parallel()
				runSmallPlan(t, runs, sb.Max, 1, sb.At, budget, func() (*tsplit.Result, error) {
					g, _, err := Build(m, sb.Max, 1, true, r.Config.Optimizer)
					if err != nil {
						return nil, err
					}
					return tsplit.Plan(context.Background(), g, tsplit.Options{Budget: budget, Profile: r.Profile, Policy: "modnn",
						Forward: BuildForward(m, 1, true), Train: compiler.TrainOptions{Optimizer: r.Config.Optimizer},
						MaxSubBatches: r.Config.MaxSubBatches, MaxSubBatchOps: r.Config.MaxSubBatchOps})
				})
			})
		}
	}
}

// maxRunBatch is the largest batch × width whose plan make test runs
// (the integration tier); larger ones (the transformer's, ResNet-50's
// and VGG-16's split plans at batches 586–1021 took 15–56 s each) run in
// the long tier.
const maxRunBatch = 512

// smallPlanRuns memoizes runs of planned steps by what the executor
// runs: the graph (its IR dump: ops, order, attributes, shapes) and the
// static layout's offsets.
type smallPlanRuns struct {
	mu sync.Mutex
	m  map[[32]byte]*smallPlanRun
}

type smallPlanRun struct {
	done  chan struct{}
	first string // the subtest that ran it
	res   *executor.Result
	model int64 // the memory model's peak of the run's graph
	err   error
}

// run runs the planned step g at placement opts in a pool of the budget,
// or returns the result of the identical step run before.
func (rs *smallPlanRuns) run(t *testing.T, g *ir.Model, opts executor.Options, budget int64) *smallPlanRun {
	var dump bytes.Buffer
	if err := ir.Dump(&dump, g.Graph); err != nil {
		t.Fatal(err)
	}
	for _, off := range opts.Placement {
		fmt.Fprintf(&dump, "%d\n", off)
	}
	key := sha256.Sum256(dump.Bytes())
	rs.mu.Lock()
	e, seen := rs.m[key]
	if !seen {
		e = &smallPlanRun{done: make(chan struct{}), first: t.Name()}
		rs.m[key] = e
	}
	rs.mu.Unlock()
	if seen {
		<-e.done
		return e
	}
	defer close(e.done)
	dev, err := cpu.New(budget)
	if err != nil {
		e.err = err
		return e
	}
	x, err := executor.New(g, dev, opts)
	if err != nil {
		e.err = err
		return e
	}
	e.model = x.Mem.Peak
	in, err := compiler.RandomInputs(g, 1)
	if err != nil {
		e.err = err
		return e
	}
	e.res, e.err = x.Run(in)
	return e
}

// runSmallPlan plans a step again as the benchmark did (plan rebuilds
// the model at (batch, width) and plans it) and runs the planned step on
// a CPU device capped at the budget.
func runSmallPlan(t *testing.T, runs *smallPlanRuns, batch, width int64, at *Probe, budget int64, plan func() (*tsplit.Result, error)) {
	if batch*width > maxRunBatch {
		oracle.Long(t, fmt.Sprintf("batch %d, k %d: tens of seconds of CPU to run", batch, width))
	}
	s, err := plan()
	if err != nil {
		t.Fatalf("batch %d, k %d: the benchmark planned it, now: %v", batch, width, err)
	}
	g, rep := s.Model, s.Report
	if at != nil && (rep.Peak != at.Peak || rep.Pool != at.Pool) {
		t.Errorf("batch %d, k %d: re-planned peak %d, pool %d; the benchmark recorded %d, %d", batch, width, rep.Peak, rep.Pool, at.Peak, at.Pool)
	}
	// As `tsplitc --run` does: the plan's static layout in a pool of
	// exactly the budget.
	opts, pool, err := executor.PlannedOptions(g)
	if err != nil {
		t.Fatal(err)
	}
	if pool > budget {
		t.Fatalf("pool %d over the budget %d", pool, budget)
	}
	e := runs.run(t, g, opts, budget)
	if e.err != nil {
		t.Fatalf("batch %d, k %d (%d swapped, %d recomputed, %d split): %v", batch, width,
			rep.Swapped, rep.Recomputed, rep.Split, e.err)
	}
	res := e.res
	ran := fmt.Sprint(res.Duration)
	if e.first != t.Name() {
		ran = "the same step as " + strings.TrimPrefix(e.first, "TestSmallPlansRun/")
	}
	t.Logf("batch %d, k %d: %d swapped, %d recomputed, %d split; planned peak %d, measured high-water %d, pool %d, budget %d; ran %s",
		batch, width, rep.Swapped, rep.Recomputed, rep.Split, rep.Peak, res.HighWater, rep.Pool, budget, ran)
	if res.HighWater > budget {
		t.Errorf("measured high-water %d over the budget %d", res.HighWater, budget)
	}
	if res.HighWater != rep.Peak || res.HighWater != e.model {
		t.Errorf("measured high-water %d, Report.Peak %d, memory model %d: should be equal", res.HighWater, rep.Peak, e.model)
	}
	if res.Reach > rep.Pool {
		t.Errorf("the run reached offset %d, past the layout's pool %d", res.Reach, rep.Pool)
	}
}

func TestNonMonotone(t *testing.T) {
	ok := func(b int64) *Probe { return &Probe{Batch: b, OK: true, Time: 1, BaseTime: 1} }
	no := func(b int64) *Probe { return &Probe{Batch: b} }
	r := &Results{
		Models:      []Model{{Name: "m"}},
		Policies:    []string{"a", "b"},
		SampleScale: [][]Search{{{Max: 20}, {Max: 40}}},
		Sweep: []Sweep{{Batches: []int64{16, 32, 48}, Probes: [][]*Probe{
			{ok(16), ok(16)},
			{no(32), no(32)}, // a: consistent; b: fails below its maximum
			{ok(48), ok(48)}, // both plan above their maxima
		}}},
	}
	got := r.NonMonotone()
	want := []Anomaly{{"m", "b", 32, 40, false}, {"m", "a", 48, 20, true}, {"m", "b", 48, 40, true}}
	slices.SortFunc(got, func(x, y Anomaly) int { return int(x.Batch-y.Batch)*10 + strings.Compare(x.Policy, y.Policy) })
	if !slices.Equal(got, want) {
		t.Errorf("NonMonotone = %v, want %v", got, want)
	}
}

// --tables param-scale computes Table V alone and writes only its files:
// the other tables' files and the README, which a partial run cannot
// make, are left as they were; its host bound is the largest k whose
// parameters and gradients fit the host memory.
func TestParamScaleAlone(t *testing.T) {
	dir := t.TempDir()
	keep := map[string]string{SampleScaleFile + ".md": "table iv\n", ReadmeFile: "readme\n", LimitsFile + ".csv": "limits\n"}
	for name, text := range keep {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Run(Config{Small: true, Models: []string{"transformer"}, Policies: []string{"base", "tsplit"},
		Tables: []string{TableParamScale}, Offload: true, Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if r.SampleScale[0][0].Max != 0 || len(r.Sweep[0].Batches) != 0 || r.ParamScale[0][1].Max <= 0 {
		t.Errorf("param-scale alone: sample scale %+v, sweep %v, param scale %+v", r.SampleScale[0], r.Sweep[0].Batches, r.ParamScale[0])
	}
	written, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, ParamScaleFile+".md"), filepath.Join(dir, ParamScaleFile+".csv")}
	if !slices.Equal(written, want) {
		t.Errorf("wrote %v, want %v", written, want)
	}
	for name, text := range keep {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != text {
			t.Errorf("%s was overwritten: %q, %v", name, b, err)
		}
	}
	kb := r.HostBound[0]
	fits := func(k int64) bool {
		b, err := stateBytes(r, r.Models[0], k)
		if err != nil {
			t.Fatal(err)
		}
		return b <= r.Profile.HostMemory
	}
	if kb <= 0 || !fits(kb) || fits(kb+1) {
		t.Errorf("host bound %d: not the largest k whose state fits %d bytes", kb, r.Profile.HostMemory)
	}
	md, _ := os.ReadFile(want[0])
	if !strings.Contains(string(md), "host bound k") || !strings.Contains(string(md), "--offload") {
		t.Errorf("param_scale.md lacks the host bound or the offload note:\n%s", md)
	}
	if _, err := Run(Config{Tables: []string{"table-6"}}); err == nil {
		t.Error("an unknown table was accepted")
	}
}
