package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints results as one aligned table, then one line per family
// measured on both a Sluice and a Redis target giving their throughput
// ratio, and one giving their server CPU per request where both were
// measured, then the first error of each run that had any. The errors
// column reads "E+L lost" when L requests were sent but never answered. The
// cpu/op column is the server's CPU time per request and srv-cpu its CPU
// use as a share of one core ("-": not measured, for servers this program
// did not start).
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tmode\tconns\tpipeline\trequests\tdecisions/s\tallowed\tlimited\terrors\tp50\tp90\tp99\tp99.9\tmax\tcpu/op\tsrv-cpu\t")
	for _, r := range results {
		conns := strconv.Itoa(r.Conns)
		if r.Rate > 0 {
			conns += "@" + strconv.FormatFloat(r.Rate, 'f', -1, 64) + "/s"
		}
		errs := strconv.FormatInt(r.Errors, 10)
		if r.Unanswered > 0 {
			errs += "+" + strconv.FormatInt(r.Unanswered, 10) + " lost"
		}
		cpuOp, util := "-", "-"
		if r.ServerCPU > 0 {
			cpuOp = strconv.FormatFloat(r.ServerCPUPerOp, 'f', 2, 64) + "us"
			util = strconv.FormatFloat(100*r.ServerCPUUtil, 'f', 0, 64) + "%"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Target, r.Mode, conns, r.Pipeline, r.Requests, formatRate(r.Throughput),
			r.Allowed, r.Limited, errs,
			formatLatency(r.Latency.P50), formatLatency(r.Latency.P90), formatLatency(r.Latency.P99),
			formatLatency(r.Latency.P999), formatLatency(r.Latency.Max), cpuOp, util)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range ratios(results) {
		fmt.Fprintln(w, line)
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s %s: %d error replies; first: %s\n", r.Target, r.Mode, r.Errors, r.FirstError)
		}
		if r.Failure != "" {
			fmt.Fprintf(w, "%s %s: run failed: %s\n", r.Target, r.Mode, r.Failure)
		}
		if r.ScriptFallbacks > 0 {
			fmt.Fprintf(w, "%s %s: %d NOSCRIPT replies, each answered with the library's fallback (%s)\n",
				r.Target, r.Mode, r.ScriptFallbacks, fallbackName(r.Mode))
		}
		if r.CPUError != "" {
			fmt.Fprintf(w, "%s %s: server CPU not measured: %s\n", r.Target, r.Mode, r.CPUError)
		}
	}
	return nil
}

// fallbackName says what a library mode sends after NOSCRIPT.
func fallbackName(modeName string) string {
	m, err := lookupMode(modeName)
	if err != nil || m.lib == nil {
		return "?"
	}
	if m.lib.onNoScript == reloadThenEvalsha {
		return "SCRIPT LOAD, then EVALSHA again"
	}
	return "the same call as EVAL"
}

// ratios compares, per family and run shape, the sluice target's
// throughput with the redis target's, and their server CPU per request when
// both were measured. A run whose every reply was an error (a server without
// the command) is compared with nothing.
func ratios(results []Result) []string {
	var lines []string
	answered := func(r Result) bool {
		return r.Throughput > 0 && r.Failure == "" && r.Allowed+r.Limited > 0
	}
	for i, a := range results {
		if a.Kind != KindSluice.String() || !answered(a) {
			continue
		}
		for _, b := range results[i+1:] {
			if b.Kind == KindRedis.String() && b.Family == a.Family && b.Conns == a.Conns &&
				b.Pipeline == a.Pipeline && b.Rate == a.Rate && answered(b) {
				lines = append(lines, fmt.Sprintf("%s: %s %s / %s %s throughput = %.2fx",
					a.Family, a.Target, a.Mode, b.Target, b.Mode, a.Throughput/b.Throughput))
				if a.ServerCPUPerOp > 0 && b.ServerCPUPerOp > 0 {
					lines = append(lines, cpuRatio(a, b))
				}
				break
			}
		}
	}
	return lines
}

// cpuRatio describes the server CPU per request of sluice run a against
// redis run b, for example
//
//	gcra: redis lua-gcra uses 7.40 us/decision, sluice cl.throttle 1.10 us (6.7x less)
func cpuRatio(a, b Result) string {
	unit := "request"
	if m, err := lookupMode(a.Mode); err == nil && m.decision {
		unit = "decision"
	}
	cmp := fmt.Sprintf("%.1fx less", b.ServerCPUPerOp/a.ServerCPUPerOp)
	if a.ServerCPUPerOp > b.ServerCPUPerOp {
		cmp = fmt.Sprintf("%.1fx more", a.ServerCPUPerOp/b.ServerCPUPerOp)
	}
	return fmt.Sprintf("%s: %s %s uses %.2f us/%s, %s %s %.2f us (%s)",
		a.Family, b.Target, b.Mode, b.ServerCPUPerOp, unit, a.Target, a.Mode, a.ServerCPUPerOp, cmp)
}

func formatRate(v float64) string {
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// formatLatency keeps three significant figures, like the histogram.
func formatLatency(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64) + "us"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// Report is what WriteJSON writes: the invocation's settings and every
// run's result.
type Report struct {
	Started  time.Time         `json:"started"`
	Settings map[string]string `json:"settings,omitempty"`
	Results  []Result          `json:"results"`
}

// WriteJSON writes r as indented JSON; durations are in nanoseconds.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

var csvHeader = []string{
	"target", "kind", "addr", "mode", "family", "conns", "pipeline", "rate",
	"requests", "allowed", "limited", "errors", "unanswered", "elapsed_ns", "per_second",
	"p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns",
	"server_cpu_ns", "server_cpu_us_per_op", "server_cpu_util", "first_error", "failure",
}

// WriteCSV writes one header row and one row per result; durations are in
// nanoseconds.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	d := func(v time.Duration) string { return strconv.FormatInt(int64(v), 10) }
	for _, r := range results {
		row := []string{
			r.Target, r.Kind, r.Addr, r.Mode, r.Family, strconv.Itoa(r.Conns), strconv.Itoa(r.Pipeline),
			strconv.FormatFloat(r.Rate, 'f', -1, 64),
			i(r.Requests), i(r.Allowed), i(r.Limited), i(r.Errors), i(r.Unanswered),
			d(r.Elapsed), strconv.FormatFloat(r.Throughput, 'f', 1, 64),
			d(r.Latency.P50), d(r.Latency.P90), d(r.Latency.P99), d(r.Latency.P999), d(r.Latency.Max), d(r.Latency.Mean),
			d(r.ServerCPU), strconv.FormatFloat(r.ServerCPUPerOp, 'f', 3, 64), strconv.FormatFloat(r.ServerCPUUtil, 'f', 3, 64),
			strings.TrimSpace(r.FirstError), strings.TrimSpace(r.Failure),
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
