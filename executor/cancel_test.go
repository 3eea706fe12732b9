package executor_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/tsplit/tsplit/executor"
	"github.com/tsplit/tsplit/executor/cpu"
)

// cancelling wraps the CPU device and cancels a context at its first
// launch, counting launches.
type cancelling struct {
	*cpu.Device
	cancel   context.CancelFunc
	launches int
}

func (d *cancelling) Launch(l *executor.Launch) error {
	d.launches++
	d.cancel()
	return d.Device.Launch(l)
}

// A run whose context is cancelled during its first op launches no
// other op, fails with the context's error, and leaves the executor
// ready for the next run, which computes what a fresh executor does.
func TestRunContextStopsBetweenOps(t *testing.T) {
	m := chain(t)
	in := map[string][]byte{"x": floats(64*64, func(i int) float32 { return float32(i%13)/13 - 0.5 })}
	want, _, err := run(t, m, 1<<20, in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dev := &cancelling{Device: mustCPU(t, 1<<20), cancel: cancel}
	x, err := executor.New(m, dev, executor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.RunContext(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", err)
	}
	if dev.launches != 1 {
		t.Errorf("%d ops launched after the cancel at the first, want none", dev.launches-1)
	}
	got, err := x.RunContext(context.Background(), in)
	if err != nil {
		t.Fatalf("the run after a cancelled one: %v", err)
	}
	for name, w := range want.Outputs {
		if !bytes.Equal(got.Outputs[name], w) {
			t.Errorf("output %s differs from a fresh executor's after a cancelled run", name)
		}
	}
}
