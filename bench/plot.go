package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot/vg"
)

// WritePlots draws a throughput run's results as two PNG charts beside
// path's base name: <base>-throughput.png (decisions/s per family, one bar
// per target) and <base>-latency.png (p50, p99 and p99.9 per target and
// mode). It returns the files written.
func WritePlots(path string, results []Result) ([]string, error) {
	if len(results) == 0 {
		return nil, fmt.Errorf("no results to plot")
	}
	base := strings.TrimSuffix(path, filepath.Ext(path))
	var families, targets []string
	for _, r := range results {
		if !slices.Contains(families, r.Family) {
			families = append(families, r.Family)
		}
		if !slices.Contains(targets, r.Target) {
			targets = append(targets, r.Target)
		}
	}
	var series []barSeries
	for _, t := range targets {
		s := barSeries{Name: t, Values: make([]float64, len(families))}
		for _, r := range results {
			if r.Target == t {
				s.Values[slices.Index(families, r.Family)] = r.Throughput
			}
		}
		series = append(series, s)
	}
	title := fmt.Sprintf("Decisions/s (%d connections, pipeline %d)", results[0].Conns, results[0].Pipeline)
	tp, err := barChart(title, "replies per second", families, series, 0, "")
	if err != nil {
		return nil, err
	}
	var labels []string
	lat := []barSeries{{Name: "p50"}, {Name: "p99"}, {Name: "p99.9"}}
	for _, r := range results {
		labels = append(labels, r.Target+"\n"+r.Mode)
		lat[0].Values = append(lat[0].Values, float64(r.Latency.P50.Microseconds())/1000)
		lat[1].Values = append(lat[1].Values, float64(r.Latency.P99.Microseconds())/1000)
		lat[2].Values = append(lat[2].Values, float64(r.Latency.P999.Microseconds())/1000)
	}
	lp, err := barChart("Latency per request", "milliseconds", labels, lat, 0, "")
	if err != nil {
		return nil, err
	}
	files := []string{base + "-throughput.png", base + "-latency.png"}
	if err := tp.Save(widthFor(len(families)), chartHeight, files[0]); err != nil {
		return nil, err
	}
	if err := lp.Save(max(widthFor(len(labels)), 10*vg.Inch), chartHeight, files[1]); err != nil {
		return nil, err
	}
	return files, nil
}
