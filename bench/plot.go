package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tsplit/tsplit/backend"
)

// palette is Tableau 10: ten policies, ten distinguishable colors.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0x76, 0xb7, 0xb2, 0xff}, {0x59, 0xa1, 0x4f, 0xff},
	{0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff}, {0x9c, 0x75, 0x5f, 0xff},
	{0xba, 0xb0, 0xac, 0xff}, {0xe1, 0x57, 0x59, 0xff},
}

func policyStyle(j int, policy string) (color.Color, vg.Length) {
	col := color.Color(palette[j%len(palette)])
	width := vg.Points(1.3)
	switch policy {
	case "tsplit":
		col, width = color.RGBA{0xd6, 0x27, 0x28, 0xff}, vg.Points(2.4)
	case "tsplit-nosplit":
		col, width = color.RGBA{0xff, 0x7f, 0x0e, 0xff}, vg.Points(1.8)
	}
	return col, width
}

// plotSweep draws one model's Fig. 12 in two panels over the batch (log
// scale): samples per second of each policy's planned step, with the
// unconstrained step dashed, and that throughput relative to the
// unconstrained step. A policy has a point where it fits and none where
// it does not. It writes base.png and base.svg in dir.
func plotSweep(dir, base string, r *Results, i int) error {
	m, sw := r.Models[i], r.Sweep[i]
	abs, rel := plot.New(), plot.New()
	abs.Title.Text = fmt.Sprintf("%s on %s: simulated training throughput", m.Display, r.Profile.Name)
	abs.Y.Label.Text = "samples / s"
	rel.Y.Label.Text = "% of unconstrained step"
	rel.X.Label.Text = "batch size (samples)"
	for _, p := range []*plot.Plot{abs, rel} {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = pow2Ticks{}
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		if n := len(sw.Batches); n > 0 {
			p.X.Min, p.X.Max = float64(sw.Batches[0])/1.06, float64(sw.Batches[n-1])*1.06
		}
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	legend.ThumbnailWidth = vg.Points(24)

	var ideal, hundred plotter.XYs
	for bi, b := range sw.Batches {
		if t := sw.Unconstrained[bi]; t > 0 {
			ideal = append(ideal, plotter.XY{X: float64(b), Y: float64(b) / t})
			hundred = append(hundred, plotter.XY{X: float64(b), Y: 100})
		}
	}
	ymax := 0.0
	if len(ideal) > 0 {
		for k, xys := range []plotter.XYs{ideal, hundred} {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			l.Color = color.Gray{Y: 60}
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			l.Width = vg.Points(1.5)
			if k == 0 {
				abs.Add(l)
				legend.Add("unconstrained", l)
			} else {
				rel.Add(l)
			}
		}
		for _, xy := range ideal {
			ymax = max(ymax, xy.Y)
		}
	}
	// Drawn last policy first, so tsplit's thick line lies under the
	// others where they coincide; the legend keeps the table order.
	type thumb struct {
		line *plotter.Line
		dots *plotter.Scatter
	}
	thumbs := make([]thumb, len(r.Policies))
	for j := len(r.Policies) - 1; j >= 0; j-- {
		pol := r.Policies[j]
		col, width := policyStyle(j, pol)
		var legendLine *plotter.Line
		var legendDots *plotter.Scatter
		for k, p := range []*plot.Plot{abs, rel} {
			var segs []plotter.XYs
			var pts plotter.XYs
			for bi := range sw.Batches {
				pr := sw.Probes[bi][j]
				if pr == nil || !pr.OK {
					if len(pts) > 0 {
						segs, pts = append(segs, pts), nil
					}
					continue
				}
				y := pr.Throughput()
				if k == 1 {
					y = 100 * pr.Relative()
				} else {
					ymax = max(ymax, y)
				}
				pts = append(pts, plotter.XY{X: float64(pr.Batch), Y: y})
			}
			if len(pts) > 0 {
				segs = append(segs, pts)
			}
			for _, seg := range segs {
				l, s, err := plotter.NewLinePoints(seg)
				if err != nil {
					return err
				}
				l.Color, l.Width = col, width
				s.Color, s.Shape, s.Radius = col, plotutil.Shape(j), vg.Points(2.8)
				p.Add(l, s)
				legendLine, legendDots = l, s
			}
		}
		thumbs[j] = thumb{legendLine, legendDots}
	}
	for j, pol := range r.Policies {
		if t := thumbs[j]; t.line != nil {
			legend.Add(pol, t.line, t.dots)
		} else {
			legend.Add(pol+" (never fits)", plotter.NewFunction(func(float64) float64 { return math.NaN() }))
		}
	}
	abs.Y.Max = 1.05 * ymax
	if ymax == 0 {
		abs.Y.Max = 1
	}
	rel.Y.Max = 105

	return writePlot(dir, base, 10*vg.Inch, 7.5*vg.Inch, legend, func(plots draw.Canvas) {
		tiles := plot.Align([][]*plot.Plot{{abs}, {rel}}, draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4),
			PadBottom: vg.Points(4), PadLeft: vg.Points(4)}, plots)
		abs.Draw(tiles[0][0])
		rel.Draw(tiles[1][0])
	})
}

// writePlot draws a figure of w × h, the plots left of a legend column,
// into dir/base.png (110 dpi, white background) and dir/base.svg.
func writePlot(dir, base string, w, h vg.Length, legend plot.Legend, drawPlots func(draw.Canvas)) error {
	return saveFigure(dir, base, w, h, func(dc draw.Canvas) {
		legendW := 1.9 * vg.Inch
		drawPlots(draw.Crop(dc, 0, -legendW, 0, 0))
		legend.XOffs, legend.YOffs = vg.Points(8), -vg.Points(36)
		legend.Draw(draw.Crop(dc, w-legendW, 0, 0, 0))
	})
}

// saveFigure paints a figure of w × h into dir/base.png (110 dpi, white
// background) and dir/base.svg.
func saveFigure(dir, base string, w, h vg.Length, paint func(draw.Canvas)) error {
	render := func(c vg.CanvasWriterTo, path string) error {
		paint(draw.New(c))
		var b bytes.Buffer
		if _, err := c.WriteTo(&b); err != nil {
			return err
		}
		return backend.WriteBytesAtomic(path, b.Bytes())
	}
	if err := render(vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))},
		filepath.Join(dir, base+".png")); err != nil {
		return err
	}
	return render(vgsvg.New(w, h), filepath.Join(dir, base+".svg"))
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
