package report

import (
	"bytes"
	"context"
	"flag"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tsplit/tsplit/internal/oracle"
	"github.com/tsplit/tsplit/zoo"
)

var writeScreenshot = flag.Bool("write-screenshot", false, "plan BERT-large (seq 512, batch 32, half its peak), render its report in Chromium and write ../docs/images/plan-report.png")

// chromiumPath is the browser the browser tests drive; scripts/install-deps.sh
// installs Debian's chromium there.
const chromiumPath = "/usr/bin/chromium"

// chromium returns the browser, or skips the test when there is none;
// with TSPLIT_REQUIRE_ORACLES set (make test, CI) a missing browser is
// an error, as a missing oracle is (internal/oracle).
func chromium(t *testing.T) string {
	t.Helper()
	oracle.Oracles(t, "headless Chromium")
	if _, err := os.Stat(chromiumPath); err != nil {
		msg := "no headless browser at " + chromiumPath + "; scripts/install-deps.sh (make deps) installs Debian's chromium"
		if os.Getenv("TSPLIT_REQUIRE_ORACLES") != "" {
			t.Fatal(msg + " (TSPLIT_REQUIRE_ORACLES is set, so this is an error)")
		}
		t.Skip("skipping: " + msg)
	}
	return chromiumPath
}

// runChromium runs headless Chromium on file with args; it has no
// network to use and keeps its profile in a temporary folder.
func runChromium(t *testing.T, file string, args ...string) []byte {
	t.Helper()
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+file)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(errb.String(), 3000))
	}
	return out.Bytes()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The page renders in a real browser: its script runs to the end and
// the rendered DOM holds the timeline with its curves.
func TestBrowserDOM(t *testing.T) {
	chromium(t)
	r := smallReport(t)
	page := writeTemp(t, "plan.html", render(t, HTML, r))
	dom := string(runChromium(t, page, "--dump-dom", "--virtual-time-budget=5000"))
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Fatalf("the page's script did not finish:\n%s", tail(dom, 2000))
	}
	curves := regexp.MustCompile(`<path class="curve (\w+)" data-steps="(\d+)" d="([^"]*)"`).FindAllStringSubmatch(dom, -1)
	seen := map[string]int{}
	for _, m := range curves {
		// Each step of the path is an H command.
		h := strings.Count(m[3], "H")
		k, _ := strconv.Atoi(m[2])
		if h != k || h < 20 {
			t.Errorf("curve %s: %d steps declared, %d drawn", m[1], k, h)
		}
		seen[m[1]]++
	}
	// Two charts (time, index), each with base, planned and ghost curves.
	if seen["base"] != 2 || seen["planned"] != 2 || seen["ghost"] != 2 {
		t.Errorf("curves in the DOM: %v", seen)
	}
	if n := strings.Count(dom, `<rect class="phase"`); n < 8 {
		t.Errorf("%d phase bands", n)
	}
	if !strings.Contains(dom, `data-kind="swap_in" data-count="`+strconv.Itoa(r.Swapped)+`"`) {
		t.Error("no swap-in lane")
	}
}

// A screenshot of the page is a 1400×1000 picture with a drawing on it.
func TestBrowserScreenshot(t *testing.T) {
	chromium(t)
	page := writeTemp(t, "plan.html", render(t, HTML, smallReport(t)))
	png := filepath.Join(t.TempDir(), "shot.png")
	screenshot(t, page, png)
	checkPicture(t, png)
}

func screenshot(t *testing.T, page, out string) {
	t.Helper()
	runChromium(t, page, "--screenshot="+out, "--window-size=1400,1000", "--virtual-time-budget=5000")
	if _, err := os.Stat(out); err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
}

func checkPicture(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 1000 {
		t.Fatalf("screenshot is %v", b)
	}
	// The curves' blue and the budget's red are on it.
	blue, red := 0, 0
	colors := map[[3]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bb, _ := img.At(x, y).RGBA()
			r, g, bb = r>>8, g>>8, bb>>8
			colors[[3]uint32{r, g, bb}] = true
			if near(r, 0x1a) && near(g, 0x73) && near(bb, 0xe8) {
				blue++
			}
			if near(r, 0xd9) && near(g, 0x30) && near(bb, 0x25) {
				red++
			}
		}
	}
	if blue < 50 || red < 20 || len(colors) < 50 {
		t.Fatalf("screenshot %s looks empty: %d blue, %d red pixels, %d colors", path, blue, red, len(colors))
	}
	var _ image.Image = img
}

func near(a, b uint32) bool { return a+24 >= b && b+24 >= a }

// TestWriteScreenshot writes docs/images/plan-report.png, the picture
// docs/report.md shows, from a large real plan: go test ./report/
// -run WriteScreenshot -write-screenshot.
func TestWriteScreenshot(t *testing.T) {
	if !*writeScreenshot {
		t.Skip("run with -write-screenshot to rewrite docs/images/plan-report.png")
	}
	t.Setenv(oracle.RequireEnv, "1") // asked for by name: no Chromium is an error
	chromium(t)
	r := planZoo(t, "bert-large", zoo.Config{SeqLen: 512, WeightsAsInputs: true}, 32, 0.5)
	html := render(t, HTML, r)
	page := writeTemp(t, "plan.html", html)
	t.Logf("bert-large report: %d ops → %d, %d decisions; HTML %d bytes, SVG %d bytes, JSON %d bytes",
		len(r.Base), len(r.Planned), len(r.Decisions), len(html), len(render(t, SVG, r)), len(render(t, JSON, r)))
	out := filepath.Join("..", "docs", "images", "plan-report.png")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "shot.png")
	screenshot(t, page, tmp)
	checkPicture(t, tmp)
	data, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", out, len(data))
}
