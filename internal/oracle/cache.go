package oracle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The result cache. An oracle is a pure function of its tool (script
// bytes, interpreter and library versions) and its inputs (model bytes,
// tensors, arguments), so its output files are kept under a hash of all
// of these and a rerun reads them back instead of starting PyTorch or
// Node.js. The cache lives outside the repository, in
// os.UserCacheDir()/tsplit/oracle, or where TSPLIT_ORACLE_CACHE says;
// TSPLIT_ORACLE_CACHE=off turns it off.
//
// An entry is a directory named by the key's hex digest holding the
// tool's output files and a manifest: the key, then the sha256 and size
// of every file, then the sha256 of the manifest's own lines. Entries
// are written in a temporary directory and renamed into place, so a
// reader sees a whole entry or none; a miss is computed under a lock
// file per key, so concurrent test binaries compute each entry once. A
// hit is verified against the manifest first: an entry that does not
// match (a truncated file, a flipped byte, a lost manifest) is removed
// and computed again, never trusted.

// CacheEnv names the environment variable that moves the cache ("off":
// no cache).
const CacheEnv = "TSPLIT_ORACLE_CACHE"

// cacheFormat starts every key and manifest: changing the layout of
// entries or what goes into a key changes it, and with it every key.
const cacheFormat = "tsplit-oracle-cache 1"

const manifestName = "MANIFEST"

// unusedFor is how long an entry may go unread before a miss prunes it:
// entries of scripts and models since changed are never read again.
const unusedFor = 30 * 24 * time.Hour

// CacheDir returns the directory of the oracle cache and whether the
// cache is on. It is never inside the module (a cache there would end
// up committed): a TSPLIT_ORACLE_CACHE inside it is an error.
func CacheDir() (string, bool, error) {
	dir := os.Getenv(CacheEnv)
	switch dir {
	case "off":
		return "", false, nil
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return "", false, nil // no home to cache in: run every oracle
		}
		dir = filepath.Join(base, "tsplit", "oracle")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if mod, err := ModuleRoot(); err == nil {
		if rel, err := filepath.Rel(mod, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", false, fmt.Errorf("%s=%s is inside the repository %s; point it elsewhere (or \"off\")", CacheEnv, dir, mod)
		}
	}
	return dir, true, nil
}

// key accumulates what an oracle's result depends on. Every part is
// written with its label and length, so no two different sequences of
// parts hash alike.
type key struct {
	h    hash.Hash
	what string // for messages: the tool and its main input
}

func newKey(tool, what string) *key {
	k := &key{h: sha256.New(), what: what}
	k.add("format", cacheFormat)
	k.add("tool", tool)
	k.add("platform", runtime.GOOS+"/"+runtime.GOARCH)
	return k
}

func (k *key) add(label, value string) {
	fmt.Fprintf(k.h, "%d:%s=%d:%s\n", len(label), label, len(value), value)
}

// file adds the bytes of the file at path (by their sha256).
func (k *key) file(t testing.TB, label, path string) {
	t.Helper()
	sum, _, err := fileSum(path)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	k.add(label, sum)
}

// model adds an ONNX model: its bytes and, when it keeps tensors in
// external files, theirs. External data is named by a path relative to
// the model's folder, stored as plain bytes in the model, so a sibling
// file is counted when the model mentions its name (only models holding
// the string "location", the key of an external-data entry, are
// searched).
func (k *key) model(t testing.TB, path string) {
	t.Helper()
	sum, mentionsLocation, err := fileSum(path)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	k.add("model", sum)
	if !mentionsLocation {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == path || !e.Type().IsRegular() || !bytes.Contains(data, []byte(e.Name())) {
			continue
		}
		k.file(t, "external data "+e.Name(), p)
	}
}

// files adds every file of dir whose name ends in ext (the scripts a
// tool may import), in name order.
func (k *key) files(t testing.TB, dir, ext string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	sort.Strings(names)
	for _, p := range names {
		k.file(t, filepath.Base(p), p)
	}
}

func (k *key) sum() string { return hex.EncodeToString(k.h.Sum(nil)) }

// fileSums memoizes digests of large files within the process by path,
// size and modification time: the PyTorch exports are hundreds of MB
// and tests ask about the same one many times. As in git's racy-clean
// rule, a file modified shortly before it was hashed is not memoized
// (a rewrite within the file system's timestamp granularity would keep
// size and time), and small files are always hashed again.
var fileSums struct {
	mu sync.Mutex
	m  map[string]fileDigest
}

const (
	memoMin    = 1 << 20
	racyWindow = 2 * time.Second
)

type fileDigest struct {
	stamp    string
	sum      string
	location bool
}

// fileSum returns the hex sha256 of a file's bytes, and whether they
// contain the string "location".
func fileSum(path string) (string, bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false, err
	}
	stamp := fmt.Sprintf("%d %d", st.Size(), st.ModTime().UnixNano())
	fileSums.mu.Lock()
	d, ok := fileSums.m[path]
	fileSums.mu.Unlock()
	if ok && d.stamp == stamp {
		return d.sum, d.location, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	h := sha256.New()
	word := []byte("location")
	found := false
	// edge holds the last bytes read before buf, so that a word split
	// across two reads is found too.
	edge := make([]byte, 0, 2*len(word))
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if !found {
				edge = append(edge, buf[:min(n, len(word)-1)]...)
				found = bytes.Contains(edge, word) || bytes.Contains(buf[:n], word)
				if n >= len(word)-1 {
					edge = append(edge[:0], buf[n-len(word)+1:n]...)
				} else { // a short read: keep the last bytes of both
					edge = append(edge[:0], edge[len(edge)-min(len(edge), len(word)-1):]...)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", false, err
		}
	}
	d = fileDigest{stamp: stamp, sum: hex.EncodeToString(h.Sum(nil)), location: found}
	if st.Size() < memoMin || time.Since(st.ModTime()) < racyWindow {
		return d.sum, d.location, nil
	}
	fileSums.mu.Lock()
	if fileSums.m == nil {
		fileSums.m = map[string]fileDigest{}
	}
	fileSums.m[path] = d
	fileSums.mu.Unlock()
	return d.sum, d.location, nil
}

// ---- tool versions ----

var pyVersions struct {
	mu   sync.Mutex
	done map[string]string // interpreter -> versions, or "" with err
	errs map[string]error
}

// pythonVersions returns the interpreter's version and those of the
// packages the scripts use, read from their installed metadata (python
// starts, torch is not imported). It skips the test if the interpreter
// does not run.
func pythonVersions(t testing.TB, py string) string {
	t.Helper()
	pyVersions.mu.Lock()
	defer pyVersions.mu.Unlock()
	if pyVersions.done == nil {
		pyVersions.done, pyVersions.errs = map[string]string{}, map[string]error{}
	}
	v, ok := pyVersions.done[py]
	if !ok {
		const src = `import importlib.metadata as md, json, sys
def version(p):
    try:
        return md.version(p)
    except md.PackageNotFoundError:
        return None
print(json.dumps({"python": sys.version, "executable": sys.executable,
    "packages": {p: version(p) for p in ("torch", "torchvision", "onnx", "numpy")}}, sort_keys=True))`
		out, err := exec.Command(py, "-c", src).Output()
		if err != nil {
			pyVersions.errs[py] = err
		}
		v = string(bytes.TrimSpace(out))
		pyVersions.done[py] = v
	}
	if err := pyVersions.errs[py]; err != nil {
		skipf(t, "%s does not run (%v); it needs Debian's python3-torch python3-torchvision python3-onnx python3-numpy", py, err)
	}
	return v
}

var ortVersions struct {
	once sync.Once
	v    string
	err  error
}

// ortVersion identifies the ONNX Runtime oracle without starting Node.js:
// the node binary (path, size, modification time), the installed
// onnxruntime-node package.json and scripts/ort/package-lock.json. It
// skips the test if Node.js or onnxruntime-node is missing.
func ortVersion(t testing.TB) string {
	t.Helper()
	ortVersions.once.Do(func() {
		node, err := exec.LookPath("node")
		if err != nil {
			ortVersions.err = err
			return
		}
		st, err := os.Stat(node)
		if err != nil {
			ortVersions.err = err
			return
		}
		parts := []string{fmt.Sprintf("node %s %d %d", node, st.Size(), st.ModTime().UnixNano())}
		for _, f := range []string{filepath.Join("node_modules", "onnxruntime-node", "package.json"), "package-lock.json"} {
			sum, _, err := fileSum(filepath.Join(ortDir(), f))
			if err != nil {
				ortVersions.err = err
				return
			}
			parts = append(parts, f+" "+sum)
		}
		ortVersions.v = strings.Join(parts, "\n")
	})
	if ortVersions.err != nil {
		requireORT(t) // skips, saying what is missing
		t.Fatalf("oracle: ONNX Runtime loads but cannot be identified: %v", ortVersions.err)
	}
	return ortVersions.v
}

// ---- entries ----

// cached returns the directory holding the output files of the oracle
// run that k describes: a verified cache entry, or a new one that
// produce fills (produce writes its files into the directory it is
// given and fails the test on error). With the cache off, produce
// writes into a temporary directory of the test.
func cached(t testing.TB, k *key, produce func(dir string)) string {
	t.Helper()
	root, on, err := CacheDir()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if !on {
		dir := t.TempDir()
		produce(dir)
		return dir
	}
	sum := k.sum()
	entry := filepath.Join(root, sum)
	if err := verifyEntry(entry, sum); err == nil {
		touch(entry)
		t.Logf("oracle: %s: cached (%s)", k.what, entry)
		return entry
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("oracle: cache: %v", err)
	}
	unlock, err := lockFile(entry + ".lock")
	if err != nil {
		t.Fatalf("oracle: cache: locking %s: %v", entry, err)
	}
	defer unlock()
	switch err := verifyEntry(entry, sum); {
	case err == nil: // written by another process meanwhile
		touch(entry)
		t.Logf("oracle: %s: cached (%s)", k.what, entry)
		return entry
	case err != errNoEntry:
		t.Logf("oracle: %s: cache entry %s is damaged (%v); computing it again", k.what, entry, err)
		if err := os.RemoveAll(entry); err != nil {
			t.Fatalf("oracle: cache: %v", err)
		}
	}
	prune(root)
	tmp, err := os.MkdirTemp(root, ".tmp-"+sum[:16]+"-")
	if err != nil {
		t.Fatalf("oracle: cache: %v", err)
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(tmp) // produce failed (or the test stopped)
		}
	}()
	produce(tmp)
	if err := writeManifest(tmp, sum); err != nil {
		t.Fatalf("oracle: cache: %v", err)
	}
	if err := os.Rename(tmp, entry); err != nil {
		t.Fatalf("oracle: cache: %v", err)
	}
	published = true
	return entry
}

// cachedBatches is cached for a tool run at several batches whose
// results are cached one batch each (under keys[batch], as one file
// named file). The batches not cached are computed by one call of
// produce, which gets the comma-separated batches and a path containing
// "{batch}" to write each result to. It returns the path of every
// batch's result.
func cachedBatches(t testing.TB, batches []int, keys map[int]*key, file string, produce func(out, batches string)) map[int]string {
	t.Helper()
	paths := map[int]string{}
	root, on, err := CacheDir()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var missing []string
	for _, b := range batches {
		if _, done := paths[b]; done {
			continue
		}
		entry := filepath.Join(root, keys[b].sum())
		if on && verifyEntry(entry, keys[b].sum()) == nil {
			touch(entry)
			t.Logf("oracle: %s: cached (%s)", keys[b].what, entry)
			paths[b] = filepath.Join(entry, file)
			continue
		}
		paths[b] = ""
		missing = append(missing, strconv.Itoa(b))
	}
	if len(missing) == 0 {
		return paths
	}
	tmp := t.TempDir()
	out := filepath.Join(tmp, "{batch}-"+file)
	produce(out, strings.Join(missing, ","))
	for _, bs := range missing {
		b, _ := strconv.Atoi(bs)
		got := strings.ReplaceAll(out, "{batch}", bs)
		entry := cached(t, keys[b], func(dir string) {
			data, err := os.ReadFile(got)
			if err != nil {
				t.Fatalf("oracle: %s: %v", keys[b].what, err)
			}
			if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
				t.Fatalf("oracle: %v", err)
			}
		})
		paths[b] = filepath.Join(entry, file)
	}
	return paths
}

// writeManifest lists every file of dir with its size and sha256.
func writeManifest(dir, sum string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nkey %s\n", cacheFormat, sum)
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", dir, e.Name())
		}
		fsum, size, err := plainSum(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "file %s %d %s\n", fsum, size, e.Name())
	}
	self := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "end %x\n", self)
	return os.WriteFile(filepath.Join(dir, manifestName), b.Bytes(), 0o644)
}

// verifyEntry checks an entry against its manifest: the manifest's own
// digest, its key, and the size and digest of every file listed, with no
// file missing or added. A missing entry is errNoEntry.
func verifyEntry(dir, sum string) error {
	m, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return errNoEntry
		}
		return fmt.Errorf("no manifest: %v", err)
	}
	body, last, ok := cutLastLine(m)
	if !ok || !bytes.HasPrefix(last, []byte("end ")) {
		return errors.New("manifest has no end line")
	}
	if want := fmt.Sprintf("end %x", sha256.Sum256(body)); string(last) != want {
		return errors.New("manifest does not match its digest")
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(lines) < 2 || lines[0] != cacheFormat || lines[1] != "key "+sum {
		return errors.New("manifest is for another key or format")
	}
	listed := map[string]bool{manifestName: true}
	for _, l := range lines[2:] {
		f := strings.SplitN(l, " ", 4)
		if len(f) != 4 || f[0] != "file" {
			return fmt.Errorf("bad manifest line %q", l)
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return fmt.Errorf("bad manifest line %q", l)
		}
		got, gotSize, err := plainSum(filepath.Join(dir, f[3]))
		if err != nil {
			return err
		}
		if gotSize != size || got != f[1] {
			return fmt.Errorf("%s does not match the manifest", f[3])
		}
		listed[f[3]] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			return fmt.Errorf("%s is not in the manifest", e.Name())
		}
	}
	return nil
}

var errNoEntry = errors.New("no such entry")

func cutLastLine(b []byte) (body, last []byte, ok bool) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		return nil, nil, false
	}
	return b[:i+1], b[i+1:], true
}

// plainSum is the sha256 and size of a file, not memoized: cache entries
// are checked against what is on disk now.
func plainSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// touch marks an entry as read now, for prune.
func touch(entry string) {
	now := time.Now()
	os.Chtimes(filepath.Join(entry, manifestName), now, now)
}

// prune removes entries unread for unusedFor, and temporary directories
// a killed process left behind a day ago. Errors are ignored: another
// process may be pruning too.
func prune(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		switch {
		case !e.IsDir():
		case strings.HasPrefix(e.Name(), ".tmp-"):
			if st, err := os.Stat(p); err == nil && now.Sub(st.ModTime()) > 24*time.Hour {
				os.RemoveAll(p)
			}
		default:
			st, err := os.Stat(filepath.Join(p, manifestName))
			if err == nil && now.Sub(st.ModTime()) > unusedFor {
				os.RemoveAll(p) // its lock file stays: another process may hold it
			}
		}
	}
}
