//go:build unix

package exit

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// SIGINT cancels the context with the signal as its cause, and the
// status is 130; a context cancelled otherwise is not an interruption.
func TestSignals(t *testing.T) {
	ctx, stop := Signals(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Skip("cannot signal myself:", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	if code, ok := Interrupted(ctx); !ok || code != 130 {
		t.Fatalf("Interrupted = %d, %v; want 130, true", code, ok)
	}
	if got := context.Cause(ctx).Error(); got != "interrupted by SIGINT" {
		t.Fatalf("cause %q", got)
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("ctx.Err() = %v", ctx.Err())
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := Interrupted(plain); ok {
		t.Fatal("a plain cancellation read as a signal")
	}
}
