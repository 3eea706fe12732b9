package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotSweep draws one model's Fig. 12: samples per second of each
// policy's planned step against the batch (log scale), a point where the
// policy fits, nothing where it does not, and the unconstrained step as
// a dashed line. It writes base.png and base.svg in dir.
func plotSweep(dir, base string, r *Results, i int) error {
	m, sw := r.Models[i], r.Sweep[i]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s on %s: simulated training throughput", m.Display, r.Profile.Name)
	p.X.Label.Text = "batch size (samples)"
	p.Y.Label.Text = "samples / s (predicted step)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = pow2Ticks{}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Add(plotter.NewGrid())

	var ideal plotter.XYs
	for bi, b := range sw.Batches {
		if t := sw.Unconstrained[bi]; t > 0 {
			ideal = append(ideal, plotter.XY{X: float64(b), Y: float64(b) / t})
		}
	}
	ymax := 0.0
	if len(ideal) > 0 {
		l, err := plotter.NewLine(ideal)
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 80}
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("unconstrained", l)
		for _, xy := range ideal {
			ymax = max(ymax, xy.Y)
		}
	}
	for j, pol := range r.Policies {
		var pts plotter.XYs
		var segs []plotter.XYs
		for bi := range sw.Batches {
			pr := sw.Probes[bi][j]
			if pr == nil || !pr.OK {
				if len(pts) > 0 {
					segs = append(segs, pts)
					pts = nil
				}
				continue
			}
			pts = append(pts, plotter.XY{X: float64(pr.Batch), Y: pr.Throughput()})
			ymax = max(ymax, pr.Throughput())
		}
		if len(pts) > 0 {
			segs = append(segs, pts)
		}
		col := plotutil.Color(j)
		var legendLine *plotter.Line
		var legendDots *plotter.Scatter
		for _, seg := range segs {
			l, s, err := plotter.NewLinePoints(seg)
			if err != nil {
				return err
			}
			l.Color, l.Width = col, vg.Points(1.2)
			s.Color, s.Shape, s.Radius = col, plotutil.Shape(j), vg.Points(2.5)
			p.Add(l, s)
			legendLine, legendDots = l, s
		}
		if legendLine != nil {
			p.Legend.Add(pol, legendLine, legendDots)
		} else {
			p.Legend.Add(pol+" (never fits)", plotter.NewFunction(func(float64) float64 { return math.NaN() }))
		}
	}
	p.Y.Max = ymax * 1.05
	if ymax == 0 {
		p.Y.Max = 1
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := p.Save(9*vg.Inch, 5.5*vg.Inch, filepath.Join(dir, base+ext)); err != nil {
			return err
		}
	}
	return nil
}

// pow2Ticks labels powers of two on a log axis.
type pow2Ticks struct{}

func (pow2Ticks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := 1.0; x <= hi*1.0001; x *= 2 {
		if x >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
	}
	if len(ts) < 2 {
		ts = append(ts, plot.Tick{Value: lo, Label: strconv.FormatFloat(math.Round(lo), 'f', -1, 64)},
			plot.Tick{Value: hi, Label: strconv.FormatFloat(math.Round(hi), 'f', -1, 64)})
	}
	return ts
}
