package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot/plotter"
)

// The reset-header experiment: back-to-back requests inside one long
// window, each reporting when the window resets.
const (
	headerWindowS  = 3600
	headerLimit    = 1_000_000_000 // never limited: only the reset matters
	headerSpan     = 2500 * time.Millisecond
	headerSpanSmk  = 1100 * time.Millisecond // just over a second: enough to cross one
	headerMaxReqs  = 100_000
	headerChartMax = 3000 // points per line in the chart
)

// headerSeries is one way of computing the reset a response reports.
type headerSeries struct {
	Server string
	Method string
	// Resets holds the reported reset (unix ms) of each request; At when
	// it was sent, ms since the first request.
	Resets []int64
	At     []float64
}

func (h *headerSeries) add(at float64, reset int64) {
	h.At = append(h.At, at)
	h.Resets = append(h.Resets, reset)
}

// Spread is the largest minus the smallest reset reported, in ms.
func (h *headerSeries) Spread() int64 {
	if len(h.Resets) == 0 {
		return 0
	}
	lo, hi := h.Resets[0], h.Resets[0]
	for _, v := range h.Resets {
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi - lo
}

// Changes counts consecutive requests whose reported resets differ.
func (h *headerSeries) Changes() int {
	n := 0
	for i := 1; i < len(h.Resets); i++ {
		if h.Resets[i] != h.Resets[i-1] {
			n++
		}
	}
	return n
}

// Distinct counts the different resets reported.
func (h *headerSeries) Distinct() int {
	seen := map[int64]bool{}
	for _, v := range h.Resets {
		seen[v] = true
	}
	return len(seen)
}

type headerResult struct {
	Span   time.Duration
	Series []*headerSeries
	Notes  []string
}

func (r *headerResult) find(server, method string) *headerSeries {
	for _, s := range r.Series {
		if s.Server == server && strings.HasPrefix(s.Method, method) {
			return s
		}
	}
	return nil
}

const (
	hdrTTL        = "app clock (s) + TTL (s)"
	hdrPTTL       = "app clock (ms) + PTTL (ms)"
	hdrExpiretime = "PEXPIRETIME (the stored absolute expiry)"
	hdrStored     = "LIMIT.INFO reset_at_ms (stored absolute reset)"
	hdrAppMS      = "app clock (ms) + reset_after (MS reply)"
	hdrTimeMS     = "server TIME (ms) + reset_after (MS reply)"
)

func runResetHeader(ctx context.Context, env *expEnv) (*headerResult, error) {
	span := headerSpan
	if env.smoke() {
		span = headerSpanSmk
	}
	if env.quick {
		span = 300 * time.Millisecond
	}
	res := &headerResult{Span: span}
	if err := headerRedis(ctx, env, span, res); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if env.hasSluice() {
		if err := headerSluice(ctx, env, span, res); err != nil {
			return nil, fmt.Errorf("sluice: %w", err)
		}
	} else {
		res.Notes = append(res.Notes, skippedSluice)
	}
	return res, nil
}

func headerRedis(ctx context.Context, env *expEnv, span time.Duration, res *headerResult) error {
	_, c, err := env.startRedis(ctx)
	if err != nil {
		return err
	}
	sha, err := loadLua(ctx, c, fwScript)
	if err != nil {
		return err
	}
	conn := c.Conn()
	defer conn.Close()
	ttl := &headerSeries{Server: "redis", Method: hdrTTL}
	pttl := &headerSeries{Server: "redis", Method: hdrPTTL}
	exp := &headerSeries{Server: "redis", Method: hdrExpiretime}
	const key = "header:fw"
	// PEXPIRETIME is Redis 7's; without it that series is left out.
	hasExpiretime := conn.Do(ctx, "PEXPIRETIME", key).Err() == nil
	var first time.Time
	for i := 0; i < headerMaxReqs; i++ {
		now := time.Now()
		if i == 0 {
			first = now
		} else if now.Sub(first) >= span {
			break
		}
		pipe := conn.Pipeline()
		dec := pipe.EvalSha(ctx, sha, []string{key}, headerLimit, headerWindowS, 1)
		t := pipe.TTL(ctx, key)
		pt := pipe.PTTL(ctx, key)
		var et *redis.Cmd
		if hasExpiretime {
			et = pipe.Do(ctx, "PEXPIRETIME", key)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if _, err := parseDecision(dec.Result()); err != nil {
			return err
		}
		at := float64(now.Sub(first)) / float64(time.Second)
		// go-redis turns TTL's seconds into a Duration.
		ttl.add(at, now.Unix()*1000+int64(t.Val()/time.Second)*1000)
		pttl.add(at, now.UnixMilli()+pt.Val().Milliseconds())
		if et != nil {
			abs, err := et.Int64()
			if err != nil {
				return fmt.Errorf("PEXPIRETIME: %w", err)
			}
			exp.add(at, abs)
		}
	}
	res.Series = append(res.Series, ttl, pttl)
	if hasExpiretime {
		res.Series = append(res.Series, exp)
	} else {
		res.Notes = append(res.Notes, "this redis-server has no PEXPIRETIME (Redis 7); that series is left out")
	}
	env.logf("  redis: %d requests; spreads %d / %d / %d ms", len(ttl.Resets), ttl.Spread(), pttl.Spread(), exp.Spread())
	return nil
}

func headerSluice(ctx context.Context, env *expEnv, span time.Duration, res *headerResult) error {
	_, c, err := env.startSluice(ctx)
	if err != nil {
		return err
	}
	conn := c.Conn()
	defer conn.Close()
	// Sluice's fixed windows are aligned to the hour here; stay clear of a
	// boundary (waiting is bounded by the span plus a second).
	st, err := conn.Time(ctx).Result()
	if err != nil {
		return err
	}
	winMs := int64(headerWindowS * 1000)
	if left := winMs - st.UnixMilli()%winMs; left < (span + time.Second).Milliseconds() {
		env.logf("  sluice: %d ms to the window boundary; waiting for it to pass", left)
		if err := sleepUntil(ctx, time.Now().Add(time.Duration(left+100)*time.Millisecond)); err != nil {
			return err
		}
	}
	stored := &headerSeries{Server: "sluice", Method: hdrStored}
	appMS := &headerSeries{Server: "sluice", Method: hdrAppMS}
	timeMS := &headerSeries{Server: "sluice", Method: hdrTimeMS}
	const key = "header:fw"
	var first time.Time
	for i := 0; i < headerMaxReqs; i++ {
		now := time.Now()
		if i == 0 {
			first = now
		} else if now.Sub(first) >= span {
			break
		}
		pipe := conn.Pipeline()
		tm := pipe.Time(ctx)
		dec := pipe.Do(ctx, "FW.CHECK", key, headerLimit, headerWindowS, 1, "MS")
		info := pipe.Do(ctx, "LIMIT.INFO", key)
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		d, err := parseDecision(dec.Result())
		if err != nil {
			return err
		}
		resetAt, err := infoField(info, "reset_at_ms")
		if err != nil {
			return err
		}
		at := float64(now.Sub(first)) / float64(time.Second)
		stored.add(at, resetAt)
		appMS.add(at, now.UnixMilli()+d.ResetIn)
		timeMS.add(at, tm.Val().UnixMilli()+d.ResetIn)
	}
	res.Series = append(res.Series, stored, appMS, timeMS)
	env.logf("  sluice: %d requests; spreads %d / %d / %d ms", len(stored.Resets), stored.Spread(), appMS.Spread(), timeMS.Spread())
	return nil
}

// infoField reads one integer field of a LIMIT.INFO reply (a flat
// field/value array under RESP2).
func infoField(cmd *redis.Cmd, field string) (int64, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, fmt.Errorf("LIMIT.INFO: %w", err)
	}
	arr, ok := v.([]any)
	if !ok {
		return 0, fmt.Errorf("LIMIT.INFO: not a field list: %v", v)
	}
	for i := 0; i+1 < len(arr); i += 2 {
		if name, _ := arr[i].(string); name == field {
			switch x := arr[i+1].(type) {
			case int64:
				return x, nil
			case string:
				return strconv.ParseInt(x, 10, 64)
			}
			return 0, fmt.Errorf("LIMIT.INFO %s is %T", field, arr[i+1])
		}
	}
	return 0, fmt.Errorf("LIMIT.INFO has no %s: %v", field, arr)
}

func (r *headerResult) report() (*ExperimentReport, error) {
	rep := &ExperimentReport{
		Seed: "the reported reset jittered by a second between consecutive requests; storing the absolute reset and returning it removes the jitter.",
		Setup: fmt.Sprintf("back-to-back requests on one key for about %s, inside one %d s window (a limit high enough never to "+
			"limit). Redis: the fixed-window script (window from the first hit), then TTL, PTTL and PEXPIRETIME in the same "+
			"pipeline; the reset header is computed the usual way, application clock + TTL read from the store. Sluice: TIME, "+
			"FW.CHECK ... MS and LIMIT.INFO in one pipeline. Spread = largest minus smallest reset reported over all the requests.",
			fmtMs(r.Span), headerWindowS),
		Notes: r.Notes,
	}
	rep.CSV = [][]string{{"server", "method", "requests", "spread_ms", "distinct_values", "changes_between_consecutive"}}
	rep.Table = [][]string{{"server", "reset computed as", "requests", "spread", "distinct values", "changes between consecutive requests"}}
	var parts []string
	var lines []lineSeries
	for _, s := range r.Series {
		rep.CSV = append(rep.CSV, []string{s.Server, s.Method, itoaI(len(s.Resets)), strconv.FormatInt(s.Spread(), 10),
			itoaI(s.Distinct()), itoaI(s.Changes())})
		rep.Table = append(rep.Table, []string{s.Server, s.Method, itoaI(len(s.Resets)), strconv.FormatInt(s.Spread(), 10) + " ms",
			itoaI(s.Distinct()), itoaI(s.Changes())})
		parts = append(parts, fmt.Sprintf("%s %s: spread %d ms, %d changes in %d requests", s.Server, s.Method, s.Spread(), s.Changes(), len(s.Resets)))
		lines = append(lines, lineSeries{Name: s.Server + ": " + s.Method, XY: s.chartPoints()})
	}
	rep.Summary = strings.Join(parts, "; ") + "."
	p, err := lineChart("Reported reset across back-to-back requests in one window", "seconds since the first request",
		"reset minus the first one reported (ms)", lines)
	if err != nil {
		return nil, err
	}
	// Room below the lines for the legend.
	lo, hi := 0.0, 0.0
	for _, l := range lines {
		for _, pt := range l.XY {
			lo, hi = min(lo, pt.Y), max(hi, pt.Y)
		}
	}
	p.Y.Min = lo - 0.7*(hi-lo) - 50
	rep.Charts = append(rep.Charts, Chart{File: "reset-header.png", Caption: "Reported reset relative to the first request's", Plot: p})
	return rep, nil
}

// chartPoints returns at most headerChartMax points, keeping every change
// of value so that no jump is lost.
func (h *headerSeries) chartPoints() plotter.XYs {
	var xy plotter.XYs
	if len(h.Resets) == 0 {
		return xy
	}
	step := max(1, len(h.Resets)/headerChartMax)
	base := h.Resets[0]
	for i := range h.Resets {
		changed := i > 0 && h.Resets[i] != h.Resets[i-1]
		if i%step == 0 || changed || i == len(h.Resets)-1 {
			if changed && i > 0 {
				// The last point before the jump, so the line steps.
				xy = append(xy, plotter.XY{X: h.At[i-1], Y: float64(h.Resets[i-1] - base)})
			}
			xy = append(xy, plotter.XY{X: h.At[i], Y: float64(h.Resets[i] - base)})
		}
	}
	return xy
}
