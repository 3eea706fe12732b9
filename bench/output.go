package bench

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/internal/units"
	"github.com/tsplit/tsplit/policy"
	"github.com/tsplit/tsplit/zoo"
)

// Output files, in the output folder.
const (
	SampleScaleFile = "sample_scale"            // Table IV (.md, .csv)
	ParamScaleFile  = "param_scale"             // Table V
	ThroughputFile  = "throughput"              // Fig. 12 data
	ThresholdFile   = "max_batch_at_throughput" // Fig. 14a
	LimitsFile      = "limits"                  // why each search stops
	SubBatchedFile  = "modnn_subbatched"        // modnn with sub-batching
	PlotPrefix      = "throughput_"             // + model + .png/.svg
	ReadmeFile      = "README.md"
)

// Write writes every table, plot and the README into dir and returns
// the paths written.
func Write(dir string, r *Results) ([]string, error) {
	out, err := newOutDir(dir)
	if err != nil {
		return nil, err
	}
	type table struct {
		name string
		md   string
		csv  [][]string
	}
	c := r.Config
	var tables []table
	if c.wants(TableSampleScale) {
		tables = append(tables,
			table{SampleScaleFile, sampleScaleMD(r), scaleCSV(r, r.SampleScale, true)},
			table{ThroughputFile, throughputMD(r), throughputCSV(r)},
			table{ThresholdFile, thresholdMD(r), thresholdCSV(r)})
	}
	if c.wants(TableParamScale) {
		tables = append(tables, table{ParamScaleFile, paramScaleMD(r), scaleCSV(r, r.ParamScale, false)})
	}
	if !c.partial() {
		tables = append(tables, table{LimitsFile, limitsMD(r), limitsCSV(r)})
	}
	if r.SubBatched != nil {
		tables = append(tables, table{SubBatchedFile, subBatchedMD(r), subBatchedCSV(r)})
	}
	for _, t := range tables {
		if err := out.table(t.name, t.md, t.csv); err != nil {
			return out.written, err
		}
	}
	if c.partial() {
		// The other tables' files, the limits table and the README
		// (which has every table) stay as they are: a run of some
		// tables never overwrites what it did not compute.
		return out.written, nil
	}
	for i, m := range r.Models {
		if err := out.plot(PlotPrefix+m.Name, m.Name, func(dir, name string) error { return plotSweep(dir, name, r, i) }); err != nil {
			return out.written, err
		}
	}
	if err := out.put(ReadmeFile, []byte(readme(r))); err != nil {
		return out.written, err
	}
	return out.written, nil
}

// outDir is an output folder being written: every table, plot and file
// goes through it, so each is a regular file written whole (never
// through a symlink or over a device) and listed once in written.
type outDir struct {
	dir     string
	written []string
}

func newOutDir(dir string) (*outDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &outDir{dir: dir}, nil
}

// put writes one file of the folder.
func (o *outDir) put(name string, data []byte) error {
	path := filepath.Join(o.dir, name)
	o.written = append(o.written, path)
	return backend.WriteBytesAtomic(path, data) // regular files only, umask's mode
}

// table writes a table as name.md and name.csv.
func (o *outDir) table(name, md string, rows [][]string) error {
	if err := o.put(name+".md", []byte(md)); err != nil {
		return err
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(rows); err != nil {
		return err
	}
	return o.put(name+".csv", b.Bytes())
}

// plot draws name.png and name.svg with draw (the plot of model).
func (o *outDir) plot(name, model string, draw func(dir, name string) error) error {
	if err := draw(o.dir, name); err != nil {
		return fmt.Errorf("plot %s: %w", model, err)
	}
	o.written = append(o.written, filepath.Join(o.dir, name+".png"), filepath.Join(o.dir, name+".svg"))
	return nil
}

// mdTable renders a Markdown table: numeric columns (every cell a
// number, a ratio, "≥N" or "—") right-aligned, the others left-aligned.
func mdTable(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for j := range header {
		if j > 0 && numericColumn(rows, j) {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

func numericColumn(rows [][]string, j int) bool {
	for _, row := range rows {
		if j >= len(row) {
			continue
		}
		c := strings.TrimPrefix(row[j], "≥")
		if c == "—" || c == "" {
			continue
		}
		if c[0] < '0' || c[0] > '9' {
			return false
		}
	}
	return true
}

func fmtScale(s Search) string {
	if s.Capped {
		return "≥" + strconv.FormatInt(s.Max, 10)
	}
	return strconv.FormatInt(s.Max, 10)
}

func ratio(a, b int64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f×", float64(a)/float64(b))
}

// column returns the index of a policy in r.Policies (-1: absent).
func (r *Results) column(policy string) int {
	for j, p := range r.Policies {
		if p == policy {
			return j
		}
	}
	return -1
}

// scaleOf returns a model's result for a policy (ok false: not run).
func scaleOf(r *Results, t [][]Search, i int, policy string) (Search, bool) {
	j := r.column(policy)
	if j < 0 {
		return Search{}, false
	}
	return t[i][j], true
}

func tsplitOverBase(r *Results, t [][]Search, i int) string {
	ts, ok1 := scaleOf(r, t, i, "tsplit")
	bs, ok2 := scaleOf(r, t, i, "base")
	if !ok1 || !ok2 {
		return "—"
	}
	return ratio(ts.Max, bs.Max)
}

func paperRatio(m Model, sample bool) string {
	if m.Paper == nil {
		return "—"
	}
	t := m.Paper.ParamScale
	if sample {
		t = m.Paper.SampleScale
	}
	return ratio(t["tsplit"], t["base"])
}

func scaleTable(r *Results, t [][]Search, sample bool) string {
	header := []string{"Model"}
	header = append(header, r.Policies...)
	header = append(header, "tsplit / base", "paper: tsplit / base")
	if !sample {
		header = append(header, "host bound k", "tsplit / host bound")
	}
	var rows [][]string
	for i, m := range r.Models {
		row := []string{m.Display}
		for j := range r.Policies {
			row = append(row, fmtScale(t[i][j]))
		}
		row = append(row, tsplitOverBase(r, t, i), paperRatio(m, sample))
		if !sample {
			kb := r.hostBound(i)
			row = append(row, fmtBound(kb), tsplitOverBound(r, t, i, kb))
		}
		rows = append(rows, row)
	}
	return mdTable(header, rows)
}

func scaleCSV(r *Results, t [][]Search, sample bool) [][]string {
	header := []string{"model", "zoo"}
	header = append(header, r.Policies...)
	header = append(header, "tsplit_over_base", "paper_tsplit_over_base")
	if !sample {
		header = append(header, "host_bound_k", "tsplit_over_host_bound")
	}
	out := [][]string{header}
	for i, m := range r.Models {
		row := []string{m.Name, m.Zoo}
		for j := range r.Policies {
			row = append(row, strconv.FormatInt(t[i][j].Max, 10))
		}
		row = append(row, strings.TrimSuffix(tsplitOverBase(r, t, i), "×"), strings.TrimSuffix(paperRatio(m, sample), "×"))
		if !sample {
			kb := r.hostBound(i)
			row = append(row, strconv.FormatInt(kb, 10), tsplitOverBound(r, t, i, kb))
		}
		out = append(out, row)
	}
	return out
}

// fmtBound is a host bound for a table (— where it could not be
// computed).
func fmtBound(k int64) string {
	if k <= 0 {
		return "—"
	}
	return strconv.FormatInt(k, 10)
}

// tsplitOverBound is tsplit's largest k over the host bound k, to two
// places (— where either is missing).
func tsplitOverBound(r *Results, t [][]Search, i int, kb int64) string {
	ts, ok := scaleOf(r, t, i, "tsplit")
	if !ok || kb <= 0 || ts.Max <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", float64(ts.Max)/float64(kb))
}

func sampleScaleMD(r *Results) string {
	return fmt.Sprintf("# Largest sample scale (batch size) per policy — Table IV\n\n"+
		"Device %s, budget %s, host memory %s. The largest batch whose training step each policy plans into the budget "+
		"(bisection, capped at %d; ≥ marks the cap). 0: not even batch 1 fits.\n\n%s",
		r.Profile.Name, units.Bytes(r.Profile.Budget()), units.Bytes(r.Profile.HostMemory), r.Config.MaxBatch,
		scaleTable(r, r.SampleScale, true))
}

func paramScaleMD(r *Results) string {
	made := ""
	if r.Config.partial() {
		// The README, which names the command of the whole benchmark,
		// was not made with this table.
		made = fmt.Sprintf("Made alone by\n\n    %s\n\n", r.Config.Command)
	}
	return made + fmt.Sprintf("# Largest parameter scale per policy — Table V\n\n"+
		"Device %s, budget %s, host memory %s, batch %d, %s. The largest integer k such that the model with channels × k (CNNs) or hidden size × k "+
		"(the transformer) plans into the budget (bisection, capped at %d; ≥ marks the cap). 0: not even k = 1 fits. %s\n\n%s",
		r.Profile.Name, units.Bytes(r.Profile.Budget()), units.Bytes(r.Profile.HostMemory), r.Config.ParamBatch, r.Config.Optimizer,
		r.Config.widthLimit(), hostBoundNote(r), scaleTable(r, r.ParamScale, false))
}

func fmtFloat(x float64, prec int) string { return strconv.FormatFloat(x, 'f', prec, 64) }

func throughputMD(r *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Simulated throughput against the batch size — Fig. 12\n\n"+
		"Device %s. Each cell: samples/s of the policy's planned step (batch / predicted step time) and, in parentheses, "+
		"that throughput relative to the unconstrained step at the same batch (the training step with every tensor "+
		"resident and unlimited memory). — : the policy cannot plan that batch into the budget.\n\n", r.Profile.Name)
	if r.SubBatched != nil {
		fmt.Fprintf(&b, "The last column, %s, is modnn with moDNN's sub-batching, k×b where it ran k sub-batches of at most b "+
			"samples: for models with BatchNormalization a different training step (see [%s.md](%s.md)); its relative throughput "+
			"is against the plain step's unconstrained time.\n\n", SubBatchedName, SubBatchedFile, SubBatchedFile)
	}
	for i, m := range r.Models {
		sw := r.Sweep[i]
		fmt.Fprintf(&b, "## %s\n\n![%s](%s%s.png)\n\n", m.Display, m.Display, PlotPrefix, m.Name)
		header := append([]string{"batch", "unconstrained"}, r.Policies...)
		if r.SubBatched != nil {
			header = append(header, SubBatchedName)
		}
		cell := func(p *Probe) string {
			if p == nil || !p.OK {
				return "—"
			}
			return fmt.Sprintf("%s (%.0f%%)", fmtFloat(p.Throughput(), 1), 100*p.Relative())
		}
		var rows [][]string
		for bi, batch := range sw.Batches {
			row := []string{strconv.FormatInt(batch, 10), "—"}
			if t := sw.Unconstrained[bi]; t > 0 {
				row[1] = fmtFloat(float64(batch)/t, 1)
			}
			for _, p := range sw.Probes[bi] {
				row = append(row, cell(p))
			}
			if r.SubBatched != nil {
				c := cell(sw.SubBatched[bi])
				if p := sw.SubBatched[bi]; c != "—" && p.SubBatches > 1 {
					c += fmt.Sprintf(" %d×%d", p.SubBatches, p.SubBatch)
				}
				row = append(row, c)
			}
			rows = append(rows, row)
		}
		b.WriteString(mdTable(header, rows))
		b.WriteString("\n")
	}
	return b.String()
}

func throughputCSV(r *Results) [][]string {
	out := [][]string{{"model", "batch", "policy", "fits", "step_s", "unconstrained_step_s", "samples_per_s", "relative",
		"peak_bytes", "pool_bytes", "host_peak_bytes", "swapped", "recomputed", "split", "sub_batches"}}
	for i, m := range r.Models {
		sw := r.Sweep[i]
		for bi, batch := range sw.Batches {
			probes := sw.Probes[bi]
			if r.SubBatched != nil && sw.SubBatched[bi] != nil {
				probes = append(slices.Clone(probes), sw.SubBatched[bi])
			}
			for _, p := range probes {
				policy, subs := p.Policy, ""
				if p.SubBatched {
					policy, subs = SubBatchedPolicy, strconv.Itoa(p.SubBatches)
				}
				row := []string{m.Name, strconv.FormatInt(batch, 10), policy, strconv.FormatBool(p.OK), "",
					fmtFloat(sw.Unconstrained[bi], 6), "", "", "", "", "", "", "", "", subs}
				if p.OK {
					row[4] = fmtFloat(p.Time, 6)
					row[6] = fmtFloat(p.Throughput(), 3)
					row[7] = fmtFloat(p.Relative(), 4)
					row[8] = strconv.FormatInt(p.Peak, 10)
					row[9] = strconv.FormatInt(p.Pool, 10)
					row[10] = strconv.FormatInt(p.HostPeak, 10)
					row[11] = strconv.Itoa(p.Swapped)
					row[12] = strconv.Itoa(p.Recomputed)
					row[13] = strconv.Itoa(p.Split)
				}
				out = append(out, row)
			}
		}
	}
	return out
}

func thresholdHeader(r *Results) []string {
	h := []string{"Model"}
	for _, x := range r.Config.Thresholds {
		for _, p := range r.Config.ThresholdPolicies {
			h = append(h, fmt.Sprintf("%s ≥%d%%", p, x))
		}
	}
	return h
}

func thresholdMD(r *Results) string {
	var rows [][]string
	for i, m := range r.Models {
		row := []string{m.Display}
		for t := range r.Config.Thresholds {
			for j := range r.Config.ThresholdPolicies {
				row = append(row, fmtScale(r.UnderX[t][i][j]))
			}
		}
		rows = append(rows, row)
	}
	return fmt.Sprintf("# Largest batch at no less than x%% of the unconstrained throughput — Fig. 14a\n\n"+
		"Device %s. For each x, the largest batch a policy plans into the budget whose predicted throughput is at least x%% "+
		"of the unconstrained step's at that batch (every tensor resident, unlimited memory), found by bisection. "+
		"tsplit against tsplit-nosplit is the effect of tensor split.\n\n%s",
		r.Profile.Name, mdTable(thresholdHeader(r), rows))
}

func thresholdCSV(r *Results) [][]string {
	out := [][]string{{"model", "threshold_percent", "policy", "max_batch"}}
	for i, m := range r.Models {
		for t, x := range r.Config.Thresholds {
			for j, p := range r.Config.ThresholdPolicies {
				out = append(out, []string{m.Name, strconv.Itoa(x), p, strconv.FormatInt(r.UnderX[t][i][j].Max, 10)})
			}
		}
	}
	return out
}

// shortReason classifies why a search stopped at its failing probe.
func shortReason(p *Probe) string {
	switch {
	case p == nil:
		return "search cap"
	case p.OK:
		return fmt.Sprintf("throughput %.1f%% of unconstrained", 100*p.Relative())
	// A sub-batched probe's own limits first: their messages quote the
	// plan that failed before.
	case strings.Contains(p.Err, "unrolled at most"), strings.Contains(p.Err, "built at most"):
		return "unrolled-step cap"
	case batchInputSlice.MatchString(p.Err):
		return "the whole batch's inputs on the device"
	case strings.Contains(p.Err, "pinned host memory"):
		return "host memory"
	case strings.Contains(p.Err, "keeps every tensor"):
		return "device (keeps every tensor)"
	case strings.Contains(p.Err, "no plan fits"):
		return "device (no eviction left)"
	case strings.Contains(p.Err, "rounds the plan still peaks"):
		return "planner rounds exhausted"
	case strings.Contains(p.Err, "found nothing to evict"):
		return "planner found nothing to evict"
	case strings.Contains(p.Err, "fragmentation"):
		return "layout fragmentation"
	case strings.Contains(p.Err, "panicked"):
		return "policy panicked"
	case strings.Contains(p.Err, "lower bound (Eq. 2)"):
		return "below moDNN's Eq. 2 bound"
	case strings.Contains(p.Err, "after offloading everything"):
		return "device (nothing left to offload)"
	}
	return "other"
}

// batchInputSlice matches a plan that fails at a sub-batched step's
// slice of a batch input, where the whole batch's inputs are live.
var batchInputSlice = regexp.MustCompile(`at node "subbatch[0-9]+/[^"]*" \(Slice\)`)

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

type limitRow struct {
	table, model, policy string
	s                    Search
}

func limitRows(r *Results) []limitRow {
	var out []limitRow
	for i, m := range r.Models {
		for j, p := range r.Policies {
			out = append(out, limitRow{SampleScaleTable, m.Name, p, r.SampleScale[i][j]})
		}
		for j, p := range r.Policies {
			out = append(out, limitRow{ParamScaleTable, m.Name, p, r.ParamScale[i][j]})
		}
		for t, x := range r.Config.Thresholds {
			for j, p := range r.Config.ThresholdPolicies {
				out = append(out, limitRow{fmt.Sprintf("batch at ≥%d%% throughput", x), m.Name, p, r.UnderX[t][i][j]})
			}
		}
		if r.SubBatched != nil {
			out = append(out, limitRow{SampleScaleTable, m.Name, SubBatchedPolicy, r.SubBatched[i]})
		}
	}
	return out
}

func stopAt(l limitRow) string {
	if l.s.Stop == nil {
		return ""
	}
	if l.table == ParamScaleTable {
		return "k=" + strconv.FormatInt(l.s.Stop.Width, 10)
	}
	return "batch " + strconv.FormatInt(l.s.Stop.Batch, 10)
}

func limitsMD(r *Results) string {
	var rows [][]string
	for _, l := range limitRows(r) {
		msg := ""
		if l.s.Stop != nil {
			msg = oneLine(l.s.Stop.Err)
		}
		msg = strings.ReplaceAll(msg, "|", "\\|")
		rows = append(rows, []string{l.table, l.model, l.policy, fmtScale(l.s), stopAt(l), shortReason(l.s.Stop), msg})
	}
	return "# Why each search stops\n\nFor every search, the first failing probe (one past the largest passing value) and the planner's message there.\n\n" +
		mdTable([]string{"Table", "Model", "Policy", "Max", "Fails at", "Reason", "Planner message"}, rows)
}

func limitsCSV(r *Results) [][]string {
	out := [][]string{{"table", "model", "policy", "max", "capped", "fails_at", "reason", "message"}}
	for _, l := range limitRows(r) {
		msg := ""
		if l.s.Stop != nil {
			msg = oneLine(l.s.Stop.Err)
		}
		out = append(out, []string{l.table, l.model, l.policy, strconv.FormatInt(l.s.Max, 10), strconv.FormatBool(l.s.Capped), stopAt(l), shortReason(l.s.Stop), msg})
	}
	return out
}

// Table names of Violation.
const (
	SampleScaleTable = "sample scale"
	ParamScaleTable  = "parameter scale"
)

// Violation is a model on which some policy reaches more than tsplit.
type Violation struct {
	Table         string // SampleScaleTable, ParamScaleTable or Fig. 14a's threshold
	Model, Policy string
	Value, Tsplit int64 // the policy's maximum and tsplit's
}

// Violations lists where tsplit is not ≥ every other policy.
func (r *Results) Violations() []Violation {
	ts := r.column("tsplit")
	if ts < 0 {
		return nil
	}
	var out []Violation
	for _, t := range []struct {
		name string
		t    [][]Search
	}{{SampleScaleTable, r.SampleScale}, {ParamScaleTable, r.ParamScale}} {
		for i, m := range r.Models {
			for j, p := range r.Policies {
				if t.t[i][j].Max > t.t[i][ts].Max {
					out = append(out, Violation{t.name, m.Name, p, t.t[i][j].Max, t.t[i][ts].Max})
				}
			}
		}
	}
	return out
}

// ThresholdViolations lists where another policy's largest batch at no
// less than x% of the unconstrained throughput (Fig. 14a) exceeds
// tsplit's. Table is "Fig. 14a ≥x%". Not diagnosed like Violations:
// the threshold searches probe the same batches for every policy, so a
// break here is a batch at which another policy's plan is faster.
func (r *Results) ThresholdViolations() []Violation {
	ts := slices.Index(r.Config.ThresholdPolicies, "tsplit")
	if ts < 0 {
		return nil
	}
	var out []Violation
	for t, x := range r.Config.Thresholds {
		for i, m := range r.Models {
			for j, p := range r.Config.ThresholdPolicies {
				if v := r.UnderX[t][i][j].Max; v > r.UnderX[t][i][ts].Max {
					out = append(out, Violation{fmt.Sprintf("Fig. 14a ≥%d%%", x), m.Name, p, v, r.UnderX[t][i][ts].Max})
				}
			}
		}
	}
	return out
}

// modelConfig describes a model's configuration at k = 1.
func modelConfig(r *Results, m Model) (string, int64) {
	zc := zoo.Config{}
	if r.Config.Small {
		zc = zoo.SmallConfig(m.Zoo)
	}
	n, _ := zoo.ParamCount(m.Zoo, zc)
	if zc.Width == 0 {
		zc.Width = 1
	}
	var desc string
	switch {
	case zc.ImageSize > 0 || strings.HasPrefix(m.Zoo, "vgg") || strings.HasPrefix(m.Zoo, "resnet") || m.Zoo == "inception":
		img := zc.ImageSize
		if img == 0 {
			img = 224
			if m.Zoo == "inception" {
				img = 299
			}
		}
		classes := zc.Classes
		if classes == 0 {
			classes = 1000
		}
		desc = fmt.Sprintf("%d×%d images, %d classes, width %g", img, img, classes, zc.Width)
	default:
		seq := zc.SeqLen
		if seq == 0 {
			seq = 128
		}
		desc = fmt.Sprintf("%d tokens, width %g", seq, zc.Width)
		if zc.Layers > 0 {
			desc += fmt.Sprintf(", %d layers", zc.Layers)
		}
		if zc.Vocab > 0 {
			desc += fmt.Sprintf(", vocabulary %d", zc.Vocab)
		}
	}
	return desc, n
}

// Summary prints the two scale tables, the Fig. 14a table and where
// tsplit is beaten, as Markdown.
func Summary(w io.Writer, r *Results) {
	if r.Config.wants(TableSampleScale) {
		fmt.Fprintf(w, "\nLargest batch (Table IV), %s:\n\n%s", r.Profile.Name, scaleTable(r, r.SampleScale, true))
	}
	if r.Config.wants(TableParamScale) {
		fmt.Fprintf(w, "\nLargest parameter scale k at batch %d (Table V):\n\n%s", r.Config.ParamBatch, scaleTable(r, r.ParamScale, false))
	}
	if r.Config.wants(TableSampleScale) {
		fmt.Fprintf(w, "\nLargest batch at ≥ x%% of the unconstrained throughput (Fig. 14a):\n\n%s", mdTable(thresholdHeader(r), thresholdRows(r)))
	}
	if r.SubBatched != nil {
		fmt.Fprintf(w, "\nmodnn with sub-batching (a different step for models with BatchNormalization):\n\n%s", subBatchedTable(r))
	}
	for _, d := range r.Diagnoses {
		fmt.Fprintf(w, "tsplit beaten: %s, %s: %s reaches %d, tsplit %d; %s\n", d.Table, d.Model, d.Policy, d.Value, d.Tsplit, d.swapOnlyNote())
	}
	for _, a := range r.NonMonotone() {
		fmt.Fprintf(w, "not monotone: %s\n", a)
	}
}

// Anomaly is a sweep point that contradicts a policy's searched
// maximum: a batch above it that plans, or one below it that does not.
// The searches assume that a policy that plans a batch plans every
// smaller one; an anomaly shows a planner for which that is not so.
type Anomaly struct {
	Model, Policy string
	Batch, Max    int64
	// Fits: the batch is above the maximum and plans; otherwise it is
	// below the maximum and does not.
	Fits bool
}

// NonMonotone lists the sweep's anomalies.
func (r *Results) NonMonotone() []Anomaly {
	var out []Anomaly
	for i, m := range r.Models {
		sw := r.Sweep[i]
		for j, pol := range r.Policies {
			max := r.SampleScale[i][j].Max
			for bi, b := range sw.Batches {
				p := sw.Probes[bi][j]
				if p == nil {
					continue
				}
				if (b > max && p.OK) || (b < max && !p.OK) {
					out = append(out, Anomaly{m.Name, pol, b, max, p.OK})
				}
			}
		}
	}
	return out
}

func (a Anomaly) String() string {
	if a.Fits {
		return fmt.Sprintf("%s, %s: batch %d plans, above the searched maximum %d", a.Model, a.Policy, a.Batch, a.Max)
	}
	return fmt.Sprintf("%s, %s: batch %d does not plan, below the searched maximum %d", a.Model, a.Policy, a.Batch, a.Max)
}

// swapOnlyNote says how tsplit restricted to swapping fares at the size
// another policy reached.
func (d *Diagnosis) swapOnlyNote() string {
	p := d.SwapOnly
	switch {
	case p == nil:
		return "not diagnosed"
	case p.OK:
		return fmt.Sprintf("tsplit swapping only (no recomputation) plans %d", d.Value)
	}
	return fmt.Sprintf("tsplit swapping only fails there too (%s)", shortReason(p))
}

// SubBatchedName is modnn with sub-batching in tables; SubBatchedPolicy
// its name in CSV files and the limits table.
const (
	SubBatchedName   = "modnn (sub-batched)"
	SubBatchedPolicy = "modnn-subbatched"
)

// hasBatchNorm says whether a benchmark model has BatchNormalization, so
// that sub-batching changes its training step.
func hasBatchNorm(r *Results, m Model) bool {
	zc := zoo.Config{Batch: 1, WeightsAsInputs: true}
	if r.Config.Small {
		zc = zoo.SmallConfig(m.Zoo)
		zc.Batch, zc.WeightsAsInputs = 1, true
	}
	mp, err := zoo.Build(m.Zoo, zc)
	if err != nil {
		return false
	}
	for _, n := range mp.GetGraph().GetNode() {
		if n.GetOpType() == "BatchNormalization" {
			return true
		}
	}
	return false
}

// fmtSubBatched is a sub-batched search's maximum, "≥N" where it stopped
// on the benchmark's bound on the unrolled step rather than on memory.
func fmtSubBatched(s Search) string {
	if s.Stop != nil && shortReason(s.Stop) == "unrolled-step cap" {
		return "≥" + strconv.FormatInt(s.Max, 10)
	}
	return fmtScale(s)
}

// subBatchedRows are the per-model rows of the sub-batched table.
func subBatchedRows(r *Results) [][]string {
	var rows [][]string
	for i, m := range r.Models {
		s := r.SubBatched[i]
		plain, _ := scaleOf(r, r.SampleScale, i, "modnn")
		ts, ok := scaleOf(r, r.SampleScale, i, "tsplit")
		tsCell := "—"
		if ok {
			tsCell = fmtScale(ts)
		}
		bn := "no (the same step)"
		if hasBatchNorm(r, m) {
			bn = "yes (statistics per sub-batch)"
		}
		row := []string{m.Display, bn, fmtScale(plain), fmtSubBatched(s), tsCell}
		if p := s.At; p != nil {
			row = append(row, fmt.Sprintf("%d × %d (Eq. 3: %d)", p.SubBatches, p.SubBatch, p.SubBatchEq3),
				fmt.Sprintf("%s (%.0f%%)", fmtFloat(p.Throughput(), 1), 100*p.Relative()))
		} else {
			row = append(row, "—", "—")
		}
		row = append(row, shortReason(s.Stop))
		rows = append(rows, row)
	}
	return rows
}

func subBatchedTable(r *Results) string {
	return mdTable([]string{"Model", "BatchNormalization", "modnn", SubBatchedName, "tsplit", "sub-batches at the maximum",
		"samples/s there (vs unconstrained)", "stops because"}, subBatchedRows(r))
}

func subBatchedMD(r *Results) string {
	return fmt.Sprintf("# modnn with sub-batching\n\n"+
		"Device %s, budget %s. The largest batch modnn plans when, as moDNN does, it runs the step as sub-batches of Eq. 3's "+
		"size with the gradients accumulated (policy.PlanSubBatched: where the plan at Eq. 3's size does not fit, the whole batch, "+
		"then the sub-batch halved at most %d times), next to modnn on the plain step (Table IV's column) and tsplit. For a model with BatchNormalization this is a "+
		"different training step: each sub-batch is normalized with its own statistics. The step is unrolled (one copy of the "+
		"sub-batch step per sub-batch), so the benchmark builds at most %d sub-batches and %d ops; ≥ marks a search that "+
		"stopped there. Samples/s is at the maximum, in parentheses against the plain step's unconstrained throughput at that "+
		"batch.\n\n%s", r.Profile.Name, units.Bytes(r.Profile.Budget()), policy.SubBatchHalvings, r.Config.MaxSubBatches,
		r.Config.MaxSubBatchOps, subBatchedTable(r))
}

func subBatchedCSV(r *Results) [][]string {
	out := [][]string{{"model", "batchnorm", "modnn_max_batch", "subbatched_max_batch", "stopped_on_unroll_cap", "tsplit_max_batch",
		"sub_batches", "sub_batch", "eq3_sub_batch", "samples_per_s", "relative", "stop_reason"}}
	for i, m := range r.Models {
		s := r.SubBatched[i]
		plain, _ := scaleOf(r, r.SampleScale, i, "modnn")
		ts, _ := scaleOf(r, r.SampleScale, i, "tsplit")
		row := []string{m.Name, strconv.FormatBool(hasBatchNorm(r, m)), strconv.FormatInt(plain.Max, 10), strconv.FormatInt(s.Max, 10),
			strconv.FormatBool(strings.HasPrefix(fmtSubBatched(s), "≥")), strconv.FormatInt(ts.Max, 10), "", "", "", "", "", shortReason(s.Stop)}
		if p := s.At; p != nil {
			row[6], row[7], row[8] = strconv.Itoa(p.SubBatches), strconv.FormatInt(p.SubBatch, 10), strconv.FormatInt(p.SubBatchEq3, 10)
			row[9], row[10] = fmtFloat(p.Throughput(), 3), fmtFloat(p.Relative(), 4)
		}
		out = append(out, row)
	}
	return out
}
