package main

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotFormats are the file name extensions -plot accepts; gonum/plot picks
// the encoder by the extension.
var plotFormats = []string{".svg", ".png"}

// checkPlotPath refuses a -plot file whose extension names no format.
func checkPlotPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range plotFormats {
		if ext == f {
			return nil
		}
	}
	return fmt.Errorf("-plot %q: the file name must end in %s", path, strings.Join(plotFormats, " or "))
}

// latencyCurve is one line of the plot: a latency histogram of one target.
type latencyCurve struct {
	name string
	hist *hdrhistogram.Histogram
}

// plotCurves lists the latency histograms of results, produce then
// end-to-end for each target, skipping empty ones.
func plotCurves(results []Result) []latencyCurve {
	var out []latencyCurve
	for _, r := range results {
		if r.produceHist != nil && r.produceHist.TotalCount() > 0 {
			out = append(out, latencyCurve{r.Target + " produce", r.produceHist})
		}
		if r.e2eHist != nil && r.e2eHist.TotalCount() > 0 {
			out = append(out, latencyCurve{r.Target + " e2e", r.e2eHist})
		}
	}
	return out
}

// percentileXYs turns a histogram into the points of a latency-by-percentile
// curve: x is 1/(1−q) for the quantile q (1 at the minimum, 10 at p90, 100
// at p99, …), so that a log axis spreads the tail evenly; y is the latency
// in milliseconds. Points are 20 per decade of x up to the count of values,
// where the last point is the maximum.
func percentileXYs(h *hdrhistogram.Histogram) plotter.XYs {
	n := float64(h.TotalCount())
	var xys plotter.XYs
	for k := 0; ; k++ {
		x := math.Pow(10, float64(k)/20)
		if x >= n {
			break
		}
		q := 100 * (1 - 1/x)
		xys = append(xys, plotter.XY{X: x, Y: float64(h.ValueAtQuantile(q)) / 1e3})
	}
	return append(xys, plotter.XY{X: max(n, 1), Y: float64(h.Max()) / 1e3})
}

// percentileTicks labels the x axis of percentileXYs at p0, p90, p99, …
// up to the decade that holds max.
func percentileTicks(max float64) plot.ConstantTicks {
	ticks := plot.ConstantTicks{{Value: 1, Label: "0%"}}
	labels := []string{"90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"}
	for i, l := range labels {
		v := math.Pow(10, float64(i+1))
		if v > max*1.0001 {
			break
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: l})
	}
	return ticks
}

// writePlot draws the latency histograms of results as latency by
// percentile, one line per target and kind (produce, e2e), into path; the
// extension picks SVG or PNG (checkPlotPath). The title carries settings,
// so that a plot found later says what produced it.
func writePlot(path string, cfg Config, results []Result) error {
	curves := plotCurves(results)
	if len(curves) == 0 {
		return errors.New("plot: no latencies were recorded")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("latency by percentile — %d-byte records, %d partitions, linger %v, codec %s, rate %s",
		cfg.RecordSize, cfg.Partitions, cfg.Linger, cfg.Codec, rateText(cfg.Rate))
	p.X.Label.Text = "percentile (log scale of 1/(1−q))"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale = plot.LogScale{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	maxX := 1.0
	for i, c := range curves {
		xys := percentileXYs(c.hist)
		maxX = max(maxX, xys[len(xys)-1].X)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", c.name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d, p99 %.1f ms)", c.name, c.hist.TotalCount(),
			float64(c.hist.ValueAtQuantile(99))/1e3), l)
	}
	p.X.Min, p.X.Max = 1, maxX
	p.X.Tick.Marker = percentileTicks(maxX)
	p.Y.Min = 0
	if err := p.Save(24*vg.Centimeter, 14*vg.Centimeter, path); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

func rateText(rate float64) string {
	if rate <= 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.0f rec/s", rate)
}
