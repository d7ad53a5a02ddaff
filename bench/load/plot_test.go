package main

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// histOf is a latency histogram of the given values in microseconds.
func histOf(t *testing.T, us ...int64) *hdrhistogram.Histogram {
	t.Helper()
	h := newHist()
	for _, v := range us {
		if err := h.RecordValue(v); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestPercentileXYs(t *testing.T) {
	// 10,000 values 1 … 10,000 ms: p90 ≈ 9,000 ms at x = 10, and the
	// last point is the maximum at x = n.
	var us []int64
	for i := int64(1); i <= 10_000; i++ {
		us = append(us, i*1000)
	}
	xys := percentileXYs(histOf(t, us...))
	for i := 1; i < len(xys); i++ {
		if xys[i].X <= xys[i-1].X || xys[i].Y < xys[i-1].Y {
			t.Fatalf("point %d %+v after %+v: want x increasing and y not decreasing", i, xys[i], xys[i-1])
		}
	}
	if last := xys[len(xys)-1]; last.X != 10_000 || last.Y < 9_990 || last.Y > 10_010 {
		t.Errorf("last point %+v, want the maximum ≈ 10,000 ms at x = 10,000", last)
	}
	for _, p := range xys {
		if p.X == 10 && (p.Y < 8_990 || p.Y > 9_010) {
			t.Errorf("p90 point %+v, want ≈ 9,000 ms", p)
		}
	}
	// Histogram values are exact to 3 significant digits.
	if got := percentileXYs(histOf(t, 5000)); len(got) != 1 || got[0].X != 1 || got[0].Y < 5 || got[0].Y > 5.01 {
		t.Errorf("one value: %+v, want one point (1, 5 ms)", got)
	}
	ticks := percentileTicks(10_000)
	var labels []string
	for _, tk := range ticks {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0% 90% 99% 99.9% 99.99%" {
		t.Errorf("ticks %q", got)
	}
}

func TestPlotFiles(t *testing.T) {
	results := []Result{
		{Target: "sidecar", produceHist: histOf(t, 300_000, 350_000, 700_000), e2eHist: histOf(t, 400_000, 900_000)},
		{Target: "kafka", produceHist: histOf(t, 2_000, 3_000), e2eHist: newHist()},
	}
	dir := t.TempDir()
	svgPath := filepath.Join(dir, "latency.svg")
	if err := writePlot(svgPath, smallConfig(), results); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
	}
	// One legend entry per non-empty histogram: kafka's e2e is empty.
	for _, want := range []string{"sidecar produce", "sidecar e2e", "kafka produce", "latency by percentile"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if bytes.Contains(svg, []byte("kafka e2e")) {
		t.Error("SVG has a line for an empty histogram")
	}

	pngPath := filepath.Join(dir, "latency.png")
	if err := writePlot(pngPath, smallConfig(), results); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if img.Width < 500 || img.Height < 300 {
		t.Errorf("PNG %d×%d, want a readable size", img.Width, img.Height)
	}

	if err := writePlot(filepath.Join(dir, "none.svg"), smallConfig(), []Result{{Target: "x", produceHist: newHist()}}); err == nil {
		t.Error("a plot of no latencies: want an error")
	}
	for _, bad := range []string{"latency", "latency.jpeg", "latency.pdf"} {
		if err := checkPlotPath(bad); err == nil {
			t.Errorf("checkPlotPath(%q): want an error", bad)
		}
	}
	for _, good := range []string{"a.svg", "b.PNG"} {
		if err := checkPlotPath(good); err != nil {
			t.Errorf("checkPlotPath(%q): %v", good, err)
		}
	}
}
