package bench

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tidwall/redcon"
)

// Latencies are recorded in nanoseconds from 1 ns to one hour, to three
// significant digits.
const (
	histMin    = 1
	histMax    = int64(time.Hour)
	histDigits = 3
)

// Result is what one run measured. Counts are of replies: Allowed +
// Limited + Errors == Requests, and Unanswered counts requests that were
// sent but got no reply because their connection failed or the run was
// cancelled.
type Result struct {
	Target   string  `json:"target"`
	Kind     string  `json:"kind"` // sluice, redis or any
	Addr     string  `json:"addr"`
	Mode     string  `json:"mode"`
	Family   string  `json:"family"`
	Conns    int     `json:"conns"`
	Pipeline int     `json:"pipeline"`
	Rate     float64 `json:"rate,omitempty"` // open-loop target, requests/s

	Requests   int64 `json:"requests"`
	Allowed    int64 `json:"allowed"`
	Limited    int64 `json:"limited"`
	Errors     int64 `json:"errors"`
	Unanswered int64 `json:"unanswered"`

	Elapsed    time.Duration `json:"elapsed_ns"`
	Throughput float64       `json:"per_second"` // replies per second of Elapsed

	Latency Latency `json:"latency"`

	// ServerCPU is the CPU time (user + system, all threads) the server
	// process used while the load ran; zero when Target.Pid was not set or
	// could not be read. ServerCPUPerOp is that per reply, in
	// microseconds, and ServerCPUUtil is ServerCPU / Elapsed (1 = one core
	// busy throughout). On a machine where the load generator cannot
	// saturate the server, CPU per request compares servers where
	// throughput cannot.
	ServerCPU      time.Duration `json:"server_cpu_ns,omitempty"`
	ServerCPUPerOp float64       `json:"server_cpu_us_per_op,omitempty"`
	ServerCPUUtil  float64       `json:"server_cpu_util,omitempty"`
	// CPUError says why server CPU was not measured although Pid was set.
	CPUError string `json:"cpu_error,omitempty"`
	// Hist holds every per-request latency in nanoseconds; nil when the
	// run did not start.
	Hist *hdrhistogram.Histogram `json:"-"`

	// ScriptFallbacks counts, for library modes, the NOSCRIPT replies that
	// were answered with the library's own fallback (EVAL, or SCRIPT LOAD
	// then EVALSHA); the retried call's reply is what the request counts.
	ScriptFallbacks int64 `json:"script_fallbacks,omitempty"`
	// FirstError is the first error reply (or unexpected reply) seen.
	FirstError string `json:"first_error,omitempty"`
	// Failure is the error that ended the run early, if any.
	Failure string `json:"failure,omitempty"`
}

// Latency summarises a run's latency histogram.
type Latency struct {
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	q := h.ValueAtPercentilesSlice([]float64{50, 90, 99, 99.9})
	return Latency{
		P50:  time.Duration(q[0]),
		P90:  time.Duration(q[1]),
		P99:  time.Duration(q[2]),
		P999: time.Duration(q[3]),
		Max:  time.Duration(h.Max()),
		Mean: time.Duration(h.Mean()),
	}
}

// OK reports whether the run completed with no error replies.
func (r *Result) OK() bool { return r.Failure == "" && r.Errors == 0 && r.Unanswered == 0 }

// Run loads one target with one mode and reports what it measured. It
// returns an error when the run could not start or ended early (target
// unreachable, connection lost, timeout, protocol error, ctx cancelled); the
// Result then still holds whatever was measured. Error replies do not make
// Run fail: they are counted in Result.Errors (see Result.OK).
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, m, err := cfg.prepare()
	res := Result{
		Target:   cfg.Target.label(),
		Kind:     cfg.Target.Kind.String(),
		Addr:     cfg.Target.Addr,
		Mode:     cfg.Mode,
		Conns:    cfg.Conns,
		Pipeline: cfg.Pipeline,
		Rate:     cfg.Rate,
	}
	if m != nil {
		res.Family = m.family
	}
	fail := func(err error) (Result, error) {
		res.Failure = err.Error()
		return res, err
	}
	if err != nil {
		return fail(err)
	}
	addr, err := CheckAddr(cfg.Target.Addr, cfg.AllowRemote)
	if err != nil {
		return fail(err)
	}

	dialer := net.Dialer{Timeout: cfg.Timeout}
	conns := make([]net.Conn, 0, cfg.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func() error {
		c, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("%s %s unreachable: %w", res.Target, cfg.Target.Addr, err)
		}
		if c, err = secure(c, cfg.Target, cfg.Timeout); err != nil {
			return fmt.Errorf("%s %s: %w", res.Target, cfg.Target.Addr, err)
		}
		conns = append(conns, c)
		return nil
	}
	if err := dial(); err != nil {
		return fail(err)
	}
	var sha string
	if m.script != "" {
		if sha, err = loadScript(conns[0], scriptLoadUpper, m.command, m.script, cfg.Timeout); err != nil {
			return fail(fmt.Errorf("%s %s: %w", res.Target, cfg.Target.Addr, err))
		}
	}
	if m.lib != nil {
		// What the library does when it starts: nothing, or SCRIPT LOAD.
		for _, body := range m.lib.load {
			if _, err := loadScript(conns[0], m.lib.scriptLoad, m.name, body, cfg.Timeout); err != nil {
				return fail(fmt.Errorf("%s %s: %w", res.Target, cfg.Target.Addr, err))
			}
		}
	}
	for len(conns) < cfg.Conns {
		if err := dial(); err != nil {
			return fail(err)
		}
	}

	req := m.request(cfg.Limit, sha)
	var pat *pattern
	seq := &patternSeq{}
	if m.pattern != nil {
		pat = m.pattern(cfg)
		if err := pat.preload(conns[0], cfg); err != nil {
			return fail(fmt.Errorf("%s %s: %w", res.Target, cfg.Target.Addr, err))
		}
	}
	share := cfg.Split.shareOf(cfg.KeyPrefix, cfg.keySuffix, cfg.Keys)
	if cfg.Split.Of > 1 && len(share) == 0 && cfg.Hot < 1 {
		return fail(fmt.Errorf("none of the %d keys falls in share %d of %d", cfg.Keys, cfg.Split.Index, cfg.Split.Of))
	}
	st := &runState{
		done:     ctx.Done(),
		timeout:  cfg.Timeout,
		counted:  cfg.Requests > 0,
		decision: m.decision,
	}
	st.remaining.Store(cfg.Requests)
	if cfg.Rate > 0 {
		// Each connection sends Pipeline requests every interval.
		st.interval = time.Duration(float64(time.Second) * float64(cfg.Pipeline) * float64(cfg.Conns) / cfg.Rate)
		if st.interval <= 0 {
			st.interval = 1
		}
	}
	workers := make([]*worker, cfg.Conns)
	for i, c := range conns {
		workers[i] = newWorker(i, c, cfg, req)
		workers[i].share = share
		workers[i].pat, workers[i].seq = pat, seq
		if m.lib != nil {
			// Arguments were checked by prepare.
			if workers[i].lib, err = newLibConn(m.lib, cfg.Limit); err != nil {
				return fail(err)
			}
		}
		if st.interval > 0 {
			// Stagger the schedules so connections do not all fire together.
			workers[i].offset = st.interval * time.Duration(i) / time.Duration(cfg.Conns)
		}
	}

	// Closing the connections is what unblocks a worker waiting on a reply
	// when the run is cancelled.
	stopClose := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.Close()
		}
	})
	defer stopClose()

	// Server CPU is read as close around the load as possible: after the
	// connections and the script are set up, after the last reply.
	var cpuBefore time.Duration
	pid := cfg.Target.Pid
	if pid > 0 {
		if cpuBefore, err = processCPU(pid); err != nil {
			res.CPUError = err.Error()
			pid = 0
		}
	}
	st.start = time.Now()
	if cfg.Duration > 0 {
		st.deadline = st.start.Add(cfg.Duration)
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(st)
		}()
	}
	var progressDone chan struct{}
	if cfg.Progress != nil {
		progressDone = make(chan struct{})
		stopProgress := make(chan struct{})
		go func() {
			defer close(progressDone)
			showProgress(cfg, res.Target, workers, st.start, stopProgress)
		}()
		defer func() {
			close(stopProgress)
			<-progressDone
		}()
	}
	wg.Wait()
	if pid > 0 {
		if after, err := processCPU(pid); err != nil {
			res.CPUError = err.Error()
		} else {
			res.ServerCPU = after - cpuBefore
		}
	}

	end := st.start
	res.Hist = hdrhistogram.New(histMin, histMax, histDigits)
	var firstFailure error
	failed := 0
	for _, w := range workers {
		if w.end.After(end) {
			end = w.end
		}
		res.Hist.Merge(w.hist)
		res.Allowed += w.allowed
		res.Limited += w.limited
		res.Errors += w.errors
		res.Unanswered += w.unanswered
		if w.lib != nil {
			res.ScriptFallbacks += w.lib.fallbacks
		}
		if res.FirstError == "" {
			res.FirstError = w.firstErr
		}
		if w.err != nil {
			failed++
			if firstFailure == nil {
				firstFailure = w.err
			}
		}
	}
	res.Requests = res.Allowed + res.Limited + res.Errors
	res.Elapsed = end.Sub(st.start)
	if res.Elapsed > 0 {
		res.Throughput = float64(res.Requests) / res.Elapsed.Seconds()
	}
	res.Latency = summarize(res.Hist)
	if res.ServerCPU > 0 {
		if res.Requests > 0 {
			res.ServerCPUPerOp = float64(res.ServerCPU) / float64(time.Microsecond) / float64(res.Requests)
		}
		if res.Elapsed > 0 {
			res.ServerCPUUtil = float64(res.ServerCPU) / float64(res.Elapsed)
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if firstFailure != nil {
		return fail(fmt.Errorf("%s %s: %d of %d connections failed: %w", res.Target, cfg.Target.Addr, failed, cfg.Conns, firstFailure))
	}
	return res, nil
}

// loadScript loads m's Lua source with SCRIPT LOAD and checks the SHA1 the
// server reports against the one computed here.
// secure does a connection's TLS handshake and AUTH, as the target asks.
func secure(c net.Conn, t Target, timeout time.Duration) (net.Conn, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if t.TLS != nil {
		tc := tls.Client(c, t.TLS)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	if t.Password != "" {
		args := []string{"AUTH", t.Password}
		if t.User != "" {
			args = []string{"AUTH", t.User, t.Password}
		}
		rd := newReplyReader(256)
		resp, err := roundTrip(c, &rd, args...)
		if err == nil && resp.Type == redcon.Error {
			err = fmt.Errorf("AUTH: %s", resp.Data)
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// loadScript sends SCRIPT LOAD, spelled as verb, and checks the SHA1 it
// answers.
func loadScript(c net.Conn, verb [2]string, name, script string, timeout time.Duration) (string, error) {
	sum := sha1.Sum([]byte(script))
	want := hex.EncodeToString(sum[:])
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	rd := newReplyReader(4096)
	resp, err := roundTrip(c, &rd, verb[0], verb[1], script)
	if err != nil {
		return "", fmt.Errorf("SCRIPT LOAD %s: %w", name, err)
	}
	if resp.Type == redcon.Error {
		return "", fmt.Errorf("SCRIPT LOAD %s: %s", name, resp.Data)
	}
	if got := string(resp.Data); got != want {
		return "", fmt.Errorf("SCRIPT LOAD %s: server answered %q, want SHA1 %s", name, resp.Raw, want)
	}
	return want, nil
}

// runState is shared by the workers of one run; apart from remaining it is
// read-only once they start.
type runState struct {
	done     <-chan struct{}
	start    time.Time
	deadline time.Time     // zero: no time bound
	interval time.Duration // open loop: per-connection batch period; 0: closed loop
	timeout  time.Duration
	decision bool

	counted   bool         // the run has a request budget
	remaining atomic.Int64 // requests not yet claimed
}

// claim takes up to p requests from the budget and reports how many.
func (s *runState) claim(p int) int {
	if !s.counted {
		return p
	}
	left := s.remaining.Add(-int64(p))
	if left >= 0 {
		return p
	}
	if n := left + int64(p); n > 0 {
		return int(n)
	}
	return 0
}

// worker drives one connection. Only its own goroutine touches it while the
// run lasts, except progress, which is atomic.
type worker struct {
	conn     net.Conn
	req      request
	pat      *pattern // set: each request is this operation
	seq      *patternSeq
	lib      *libConn // set: each request is a library's script call
	pipeline int
	rng      *rand.Rand
	keys     uint64
	hot      float64
	share    []uint64 // with a key split: the key numbers to draw from

	key       []byte // prefix, then the key's number and suffix
	prefixLen int
	suffix    string // what a library puts after the caller's key
	hotKey    []byte
	wbuf      []byte
	rd        replyReader
	hist      *hdrhistogram.Histogram
	deadline  time.Time // the connection's current I/O deadline
	offset    time.Duration
	timer     *time.Timer

	allowed, limited, errors, unanswered int64
	firstErr                             string
	err                                  error
	end                                  time.Time

	// progress is read by the progress display; padded so that workers
	// allocated side by side do not share its cache line.
	_        [64]byte
	progress atomic.Int64
	_        [56]byte
}

func newWorker(i int, c net.Conn, cfg Config, req request) *worker {
	w := &worker{
		conn:      c,
		req:       req,
		pipeline:  cfg.Pipeline,
		rng:       rand.New(rand.NewPCG(cfg.Seed, uint64(i))),
		keys:      uint64(cfg.Keys),
		hot:       cfg.Hot,
		key:       make([]byte, len(cfg.KeyPrefix), len(cfg.KeyPrefix)+24+len(cfg.keySuffix)),
		prefixLen: len(cfg.KeyPrefix),
		suffix:    cfg.keySuffix,
		hotKey:    []byte(cfg.KeyPrefix + "hot" + cfg.keySuffix),
		rd:        newReplyReader(64 << 10),
		hist:      hdrhistogram.New(histMin, histMax, histDigits),
	}
	copy(w.key, cfg.KeyPrefix)
	// Room for a batch of typical requests, so steady state never grows it.
	w.wbuf = make([]byte, 0, cfg.Pipeline*(len(req.head)+len(req.tail)+len(w.hotKey)+32))
	return w
}

// nextKey picks the next request's key; the slice is valid until the next
// call.
func (w *worker) nextKey() []byte {
	if w.hot > 0 && w.rng.Float64() < w.hot {
		return w.hotKey
	}
	n := w.rng.Uint64N(w.keys)
	if w.share != nil {
		n = w.share[w.rng.Uint64N(uint64(len(w.share)))]
	}
	w.key = strconv.AppendUint(w.key[:w.prefixLen], n, 10)
	w.key = append(w.key, w.suffix...)
	return w.key
}

func (w *worker) run(st *runState) {
	defer func() { w.end = time.Now() }()
	if st.interval > 0 {
		w.timer = time.NewTimer(time.Hour)
		w.timer.Stop()
	}
	for batch := int64(0); ; batch++ {
		select {
		case <-st.done:
			return
		default:
		}
		now := time.Now()
		sent := now
		if st.interval > 0 {
			// Open loop: the batch is due at its scheduled time, and its
			// latency counts from then even if this connection is late.
			sent = st.start.Add(w.offset + time.Duration(batch)*st.interval)
			// A connection that has fallen behind its schedule stops at the
			// deadline too: the run stays bounded by Duration.
			if !st.deadline.IsZero() && (!sent.Before(st.deadline) || !now.Before(st.deadline)) {
				return
			}
			if d := sent.Sub(now); d > 0 {
				w.timer.Reset(d)
				select {
				case <-w.timer.C:
				case <-st.done:
					return
				}
				now = time.Now()
			}
		} else if !st.deadline.IsZero() && !now.Before(st.deadline) {
			return
		}
		n := st.claim(w.pipeline)
		if n == 0 {
			return
		}
		if err := w.batch(st, n, now, sent); err != nil {
			select {
			case <-st.done:
				// Cancelled: the connection was closed under us.
			default:
				w.err = err
			}
			return
		}
	}
}

// batch writes n requests in one write and reads their n replies. sent is
// when the batch counts as sent (the write time, or its scheduled time in
// open loop); now is the current time.
func (w *worker) batch(st *runState, n int, now, sent time.Time) error {
	if w.lib != nil {
		return w.libBatch(st, n, now, sent)
	}
	w.wbuf = w.wbuf[:0]
	perOp := 1
	if w.pat != nil {
		perOp = w.pat.replies()
		for range n {
			w.wbuf = w.pat.appendOp(w.wbuf, w.nextKey(), w.seq.n.Add(1))
		}
	} else {
		for range n {
			w.wbuf = w.req.appendTo(w.wbuf, w.nextKey())
		}
	}
	if err := w.refreshDeadline(st, now); err != nil {
		return err
	}
	if st.interval == 0 {
		sent = time.Now()
	}
	if _, err := w.conn.Write(w.wbuf); err != nil {
		w.unanswered += int64(n)
		return fmt.Errorf("write: %w", err)
	}
	arrived := sent
	// An operation of several commands counts once, when its last reply
	// arrives, as an error if any of its replies was one.
	part, opBad := 0, redcon.RESP{}
	for got := 0; got < n; {
		resp, ok, err := w.rd.next()
		if err != nil {
			w.unanswered += int64(n - got)
			return err
		}
		if !ok {
			if err := w.rd.fill(w.conn); err != nil {
				w.unanswered += int64(n - got)
				return fmt.Errorf("read: %w", err)
			}
			// Every reply parsed from this read arrived at this instant.
			arrived = time.Now()
			continue
		}
		if perOp > 1 {
			if opBad.Type == 0 && (resp.Type == redcon.Error || (part == perOp-1 && resp.Type == redcon.Array && resp.Count < 0)) {
				opBad = resp
			}
			if part++; part < perOp {
				continue
			}
			if opBad.Type != 0 {
				w.countBad(opBad)
			} else {
				w.count(resp, st.decision)
			}
			part, opBad = 0, redcon.RESP{}
		} else {
			w.count(resp, st.decision)
		}
		w.record(arrived.Sub(sent))
		got++
	}
	w.progress.Add(int64(n))
	if w.rd.buffered() > 0 {
		return fmt.Errorf("%w: %d bytes arrived beyond the replies expected", errProtocol, w.rd.buffered())
	}
	return nil
}

// refreshDeadline pushes the connection's I/O deadline out. Refreshing it
// every batch would cost a timer update per batch; once it is half used up
// is often enough.
func (w *worker) refreshDeadline(st *runState, now time.Time) error {
	if w.deadline.Sub(now) < st.timeout/2 {
		w.deadline = now.Add(st.timeout)
		return w.conn.SetDeadline(w.deadline)
	}
	return nil
}

// record adds one request's latency to the histogram.
func (w *worker) record(d time.Duration) {
	lat := int64(d)
	if lat < histMin {
		lat = histMin
	} else if lat > histMax {
		lat = histMax
	}
	// In range by construction, so RecordValue cannot fail (and its error
	// path would allocate).
	_ = w.hist.RecordValue(lat)
}

// countBad counts an operation whose reply resp was an error (or a nil
// EXEC).
func (w *worker) countBad(resp redcon.RESP) {
	w.errors++
	if w.firstErr == "" {
		w.firstErr = describeBad(resp)
	}
}

func (w *worker) count(resp redcon.RESP, decision bool) {
	switch classify(resp, decision) {
	case outAllowed:
		w.allowed++
	case outLimited:
		w.limited++
	default:
		w.errors++
		if w.firstErr == "" {
			w.firstErr = describeBad(resp)
		}
	}
}
