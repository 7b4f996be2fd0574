package bench

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/race.lua
var raceScript string

// The reset race as published: 30 forced rollovers, 8 clients colliding on
// each, a limit of 100 per window (a budget of 3,000), and a gap of
// 0/5/10/25 ms injected between reading the reset and writing the new
// window.
const (
	raceLimit      = 100
	raceColliders  = 8
	raceWindowMs   = 60000
	raceRounds     = 30
	raceRoundsSmk  = 6
	raceFillBudget = raceLimit + raceColliders + 1 // bounds each fill loop
)

var (
	raceGaps      = []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond}
	raceGapsSmoke = []time.Duration{0, 10 * time.Millisecond}
)

// raceRow is one implementation at one injected gap.
type raceRow struct {
	Impl     string
	Gap      time.Duration
	GapUsed  bool // false: the implementation has no gap to inject into
	Rounds   int
	Budget   int // Rounds * limit
	Admitted int
	// Collided counts the rounds in which more than one client rolled the
	// window over (two-command pattern only).
	Collided int
}

func (r raceRow) Leak() int { return r.Admitted - r.Budget }

type raceResult struct {
	Rows  []raceRow
	Notes []string
}

func (r *raceResult) find(impl string, gap time.Duration) *raceRow {
	for i := range r.Rows {
		if r.Rows[i].Impl == impl && r.Rows[i].Gap == gap {
			return &r.Rows[i]
		}
	}
	return nil
}

const (
	raceNaive  = "Redis: GET reset, SET count+reset, INCR (two-command)"
	raceLua    = "Redis: one Lua script"
	raceSluice = "Sluice: FW.CHECK"
)

func runResetRace(ctx context.Context, env *expEnv) (*raceResult, error) {
	rounds, gaps := raceRounds, raceGaps
	if env.smoke() {
		rounds, gaps = raceRoundsSmk, raceGapsSmoke
	}
	res := &raceResult{}
	_, rc, err := env.startRedis(ctx)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	sha, err := loadLua(ctx, rc, raceScript)
	if err != nil {
		return nil, err
	}
	var sc *redis.Client
	if env.hasSluice() {
		if _, sc, err = env.startSluice(ctx); err != nil {
			return nil, fmt.Errorf("sluice: %w", err)
		}
		if _, err := freezeAtWindowStart(ctx, sc, raceWindowMs, 1000); err != nil {
			return nil, fmt.Errorf("sluice: %w", err)
		}
	} else {
		res.Notes = append(res.Notes, skippedSluice)
	}
	for _, gap := range gaps {
		keys := fmt.Sprintf("race:%v:", gap)
		row, err := raceRun(ctx, rc, raceNaive, gap, rounds, keys,
			func(c *redis.Conn) error { return c.Set(ctx, keys+"reset", 0, 0).Err() },
			func(c *redis.Conn, gap time.Duration) (bool, bool, error) { return naiveRequest(ctx, c, keys, gap) })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", raceNaive, err)
		}
		res.Rows = append(res.Rows, row)

		row, err = raceRun(ctx, rc, raceLua, gap, rounds, keys,
			func(c *redis.Conn) error { return c.Set(ctx, keys+"lua:reset", 0, 0).Err() },
			func(c *redis.Conn, _ time.Duration) (bool, bool, error) {
				n, err := c.EvalSha(ctx, sha, []string{keys + "lua:count", keys + "lua:reset"}, raceWindowMs).Int64()
				return n <= raceLimit, false, err
			})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", raceLua, err)
		}
		row.GapUsed = false
		res.Rows = append(res.Rows, row)

		if sc == nil {
			continue
		}
		key := keys + "fw"
		row, err = raceRun(ctx, sc, raceSluice, gap, rounds, keys,
			// The rollover: the next window on the frozen server clock.
			func(c *redis.Conn) error { return c.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", raceWindowMs).Err() },
			func(c *redis.Conn, _ time.Duration) (bool, bool, error) {
				d, err := parseDecision(c.Do(ctx, "FW.CHECK", key, raceLimit, raceWindowMs/1000, 1).Result())
				return !d.Limited, false, err
			})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", raceSluice, err)
		}
		row.GapUsed = false
		res.Rows = append(res.Rows, row)
		env.logf("  gap %s: %s", fmtMs(gap), res.summaryAt(gap))
	}
	return res, nil
}

func (r *raceResult) summaryAt(gap time.Duration) string {
	var parts []string
	for _, row := range r.Rows {
		if row.Gap == gap {
			parts = append(parts, fmt.Sprintf("%s admitted %d of %d", row.Impl, row.Admitted, row.Budget))
		}
	}
	return strings.Join(parts, "; ")
}

// naiveRequest is the two-command pattern: GET the reset; if it has passed
// (on the application's clock), wait gap, then SET the count to 0 and a new
// reset; then INCR. It reports whether the request was admitted and whether
// it rolled the window over.
func naiveRequest(ctx context.Context, c *redis.Conn, keys string, gap time.Duration) (admitted, rolled bool, err error) {
	now := time.Now().UnixMilli()
	reset, err := c.Get(ctx, keys+"reset").Int64()
	if errors.Is(err, redis.Nil) {
		reset, err = 0, nil
	}
	if err != nil {
		return false, false, err
	}
	if reset <= now {
		rolled = true
		if gap > 0 {
			time.Sleep(gap)
		}
		pipe := c.Pipeline()
		pipe.Set(ctx, keys+"count", 0, 0)
		pipe.Set(ctx, keys+"reset", now+raceWindowMs, 0)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, rolled, err
		}
	}
	n, err := c.Incr(ctx, keys+"count").Result()
	return n <= raceLimit, rolled, err
}

// raceRun runs rounds of: force the window over (rollover), release
// raceColliders clients at once on the limiter, then have one client take
// whatever the limiter still admits. It counts everything admitted.
func raceRun(ctx context.Context, c *redis.Client, impl string, gap time.Duration, rounds int, keys string,
	rollover func(*redis.Conn) error, request func(*redis.Conn, time.Duration) (admitted, rolled bool, err error)) (raceRow, error) {
	row := raceRow{Impl: impl, Gap: gap, GapUsed: true, Rounds: rounds, Budget: rounds * raceLimit}
	conns := make([]*redis.Conn, raceColliders)
	for i := range conns {
		conns[i] = c.Conn()
		defer conns[i].Close()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			return row, err
		}
	}
	for range rounds {
		if err := rollover(conns[0]); err != nil {
			return row, fmt.Errorf("rollover: %w", err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		admitted := make([]bool, len(conns))
		rolled := make([]bool, len(conns))
		errs := make([]error, len(conns))
		for i, conn := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				admitted[i], rolled[i], errs[i] = request(conn, gap)
			}()
		}
		close(start)
		wg.Wait()
		rollers := 0
		for i := range conns {
			if errs[i] != nil {
				return row, errs[i]
			}
			if admitted[i] {
				row.Admitted++
			}
			if rolled[i] {
				rollers++
			}
		}
		if rollers > 1 {
			row.Collided++
		}
		// Fill: take what the limiter still claims is left.
		for range raceFillBudget {
			ok, _, err := request(conns[0], 0)
			if err != nil {
				return row, err
			}
			if !ok {
				break
			}
			row.Admitted++
		}
		if err := ctx.Err(); err != nil {
			return row, err
		}
	}
	return row, nil
}

func (r *raceResult) report() (*ExperimentReport, error) {
	rep := &ExperimentReport{
		Seed: "naive pair admitted 3,018 of a 3,000 budget at 0 ms (0.60% leak), 3,100 at 25 ms (3.33%); one Lua script: exactly 3,000 at every gap.",
		Setup: fmt.Sprintf("a fixed window of %d per window kept as two keys (count, reset time in unix ms). Each round forces the "+
			"window over (Redis: the reset key is set to 0; Sluice: DEBUG CLOCK ADVANCE one window on a frozen clock), releases %d "+
			"clients at once (one connection each), then one client keeps requesting until the limiter says no. The two-command "+
			"client GETs the reset, and if it has passed sleeps for the gap, SETs count=0 and a new reset (one pipeline), then INCRs; "+
			"the Lua script does the same in one call; Sluice's FW.CHECK stores its absolute reset with the count. The gap has "+
			"nowhere to go in the one-call versions; they are run at each gap for the same schedule.", raceLimit, raceColliders),
		Notes: r.Notes,
	}
	rep.CSV = [][]string{{"implementation", "gap_ms", "gap_applies", "rounds", "budget", "admitted", "leaked", "leak_pct", "rounds_with_colliding_rollovers"}}
	rep.Table = [][]string{{"implementation", "gap", "admitted / budget", "leaked", "rounds with colliding rollovers"}}
	var gaps []time.Duration
	seenGap := map[time.Duration]bool{}
	impls := map[string]bool{}
	var implOrder []string
	for _, row := range r.Rows {
		if !seenGap[row.Gap] {
			seenGap[row.Gap] = true
			gaps = append(gaps, row.Gap)
		}
		if !impls[row.Impl] {
			impls[row.Impl] = true
			implOrder = append(implOrder, row.Impl)
		}
		gapMs := fmtF(float64(row.Gap)/float64(time.Millisecond), 0)
		collided := itoaI(row.Collided)
		gapText := fmtMs(row.Gap)
		if !row.GapUsed {
			collided = "-"
			gapText += " (n/a)"
		}
		rep.CSV = append(rep.CSV, []string{row.Impl, gapMs, fmt.Sprint(row.GapUsed), itoaI(row.Rounds), itoaI(row.Budget),
			itoaI(row.Admitted), itoaI(row.Leak()), fmtF(100*float64(row.Leak())/float64(row.Budget), 2), collided})
		rep.Table = append(rep.Table, []string{row.Impl, gapText, fmt.Sprintf("%d / %d", row.Admitted, row.Budget),
			fmt.Sprintf("%d (%s)", row.Leak(), pct(float64(row.Leak()), float64(row.Budget))), collided})
	}
	var parts []string
	for _, g := range gaps {
		var ps []string
		for _, impl := range implOrder {
			if row := r.find(impl, g); row != nil {
				ps = append(ps, fmt.Sprintf("%s %d (%s leaked)", shortRaceImpl(impl), row.Admitted, pct(float64(row.Leak()), float64(row.Budget))))
			}
		}
		parts = append(parts, fmt.Sprintf("at a %s gap: %s", fmtMs(g), strings.Join(ps, ", ")))
	}
	if len(r.Rows) > 0 {
		rep.Summary = fmt.Sprintf("Admitted of a %d budget: %s.", r.Rows[0].Budget, strings.Join(parts, "; "))
	}

	cats := make([]string, len(gaps))
	for i, g := range gaps {
		cats[i] = "gap " + fmtMs(g)
	}
	var series []barSeries
	for _, impl := range implOrder {
		vals := make([]float64, len(gaps))
		for i, g := range gaps {
			if row := r.find(impl, g); row != nil {
				vals[i] = float64(row.Leak())
			}
		}
		series = append(series, barSeries{Name: shortRaceImpl(impl), Values: vals})
	}
	bar, err := barChart("Reset race: quota leaked beyond the budget", "units admitted beyond the budget", cats, series, 0, "")
	if err != nil {
		return nil, err
	}
	rep.Charts = append(rep.Charts, Chart{File: "reset-race.png", Caption: "Reset race: units admitted beyond the budget, by injected gap", Plot: bar})
	return rep, nil
}

func shortRaceImpl(impl string) string {
	switch impl {
	case raceNaive:
		return "Redis two-command"
	case raceLua:
		return "Redis one Lua script"
	case raceSluice:
		return "Sluice FW.CHECK"
	}
	return impl
}
