package main

import (
	"bytes"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/report"
)

// checkReportPath rejects a --report file whose format the name does
// not tell, before any planning.
func checkReportPath(path string) error {
	if path == "" {
		return nil
	}
	if _, err := report.FormatOf(path); err != nil {
		return usageError{err}
	}
	return nil
}

// writeReport writes the plan report to path (HTML, SVG or JSON by its
// extension), atomically.
func writeReport(path string, r *passes.Report) error {
	f, err := report.FormatOf(path)
	if err != nil {
		return usageError{err}
	}
	var b bytes.Buffer
	if err := report.Write(&b, f, r); err != nil {
		return err
	}
	return backend.WriteBytesAtomic(path, b.Bytes())
}
