package executor

import (
	"context"
	"sync"
	"time"
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
			err = t.run()
			*t.end = time.Since(s.t0)
		}
		t.done.err = err
		close(t.done.done)
	}
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
