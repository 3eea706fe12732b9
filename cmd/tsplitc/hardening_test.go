//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/tsplit/tsplit"
	"github.com/tsplit/tsplit/backend"
	ot "github.com/tsplit/tsplit/internal/onnxtest"
)

// testCommands are commands only the test binary has: a crash, a
// planner-style panic reported as an error, and a write that waits for
// a signal.
func testCommands() []*cobra.Command {
	return []*cobra.Command{
		{Use: "test-crash", RunE: func(*cobra.Command, []string) error {
			var m map[string]int
			m["boom"]++ // a nil map write: the runtime panics, as a tsplit bug would
			return nil
		}},
		{Use: "test-panic-error", RunE: func(*cobra.Command, []string) error {
			return &tsplit.PanicError{Op: `node "conv" (Conv)`, Value: "index out of range [7] with length 7", Stack: []byte("goroutine 7 [running]:\nkernels.conv(...)")}
		}},
		{Use: "test-write-on-signal", Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Println("ready")
			<-cmd.Context().Done()
			return backend.WriteBytesContext(cmd.Context(), args[0], make([]byte, 64<<20))
		}},
	}
}

// runChild runs the test binary as tsplitc with the test commands and
// returns its stdout, stderr and exit status.
func runChild(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TSPLITC_MAIN=test-commands")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// A bug in tsplit is exit status 3 with a report that gives the command
// to reproduce it and asks for a bug report; a panic used to exit 2,
// the usage-error status (issue 12, item 13).
func TestExitInternal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"test-crash", "my model.onnx"}, []string{"internal error: assignment to entry in nil map", "hardening_test.go", "This is a bug in tsplit", "test-crash 'my model.onnx'"}},
		{[]string{"test-panic-error"}, []string{`internal error: node "conv" (Conv): the kernel panicked: index out of range [7]`, "kernels.conv", "This is a bug in tsplit", "test-panic-error"}},
	} {
		_, errs, code := runChild(t, c.args...)
		if code != 3 {
			t.Errorf("%v: exit %d, want 3\n%s", c.args, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: report lacks %q:\n%s", c.args, w, errs)
			}
		}
	}
}

// SIGINT and SIGTERM stop a command with status 128+n, and a write in
// progress removes its temporary file: killed writes left hidden
// hundred-megabyte temporary files (issue 12, item 11).
func TestInterruptedWriteCleansUp(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		dir := t.TempDir()
		out := filepath.Join(dir, "x.onnx")
		cmd := exec.Command(os.Args[0], "test-write-on-signal", out)
		cmd.Env = append(os.Environ(), "TSPLITC_MAIN=test-commands")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			cmd.Process.Kill()
			t.Fatalf("child said %q", line)
		}
		cmd.Process.Signal(sig)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the command did not stop")
		}
		if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
			t.Errorf("%v: exit %d, want %d (%s)", sig, code, 128+int(sig), errb.String())
		}
		if !strings.Contains(errb.String(), "interrupted by") {
			t.Errorf("%v: stderr %q", sig, errb.String())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%v: the interrupted write left %s", sig, ents[0].Name())
		}
	}
}

// Every writer of the command line (-o of plan and train, zoo -o,
// --report) refuses what is not a regular file and the input model,
// as a usage error, before any work; -o into another folder gives a
// model that loads (issue 12, item 11).
func TestOutputRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	data, err := os.ReadFile(resnet18)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(model, data, 0o644)
	os.Symlink("m.onnx", filepath.Join(dir, "link.onnx"))
	os.Mkdir(filepath.Join(dir, "folder.html"), 0o755)
	ok := filepath.Join(dir, "ok.onnx")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", model, "-o", "/dev/null"}, "-o: backend: output /dev/null is a character device"},
		{[]string{"plan", model, "-o", model}, "is the input"},
		{[]string{model, "-o", filepath.Join(dir, "link.onnx")}, "is the input"},
		{[]string{"plan", model, "-o", dir}, "is a folder"},
		{[]string{"plan", model, "-o", ok, "--report", filepath.Join(dir, "folder.html")}, "--report: backend: output"},
		{[]string{"train", model, "-o", "/dev/null"}, "is a character device"},
		{[]string{"train", model, "-o", model}, "is the input"},
		{[]string{"zoo", "resnet18", "--small", "-o", "/dev/null"}, "is a character device"},
	} {
		_, errs, code := runChild(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d (want 2), stderr %q lacks %q", c.args, code, errs, c.want)
		}
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatal("/dev/null is no longer a device")
	}
	if b, _ := os.ReadFile(model); !bytes.Equal(b, data) {
		t.Fatal("the input model changed")
	}
	if _, err := os.Stat(ok); err == nil {
		t.Fatal("a refused command wrote its output")
	}
}

// Names and op types from the model reach the terminal escaped: an op
// type holding an escape sequence is quoted in the error (issue 12,
// item 13).
func TestModelNamesEscaped(t *testing.T) {
	t.Parallel()
	m := ot.ReluChain()
	m.Graph.Node[0].OpType = proto.String("Frob\x1b[2J\x1b]0;pwned\a")
	m.Graph.Node[0].Name = proto.String("relu\x1b[31m")
	path := ot.Write(t, t.TempDir(), "m.onnx", m)
	for _, args := range [][]string{{"inspect", path}, {"dump", path}, {"run", path}} {
		_, errs, code := runChild(t, args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1: %s", args, code, errs)
		}
		if strings.ContainsAny(errs, "\x1b\a") {
			t.Errorf("%v: raw control characters reached stderr: %q", args, errs)
		}
		if !strings.Contains(errs, `node "relu\x1b[31m" ("Frob\x1b[2J\x1b]0;pwned\a")`) {
			t.Errorf("%v: the node is not named escaped: %q", args, errs)
		}
	}
}
