package oracle

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// useCache points the cache at a fresh folder for one test.
func useCache(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	t.Setenv(CacheEnv, dir)
	return dir
}

// counting is a produce function that writes out.txt (its content is
// body) and counts its calls.
type counting struct {
	calls atomic.Int32
	body  string
}

func (c *counting) produce(t *testing.T) func(string) {
	return func(dir string) {
		c.calls.Add(1)
		if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readOut(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func testKey(t *testing.T, model string, batch string) *key {
	k := newKey("test-tool", "test run")
	k.model(t, model)
	k.add("batch", batch)
	return k
}

func TestCacheHitAndMiss(t *testing.T) {
	root := useCache(t)
	model := filepath.Join(t.TempDir(), "m.onnx")
	os.WriteFile(model, []byte("model bytes"), 0o644)
	c := &counting{body: "result 1"}

	first := cached(t, testKey(t, model, "2"), c.produce(t))
	if c.calls.Load() != 1 || readOut(t, first) != "result 1" {
		t.Fatalf("first run: %d calls, %q", c.calls.Load(), readOut(t, first))
	}
	if rel, err := filepath.Rel(root, first); err != nil || strings.Contains(rel, string(filepath.Separator)) {
		t.Errorf("entry %s is not directly in the cache %s", first, root)
	}
	// Same tool, model and arguments: the entry, without running.
	c.body = "result 2"
	if again := cached(t, testKey(t, model, "2"), c.produce(t)); again != first || c.calls.Load() != 1 || readOut(t, again) != "result 1" {
		t.Fatalf("second run: entry %s (first %s), %d calls", again, first, c.calls.Load())
	}
	// Another argument, or other model bytes: a miss each.
	if other := cached(t, testKey(t, model, "3"), c.produce(t)); other == first || c.calls.Load() != 2 {
		t.Fatalf("another batch: entry %s, %d calls", other, c.calls.Load())
	}
	os.WriteFile(model, []byte("model bytes, changed"), 0o644)
	if other := cached(t, testKey(t, model, "2"), c.produce(t)); other == first || c.calls.Load() != 3 || readOut(t, other) != "result 2" {
		t.Fatalf("changed model: entry %s, %d calls", other, c.calls.Load())
	}
	// Nothing half-written is left behind.
	left, _ := filepath.Glob(filepath.Join(root, ".tmp-*"))
	if len(left) > 0 {
		t.Errorf("temporary folders left: %v", left)
	}
}

// A damaged entry is found by its manifest, removed and computed again.
func TestCacheDamagedEntry(t *testing.T) {
	useCache(t)
	model := filepath.Join(t.TempDir(), "m.onnx")
	os.WriteFile(model, []byte("model bytes"), 0o644)
	for _, c := range []struct {
		name   string
		damage func(entry string) error
	}{
		{"flipped byte", func(e string) error { return os.WriteFile(filepath.Join(e, "out.txt"), []byte("result X"), 0o644) }},
		{"truncated file", func(e string) error { return os.Truncate(filepath.Join(e, "out.txt"), 3) }},
		{"lost file", func(e string) error { return os.Remove(filepath.Join(e, "out.txt")) }},
		{"added file", func(e string) error { return os.WriteFile(filepath.Join(e, "extra"), nil, 0o644) }},
		{"lost manifest", func(e string) error { return os.Remove(filepath.Join(e, manifestName)) }},
		{"edited manifest", func(e string) error {
			b, err := os.ReadFile(filepath.Join(e, manifestName))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(e, manifestName), []byte(strings.Replace(string(b), " 8 out.txt", " 9 out.txt", 1)), 0o644)
		}},
		{"truncated manifest", func(e string) error { return os.Truncate(filepath.Join(e, manifestName), 20) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &counting{body: "result 1"}
			k := func() *key { return testKey(t, model, c.name) }
			entry := cached(t, k(), p.produce(t))
			if err := verifyEntry(entry, k().sum()); err != nil {
				t.Fatalf("fresh entry does not verify: %v", err)
			}
			if err := c.damage(entry); err != nil {
				t.Fatal(err)
			}
			if err := verifyEntry(entry, k().sum()); err == nil {
				t.Fatal("the damaged entry verifies")
			}
			if again := cached(t, k(), p.produce(t)); again != entry || p.calls.Load() != 2 || readOut(t, again) != "result 1" {
				t.Fatalf("after damage: entry %s, %d calls", again, p.calls.Load())
			}
			if err := verifyEntry(entry, k().sum()); err != nil {
				t.Fatalf("recomputed entry does not verify: %v", err)
			}
		})
	}
}

// Concurrent requests for one key (test binaries of several packages,
// or parallel subtests) compute it once.
func TestCacheConcurrent(t *testing.T) {
	useCache(t)
	model := filepath.Join(t.TempDir(), "m.onnx")
	os.WriteFile(model, []byte("model bytes"), 0o644)
	p := &counting{body: "result"}
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs[i] = cached(t, testKey(t, model, "1"), p.produce(t))
		}()
	}
	wg.Wait()
	if p.calls.Load() != 1 {
		t.Errorf("computed %d times", p.calls.Load())
	}
	for _, d := range dirs {
		if d != dirs[0] || readOut(t, d) != "result" {
			t.Errorf("entries %v", dirs)
		}
	}
}

func TestCacheOffAndPlace(t *testing.T) {
	t.Setenv(CacheEnv, "off")
	if _, on, err := CacheDir(); on || err != nil {
		t.Errorf("%s=off: on %v, err %v", CacheEnv, on, err)
	}
	model := filepath.Join(t.TempDir(), "m.onnx")
	os.WriteFile(model, []byte("model bytes"), 0o644)
	p := &counting{body: "result"}
	cached(t, testKey(t, model, "1"), p.produce(t))
	cached(t, testKey(t, model, "1"), p.produce(t))
	if p.calls.Load() != 2 {
		t.Errorf("cache off: computed %d times, want 2", p.calls.Load())
	}

	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(CacheEnv, filepath.Join(root, "testdata", "cache"))
	if _, _, err := CacheDir(); err == nil {
		t.Error("a cache inside the repository was accepted")
	}
	t.Setenv(CacheEnv, "")
	dir, on, err := CacheDir()
	if base, uerr := os.UserCacheDir(); uerr == nil && (!on || err != nil || dir != filepath.Join(base, "tsplit", "oracle")) {
		t.Errorf("default cache: %s, on %v, err %v", dir, on, err)
	}
}

// A model's external data is part of its key; so are its bytes, found
// again after the file changes (the digest memo is keyed by size and
// modification time).
func TestCacheKeyModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	data := filepath.Join(dir, "weights.bin")
	os.WriteFile(model, []byte("...location\x12\x0bweights.bin..."), 0o644)
	os.WriteFile(data, []byte{1, 2, 3}, 0o644)
	os.WriteFile(filepath.Join(dir, "unrelated.bin"), []byte{1}, 0o644)
	sum := func() string { return testKey(t, model, "1").sum() }
	before := sum()
	if sum() != before {
		t.Fatal("the key is not deterministic")
	}
	os.WriteFile(filepath.Join(dir, "unrelated.bin"), []byte{2}, 0o644)
	if sum() != before {
		t.Error("a file the model does not name changed the key")
	}
	os.WriteFile(data, []byte{1, 2, 4}, 0o644)
	if sum() == before {
		t.Error("changed external data left the key as it was")
	}
	// "location" split across two reads of fileSum's buffer.
	big := make([]byte, 1<<20+16)
	copy(big[1<<20-3:], "location")
	os.WriteFile(model, big, 0o644)
	if _, found, err := fileSum(model); err != nil || !found {
		t.Errorf("a word across two reads: found %v, err %v", found, err)
	}
}

// The real oracles through the cache: a second call reads the entry,
// and a damaged entry is computed again by the tool, with the same
// result.
func TestCachedOracles(t *testing.T) {
	root := useCache(t)
	model := tinyModel(t)
	first := ORTShapes(t, model, 5)
	entries, _ := filepath.Glob(filepath.Join(root, "*", manifestName))
	if len(entries) != 1 {
		t.Fatalf("%d cache entries after one run", len(entries))
	}
	if again := ORTShapes(t, model, 5); !reflect.DeepEqual(again, first) {
		t.Errorf("cached ORTShapes = %v, computed %v", again, first)
	}
	os.WriteFile(filepath.Join(filepath.Dir(entries[0]), "shapes.json"), []byte(`{"outputs": {"Z": [1, 1]}}`), 0o644)
	if again := ORTShapes(t, model, 5); !reflect.DeepEqual(again, first) {
		t.Errorf("ORTShapes after damage = %v, computed %v", again, first)
	}
	if got := OnnxShapes(t, model, 4); !reflect.DeepEqual(got, OnnxShapes(t, model, 4)) || len(got) != 3 {
		t.Errorf("OnnxShapes, computed then cached: %v", got)
	}
	entries, _ = filepath.Glob(filepath.Join(root, "*", manifestName))
	if len(entries) != 2 {
		t.Errorf("%d cache entries after two oracles", len(entries))
	}
}

// A tool run at several batches computes the batches not cached in one
// call and caches each batch on its own: the same entries a run at one
// batch reads.
func TestCachedBatches(t *testing.T) {
	useCache(t)
	model := filepath.Join(t.TempDir(), "m.onnx")
	os.WriteFile(model, []byte("model bytes"), 0o644)
	keys := func(batches ...int) map[int]*key {
		ks := map[int]*key{}
		for _, b := range batches {
			ks[b] = testKey(t, model, fmt.Sprint(b))
		}
		return ks
	}
	var asked []string
	produce := func(out, batches string) {
		asked = append(asked, batches)
		for _, b := range strings.Split(batches, ",") {
			if err := os.WriteFile(strings.ReplaceAll(out, "{batch}", b), []byte("result at "+b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(paths map[int]string, batches ...int) {
		t.Helper()
		for _, b := range batches {
			got, err := os.ReadFile(paths[b])
			if err != nil || string(got) != fmt.Sprintf("result at %d", b) {
				t.Errorf("batch %d: %q, %v", b, got, err)
			}
		}
	}
	check(cachedBatches(t, []int{8}, keys(8), "out.txt", produce), 8)
	check(cachedBatches(t, []int{1, 8, 32}, keys(1, 8, 32), "out.txt", produce), 1, 8, 32)
	check(cachedBatches(t, []int{32, 1, 8}, keys(1, 8, 32), "out.txt", produce), 1, 8, 32)
	if want := []string{"8", "1,32"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("the tool was asked for %q, want %q", asked, want)
	}
	// The entry of one batch is the one cached reads for the same key.
	c := &counting{body: "other"}
	dir := cached(t, keys(32)[32], c.produce(t))
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); c.calls.Load() != 0 || string(b) != "result at 32" {
		t.Errorf("cached after cachedBatches: %d calls, %q", c.calls.Load(), b)
	}
}
