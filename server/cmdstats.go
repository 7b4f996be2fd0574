package server

import (
	"errors"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/engine"
)

// Per-command statistics (INFO commandstats, errorstats, latencystats, the
// Prometheus command metrics), the settings of the slow log and the latency
// monitor, and the accounting hooks the connection calls.
//
// What is measured, as Redis measures it: a command's execution, not its
// reading or the writing of its reply to the socket. A server-level command
// (run on the connection) is timed alone. Engine commands are pipelined
// into a batch the engine executes at once; the batch is timed once and
// each of its commands is charged an equal share, so a pipelined command's
// duration is its batch's share (a command alone is its own batch). The
// counts are kept per connection for the batch and folded into the shared
// counters once per batch, not once per command.

// monoBase anchors monoNow.
var monoBase = time.Now()

// monoNow is the monotonic clock: one clock read, where time.Now takes two
// (wall and monotonic), and a batch is timed with two of them.
func monoNow() time.Duration { return time.Since(monoBase) }

// StatsConfig holds the settings of SLOWLOG, LATENCY and the per-command
// latency histograms, Redis's names and units. Set applies one by name
// (flags, config file, CONFIG SET); DefaultStatsConfig is Redis's.
type StatsConfig struct {
	SlowlogLogSlowerThan    int64     // µs; -1 logs nothing, 0 everything
	SlowlogMaxLen           int64     // entries kept
	LatencyMonitorThreshold int64     // ms; 0: the latency monitor is off
	LatencyTracking         bool      // per-command histograms (latencystats)
	LatencyPercentiles      []float64 // latency-tracking-info-percentiles
}

// DefaultStatsConfig is Redis 7's: slowlog 10000 µs and 128 entries, the
// latency monitor off, tracking on with percentiles 50 99 99.9.
func DefaultStatsConfig() StatsConfig {
	return StatsConfig{SlowlogLogSlowerThan: 10000, SlowlogMaxLen: 128, LatencyTracking: true,
		LatencyPercentiles: []float64{50, 99, 99.9}}
}

// statsSettings are the names StatsConfig.Set takes.
var statsSettings = []string{"slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold",
	"latency-tracking", "latency-tracking-info-percentiles"}

// Set applies one setting with Redis's parsing and error texts.
func (sc *StatsConfig) Set(name, value string) error {
	switch name {
	case "slowlog-log-slower-than":
		n, err := configInt(value, -1, math.MaxInt64)
		if err != nil {
			return err
		}
		sc.SlowlogLogSlowerThan = n
	case "slowlog-max-len":
		n, err := configInt(value, 0, math.MaxInt64)
		if err != nil {
			return err
		}
		sc.SlowlogMaxLen = n
	case "latency-monitor-threshold":
		n, err := configInt(value, 0, math.MaxInt64)
		if err != nil {
			return err
		}
		sc.LatencyMonitorThreshold = n
	case "latency-tracking":
		switch strings.ToLower(value) {
		case "yes":
			sc.LatencyTracking = true
		case "no":
			sc.LatencyTracking = false
		default:
			return errors.New("argument must be 'yes' or 'no'")
		}
	case "latency-tracking-info-percentiles":
		words := strings.Fields(value)
		ps := make([]float64, 0, len(words))
		for _, w := range words {
			p, err := strconv.ParseFloat(w, 64)
			if err != nil || math.IsNaN(p) {
				return errors.New("Invalid latency-tracking-info-percentiles parameters")
			}
			if p < 0 || p > 100 {
				return errors.New("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
			}
			ps = append(ps, p)
		}
		sc.LatencyPercentiles = ps
	default:
		return errors.New("unknown setting " + name)
	}
	return nil
}

// Get is one setting as CONFIG GET gives it.
func (sc *StatsConfig) Get(name string) string { return sc.values()[name] }

// values are the settings as CONFIG GET gives them.
func (sc *StatsConfig) values() map[string]string {
	ps := make([]string, len(sc.LatencyPercentiles))
	for i, p := range sc.LatencyPercentiles {
		ps[i] = trimDouble(p)
	}
	return map[string]string{
		"slowlog-log-slower-than":           strconv.FormatInt(sc.SlowlogLogSlowerThan, 10),
		"slowlog-max-len":                   strconv.FormatInt(sc.SlowlogMaxLen, 10),
		"latency-monitor-threshold":         strconv.FormatInt(sc.LatencyMonitorThreshold, 10),
		"latency-tracking":                  map[bool]string{true: "yes", false: "no"}[sc.LatencyTracking],
		"latency-tracking-info-percentiles": strings.Join(ps, " "),
	}
}

// configInt reads an integer setting as Redis's string2ll does (no sign
// but '-', no leading zeros, no spaces) and bounds it, with Redis's texts.
func configInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	digits := strings.TrimPrefix(v, "-")
	if err != nil || v == "" || v[0] == '+' || (len(digits) > 1 && digits[0] == '0') || v == "-0" {
		return 0, errors.New("argument couldn't be parsed into an integer")
	}
	if n < lo || n > hi {
		return 0, errors.New("argument must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10) + " inclusive")
	}
	return n, nil
}

// trimDouble formats p as Redis's "%f" with trailing zeros (and a bare
// point) removed: 50, 99, 99.9.
func trimDouble(p float64) string {
	s := strconv.FormatFloat(p, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// The latency histogram: log-linear, 16 buckets per power of two, over
// units of 1/1024 µs, so that every power of two of microseconds (the
// Prometheus buckets, LATENCY HISTOGRAM's) is a bucket boundary and each
// bucket is within 6.25% of its values.
const (
	histSub     = 16
	histBuckets = 544 // up to 2^36 units, about 67 s; longer is counted there
)

type latencyHist struct{ b [histBuckets]atomic.Int64 }

// histIndex is the bucket of a duration in ns.
func histIndex(ns int64) int {
	if ns <= 0 {
		return 0
	}
	x := uint64(ns) * 1024 / 1000
	if x < 2*histSub {
		return int(x)
	}
	shift := bits.Len64(x) - 5 // x>>shift is in [16, 32)
	return min(shift*histSub+int(x>>shift), histBuckets-1)
}

// histUpperUsec is bucket i's upper bound in µs.
func histUpperUsec(i int) float64 {
	if i < 2*histSub {
		return float64(i+1) / 1024
	}
	shift := i/histSub - 1
	m := uint64(i%histSub + histSub)
	return float64((m+1)<<shift) / 1024
}

// percentile is the upper bound (µs) of the bucket holding percentile p
// of the recorded values, as hdr_value_at_percentile reports one.
func (h *latencyHist) percentile(counts []int64, total int64, p float64) float64 {
	want := int64(math.Ceil(p / 100 * float64(total)))
	want = max(want, 1)
	var seen int64
	for i, n := range counts {
		if seen += n; seen >= want {
			return histUpperUsec(i)
		}
	}
	return histUpperUsec(len(counts) - 1)
}

// snapshot copies the counts, and their total.
func (h *latencyHist) snapshot() ([]int64, int64) {
	counts := make([]int64, histBuckets)
	var total int64
	for i := range h.b {
		counts[i] = h.b[i].Load()
		total += counts[i]
	}
	return counts, total
}

// cmdCounters are one command's (or subcommand's) statistics, padded to a
// cache line of its own: connections running different commands do not
// contend.
type cmdCounters struct {
	calls, ns, rejected, failed atomic.Int64
	hist                        atomic.Pointer[latencyHist]
	_                           [24]byte
}

// maxErrorPrefixes bounds errorstats: past it, new error codes are counted
// in total_error_replies only (scripts can make up any number of them).
const maxErrorPrefixes = 128

// cmdStats is the server's statistics and their settings.
type cmdStats struct {
	cmds []cmdCounters // by command id

	errMu      sync.Mutex
	errs       map[string]int64
	errReplies atomic.Int64

	slowSlower  atomic.Int64 // slowlog-log-slower-than, µs
	slowMaxLen  atomic.Int64
	latThresh   atomic.Int64 // latency-monitor-threshold, ms
	tracking    atomic.Bool
	percentiles atomic.Pointer[[]float64]

	// cfgMu serialises CONFIG SET of these settings (each is read alone).
	cfgMu sync.Mutex

	slowlog slowlog
	latency latencyMonitor
}

func newCmdStats(cfg *StatsConfig) *cmdStats {
	st := &cmdStats{cmds: make([]cmdCounters, len(aclCommands)), errs: map[string]int64{}}
	c := DefaultStatsConfig()
	if cfg != nil {
		c = *cfg
	}
	st.apply(&c)
	return st
}

func (st *cmdStats) apply(c *StatsConfig) {
	st.slowSlower.Store(c.SlowlogLogSlowerThan)
	st.slowMaxLen.Store(c.SlowlogMaxLen)
	st.latThresh.Store(c.LatencyMonitorThreshold)
	st.tracking.Store(c.LatencyTracking)
	ps := append([]float64(nil), c.LatencyPercentiles...)
	st.percentiles.Store(&ps)
	st.slowlog.trim(int(min(c.SlowlogMaxLen, math.MaxInt32)))
}

func (st *cmdStats) config() StatsConfig {
	return StatsConfig{SlowlogLogSlowerThan: st.slowSlower.Load(), SlowlogMaxLen: st.slowMaxLen.Load(),
		LatencyMonitorThreshold: st.latThresh.Load(), LatencyTracking: st.tracking.Load(),
		LatencyPercentiles: *st.percentiles.Load()}
}

// set serves CONFIG SET of one of statsSettings.
func (st *cmdStats) set(name, value string) error {
	st.cfgMu.Lock()
	defer st.cfgMu.Unlock()
	c := st.config()
	if err := c.Set(name, value); err != nil {
		return err
	}
	st.apply(&c)
	return nil
}

// record adds n calls of command id taking ns each.
func (st *cmdStats) record(id int, n, ns int64) {
	cc := &st.cmds[id]
	cc.calls.Add(n)
	cc.ns.Add(n * ns)
	if st.tracking.Load() {
		h := cc.hist.Load()
		if h == nil {
			cc.hist.CompareAndSwap(nil, new(latencyHist))
			h = cc.hist.Load()
		}
		h.b[histIndex(ns)].Add(n)
	}
}

// countError counts one error reply by its code, the text's first word.
func (st *cmdStats) countError(text string) {
	st.errReplies.Add(1)
	code := "ERR"
	if i := strings.IndexByte(text[:min(len(text), 32)], ' '); i > 0 {
		code = text[:i]
	}
	st.errMu.Lock()
	if n, ok := st.errs[code]; ok || len(st.errs) < maxErrorPrefixes {
		st.errs[code] = n + 1
	}
	st.errMu.Unlock()
}

// reset is CONFIG RESETSTAT's part: commandstats, errorstats and
// latencystats (not the slow log or the latency monitor, as Redis).
func (st *cmdStats) reset() {
	for i := range st.cmds {
		cc := &st.cmds[i]
		cc.calls.Store(0)
		cc.ns.Store(0)
		cc.rejected.Store(0)
		cc.failed.Store(0)
		cc.hist.Store(nil)
	}
	st.errMu.Lock()
	st.errs = map[string]int64{}
	st.errMu.Unlock()
	st.errReplies.Store(0)
}

// errorCounts are the error codes and their counts, in code order.
func (st *cmdStats) errorCounts() ([]string, map[string]int64) {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	counts := make(map[string]int64, len(st.errs))
	codes := make([]string, 0, len(st.errs))
	for k, v := range st.errs {
		codes = append(codes, k)
		counts[k] = v
	}
	sort.Strings(codes)
	return codes, counts
}

// INFO sections.

func (st *cmdStats) commandstatsLines() []string {
	var lines []string
	for _, cmd := range aclCommands {
		cc := &st.cmds[cmd.id]
		calls, ns, rej, failed := cc.calls.Load(), cc.ns.Load(), cc.rejected.Load(), cc.failed.Load()
		if calls == 0 && rej == 0 && failed == 0 {
			continue
		}
		usec := ns / 1000
		perCall := 0.0
		if calls > 0 {
			perCall = float64(float32(usec) / float32(calls)) // Redis divides in float
		}
		lines = append(lines, "cmdstat_"+cmd.fullname+":calls="+strconv.FormatInt(calls, 10)+
			",usec="+strconv.FormatInt(usec, 10)+",usec_per_call="+strconv.FormatFloat(perCall, 'f', 2, 64)+
			",rejected_calls="+strconv.FormatInt(rej, 10)+",failed_calls="+strconv.FormatInt(failed, 10))
	}
	return lines
}

func (st *cmdStats) errorstatsLines() []string {
	codes, counts := st.errorCounts()
	lines := make([]string, 0, len(codes))
	for _, code := range codes {
		lines = append(lines, "errorstat_"+safeInfoString(code)+":count="+strconv.FormatInt(counts[code], 10))
	}
	return lines
}

func (st *cmdStats) latencystatsLines() []string {
	if !st.tracking.Load() {
		return nil
	}
	ps := *st.percentiles.Load()
	var lines []string
	for _, cmd := range aclCommands {
		h := st.cmds[cmd.id].hist.Load()
		if h == nil {
			continue
		}
		counts, total := h.snapshot()
		var b strings.Builder
		b.WriteString("latency_percentiles_usec_" + cmd.fullname + ":")
		for i, p := range ps {
			if i > 0 {
				b.WriteByte(',')
			}
			v := 0.0
			if total > 0 {
				v = h.percentile(counts, total, p)
			}
			b.WriteString("p" + trimDouble(p) + "=" + strconv.FormatFloat(v, 'f', 3, 64))
		}
		lines = append(lines, b.String())
	}
	return lines
}

// safeInfoString replaces the characters INFO cannot carry, as Redis.
func safeInfoString(s string) string {
	return strings.NewReplacer("#", "_", ":", "_", "\n", "_", "\r", "_").Replace(s)
}

// The connection's side.

// callAcct is a connection's accounting of the batch it is executing: how
// many of its commands each command id ran (touched lists the ids), and
// how many error replies the connection wrote, so that a command whose
// reply held one is counted failed.
type callAcct struct {
	batchN  []int32
	failedN []int32
	touched []int32
	errors  int
}

// batchCall counts one engine command of the batch; failed: its reply
// held an error.
func (c *client) batchCall(id int32, failed bool) {
	a := &c.acct
	if a.batchN == nil {
		a.batchN = make([]int32, len(aclCommands))
		a.failedN = make([]int32, len(aclCommands))
	}
	if a.batchN[id] == 0 {
		a.touched = append(a.touched, id)
	}
	a.batchN[id]++
	if failed {
		a.failedN[id]++
	}
}

// batchDone folds the batch's counts into the server's, each command
// charged took's equal share, and gives the slow log and the latency
// monitor the commands as slow as their threshold.
func (c *client) batchDone(took time.Duration, n int) {
	st := c.s.stats
	a := &c.acct
	share := int64(took) / int64(max(n, 1))
	for _, id := range a.touched {
		st.record(int(id), int64(a.batchN[id]), share)
		if f := a.failedN[id]; f > 0 {
			st.cmds[id].failed.Add(int64(f))
			a.failedN[id] = 0
		}
		a.batchN[id] = 0
	}
	a.touched = a.touched[:0]
	if slower := st.slowSlower.Load(); slower >= 0 && share/1000 >= slower {
		for _, sl := range c.slots {
			if sl.idx >= 0 {
				c.slowlogAdd(aclCommands[sl.id], sl.args, share)
			}
		}
	}
	if th := st.latThresh.Load(); th > 0 && share/1e6 >= th {
		for _, sl := range c.slots {
			if sl.idx >= 0 {
				st.latency.commandSample(aclCommands[sl.id], share/1e6)
			}
		}
	}
}

// ranAlone accounts a command timed alone (a server-level command, or one
// whose arguments were refused at parse time: took 0).
func (c *client) ranAlone(row *command, args [][]byte, took time.Duration, failed bool) {
	st := c.s.stats
	st.record(row.id, 1, int64(took))
	if failed {
		st.cmds[row.id].failed.Add(1)
	}
	if slower := st.slowSlower.Load(); slower >= 0 && int64(took)/1000 >= slower && row.name != "exec" {
		c.slowlogAdd(row, args, int64(took))
	}
	if th := st.latThresh.Load(); th > 0 && int64(took)/1e6 >= th {
		st.latency.commandSample(row, int64(took)/1e6)
	}
}

// ranServerCommand accounts a server-level command that took took, having
// started with errs error replies written and its reply at out[mark:]: it
// failed if it wrote an error. EXEC fails only with an error of its own
// (EXECABORT); as Redis counts them, the commands it ran are calls of
// their own, each charged an equal share of its time, and their errors
// are theirs.
func (c *client) ranServerCommand(row *command, args [][]byte, took time.Duration, errs, mark int) {
	if row.name != "exec" {
		c.ranAlone(row, args, took, c.acct.errors > errs)
		return
	}
	// An array: it ran the queue (a nil one, *-1, is a WATCH that failed).
	ran := len(c.out) > mark+1 && c.out[mark] == '*' && c.out[mark+1] != '-'
	c.ranAlone(row, args, took, len(c.out) > mark && c.out[mark] == '-')
	if !ran {
		return
	}
	tx := &c.txState
	var replies []engine.Reply
	if len(c.ownBatch.Replies) > 0 {
		replies = c.ownBatch.Replies[0].Items
	}
	share := took / time.Duration(max(len(tx.queued), 1))
	for i, q := range tx.queued {
		at := tx.at[i]
		var perm *txPermError
		if errors.As(at.err, &perm) {
			continue // refused at EXEC by a changed ACL: not run, as Redis
		}
		failed := at.err != nil || at.engine >= 0 && at.engine < len(replies) && replies[at.engine].Kind == engine.ReplyError
		c.ranAlone(q.cmd.subcommand(q.args), q.args, share, failed)
	}
}

// rejectCall refuses a command before it runs, counted against its row
// (nil: the command is unknown, counted nowhere) as Redis counts
// rejected_calls.
func (c *client) rejectCall(row *command, err error) {
	if row != nil {
		c.s.stats.cmds[row.id].rejected.Add(1)
		if row.name == "exec" {
			c.abortExec(err)
			return
		}
	}
	c.reject(err)
}

// Prometheus: the command metrics, read from the counters when scraped.

type cmdMetrics struct {
	calls, failures, duration, errors, slowlogLen *prometheus.Desc
}

func newCmdMetrics() *cmdMetrics {
	return &cmdMetrics{
		calls:      prometheus.NewDesc("sluice_commands_total", "Commands executed, by command (subcommands as config|get), as INFO commandstats calls.", []string{"command"}, nil),
		failures:   prometheus.NewDesc("sluice_command_failures_total", "Commands refused before running (kind rejected) or answered with an error (kind failed).", []string{"command", "kind"}, nil),
		duration:   prometheus.NewDesc("sluice_command_duration_seconds", "Command execution time (a pipelined command: its batch's share), while latency-tracking is yes.", []string{"command"}, nil),
		errors:     prometheus.NewDesc("sluice_errors_total", "Error replies, by error code (the first word: ERR, WRONGTYPE...), as INFO errorstats.", []string{"error"}, nil),
		slowlogLen: prometheus.NewDesc("sluice_slowlog_length", "Entries in the slow log.", nil, nil),
	}
}

func (m *cmdMetrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.calls, m.failures, m.duration, m.errors, m.slowlogLen} {
		ch <- d
	}
}

// promBuckets are the histogram's upper bounds: 2^k µs, 1 µs to about 1 s.
const promBuckets = 21

func (m *cmdMetrics) collect(st *cmdStats, ch chan<- prometheus.Metric) {
	for _, cmd := range aclCommands {
		cc := &st.cmds[cmd.id]
		calls, rej, failed := cc.calls.Load(), cc.rejected.Load(), cc.failed.Load()
		if calls == 0 && rej == 0 && failed == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.calls, prometheus.CounterValue, float64(calls), cmd.fullname)
		ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(rej), cmd.fullname, "rejected")
		ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(failed), cmd.fullname, "failed")
		h := cc.hist.Load()
		if h == nil {
			continue
		}
		counts, total := h.snapshot()
		buckets := make(map[float64]uint64, promBuckets)
		var cum int64
		next := 0
		for k := range promBuckets {
			// Values under 2^k µs are in the buckets before (k+7)*histSub.
			for ; next < (k+7)*histSub; next++ {
				cum += counts[next]
			}
			buckets[float64(int64(1)<<k)/1e6] = uint64(cum)
		}
		ch <- prometheus.MustNewConstHistogram(m.duration, uint64(total), float64(cc.ns.Load())/1e9, buckets, cmd.fullname)
	}
	codes, counts := st.errorCounts()
	for _, code := range codes {
		ch <- prometheus.MustNewConstMetric(m.errors, prometheus.CounterValue, float64(counts[code]), code)
	}
	ch <- prometheus.MustNewConstMetric(m.slowlogLen, prometheus.GaugeValue, float64(st.slowlog.len()))
}
