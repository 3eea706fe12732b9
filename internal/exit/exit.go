package exit

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// The exit statuses of the tsplit commands.
const (
	OK       = 0
	Failure  = 1 // bad input, a budget that cannot be fitted, a failed run
	Usage    = 2 // a wrong command line
	Internal = 3 // a bug in tsplit: a recovered panic
	// A command stopped by a signal exits with 128 + the signal's number
	// (130 for SIGINT, 143 for SIGTERM), as shells report it.
	signalBase = 128
)

// Guard runs main and returns its exit status. A panic in main is an
// internal error: the report goes to stderr and the status is Internal.
// (Go's own exit status for an unrecovered panic is 2, the status of a
// wrong command line.)
func Guard(stderr io.Writer, args []string, main func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			Report(stderr, args, r, debug.Stack())
			code = Internal
		}
	}()
	return main()
}

// Report writes the report of an internal error: the panic's value and
// stack, the command line that reproduces it (quoted for a shell) and a
// request to file a bug with both.
func Report(w io.Writer, args []string, value any, stack []byte) {
	fmt.Fprintf(w, "%s: internal error: %v\n\n%s\n", name(args), value, strings.TrimRight(string(stack), "\n"))
	fmt.Fprintf(w, "\nThis is a bug in tsplit, not in your model or command. Please file it, with this report and the\n")
	fmt.Fprintf(w, "command that reproduces it (and the model, if you can share it):\n\n    %s\n", Command(args))
}

func name(args []string) string {
	if len(args) == 0 {
		return "tsplit"
	}
	s := args[0]
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Command is args as one shell command line: each argument quoted when
// it holds anything but plain characters.
func Command(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:@%+", r))
	}) < 0 {
		return s
	}
	if strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return "$" + ansiQuote(s) // control characters: bash's $'…'
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ansiQuote writes s as bash's $'…' string, escaping what is not
// printable.
func ansiQuote(s string) string {
	q := strconv.Quote(s) // "…" with Go escapes, which $'…' reads alike for \n \t \xNN \\ \"
	return "'" + strings.ReplaceAll(q[1:len(q)-1], "'", `\'`) + "'"
}

// Signals returns a context that SIGINT or SIGTERM cancels, with the
// signal as its cause, and the function that stops listening. While it
// listens the signals no longer end the process: the command finishes
// the step it is in, removes its temporary files and exits with
// Interrupted's status.
func Signals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(&Signal{Sig: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// Signal is the cause of a context Signals cancelled.
type Signal struct{ Sig os.Signal }

func (s *Signal) Error() string {
	switch s.Sig {
	case os.Interrupt:
		return "interrupted by SIGINT"
	case syscall.SIGTERM:
		return "interrupted by SIGTERM"
	}
	return "interrupted by " + s.Sig.String()
}

// Interrupted reports whether ctx was cancelled by a signal, and the
// exit status that says so (128 + the signal's number).
func Interrupted(ctx context.Context) (int, bool) {
	s, ok := context.Cause(ctx).(*Signal)
	if !ok {
		return 0, false
	}
	if n, ok := s.Sig.(syscall.Signal); ok {
		return signalBase + int(n), true
	}
	return signalBase + int(syscall.SIGINT), true
}
