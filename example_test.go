package tsplit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tsplit/tsplit"
)

// model is a forward model the repository ships: a small ResNet-18
// with its weights, whose training step at batch 16 peaks at 2.02 MiB.
const model = "testdata/onnx/resnet18-small.onnx"

// kib prints a byte count in KiB.
func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

// Plan a shipped model's training step into 1.5 MiB, write the planned
// model, then run one step of it on the CPU device capped at the plan's
// pool: the measured peak is the planned one.
func Example() {
	dir, err := os.MkdirTemp("", "tsplit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	planned := filepath.Join(dir, "planned.onnx")

	ctx := context.Background()
	res, err := tsplit.PlanFile(ctx, model, tsplit.Options{Batch: 16, Budget: 1536 << 10, Output: planned})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("peak %s → %s within %s\n", kib(res.BasePeak), kib(res.Peak), kib(res.Budget))
	fmt.Printf("%d swapped, %d recomputed, %d split\n", res.Swapped, res.Recomputed, res.Split)

	run, err := tsplit.RunFile(ctx, planned, tsplit.RunOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("pool %s, the plan's: %v\n", kib(run.Pool), run.Pool == res.Pool)
	fmt.Println("measured peak equals the plan's:", run.Peak == res.Peak)
	fmt.Println("loss:", run.Training.LossKind)
	// Output:
	// peak 2520.0 KiB → 1414.5 KiB within 1536.0 KiB
	// 11 swapped, 0 recomputed, 0 split
	// pool 1509.2 KiB, the plan's: true
	// measured peak equals the plan's: true
	// loss: cross-entropy
}

// A budget below what any plan can reach is an *InfeasibleError with
// the budget and the lower bound.
func ExampleInfeasibleError() {
	_, err := tsplit.PlanFile(context.Background(), model, tsplit.Options{Batch: 16, Budget: 512 << 10})
	var ie *tsplit.InfeasibleError
	if errors.As(err, &ie) {
		fmt.Println("policy", ie.Policy, "cannot fit", kib(ie.Budget))
		fmt.Println("lower bound", kib(ie.LowerBound), "above the budget:", ie.LowerBound > ie.Budget)
	}
	// Output:
	// policy tsplit cannot fit 512.0 KiB
	// lower bound 845.5 KiB above the budget: true
}

// Options are checked before the model is read: a policy that does not
// exist is a *UsageError naming the option.
func ExampleUsageError() {
	_, err := tsplit.PlanFile(context.Background(), "no-such-model.onnx", tsplit.Options{Policy: "lru"})
	var ue *tsplit.UsageError
	if errors.As(err, &ue) {
		fmt.Println("bad option:", ue.Option)
	}
	// Output:
	// bad option: Policy
}

// A model that cannot be read is an *InputError naming the file.
func ExampleInputError() {
	_, err := tsplit.Load(context.Background(), "testdata/no-such-model.onnx", tsplit.Options{})
	var ie *tsplit.InputError
	if errors.As(err, &ie) {
		fmt.Println("bad input:", ie.File)
	}
	// Output:
	// bad input: testdata/no-such-model.onnx
}

// Progress reports each stage as it starts and ends; planning reports
// every round, its fraction the way from the unplanned peak down to
// the budget.
func ExampleOptions_progress() {
	var stages []tsplit.Stage
	last := 0.0
	opts := tsplit.Options{Batch: 16, Budget: 1536 << 10, Progress: func(p tsplit.Progress) {
		if len(stages) == 0 || stages[len(stages)-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
		last = p.Fraction
	}}
	if _, err := tsplit.PlanFile(context.Background(), model, opts); err != nil {
		log.Fatal(err)
	}
	fmt.Println(stages, "ending at", last)
	// Output:
	// [import train plan] ending at 1
}

// Planning stops with the context's error once it is cancelled.
func ExamplePlan_cancel() {
	ctx, cancel := context.WithCancel(context.Background())
	m, err := tsplit.Load(ctx, model, tsplit.Options{Batch: 16})
	if err != nil {
		log.Fatal(err)
	}
	// Cancel as soon as the first planning round starts.
	opts := tsplit.Options{Budget: 1536 << 10, Progress: func(p tsplit.Progress) {
		if p.Stage == tsplit.StagePlan {
			cancel()
		}
	}}
	_, err = tsplit.Plan(ctx, m, opts)
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// true
}

// Train builds the training step of a forward model: loss, backward
// pass and optimizer update.
func ExampleTrain() {
	ctx := context.Background()
	m, err := tsplit.Load(ctx, model, tsplit.Options{Batch: 4})
	if err != nil {
		log.Fatal(err)
	}
	ti, err := tsplit.Train(ctx, m, tsplit.TrainOptions{Optimizer: "momentum"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ti.LossKind, ti.Optimizer, len(ti.Params), "parameters")
	// Output:
	// cross-entropy momentum 62 parameters
}
