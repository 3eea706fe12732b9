package policy

import (
	"maps"
	"strings"
	"testing"
)

func TestParseParams(t *testing.T) {
	got, err := ParseParams([]string{"lb=2,ub=8", " ctrld_strategy = direct_order ", "fuse_swapins=true,"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"lb": "2", "ub": "8", "ctrld_strategy": "direct_order", "fuse_swapins": "true"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range [][]string{{"lb"}, {"=2"}, {"lb=2,ub"}, {"lb=2", "lb=3"}, {"lb=2,lb=2"}} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestCheckParams(t *testing.T) {
	if len(TFLMS.Params()) != 5 {
		t.Fatalf("tflms declares %v", TFLMS.Params())
	}
	for _, s := range TFLMS.Params() {
		if s.Doc == "" || strings.Contains(s.Doc, "\n") {
			t.Errorf("tflms %s: want a one-line doc, got %q", s.Name, s.Doc)
		}
	}
	// Every name tflms declares is one its parser accepts, and the other
	// way round (an undeclared name is rejected by both).
	for _, s := range TFLMS.Params() {
		v := map[string]string{"n_tensors": "3", "lb": "2", "ub": "9", "ctrld_strategy": "direct_order", "fuse_swapins": "true"}[s.Name]
		if err := CheckParams(TFLMS, map[string]string{s.Name: v}); err != nil {
			t.Errorf("tflms %s=%s: %v", s.Name, v, err)
		}
	}
	if err := CheckParams(TFLMS, nil); err != nil {
		t.Errorf("no parameters: %v", err)
	}
	for _, c := range []struct {
		policy string
		params map[string]string
		want   []string
	}{
		{"tflms", map[string]string{"lb": "2", "bogus": "1"}, []string{"policy tflms", `"bogus"`, "n_tensors, lb, ub, ctrld_strategy, fuse_swapins"}},
		{"tflms", map[string]string{"lb": "5", "ub": "4"}, []string{"tflms", "lb=5 ub=4"}},
		{"tflms", map[string]string{"ctrld_strategy": "random"}, []string{"tflms", "ctrld_strategy"}},
		{"base", map[string]string{"lb": "2"}, []string{"policy base takes no parameters", `"lb"`}},
		{"", map[string]string{"lb": "2"}, []string{"policy tsplit takes no parameters"}},
		{"no-such-policy", map[string]string{"lb": "2"}, []string{"unknown policy"}},
	} {
		pol, err := Lookup(c.policy)
		if err == nil {
			err = CheckParams(pol, c.params)
		}
		if err == nil {
			t.Errorf("%s %v: no error", c.policy, c.params)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: error %q lacks %q", c.policy, c.params, err, w)
			}
		}
	}
	// Several unknown names: always the first in sorted order.
	for range 5 {
		err := CheckParams(TFLMS, map[string]string{"zz": "1", "aa": "1", "mm": "1"})
		if err == nil || !strings.Contains(err.Error(), `"aa"`) {
			t.Fatalf("error %v, want the one for \"aa\"", err)
		}
	}
}
