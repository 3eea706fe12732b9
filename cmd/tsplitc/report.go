package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tsplit/tsplit/backend"
	"github.com/tsplit/tsplit/passes"
	"github.com/tsplit/tsplit/report"
)

// checkReportPath rejects, before any planning, a --report file whose
// format the name does not tell or that tsplit would not write: not a
// regular file, or the model being planned.
func checkReportPath(path, model string) error {
	if path == "" {
		return nil
	}
	if _, err := report.FormatOf(path); err != nil {
		return usageError{err}
	}
	if _, err := backend.CheckOutput(path, model); err != nil {
		return usageError{fmt.Errorf("--report: %w", err)}
	}
	return nil
}

// writeReport writes the plan report to path (HTML, SVG or JSON by its
// extension), atomically, never over one of the files the plan read.
func writeReport(ctx context.Context, path string, r *passes.Report, inputs []string) error {
	f, err := report.FormatOf(path)
	if err != nil {
		return usageError{err}
	}
	var b bytes.Buffer
	if err := report.Write(&b, f, r); err != nil {
		return err
	}
	return backend.WriteBytesContext(ctx, path, b.Bytes(), inputs...)
}
