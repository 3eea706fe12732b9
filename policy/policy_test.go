package policy

import (
	"slices"
	"strings"
	"testing"
)

// The table is the only list of policies, and traits are the values'.
func TestTable(t *testing.T) {
	want := []string{"base", "capuchin", "checkpoint", "modnn", "superneurons", "tflms", "tsplit", "tsplit-nosplit", "vdnn-all", "vdnn-conv"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	// The policies whose swap-in triggers are their algorithm's own:
	// ControlEdges leaves them.
	own := []string{"capuchin", "modnn", "superneurons", "tflms", "vdnn-all", "vdnn-conv"}
	for _, n := range Names() {
		p, err := Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name() != n {
			t.Errorf("Lookup(%q) is %q", n, p.Name())
		}
		if p.OwnTriggers() != slices.Contains(own, n) {
			t.Errorf("%s: OwnTriggers %v", n, p.OwnTriggers())
		}
		if p.SubBatches() != (n == "modnn") {
			t.Errorf("%s: SubBatches %v", n, p.SubBatches())
		}
		if (len(p.Params()) > 0) != (n == "tflms") {
			t.Errorf("%s declares %v", n, p.Params())
		}
	}
	if p, err := Lookup(""); err != nil || p != Tsplit {
		t.Errorf(`Lookup("") = %v, %v; want Tsplit`, p, err)
	}
	_, err := Lookup("tsplitt")
	if err == nil || !strings.Contains(err.Error(), `unknown policy "tsplitt"`) || !strings.Contains(err.Error(), strings.Join(want, ", ")) {
		t.Errorf("unknown name: %v", err)
	}
}
