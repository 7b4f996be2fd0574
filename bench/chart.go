package bench

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one figure of an experiment, written as PNG by WriteExperiment.
type Chart struct {
	// File is the PNG's file name, e.g. "boundary.png".
	File string
	// Caption describes the figure in the markdown.
	Caption string
	// Plot is the figure.
	Plot *plot.Plot
	// Width and Height size the PNG; zero: 8 x 4.5 inches.
	Width, Height vg.Length
}

// size returns the PNG's size.
func (c Chart) size() (w, h vg.Length) {
	w, h = c.Width, c.Height
	if w == 0 {
		w = chartWidth
	}
	if h == 0 {
		h = chartHeight
	}
	return w, h
}

// widthFor widens a bar chart so that n category labels fit side by side.
func widthFor(n int) vg.Length {
	return max(chartWidth, vg.Length(n)*1.25*vg.Inch)
}

// Chart size on the page.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4.5 * vg.Inch
)

// barSeries is one colour of bars: a value per category.
type barSeries struct {
	Name   string
	Values []float64
}

// barChart draws grouped bars: one group per category, one bar per series.
// A positive refLine draws a dashed horizontal line labelled refLabel (a
// limit or a budget).
func barChart(title, yLabel string, categories []string, series []barSeries, refLine float64, refLabel string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	width := vg.Points(float64(min(40, 360/max(1, len(categories)*len(series)))))
	for i, s := range series {
		if len(s.Values) != len(categories) {
			return nil, fmt.Errorf("chart %q: series %q has %d values for %d categories", title, s.Name, len(s.Values), len(categories))
		}
		bars, err := plotter.NewBarChart(plotter.Values(s.Values), width)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		bars.Offset = width * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		if len(series) > 1 {
			p.Legend.Add(s.Name, bars)
		}
		// The value above each bar.
		xys := make(plotter.XYs, len(s.Values))
		texts := make([]string, len(s.Values))
		for j, v := range s.Values {
			xys[j] = plotter.XY{X: float64(j), Y: v}
			texts[j] = formatValue(v)
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		for j := range labels.TextStyle {
			labels.TextStyle[j].XAlign = draw.XCenter
		}
		labels.Offset = vg.Point{X: bars.Offset, Y: vg.Points(3)}
		p.Add(labels)
	}
	if refLine > 0 {
		pts := plotter.XYs{{X: -0.5, Y: refLine}, {X: float64(len(categories)) - 0.5, Y: refLine}}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		l.Color = color.Gray{Y: 80}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(refLabel, l)
	}
	// Headroom above the tallest bar for the legend.
	top := refLine
	for _, s := range series {
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	if top > 0 {
		p.Y.Max = top * 1.25
	}
	p.NominalX(categories...)
	p.X.Min, p.X.Max = -0.5, float64(len(categories))-0.5
	p.Y.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	return p, nil
}

// formatValue labels a bar: whole numbers from 100 up, else 4 significant
// digits.
func formatValue(v float64) string {
	if v >= 100 || v <= -100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("250000", not "250000.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}

// lineSeries is one line of a line chart.
type lineSeries struct {
	Name string
	XY   plotter.XYs
	// Points draws a marker at every point as well.
	Points bool
}

// lineChart draws one line per series.
func lineChart(title, xLabel, yLabel string, series []lineSeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = false
	p.Legend.Left = false
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	for i, s := range series {
		if len(s.XY) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.XY)
		if err != nil {
			return nil, fmt.Errorf("chart %q: series %q: %w", title, s.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		if s.Points {
			sc, err := plotter.NewScatter(s.XY)
			if err != nil {
				return nil, fmt.Errorf("chart %q: series %q: %w", title, s.Name, err)
			}
			sc.Color = plotutil.Color(i)
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = vg.Points(2.5)
			p.Add(sc)
			p.Legend.Add(s.Name, l, sc)
		} else {
			p.Legend.Add(s.Name, l)
		}
	}
	return p, nil
}
