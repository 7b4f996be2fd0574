package bench

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot/plotter"
)

//go:embed scripts/fw_epoch.lua
var fwEpochScript string

// The boundary experiment's parameters, as published: 100 per 2 s, a burst
// of 100 just before a window boundary and 100 just after; and a uniform
// 80 requests/s stream for 30 s.
const (
	boundaryLimit     = 100
	boundaryWindowMs  = 2000
	boundaryFirstAt   = 1990 // ms into the window
	boundarySecondAt  = 2010
	uniformRequests   = 2400 // 80/s for 30 s
	uniformSpacingX2  = 25   // ms between requests, times 2 (12.5 ms)
	boundaryRealTries = 3
)

// boundaryRow is one limiter's admissions in the boundary burst.
type boundaryRow struct {
	Server string // sluice or redis
	Impl   string // the command or script
	Clock  string // how requests were placed in time
	First  int    // admitted of the burst at 1.990 s
	Second int    // admitted of the burst at 2.010 s
	Peak   int    // most admitted in any rolling 2 s interval
}

// uniformRow is one limiter under the uniform 80/s stream.
type uniformRow struct {
	Server, Impl, Clock string
	Requests, Admitted  int
	Peak                int
	// Disagree counts decisions that differ from the exact sliding log's
	// on the same stream; -1 when not compared.
	Disagree int
	// Against names the exact log compared with.
	Against string
	// rolling is the count admitted in the trailing window at each request.
	rolling plotter.XYs
}

type boundaryResult struct {
	Burst   []boundaryRow
	Uniform []uniformRow
	Notes   []string
}

// row finds a burst row by server and implementation (for tests).
func (r *boundaryResult) row(server, impl string) *boundaryRow {
	for i := range r.Burst {
		if r.Burst[i].Server == server && r.Burst[i].Impl == impl {
			return &r.Burst[i]
		}
	}
	return nil
}

func runBoundary(ctx context.Context, env *expEnv) (*boundaryResult, error) {
	res := &boundaryResult{}
	if env.hasSluice() {
		if err := boundarySluice(ctx, env, res); err != nil {
			return nil, fmt.Errorf("sluice: %w", err)
		}
	} else {
		res.Notes = append(res.Notes, skippedSluice)
	}
	if err := boundaryRedis(ctx, env, res); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return res, nil
}

// sluiceLimiter is one Sluice decision command at the boundary
// experiment's rate.
type sluiceLimiter struct {
	impl string
	args func(key string) []any
}

var boundarySluiceLimiters = []sluiceLimiter{
	{"FW.CHECK", func(k string) []any { return []any{"FW.CHECK", k, boundaryLimit, 2, 1} }},
	{"SW.CHECK", func(k string) []any { return []any{"SW.CHECK", k, boundaryLimit, 2, 1} }},
	{"SL.CHECK", func(k string) []any { return []any{"SL.CHECK", k, boundaryLimit, 2, 1} }},
	// count 100 per 2 s with max_burst 99: the bucket holds 100.
	{"CL.THROTTLE", func(k string) []any { return []any{"CL.THROTTLE", k, boundaryLimit - 1, boundaryLimit, 2, 1} }},
}

const debugClockNote = "server clock frozen and placed with DEBUG CLOCK SET"

func boundarySluice(ctx context.Context, env *expEnv, res *boundaryResult) error {
	_, c, err := env.startSluice(ctx)
	if err != nil {
		return err
	}
	base, err := freezeAtWindowStart(ctx, c, boundaryWindowMs, 1000)
	if err != nil {
		return err
	}
	// The burst: 100 of each command at 1.990 s, 100 more at 2.010 s.
	admitted := make([][]int64, len(boundarySluiceLimiters))
	counts := make([][2]int, len(boundarySluiceLimiters))
	for b, at := range []int64{boundaryFirstAt, boundarySecondAt} {
		pipe := c.Pipeline()
		pipe.Do(ctx, "DEBUG", "CLOCK", "SET", base+at)
		cmds := make([][]*redis.Cmd, len(boundarySluiceLimiters))
		for li, l := range boundarySluiceLimiters {
			for range boundaryLimit {
				cmds[li] = append(cmds[li], pipe.Do(ctx, l.args("boundary:"+l.impl)...))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("burst at %d ms: %w", at, err)
		}
		for li := range cmds {
			for _, cmd := range cmds[li] {
				d, err := parseDecision(cmd.Result())
				if err != nil {
					return fmt.Errorf("%s: %w", boundarySluiceLimiters[li].impl, err)
				}
				if !d.Limited {
					counts[li][b]++
					admitted[li] = append(admitted[li], base+at)
				}
			}
		}
	}
	for li, l := range boundarySluiceLimiters {
		res.Burst = append(res.Burst, boundaryRow{
			Server: "sluice", Impl: l.impl, Clock: debugClockNote,
			First: counts[li][0], Second: counts[li][1], Peak: peakInWindow(admitted[li], boundaryWindowMs),
		})
	}
	env.logf("  sluice burst: %v", counts)

	// The uniform stream: 80/s for 30 s, on the frozen clock.
	base, err = freezeAtWindowStart(ctx, c, boundaryWindowMs, 1000)
	if err != nil {
		return err
	}
	decisions := make([][]bool, len(boundarySluiceLimiters))
	times := make([]int64, uniformRequests)
	const batch = 200
	for start := 0; start < uniformRequests; start += batch {
		pipe := c.Pipeline()
		var cmds []*redis.Cmd
		for i := start; i < min(start+batch, uniformRequests); i++ {
			t := base + int64(i*uniformSpacingX2/2)
			times[i] = t
			pipe.Do(ctx, "DEBUG", "CLOCK", "SET", t)
			for _, l := range boundarySluiceLimiters {
				cmds = append(cmds, pipe.Do(ctx, l.args("uniform:"+l.impl)...))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("uniform stream: %w", err)
		}
		for j, cmd := range cmds {
			d, err := parseDecision(cmd.Result())
			if err != nil {
				return fmt.Errorf("uniform stream: %w", err)
			}
			li := j % len(boundarySluiceLimiters)
			decisions[li] = append(decisions[li], !d.Limited)
		}
	}
	// The exact log to compare with is Sluice's own SL.CHECK; it is also
	// checked against this package's reference log.
	ref := &exactLog{limit: boundaryLimit, window: boundaryWindowMs}
	refMismatch := 0
	for i, t := range times {
		if ref.allow(t) != decisions[2][i] {
			refMismatch++
		}
	}
	if refMismatch > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("Sluice SL.CHECK differed from the reference sliding log (no more than 100 admitted in any half-open 2 s interval) on %d of %d decisions", refMismatch, len(times)))
	}
	for li, l := range boundarySluiceLimiters {
		row := uniformStats("sluice", l.impl, debugClockNote, times, decisions[li])
		if l.impl == "SW.CHECK" || l.impl == "FW.CHECK" || l.impl == "CL.THROTTLE" {
			row.Disagree, row.Against = disagreements(decisions[li], decisions[2]), "SL.CHECK"
		}
		res.Uniform = append(res.Uniform, row)
	}
	return nil
}

// uniformStats summarises one limiter's decisions on a stream.
func uniformStats(server, impl, clock string, times []int64, allowed []bool) uniformRow {
	row := uniformRow{Server: server, Impl: impl, Clock: clock, Requests: len(times), Disagree: -1}
	var adm []int64
	lo := 0
	for i, t := range times {
		if allowed[i] {
			row.Admitted++
			adm = append(adm, t)
		}
		for lo < len(adm) && adm[lo] <= t-boundaryWindowMs {
			lo++
		}
		row.rolling = append(row.rolling, plotter.XY{X: float64(t-times[0]) / 1000, Y: float64(len(adm) - lo)})
	}
	row.Peak = peakInWindow(sortedCopy(adm), boundaryWindowMs)
	return row
}

func disagreements(a, b []bool) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func boundaryRedis(ctx context.Context, env *expEnv, res *boundaryResult) error {
	_, c, err := env.startRedis(ctx)
	if err != nil {
		return err
	}
	fwSHA, err := loadLua(ctx, c, fwEpochScript)
	if err != nil {
		return err
	}
	swSHA, err := loadLua(ctx, c, swScript)
	if err != nil {
		return err
	}
	scripts := []struct{ impl, sha string }{
		{"Lua fixed window (INCR+PEXPIRE)", fwSHA},
		{"Lua sliding window counter", swSHA},
	}

	// Emulated: the scripts take "now" as an argument, so requests are
	// placed exactly, as on Sluice's debug clock.
	const emulated = "emulated: the script's clock is an argument"
	base := time.Now().UnixMilli()/boundaryWindowMs*boundaryWindowMs + 10*boundaryWindowMs
	for _, s := range scripts {
		var counts [2]int
		var adm []int64
		for b, at := range []int64{boundaryFirstAt, boundarySecondAt} {
			pipe := c.Pipeline()
			var cmds []*redis.Cmd
			for range boundaryLimit {
				cmds = append(cmds, pipe.EvalSha(ctx, s.sha, []string{"boundary-emulated:" + s.sha[:8]}, boundaryLimit, 2, 1, base+at))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("%s: %w", s.impl, err)
			}
			for _, cmd := range cmds {
				d, err := parseDecision(cmd.Result())
				if err != nil {
					return fmt.Errorf("%s: %w", s.impl, err)
				}
				if !d.Limited {
					counts[b]++
					adm = append(adm, base+at)
				}
			}
		}
		res.Burst = append(res.Burst, boundaryRow{Server: "redis", Impl: s.impl, Clock: emulated,
			First: counts[0], Second: counts[1], Peak: peakInWindow(adm, boundaryWindowMs)})
	}

	// Real: Redis's own clock (TIME in the scripts); the client sends each
	// burst at the right wall time, and TIME before and after the burst, in
	// the same pipeline, shows where it landed.
	if env.quick {
		res.Notes = append(res.Notes, "quick mode: the real-clock burst on Redis was skipped")
	} else {
		rows, note, err := boundaryRedisReal(ctx, env, c, scripts)
		if err != nil {
			return err
		}
		res.Burst = append(res.Burst, rows...)
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
	}

	// The uniform stream, emulated.
	times := make([]int64, uniformRequests)
	ustart := base + 20*boundaryWindowMs
	for i := range times {
		times[i] = ustart + int64(i*uniformSpacingX2/2)
	}
	ref := &exactLog{limit: boundaryLimit, window: boundaryWindowMs}
	exact := make([]bool, len(times))
	for i, t := range times {
		exact[i] = ref.allow(t)
	}
	for _, s := range scripts {
		allowed := make([]bool, 0, len(times))
		const batch = 400
		for start := 0; start < len(times); start += batch {
			pipe := c.Pipeline()
			var cmds []*redis.Cmd
			for _, t := range times[start:min(start+batch, len(times))] {
				cmds = append(cmds, pipe.EvalSha(ctx, s.sha, []string{"uniform-emulated:" + s.sha[:8]}, boundaryLimit, 2, 1, t))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("%s: %w", s.impl, err)
			}
			for _, cmd := range cmds {
				d, err := parseDecision(cmd.Result())
				if err != nil {
					return err
				}
				allowed = append(allowed, !d.Limited)
			}
		}
		row := uniformStats("redis", s.impl, emulated, times, allowed)
		row.Disagree, row.Against = disagreements(allowed, exact), "reference log"
		res.Uniform = append(res.Uniform, row)
	}
	res.Uniform = append(res.Uniform, func() uniformRow {
		row := uniformStats("reference", "exact sliding log (computed here)", "exact", times, exact)
		return row
	}())

	if env.smoke() {
		res.Notes = append(res.Notes, "smoke mode: the real-clock uniform stream on Redis (30 s) was skipped")
		return nil
	}
	return boundaryRedisRealUniform(ctx, env, c, scripts, res)
}

// boundaryRedisReal sends the two bursts at wall times on Redis's clock.
// When scheduling puts a burst on the wrong side of the boundary it tries
// again at a later boundary, a bounded number of times.
func boundaryRedisReal(ctx context.Context, env *expEnv, c *redis.Client, scripts []struct{ impl, sha string }) ([]boundaryRow, string, error) {
	const real = "Redis's own clock (TIME); bursts sent at those wall times"
	conn := c.Conn()
	defer conn.Close()
	var lastErr string
	for try := 1; try <= boundaryRealTries; try++ {
		// Local clock minus Redis's (same machine: about zero, but measured).
		t0 := time.Now()
		rt, err := conn.Time(ctx).Result()
		if err != nil {
			return nil, "", err
		}
		t1 := time.Now()
		offset := t0.Add(t1.Sub(t0) / 2).Sub(rt)
		redisNow := rt.UnixMilli()
		boundary := (redisNow/boundaryWindowMs + 1) * boundaryWindowMs
		if boundary-redisNow < 300 {
			boundary += boundaryWindowMs
		}
		winStart := boundary - boundaryWindowMs
		type burst struct {
			before, after int64 // Redis TIME around the burst, ms
			admitted      []int
		}
		var bursts [2]burst
		prefix := fmt.Sprintf("boundary-real:%d:", try)
		for b, at := range []int64{boundaryFirstAt, boundarySecondAt} {
			due := time.UnixMilli(winStart + at).Add(offset)
			if err := sleepUntil(ctx, due); err != nil {
				return nil, "", err
			}
			pipe := conn.Pipeline()
			before := pipe.Time(ctx)
			cmds := make([][]*redis.Cmd, len(scripts))
			for si, s := range scripts {
				for range boundaryLimit {
					cmds[si] = append(cmds[si], pipe.EvalSha(ctx, s.sha, []string{prefix + s.sha[:8]}, boundaryLimit, 2, 1))
				}
			}
			after := pipe.Time(ctx)
			if _, err := pipe.Exec(ctx); err != nil {
				return nil, "", err
			}
			bursts[b].before = before.Val().UnixMilli()
			bursts[b].after = after.Val().UnixMilli()
			bursts[b].admitted = make([]int, len(scripts))
			for si := range scripts {
				for _, cmd := range cmds[si] {
					d, err := parseDecision(cmd.Result())
					if err != nil {
						return nil, "", err
					}
					if !d.Limited {
						bursts[b].admitted[si]++
					}
				}
			}
		}
		if bursts[0].after >= boundary || bursts[1].before < boundary {
			lastErr = fmt.Sprintf("try %d: first burst at %d..%d ms, second at %d..%d ms of the window", try,
				bursts[0].before-winStart, bursts[0].after-winStart, bursts[1].before-winStart, bursts[1].after-winStart)
			env.logf("  redis real clock: burst missed its side of the boundary (%s); trying again", lastErr)
			continue
		}
		var rows []boundaryRow
		for si, s := range scripts {
			var adm []int64
			for b := range bursts {
				for range bursts[b].admitted[si] {
					adm = append(adm, bursts[b].before)
				}
			}
			rows = append(rows, boundaryRow{Server: "redis", Impl: s.impl, Clock: real,
				First: bursts[0].admitted[si], Second: bursts[1].admitted[si], Peak: peakInWindow(adm, boundaryWindowMs)})
		}
		note := fmt.Sprintf("Redis real clock: the bursts ran at %d-%d ms and %d-%d ms into the window by Redis's TIME (try %d)",
			bursts[0].before-winStart, bursts[0].after-winStart, bursts[1].before-winStart, bursts[1].after-winStart, try)
		return rows, note, nil
	}
	return nil, fmt.Sprintf("Redis real clock: no try placed both bursts on their side of the boundary (%s)", lastErr), nil
}

// boundaryRedisRealUniform runs the uniform stream on Redis's own clock in
// real time: 80 requests/s for 30 s, each with Redis's TIME read in the
// same pipeline as its decisions.
func boundaryRedisRealUniform(ctx context.Context, env *expEnv, c *redis.Client, scripts []struct{ impl, sha string }, res *boundaryResult) error {
	const real = "Redis's own clock (TIME), real time"
	conn := c.Conn()
	defer conn.Close()
	env.logf("  redis real-clock uniform stream: %d requests over %v", uniformRequests, time.Duration(uniformRequests*uniformSpacingX2/2)*time.Millisecond)
	start := time.Now().Add(100 * time.Millisecond)
	times := make([]int64, 0, uniformRequests)
	allowed := make([][]bool, len(scripts))
	var maxLate time.Duration
	late := 0 // requests sent more than 5 ms after their time
	for i := range uniformRequests {
		due := start.Add(time.Duration(i*uniformSpacingX2) * time.Millisecond / 2)
		if err := sleepUntil(ctx, due); err != nil {
			return err
		}
		if l := time.Since(due); l > maxLate {
			maxLate = l
		}
		if time.Since(due) > 5*time.Millisecond {
			late++
		}
		pipe := conn.Pipeline()
		tc := pipe.Time(ctx)
		cmds := make([]*redis.Cmd, len(scripts))
		for si, s := range scripts {
			cmds[si] = pipe.EvalSha(ctx, s.sha, []string{"uniform-real:" + s.sha[:8]}, boundaryLimit, 2, 1)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		times = append(times, tc.Val().UnixMilli())
		for si, cmd := range cmds {
			d, err := parseDecision(cmd.Result())
			if err != nil {
				return err
			}
			allowed[si] = append(allowed[si], !d.Limited)
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Redis real-clock uniform stream: it started %d ms into a 2 s window (where the "+
		"clock happened to be; the emulated streams start on a boundary): the first, partial window admits what is sent "+
		"in the rest of it, and the next one a full 100 right after the boundary. %d of %d requests were sent more than 5 ms after their "+
		"scheduled time (the latest %s late); a late request is followed by the ones queued behind it, back to back.",
		times[0]%boundaryWindowMs, late, uniformRequests, fmtMs(maxLate.Round(time.Millisecond/10))))
	ref := &exactLog{limit: boundaryLimit, window: boundaryWindowMs}
	exact := make([]bool, len(times))
	for i, t := range times {
		exact[i] = ref.allow(t)
	}
	for si, s := range scripts {
		row := uniformStats("redis", s.impl, real, times, allowed[si])
		row.Disagree, row.Against = disagreements(allowed[si], exact), "reference log on Redis's TIME"
		res.Uniform = append(res.Uniform, row)
	}
	return nil
}

// sleepUntil waits until t or ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *boundaryResult) report() (*ExperimentReport, error) {
	rep := &ExperimentReport{
		Seed: "fixed window admitted 200 in the boundary burst (100% overshoot); sliding window counter 101 (1%). " +
			"Under a uniform 80 req/s stream both peaked at exactly 100. Counter vs exact log disagreed on 1,102 of 2,400 " +
			"individual decisions (45.92%) while admitting the same 1,500 in total.",
		Setup: "limit 100 per 2 s (CL.THROTTLE: count 100 per 2 s, max_burst 99). Burst: 100 requests at t=1.990 s and 100 at " +
			"t=2.010 s of a window (windows aligned to multiples of 2 s since the epoch), one key per limiter. Sluice's clock is " +
			"frozen and placed with DEBUG CLOCK SET; Redis runs the fixed-window script (INCR+PEXPIRE on a key per window) and " +
			"the sliding-window-counter script twice: with the script's clock passed as an argument (emulated, exact placement) " +
			"and on Redis's own TIME with the client sending each burst at that wall time. Uniform: 2,400 requests 12.5 ms apart " +
			"(80/s for 30 s; times rounded down to the ms on Sluice's debug clock). Peak = most admitted in any half-open 2 s interval.",
		Notes: r.Notes,
	}
	rep.CSV = [][]string{{"scenario", "server", "limiter", "clock", "requests", "admitted_at_1990ms", "admitted_at_2010ms",
		"admitted", "peak_rolling_2s", "overshoot_pct", "disagree_with_exact_log", "exact_log"}}
	rep.Table = [][]string{{"scenario", "server", "limiter", "clock", "admitted", "peak in any 2 s", "overshoot", "disagreements with exact log"}}
	var cats []string
	var peaks []float64
	for _, b := range r.Burst {
		over := float64(b.Peak-boundaryLimit) / boundaryLimit * 100
		rep.CSV = append(rep.CSV, []string{"burst", b.Server, b.Impl, b.Clock, "200", itoaI(b.First), itoaI(b.Second),
			itoaI(b.First + b.Second), itoaI(b.Peak), fmtF(over, 2), "", ""})
		rep.Table = append(rep.Table, []string{"burst", b.Server, b.Impl, shortClock(b.Clock),
			fmt.Sprintf("%d + %d", b.First, b.Second), itoaI(b.Peak), fmtF(over, 0) + "%", ""})
		cats = append(cats, shortImpl(b.Impl)+"\n"+b.Server+"\n"+shortClock(b.Clock))
		peaks = append(peaks, float64(b.Peak))
	}
	for _, u := range r.Uniform {
		dis, disPct := "", ""
		if u.Disagree >= 0 {
			dis = itoaI(u.Disagree)
			disPct = fmt.Sprintf("%d of %d (%s) vs %s", u.Disagree, u.Requests, pct(float64(u.Disagree), float64(u.Requests)), u.Against)
		}
		over := float64(u.Peak-boundaryLimit) / boundaryLimit * 100
		rep.CSV = append(rep.CSV, []string{"uniform", u.Server, u.Impl, u.Clock, itoaI(u.Requests), "", "",
			itoaI(u.Admitted), itoaI(u.Peak), fmtF(over, 2), dis, u.Against})
		rep.Table = append(rep.Table, []string{"uniform 80/s", u.Server, u.Impl, shortClock(u.Clock),
			fmt.Sprintf("%d of %d", u.Admitted, u.Requests), itoaI(u.Peak), fmtF(over, 0) + "%", disPct})
	}

	var parts []string
	for _, b := range r.Burst {
		parts = append(parts, fmt.Sprintf("%s %s (%s) admitted %d+%d, peak %d", b.Server, b.Impl, shortClock(b.Clock), b.First, b.Second, b.Peak))
	}
	rep.Summary = "Boundary burst: " + strings.Join(parts, "; ") + "."
	var uparts []string
	for _, u := range r.Uniform {
		s := fmt.Sprintf("%s %s (%s) admitted %d of %d, peak %d", u.Server, u.Impl, shortClock(u.Clock), u.Admitted, u.Requests, u.Peak)
		if u.Disagree >= 0 {
			s += fmt.Sprintf(", %d disagreements (%s) with %s", u.Disagree, pct(float64(u.Disagree), float64(u.Requests)), u.Against)
		}
		uparts = append(uparts, s)
	}
	rep.Summary += " Uniform stream: " + strings.Join(uparts, "; ") + "."

	bar, err := barChart("Boundary burst: most admitted in any 2 s (limit 100)", "admitted in the busiest 2 s", cats,
		[]barSeries{{Name: "peak", Values: peaks}}, boundaryLimit, "limit")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "boundary.png", Caption: "Boundary burst: peak admitted in any rolling 2 s interval", Plot: bar, Width: widthFor(len(cats))})

	// The rolling count under the uniform stream, for one server's limiters
	// (Sluice's when it ran).
	var lines []lineSeries
	server := "redis"
	for _, u := range r.Uniform {
		if u.Server == "sluice" {
			server = "sluice"
		}
	}
	for _, u := range r.Uniform {
		if u.Server == server || (server == "redis" && u.Server == "reference") {
			if u.Clock == "exact" || strings.HasPrefix(u.Clock, "server") || strings.HasPrefix(u.Clock, "emulated") {
				lines = append(lines, lineSeries{Name: u.Server + " " + shortImpl(u.Impl), XY: u.rolling})
			}
		}
	}
	line, err := lineChart("Uniform 80 req/s, limit 100 per 2 s: admitted in the trailing 2 s", "seconds", "admitted in trailing 2 s", lines)
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "boundary-uniform.png", Caption: "Uniform stream: admitted in the trailing 2 s window", Plot: line})
	return rep, nil
}

func shortClock(clock string) string {
	switch {
	case clock == debugClockNote:
		return "debug clock"
	case strings.HasPrefix(clock, "emulated"):
		return "emulated clock"
	case strings.HasPrefix(clock, "Redis's own clock"):
		return "Redis TIME"
	}
	return clock
}

func shortImpl(impl string) string {
	switch impl {
	case "Lua fixed window (INCR+PEXPIRE)":
		return "Lua fixed"
	case "Lua sliding window counter":
		return "Lua sliding"
	case "exact sliding log (computed here)":
		return "exact log"
	}
	return impl
}
