package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/tsplit/tsplit/ir"
	"github.com/tsplit/tsplit/kernels"
)

// event is signalled when a task completes; err is its outcome.
type event struct {
	done chan struct{}
	err  error
}

func newEvent() *event { return &event{done: make(chan struct{})} }

func (e *event) wait() error {
	<-e.done
	return e.err
}

// task is one unit of work on a stream.
type task struct {
	op   *ir.Op // the op it performs, named by its errors
	deps []*event
	run  func() error
	done *event
	// start and end are set by the stream, relative to the run's t0.
	start, end *time.Duration
}

// stream runs its tasks one after another, in issue order, on its own
// goroutine: the CPU analogue of a CUDA stream.
type stream struct {
	name  string
	tasks chan *task
	wg    sync.WaitGroup
	t0    time.Time
	// ctx stops the stream: a task that has not started when it is done
	// fails with its error instead of running.
	ctx context.Context
}

func newStream(ctx context.Context, name string, t0 time.Time) *stream {
	s := &stream{name: name, tasks: make(chan *task, 1024), t0: t0, ctx: ctx}
	s.wg.Add(1)
	go s.loop()
	return s
}

func (s *stream) loop() {
	defer s.wg.Done()
	for t := range s.tasks {
		var err error
		for _, d := range t.deps {
			if e := d.wait(); e != nil && err == nil {
				err = errSkipped{e}
			}
		}
		if err == nil {
			err = s.ctx.Err()
		}
		if err == nil {
			*t.start = time.Since(s.t0)
			err = t.perform()
			*t.end = time.Since(s.t0)
		}
		t.done.err = err
		close(t.done.done)
	}
}

// perform runs the task, naming its op in any error and turning a
// panic of the kernel into an error: the stream's goroutine must live
// on (a panic there would end the process, past any recover of the
// caller), and the run fails like any failed op.
func (t *task) perform() (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		stack := debug.Stack()
		if wp, ok := r.(*kernels.WorkerPanic); ok {
			r, stack = wp.Value, wp.Stack
		}
		err = &OpError{Op: t.op, Err: fmt.Errorf("%v", r), Panic: true, Stack: stack}
	}()
	if err := t.run(); err != nil {
		return &OpError{Op: t.op, Err: err}
	}
	return nil
}

func (s *stream) submit(t *task) { s.tasks <- t }

func (s *stream) close() {
	close(s.tasks)
	s.wg.Wait()
}

// errSkipped marks a task that did not run because a task it waited
// for failed; the first failure is the one reported.
type errSkipped struct{ cause error }

func (e errSkipped) Error() string { return e.cause.Error() }
func (e errSkipped) Unwrap() error { return e.cause }

// OpError is an op that failed at run time: its kernel's error (an index
// out of range in the data, say), a failed copy, or a panic of its
// kernel, which is a bug in tsplit rather than in the input.
type OpError struct {
	Op  *ir.Op
	Err error
	// Panic is set when the kernel panicked; Stack is where.
	Panic bool
	Stack []byte
}

func (e *OpError) Error() string {
	desc := e.Op.Describe()
	msg := e.Err.Error()
	switch {
	case e.Panic:
		return fmt.Sprintf("%s: the kernel panicked (a bug in tsplit): %s", desc, msg)
	case strings.HasPrefix(msg, desc):
		return msg // kernels name their op already (kernels.Ctx.Errorf)
	}
	return desc + ": " + msg
}

func (e *OpError) Unwrap() error { return e.Err }

// IsPanic reports whether err comes from a kernel that panicked.
func IsPanic(err error) bool {
	var oe *OpError
	return errors.As(err, &oe) && oe.Panic
}
