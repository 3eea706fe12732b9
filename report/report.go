package report

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/tsplit/tsplit/passes"
)

// Format is an output format of a report.
type Format string

// Formats, named by their file extension.
const (
	HTML Format = "html"
	SVG  Format = "svg"
	JSON Format = "json"
)

// FormatOf picks the format from a file name's extension (.html or
// .htm, .svg, .json; any case).
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".html", ".htm":
		return HTML, nil
	case ".svg":
		return SVG, nil
	case ".json":
		return JSON, nil
	}
	return "", fmt.Errorf("report %q: unknown format; name the file .html (the whole report), .svg (the memory timeline) or .json (the data)", path)
}

// Write writes r in format f.
func Write(w io.Writer, f Format, r *passes.Report) error {
	switch f {
	case HTML:
		return WriteHTML(w, r)
	case SVG:
		return WriteSVG(w, r)
	case JSON:
		return WriteJSON(w, r)
	}
	return fmt.Errorf("report: unknown format %q", f)
}

// WriteSVG writes the memory timeline alone as an SVG file, along
// simulated time.
func WriteSVG(w io.Writer, r *passes.Report) error {
	if r == nil {
		return fmt.Errorf("report: no report")
	}
	_, err := io.WriteString(w, newChart(r, ByTime, true).svg())
	return err
}

// Schema names the layout of WriteJSON's output; it changes when a
// field changes meaning or goes away.
const Schema = "tsplit.report/v1"

// Summary holds the figures derived from a report, for readers that
// do not want to recompute them.
type Summary struct {
	// Overhead is planned/base step time - 1 (0.05: 5% slower); 0 when
	// no step time was simulated.
	Overhead float64 `json:"overhead"`
	// PeakSaved is base peak - planned peak.
	PeakSaved int64 `json:"peak_saved_bytes"`
	// Fits tells whether the plan's pool is within the budget.
	Fits bool `json:"fits"`
	// BaseOps and PlannedOps count the ops of the two timelines.
	BaseOps    int `json:"base_ops"`
	PlannedOps int `json:"planned_ops"`
	// Inserted counts the planned timeline's ops by kind (swap_out,
	// swap_in, recompute, split, host).
	Inserted map[string]int `json:"inserted_ops"`
	// Moved sums the bytes of the tensors the plan swaps, recomputes or
	// splits (each decision once).
	Moved map[string]int64 `json:"decided_bytes"`
}

// Summarize derives the summary figures of r.
func Summarize(r *passes.Report) Summary {
	basePeak, baseTime := r.Before()
	s := Summary{PeakSaved: basePeak - r.Peak, Fits: r.Pool <= r.Budget, BaseOps: len(r.Base), PlannedOps: len(r.Planned),
		Inserted: map[string]int{}, Moved: map[string]int64{}}
	if r.Pool == 0 {
		s.Fits = r.Peak <= r.Budget
	}
	if baseTime > 0 {
		s.Overhead = r.Time/baseTime - 1
	}
	for _, k := range kinds {
		s.Inserted[k.kind] = 0
	}
	for i := range r.Planned {
		if k := r.Planned[i].Kind; k != "" {
			s.Inserted[k]++
		}
	}
	for _, d := range r.Decisions {
		s.Moved[d.Option] += d.Bytes
	}
	return s
}

// WriteJSON writes the whole report, timelines included, with the
// summary figures: indented, and the same bytes for the same report.
func WriteJSON(w io.Writer, r *passes.Report) error {
	if r == nil {
		return fmt.Errorf("report: no report")
	}
	doc := struct {
		Schema  string  `json:"schema"`
		Summary Summary `json:"summary"`
		*passes.Report
	}{Schema, Summarize(r), r}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %v", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
