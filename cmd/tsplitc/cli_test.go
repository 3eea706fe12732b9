package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ot "github.com/tsplit/tsplit/internal/onnxtest"
)

// resnet18 is the shipped model the README's first command plans.
var resnet18 = filepath.Join("..", "..", "testdata", "onnx", "resnet18-small.onnx")

// Every subcommand prints its help with exit status 0, and
// `tsplitc --run --help` is run's help (it used to open a file called
// "--help").
func TestSubcommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "tsplitc [MODEL"},
		{[]string{"plan", "--help"}, "tsplitc plan MODEL -o PLANNED.onnx"},
		{[]string{"run", "--help"}, "tsplitc run MODEL"},
		{[]string{"--run", "--help"}, "tsplitc run MODEL"},
		{[]string{"--help", "--run"}, "tsplitc run MODEL"},
		{[]string{"train", "--help"}, "tsplitc train MODEL -o TRAIN.onnx"},
		{[]string{"inspect", "--help"}, "tsplitc inspect MODEL"},
		{[]string{"dump", "--help"}, "tsplitc dump MODEL"},
		{[]string{"zoo", "--help"}, "tsplitc zoo [NAME] -o FILE"},
		{[]string{"bench", "--help"}, "tsplitc bench [-o DIR]"},
		{[]string{"profile", "--help"}, "tsplitc profile [NAME | FILE.json]"},
	} {
		out, errs, code := tsplitc(t, c.args...)
		if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stdout lacks %q:\n%s\n%s", c.args, code, c.want, out, errs)
		}
	}
	// The plan and run helps name their budget and pool flags.
	out, _, _ := tsplitc(t, "run", "--help")
	if !strings.Contains(out, "--pool") {
		t.Errorf("run --help does not show --pool:\n%s", out)
	}
	out, _, _ = tsplitc(t, "plan", "--help")
	if !strings.Contains(out, "--memory") || !strings.Contains(out, "--policy-param") {
		t.Errorf("plan --help does not show --memory and --policy-param:\n%s", out)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, errs, code := tsplitc(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "tsplitc ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: exit %d, %q %q", code, out, errs)
	}
}

// jsonObject runs tsplitc and decodes its stdout as one JSON object.
func jsonObject(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, errs, code := tsplitc(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("%v: stdout is not a JSON object: %v\n%s", args, err, out)
	}
	if dec.More() {
		t.Fatalf("%v: more than one JSON value on stdout:\n%s", args, out)
	}
	return obj
}

// hasFields fails unless obj has every field.
func hasFields(t *testing.T, what string, obj map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := obj[f]; !ok {
			t.Errorf("%s --json lacks %q: %v", what, f, obj)
		}
	}
}

// --json prints one JSON object with snake_case fields on plan, run,
// train, inspect and profile, and on the shortcuts.
func TestJSONSummaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	planned := filepath.Join(dir, "planned.onnx")
	plan := jsonObject(t, "plan", resnet18, "--batch", "16", "--memory", "1.5MiB", "-o", planned, "--json")
	hasFields(t, "plan", plan, "policy", "budget_bytes", "base_peak_bytes", "peak_bytes", "pool_bytes", "host_peak_bytes",
		"base_step_s", "step_s", "swapped", "recomputed", "split", "kept", "planning_s", "output", "model", "device", "total_s",
		"lower_bound_step_s", "lower_bound")
	if lb, ok := plan["lower_bound_step_s"].(float64); !ok || lb < plan["base_step_s"].(float64) {
		t.Errorf("plan --json: lower_bound_step_s %v, base step %v", plan["lower_bound_step_s"], plan["base_step_s"])
	}
	if plan["policy"] != "tsplit" || plan["budget_bytes"] != float64(1536<<10) || plan["output"] != planned {
		t.Errorf("plan --json: %v", plan)
	}
	if peak := plan["peak_bytes"].(float64); peak <= 0 || peak > plan["budget_bytes"].(float64) || plan["base_peak_bytes"].(float64) <= plan["budget_bytes"].(float64) {
		t.Errorf("plan --json: peaks %v → %v, budget %v", plan["base_peak_bytes"], peak, plan["budget_bytes"])
	}
	short := jsonObject(t, resnet18, "--batch", "16", "--memory", "1.5MiB", "-o", filepath.Join(dir, "short.onnx"), "--json")
	for _, k := range []string{"peak_bytes", "pool_bytes", "swapped", "recomputed", "split", "kept"} {
		if short[k] != plan[k] {
			t.Errorf("the shortcut's %s is %v, plan's %v", k, short[k], plan[k])
		}
	}

	run := jsonObject(t, "run", planned, "--json")
	hasFields(t, "run", run, "model", "device", "pool_bytes", "need_bytes", "model_peak_bytes", "peak_bytes", "iters",
		"time_per_iter_s", "loss_kind", "optimizer", "losses", "outputs")
	if run["peak_bytes"] != plan["peak_bytes"] || run["pool_bytes"] != plan["pool_bytes"] {
		t.Errorf("run --json: measured peak %v in pool %v; the plan: %v in %v", run["peak_bytes"], run["pool_bytes"], plan["peak_bytes"], plan["pool_bytes"])
	}
	if short := jsonObject(t, "--run", planned, "--json", "--quiet"); short["peak_bytes"] != run["peak_bytes"] {
		t.Errorf("--run --json: peak %v, run's %v", short["peak_bytes"], run["peak_bytes"])
	}
	chain := ot.Write(t, dir, "chain.onnx", ot.ReluChain())
	fwd := jsonObject(t, "run", chain, "--batch", "2", "--json")
	outs, _ := fwd["outputs"].([]any)
	if len(outs) != 1 {
		t.Fatalf("run --json of a forward model: outputs %v", fwd["outputs"])
	}
	o := outs[0].(map[string]any)
	if o["name"] != "y" || o["dtype"] != "f32" || len(o["head"].([]any)) != 6 {
		t.Errorf("run --json output: %v", o)
	}

	train := jsonObject(t, "train", resnet18, "--batch", "2", "-o", filepath.Join(dir, "train.onnx"), "--json")
	hasFields(t, "train", train, "model", "output", "ops", "loss", "loss_kind", "optimizer", "params")

	inspect := jsonObject(t, "inspect", resnet18, "--batch", "8", "--json")
	hasFields(t, "inspect", inspect, "model", "ir_version", "opsets", "dims", "ops", "parameters", "parameter_bytes",
		"activation_bytes", "all_static", "op_counts", "largest_tensors")
	if inspect["dims"].(map[string]any)["batch"] != float64(8) || len(inspect["largest_tensors"].([]any)) != 10 {
		t.Errorf("inspect --json: dims %v, %d largest tensors", inspect["dims"], len(inspect["largest_tensors"].([]any)))
	}

	profiles := jsonObject(t, "profile", "--json")
	if list, _ := profiles["profiles"].([]any); len(list) < 6 {
		t.Errorf("profile --json lists %v", profiles["profiles"])
	}
	one := jsonObject(t, "profile", "gtx-1080ti", "--json")
	hasFields(t, "profile NAME", one, "name", "memory_bytes", "h2d_bytes_per_s", "d2h_bytes_per_s", "fp32_flops", "host_memory_bytes")
	// The JSON of a profile is a profile file --device and profile read.
	b, err := json.Marshal(one)
	if err != nil {
		t.Fatal(err)
	}
	file := ot.WriteBytes(t, dir, "mine.json", b)
	if again := jsonObject(t, "profile", file, "--json"); again["memory_bytes"] != one["memory_bytes"] {
		t.Errorf("the profile file reads back as %v", again)
	}
}

// The shortcuts do what the subcommands do: `tsplitc MODEL -o OUT` and
// `tsplitc plan MODEL -o OUT` write the same bytes; `tsplitc --run
// MODEL`, `--run=MODEL` and `tsplitc run MODEL` measure the same peak,
// and the root's --memory is run's --pool.
func TestShortcuts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx")
	for _, args := range [][]string{
		{resnet18, "--batch", "16", "--memory", "1.5MiB", "-o", a},
		{"plan", resnet18, "--batch", "16", "--memory", "1.5MiB", "-o", b},
	} {
		if _, errs, code := tsplitc(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatalf("tsplitc MODEL -o and tsplitc plan MODEL -o wrote different files (%d, %d bytes)", len(da), len(db))
	}
	peak := func(args ...string) string {
		t.Helper()
		out, errs, code := tsplitc(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "peak device") {
				return line
			}
		}
		t.Fatalf("%v: no peak line:\n%s", args, out)
		return ""
	}
	want := peak("run", a)
	for _, args := range [][]string{{"--run", a}, {"--run=" + a}, {"--run", a, "--memory", "2MiB"}, {"--run", a, "--pool", "2MiB"}, {"run", a, "--pool", "2MiB"}, {"run", a, "--memory", "2MiB"}} {
		if got := peak(args...); got != want {
			t.Errorf("%v: %q, run: %q", args, got, want)
		}
	}
	// The pool flag sets the device's pool: at 2 MiB the device line says so.
	out, _, _ := tsplitc(t, "--run", a, "--memory", "2MiB")
	out2, _, _ := tsplitc(t, "run", a, "--pool", "2MiB")
	for _, o := range []string{out, out2} {
		if !strings.Contains(o, "pool 2.00 MiB (2097152 bytes)") {
			t.Errorf("the pool is not 2 MiB:\n%s", o)
		}
	}
}

// Exit status 2 for a wrong command line (a zero budget or pool
// included: the library would read it as the default), 1 for bad input,
// a budget that cannot be fitted and a training step that diverges.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := ot.WriteBytes(t, dir, "bad.onnx", []byte("garbage"))
	out := filepath.Join(dir, "out.onnx")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", resnet18}, 2, "needs -o"},
		{[]string{"plan", resnet18, "-o", out, "--memory", "lots"}, 2, "--memory"},
		{[]string{"plan", resnet18, "-o", out, "--device", "gtx-9090"}, 2, "--device"},
		{[]string{"plan", resnet18, "-o", out, "--policy", "lru"}, 2, "--policy: unknown policy"},
		{[]string{"plan", resnet18, "-o", out, "--no-such-flag"}, 2, "unknown flag"},
		{[]string{"plan", resnet18, "-o", out, "--report", "r.txt"}, 2, ""},
		{[]string{"plan"}, 2, "takes 1 argument"},
		{[]string{"run", resnet18, "--pool", "1MiB", "--memory", "1MiB"}, 2, "give one of them"},
		{[]string{"--run", resnet18, "--pool", "1MiB", "--memory", "1MiB"}, 2, "give one of them"},
		{[]string{"run", resnet18, "--iters", "0"}, 2, "--iters"},
		{[]string{"run", resnet18, "-o", out}, 2, "-o: writes a trained model"},
		{[]string{"run", resnet18, "--train", "-o", resnet18}, 2, "is the input"},
		{[]string{"--run", resnet18, "--train", "-o", dir}, 2, "is a folder"},
		{[]string{"run", resnet18, "--save-outputs", bad}, 2, "is not a folder"},
		{[]string{"plan", resnet18, "-o", out, "--memory", "0"}, 2, `--memory "0": want a positive size`},
		{[]string{"run", resnet18, "--pool", "0B"}, 2, `--pool "0B": want a positive size`},
		{[]string{"--run", resnet18, "--memory", "0"}, 2, "want a positive size"},
		{[]string{"--run"}, 2, "--run takes one model"},
		{[]string{"--run=" + resnet18, resnet18}, 2, "unexpected arguments"},
		{[]string{"train", resnet18}, 2, "needs -o"},
		{[]string{"profile", "gtx-9090"}, 2, "unknown device"},
		{[]string{"profile", "a", "b"}, 2, "at most one"},
		{[]string{"zoo", "resnet18"}, 2, "needs -o"},
		{[]string{"bench", "extra"}, 2, "takes 0 argument"},
		{[]string{"plan", bad, "-o", out}, 1, bad + ": not a valid ONNX protobuf"},
		{[]string{"run", bad}, 1, bad},
		{[]string{"train", bad, "-o", out}, 1, bad},
		{[]string{"dump", bad}, 1, bad},
		{[]string{"profile", filepath.Join(dir, "missing.json")}, 1, "missing.json"},
		// --order dfs: one Alg. 2 walk instead of tsplit's search, here
		// and in TestOffloadFlag (the exit status is the subject).
		{[]string{"plan", resnet18, "--batch", "16", "--memory", "512KiB", "--order", "dfs", "-o", out}, 1, "no plan fits a budget of 512.00 KiB"},
		{[]string{"run", resnet18, "--train", "--batch", "16", "--pool", "1MiB"}, 1, "out of device memory"},
		// A diverging step stops at the first op computing a NaN (the
		// learning rate is +Inf in float32), on by default with --train.
		{[]string{"run", resnet18, "--train", "--batch", "2", "--lr", "1e308", "--iters", "2"}, 1, "the first non-finite value of the step"},
		{[]string{"run", resnet18, "--train", "--batch", "2", "--lr", "1e308", "--iters", "2", "--check-finite=false"}, 0, ""},
	} {
		_, errs, code := tsplitc(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d (want %d), stderr %q lacks %q", c.args, code, c.code, errs, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed command wrote %s", out)
	}
}

// bench writes files only where -o says: run from an empty folder
// without -o it leaves the folder empty (it used to write
// docs/benchmarks by default).
func TestBenchWritesOnlyWithOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"bench", "--small", "--models", "vgg16", "--policies", "base", "--sweep-steps", "1", "-j", "1",
		"--max-batch", "64", "--max-width", "2", "--quiet"}
	run := func(args ...string) string {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TSPLITC_MAIN=1")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	out := run(args...)
	if !strings.Contains(out, "no files written") {
		t.Errorf("bench without -o:\n%s", out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("bench without -o wrote %d entries into its folder (%s…)", len(ents), ents[0].Name())
	}
	run(append(args, "-o", "res")...)
	if _, err := os.Stat(filepath.Join(dir, "res", "README.md")); err != nil {
		t.Errorf("bench -o res: %v", err)
	}
}

// run -o writes the trained model and --save-outputs the outputs, in
// both spellings of the command; --json names the files.
func TestRunSavesResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	trained, saved := filepath.Join(dir, "trained.onnx"), filepath.Join(dir, "outputs")
	out, errs, code := tsplitc(t, "run", resnet18, "--batch", "2", "--train", "--iters", "2", "-o", trained, "--save-outputs", saved)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "wrote        "+trained+" (the trained model)") || !strings.Contains(out, "outputs to "+saved) {
		t.Errorf("the summary does not name the files:\n%s", out)
	}
	npys, _ := filepath.Glob(filepath.Join(saved, "*.npy"))
	if len(npys) == 0 {
		t.Errorf("no .npy files in %s", saved)
	}
	// Training goes on from the trained model.
	if _, errs, code := tsplitc(t, "run", trained, "--iters", "2"); code != 0 {
		t.Errorf("run %s: exit %d: %s", trained, code, errs)
	}
	again := filepath.Join(dir, "again.onnx")
	js, errs, code := tsplitc(t, "--run", resnet18, "--batch", "2", "--train", "--iters", "2", "-o", again, "--save-outputs", saved, "--json")
	if code != 0 {
		t.Fatalf("--run: exit %d: %s", code, errs)
	}
	var obj struct {
		Trained string `json:"trained_model"`
		Saved   []struct {
			Name, File string
		} `json:"saved_outputs"`
	}
	if err := json.Unmarshal([]byte(js), &obj); err != nil || obj.Trained != again || len(obj.Saved) != len(npys) {
		t.Errorf("--json: %v, trained %q, %d saved (want %s, %d):\n%s", err, obj.Trained, len(obj.Saved), again, len(npys), js)
	}
	a, _ := os.ReadFile(trained)
	b, _ := os.ReadFile(again)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("run -o and --run -o wrote different models (%d, %d bytes)", len(a), len(b))
	}
}

// bench --budget-sweep writes files only with -o too, and then the
// CI-sized variant's table and plots.
func TestBenchBudgetSweepWritesOnlyWithOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"bench", "--budget-sweep", "--small", "--models", "vgg16", "--policies", "base", "-j", "1",
		"--max-batch", "16", "--quiet"}
	run := func(args ...string) string {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TSPLITC_MAIN=1")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	out := run(args...)
	if !strings.Contains(out, "no files written") || !strings.Contains(out, "vgg16 at batch 16") {
		t.Errorf("bench --budget-sweep without -o:\n%s", out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("bench --budget-sweep without -o wrote %d entries into its folder (%s…)", len(ents), ents[0].Name())
	}
	run(append(args, "-o", "res")...)
	for _, f := range []string{"budget_sweep_small.md", "budget_sweep_small.csv", "budget_sweep_small_vgg16.png", "budget_sweep_small_vgg16.svg"} {
		if _, err := os.Stat(filepath.Join(dir, "res", f)); err != nil {
			t.Errorf("bench --budget-sweep -o res: %v", err)
		}
	}
}

// --offload lets tsplit keep the parameters and optimizer state on the
// host (issue 14): a budget that fails with the state on the device
// (TestExitCodes runs the same command without the flag: "no plan
// fits") plans with it on the host, and the summary says so.
func TestOffloadFlag(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "p.onnx")
	args := []string{"plan", resnet18, "--batch", "16", "--memory", "512KiB", "--order", "dfs", "-o", out}
	stdout, stderr, code := tsplitc(t, append(args, "--offload")...)
	if code != 0 {
		t.Fatalf("with --offload: exit %d, %s", code, stderr)
	}
	if !strings.Contains(stdout, "weights on the host") {
		t.Errorf("the summary does not say the state is on the host:\n%s", stdout)
	}
}
