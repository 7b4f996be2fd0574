package bench

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ExperimentConfig configures the experiments of EXPERIMENTS.md. The zero
// value runs the full experiments against a redis-server found in PATH and
// skips the Sluice halves.
type ExperimentConfig struct {
	// RedisServer is the redis-server binary. Default "redis-server".
	RedisServer string
	// SluiceServer is the sluice-server binary. Empty: the Sluice half of
	// every experiment is skipped, and the report says so.
	SluiceServer string
	// SluiceArgs are extra arguments for every sluice-server started.
	SluiceArgs []string
	// ServerCPU pins every started server to this CPU (taskset) when
	// PinServer is set; unpinned otherwise.
	ServerCPU int
	PinServer bool
	// Smoke shrinks every experiment to a few seconds at most (fewer
	// rounds, shorter runs), for tests and quick checks.
	Smoke bool
	// Seed seeds the experiments' random choices. Default 1.
	Seed uint64
	// Kills is how many leaders the failover experiment kills; 0: 20, or 2
	// with Smoke.
	Kills int
	// Log receives a line per step; nil discards them.
	Log io.Writer
}

// ExperimentReport is what one experiment measured, in the forms
// WriteExperiment writes: a CSV with every number, charts, and markdown.
type ExperimentReport struct {
	Name  string // the experiment's name, as ExperimentNames lists it
	Title string
	// Seed is the published result being reproduced.
	Seed string
	// Setup says how the experiment was run (parameters, method).
	Setup string
	// Summary states the numbers measured, in prose.
	Summary string
	// Table is a markdown table: header first, then rows.
	Table [][]string
	// CSV holds every measured number: header first, then rows.
	CSV    [][]string
	Charts []Chart
	// Notes are caveats (skipped halves, emulated clocks, retries).
	Notes []string
	// Elapsed is how long the experiment took.
	Elapsed time.Duration
}

// Markdown renders the report as a markdown section; charts are linked as
// imgDir/File (imgDir "" links them beside the markdown).
func (r *ExperimentReport) Markdown(imgDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", r.Title)
	if r.Seed != "" {
		fmt.Fprintf(&b, "**Published:** %s\n\n", r.Seed)
	}
	if r.Setup != "" {
		fmt.Fprintf(&b, "**Setup:** %s\n\n", r.Setup)
	}
	if r.Summary != "" {
		fmt.Fprintf(&b, "**Measured:** %s\n\n", r.Summary)
	}
	if len(r.Table) > 1 {
		writeMarkdownTable(&b, r.Table)
		b.WriteString("\n")
	}
	for _, c := range r.Charts {
		fmt.Fprintf(&b, "![%s](%s)\n\n", c.Caption, filepath.ToSlash(filepath.Join(imgDir, c.File)))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

func writeMarkdownTable(w io.Writer, rows [][]string) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for i, row := range rows {
		cells := make([]string, len(row))
		for j, c := range row {
			cells[j] = esc(c)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		if i == 0 {
			seps := make([]string, len(row))
			for j := range seps {
				seps[j] = "---"
			}
			fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
		}
	}
}

// WriteExperiment writes r into dir (created if needed) as NAME.csv,
// NAME.md and one PNG per chart, and returns the paths written.
func WriteExperiment(dir string, r *ExperimentReport) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	csvPath := filepath.Join(dir, r.Name+".csv")
	if err := writeFileWith(csvPath, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.WriteAll(r.CSV); err != nil {
			return err
		}
		return cw.Error()
	}); err != nil {
		return paths, err
	}
	paths = append(paths, csvPath)
	for _, c := range r.Charts {
		p := filepath.Join(dir, c.File)
		w, h := c.size()
		if err := c.Plot.Save(w, h, p); err != nil {
			return paths, fmt.Errorf("chart %s: %w", p, err)
		}
		paths = append(paths, p)
	}
	mdPath := filepath.Join(dir, r.Name+".md")
	if err := writeFileWith(mdPath, func(w io.Writer) error {
		_, err := io.WriteString(w, r.Markdown(""))
		return err
	}); err != nil {
		return paths, err
	}
	return append(paths, mdPath), nil
}

func writeFileWith(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// DescribeMachine describes where the experiments run, as markdown: CPU,
// cores, kernel, Go, and the server binaries' versions.
func DescribeMachine(cfg ExperimentConfig) string {
	var b strings.Builder
	model := "unknown CPU"
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(info)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimLeft(v, " \t:"))
				break
			}
		}
	}
	fmt.Fprintf(&b, "- Machine: %s, %d logical CPUs, %s/%s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		fmt.Fprintf(&b, ", Linux %s", strings.TrimSpace(string(rel)))
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(la))
		if len(f) >= 3 {
			fmt.Fprintf(&b, "; load average %s %s %s when the report was written", f[0], f[1], f[2])
		}
	}
	fmt.Fprintf(&b, "\n- Load generator: %s\n", runtime.Version())
	redisPath := cfg.RedisServer
	if redisPath == "" {
		redisPath = "redis-server"
	}
	if out, err := exec.Command(redisPath, "--version").Output(); err == nil {
		fmt.Fprintf(&b, "- Redis: %s\n", strings.TrimSpace(string(out)))
	}
	if cfg.SluiceServer != "" {
		fmt.Fprintf(&b, "- Sluice: %s\n", cfg.SluiceServer)
	} else {
		b.WriteString("- Sluice: not run\n")
	}
	return b.String()
}

// experiment is one row of the read-only experiment table.
type experiment struct {
	name  string
	title string
	run   func(ctx context.Context, env *expEnv) (*ExperimentReport, error)
}

var experiments = []experiment{
	{"boundary", "1. Boundary burst", reported(runBoundary)},
	{"reset-race", "2. Two-command reset race", reported(runResetRace)},
	{"reset-header", "3. Reset-header wobble", reported(runResetHeader)},
	{"replica-lag", "4. Deciding off a lagging replica", reported(runReplicaLag)},
	{"eviction", "5. Eviction under memory pressure", reported(runEviction)},
	{"shards", "6. Shards and a hot key", reported(runShards)},
	{"failover", "7. Failover after SIGKILL of the leader", reported(runFailover)},
}

// reporter is an experiment's typed result (what the tests check).
type reporter interface {
	report() (*ExperimentReport, error)
}

// reported turns an experiment's typed run into one that returns its
// report.
func reported[R reporter](run func(context.Context, *expEnv) (R, error)) func(context.Context, *expEnv) (*ExperimentReport, error) {
	return func(ctx context.Context, env *expEnv) (*ExperimentReport, error) {
		r, err := run(ctx, env)
		if err != nil {
			return nil, err
		}
		return r.report()
	}
}

// ExperimentNames lists the experiments in EXPERIMENTS.md's order.
func ExperimentNames() []string {
	names := make([]string, len(experiments))
	for i, e := range experiments {
		names[i] = e.name
	}
	return names
}

// RunExperiment runs one experiment by name. It starts the servers it
// needs (on loopback, on free ports) and stops them before returning; every
// loop in it is bounded.
func RunExperiment(ctx context.Context, name string, cfg ExperimentConfig) (*ExperimentReport, error) {
	for _, e := range experiments {
		if e.name != name {
			continue
		}
		env := newExpEnv(cfg)
		start := time.Now()
		env.logf("experiment %s%s", name, map[bool]string{true: " (smoke)"}[cfg.Smoke])
		rep, err := e.run(ctx, env)
		if cerr := env.close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("experiment %s: %w", name, err)
		}
		rep.Name, rep.Title = e.name, e.title
		rep.Elapsed = time.Since(start)
		return rep, nil
	}
	return nil, fmt.Errorf("unknown experiment %q (known: %s)", name, strings.Join(ExperimentNames(), ", "))
}

// expEnv holds what one experiment started, so that it can all be stopped.
type expEnv struct {
	cfg ExperimentConfig
	// quick shrinks smoke mode further (go test -short): the slowest
	// optional parts are skipped.
	quick   bool
	start   time.Time // for the log's timestamps
	servers []*Server
	clients []*redis.Client
}

func newExpEnv(cfg ExperimentConfig) *expEnv {
	if cfg.RedisServer == "" {
		cfg.RedisServer = "redis-server"
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	return &expEnv{cfg: cfg, start: time.Now()}
}

func (e *expEnv) smoke() bool { return e.cfg.Smoke }

func (e *expEnv) logf(format string, args ...any) {
	if e.cfg.Log != nil {
		fmt.Fprintf(e.cfg.Log, "[%5.1fs] "+format+"\n", append([]any{time.Since(e.start).Seconds()}, args...)...)
	}
}

// hasSluice reports whether the Sluice halves run.
func (e *expEnv) hasSluice() bool { return e.cfg.SluiceServer != "" }

// skippedSluice is the note for a report without its Sluice half.
const skippedSluice = "Sluice: no sluice-server given (--start-sluice PATH); Sluice half skipped"

// newClient connects a go-redis client to a started server. It never
// retries: a retried decision would be counted twice.
func (e *expEnv) newClient(addr string, pool int) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:            addr,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		PoolSize:        pool,
		DialTimeout:     5 * time.Second,
		ReadTimeout:     10 * time.Second,
		WriteTimeout:    10 * time.Second,
	})
	e.clients = append(e.clients, c)
	return c
}

// startRedis starts a redis-server with extra configuration args and
// returns it with a client (pool of 16 connections).
func (e *expEnv) startRedis(ctx context.Context, args ...string) (*Server, *redis.Client, error) {
	s, err := StartRedis(ctx, RedisOptions{Path: e.cfg.RedisServer, CPU: e.cfg.ServerCPU, PinCPU: e.cfg.PinServer, Args: args})
	if err != nil {
		return nil, nil, err
	}
	e.servers = append(e.servers, s)
	e.logf("  started redis-server pid %d on %s %s", s.Pid(), s.Addr, strings.Join(args, " "))
	return s, e.newClient(s.Addr, 16), nil
}

// startSluice starts a sluice-server with the debug clock enabled for
// loopback clients, plus args.
func (e *expEnv) startSluice(ctx context.Context, args ...string) (*Server, *redis.Client, error) {
	if !e.hasSluice() {
		return nil, nil, errors.New("no sluice-server binary")
	}
	all := append([]string{"--enable-debug-command", "local"}, e.cfg.SluiceArgs...)
	all = append(all, args...)
	s, err := StartSluice(ctx, SluiceOptions{Path: e.cfg.SluiceServer, CPU: e.cfg.ServerCPU, PinCPU: e.cfg.PinServer, Args: all})
	if err != nil {
		return nil, nil, err
	}
	e.servers = append(e.servers, s)
	e.logf("  started sluice-server pid %d on %s %s", s.Pid(), s.Addr, strings.Join(all, " "))
	return s, e.newClient(s.Addr, 16), nil
}

// stop stops one server now (and forgets it).
func (e *expEnv) stop(s *Server) error {
	for i, x := range e.servers {
		if x == s {
			e.servers = append(e.servers[:i], e.servers[i+1:]...)
			break
		}
	}
	return s.Close()
}

func (e *expEnv) close() error {
	for _, c := range e.clients {
		c.Close()
	}
	e.clients = nil
	var errs []error
	for _, s := range e.servers {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.servers = nil
	return errors.Join(errs...)
}

// loadScript loads a Lua script and returns its SHA1.
func loadLua(ctx context.Context, c *redis.Client, src string) (string, error) {
	sha, err := c.ScriptLoad(ctx, src).Result()
	if err != nil {
		return "", fmt.Errorf("SCRIPT LOAD: %w", err)
	}
	return sha, nil
}

// doer is what sends an arbitrary command: a client, a connection or a
// pipeline.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// debugClockGet reads Sluice's clock (unix ms).
func debugClockGet(ctx context.Context, c doer) (int64, error) {
	v, err := c.Do(ctx, "DEBUG", "CLOCK", "GET").Int64()
	if err != nil {
		return 0, fmt.Errorf("DEBUG CLOCK GET (is sluice-server started with --enable-debug-command?): %w", err)
	}
	return v, nil
}

// freezeAtWindowStart freezes Sluice's clock at the start of a window of
// windowMs (a multiple of windowMs since the epoch), at least lead ms ahead
// of its current clock (the clock cannot go backwards), and returns it.
func freezeAtWindowStart(ctx context.Context, c doer, windowMs, lead int64) (int64, error) {
	now, err := debugClockGet(ctx, c)
	if err != nil {
		return 0, err
	}
	base := (now+lead)/windowMs*windowMs + windowMs
	if err := c.Do(ctx, "DEBUG", "CLOCK", "SET", base).Err(); err != nil {
		return 0, fmt.Errorf("DEBUG CLOCK SET: %w", err)
	}
	return base, nil
}

// decision is one 5-field decision reply ({limited, limit, remaining,
// retry_after, reset_after}).
type decision struct {
	Limited                          bool
	Limit, Remaining, Retry, ResetIn int64
}

// parseDecision reads a 5-field decision reply.
func parseDecision(v any, err error) (decision, error) {
	if err != nil {
		return decision{}, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 5 {
		return decision{}, fmt.Errorf("not a decision reply: %v", v)
	}
	var f [5]int64
	for i := range f {
		n, ok := arr[i].(int64)
		if !ok {
			return decision{}, fmt.Errorf("decision field %d is %T %v", i, arr[i], arr[i])
		}
		f[i] = n
	}
	return decision{Limited: f[0] == 1, Limit: f[1], Remaining: f[2], Retry: f[3], ResetIn: f[4]}, nil
}

// peakInWindow returns the most timestamps (sorted ascending, ms) that fall
// in any half-open interval [s, s+window).
func peakInWindow(ts []int64, window int64) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi]-ts[lo] >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// exactLog is the reference sliding log: it admits a unit at t when fewer
// than limit units were admitted in (t-window, t], so no half-open interval
// of length window ever holds more than limit.
type exactLog struct {
	limit    int
	window   int64
	admitted []int64
	first    int
}

func (l *exactLog) allow(t int64) bool {
	for l.first < len(l.admitted) && l.admitted[l.first] <= t-l.window {
		l.first++
	}
	if len(l.admitted)-l.first >= l.limit {
		return false
	}
	l.admitted = append(l.admitted, t)
	return true
}

// Formatting helpers for the reports.
func itoaI(n int) string { return strconv.Itoa(n) }
func fmtF(f float64, prec int) string {
	return strconv.FormatFloat(f, 'f', prec, 64)
}
func pct(part, whole float64) string {
	if whole == 0 {
		return "-"
	}
	return fmtF(100*part/whole, 2) + "%"
}

// fmtMs formats a duration in milliseconds: "25 ms", "0.5 ms".
func fmtMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms"
}

// sortedCopy returns ts sorted.
func sortedCopy(ts []int64) []int64 {
	out := append([]int64(nil), ts...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
