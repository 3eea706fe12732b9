package exit

import (
	"bytes"
	"strings"
	"testing"
)

// A panic in main is exit status 3 with a report naming the value, the
// stack, the command to reproduce it and the request to file a bug; a
// main that returns keeps its status.
func TestGuard(t *testing.T) {
	args := []string{"/usr/bin/tsplitc", "plan", "my model.onnx", "--memory", "1GiB"}
	cases := []struct {
		name string
		main func() int
		code int
		want []string
	}{
		{"ok", func() int { return OK }, OK, nil},
		{"usage", func() int { return Usage }, Usage, nil},
		{"panic", func() int { panic("index out of range [3] with length 3") }, Internal, []string{
			"tsplitc: internal error: index out of range [3] with length 3",
			"exit_test.go", // the stack
			"This is a bug in tsplit",
			"please file it",
			`/usr/bin/tsplitc plan 'my model.onnx' --memory 1GiB`,
		}},
		{"nil-dereference", func() int {
			var p *struct{ x int }
			return p.x
		}, Internal, []string{"internal error: runtime error: invalid memory address or nil pointer dereference"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if got := Guard(&buf, args, c.main); got != c.code {
				t.Fatalf("status %d, want %d", got, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(strings.ToLower(buf.String()), strings.ToLower(w)) {
					t.Errorf("report lacks %q:\n%s", w, buf.String())
				}
			}
			if c.want == nil && buf.Len() > 0 {
				t.Errorf("unexpected output %q", buf.String())
			}
		})
	}
}

func TestCommand(t *testing.T) {
	cases := map[string][]string{
		`tsplitc plan m.onnx --memory=1GiB -o /tmp/x.onnx`: {"tsplitc", "plan", "m.onnx", "--memory=1GiB", "-o", "/tmp/x.onnx"},
		`tsplitc 'a b' 'it'\''s' ''`:                       {"tsplitc", "a b", "it's", ""},
		`tsplitc $'\x1b[31mred'`:                           {"tsplitc", "\x1b[31mred"},
	}
	for want, args := range cases {
		if got := Command(args); got != want {
			t.Errorf("Command(%q) = %s, want %s", args, got, want)
		}
	}
}
