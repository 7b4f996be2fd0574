package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// TestFailoverWithUnmodifiedClients kills (SIGKILL) the Raft leader of a
// group of three real sluice-server processes under a continuous load from
// each cluster client users run unmodified, and reports how long each took
// to get its first decision from the new leader, which errors it surfaced
// and which operations it applied twice: ioredis's Cluster and node-redis's
// createCluster (internal/clients/node/failover.mjs), redis-py's
// RedisCluster (internal/clients/python/failover.py) and redis-cli -c, each
// at its defaults and with the settings that shorten the outage.
//
// Every operation INCRs a key of its own, so the survivors' state tells how
// often each was applied: an acknowledged one never 0 times (that would be
// a decision answered without commit, by a follower or a deposed leader),
// and more than once only for a client that sends a command again after
// its connection dropped (ioredis, redis-py), which is reported, not
// failed.
//
// Each client that can must answer again within 30 s of the kill; a
// node-redis caught by a topology refresh while no leader was known (Sluice's
// CLUSTER SLOTS is empty then; docs/cluster.md) is logged, not failed.
//
// By default every client runs once, all against one group (about 15 s).
// SLUICE_FAILOVER_ROUNDS=N runs each client alone against a fresh group N
// times and logs the medians and maxima docs/cluster.md gives;
// SLUICE_FAILOVER_CLIENTS=regexp picks clients by "name/setting". No time
// is asserted: the machine is shared.
func TestFailoverWithUnmodifiedClients(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and several clients")
	}
	rounds := 0
	if s := os.Getenv("SLUICE_FAILOVER_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_FAILOVER_ROUNDS=%q: want a positive count", s)
		}
		rounds = n
	}
	specs := failoverSpecs(t)
	if pat := os.Getenv("SLUICE_FAILOVER_CLIENTS"); pat != "" {
		re := regexp.MustCompile(pat)
		var keep []foSpec
		for _, s := range specs {
			if re.MatchString(s.name()) {
				keep = append(keep, s)
			}
		}
		specs = keep
	}
	if len(specs) == 0 {
		t.Skip("no client to run")
	}
	var results []foResult
	if rounds == 0 {
		// Once each, all at once: two workers each keep the machine's two
		// cores for the servers.
		results = runFailoverRound(t, specs, 2, 1)
	} else {
		for r := 1; r <= rounds; r++ {
			for _, s := range specs {
				results = append(results, runFailoverRound(t, []foSpec{s}, 4, r)...)
			}
		}
	}
	for _, r := range results {
		t.Log(r.line())
	}
	if rounds > 0 {
		t.Logf("summary over %d rounds (ms from the kill; each client alone, 4 workers):\n%s", rounds, foSummary(specs, results))
	}
}

// foSpec is one client at one setting.
type foSpec struct {
	client, setting string
	// resends: the client sends a command again after its connection
	// closed, not knowing whether it was applied.
	resends bool
	// mustRecover: it always answers again after the kill, by itself; the
	// others are given 10 s and reported.
	mustRecover bool
	// decide: each operation is CL.THROTTLE key 10 10 3600 1 REQID key,
	// answered with the remaining count, rather than INCR key.
	decide bool
	start  func(t *testing.T, e foEnv) *foDriver
}

func (s foSpec) name() string { return s.client + "/" + s.setting }

// foEnv is what a driver is given: every member's address, a follower's
// (for redis-cli, which has one seed), the key prefix and its workers.
type foEnv struct {
	seeds    []string
	follower string
	prefix   string
	workers  int
}

func failoverSpecs(t *testing.T) []foSpec {
	var specs []foSpec
	if node, ok := nodeClients(t); ok {
		for _, c := range []struct {
			lib, name, setting string
			resends, must      bool
		}{
			{"ioredis", "ioredis Cluster", "default", true, true},
			{"ioredis", "ioredis Cluster", "fast", true, true},
			// Decisions with REQID: its resends are answered from receipts.
			{"ioredis", "ioredis Cluster", "reqid", false, true},
			{"node-redis", "node-redis createCluster", "default", false, true},
			// A topology refresh during the election finds the last
			// leader still named (an empty CLUSTER SLOTS once left it
			// without a node for good: docs/cluster.md).
			{"node-redis", "node-redis createCluster", "refresh-1000", false, true},
			{"node-redis", "node-redis createCluster", "refresh-2000", false, true},
		} {
			c := c
			specs = append(specs, foSpec{client: c.name, setting: c.setting, resends: c.resends, mustRecover: c.must,
				decide: c.setting == "reqid",
				start: func(t *testing.T, e foEnv) *foDriver {
					return startProcessDriver(t, node, "../../internal/clients/node/failover.mjs", c.lib, c.setting,
						strings.Join(e.seeds, ","), strconv.Itoa(e.workers), e.prefix)
				}})
		}
	}
	if py, ok := pythonRedis(t); ok {
		// redis-py 4.3 never answers again once a node died (it cannot
		// rebuild its topology); an application that makes a new
		// RedisCluster on RedisClusterException does.
		for _, c := range []struct {
			setting string
			must    bool
		}{{"default", false}, {"recreate", true}} {
			c := c
			specs = append(specs, foSpec{client: "redis-py RedisCluster", setting: c.setting, resends: true, mustRecover: c.must,
				start: func(t *testing.T, e foEnv) *foDriver {
					return startProcessDriver(t, py, "../../internal/clients/python/failover.py", c.setting,
						strings.Join(e.seeds, ","), strconv.Itoa(e.workers), e.prefix)
				}})
		}
	}
	cli := sluicetest.Require(t, "redis-cli")
	specs = append(specs,
		foSpec{client: "redis-cli -c", setting: "a process per command", resends: true, mustRecover: true,
			start: func(t *testing.T, e foEnv) *foDriver { return startCLILoop(t, cli, e) }},
		// One process keeps its connection and exits when it closes.
		foSpec{client: "redis-cli -c", setting: "-r (one process)", resends: true,
			start: func(t *testing.T, e foEnv) *foDriver { return startCLIRepeat(t, cli, e) }},
	)
	return specs
}

// foEvent is one line a driver prints (internal/clients/node/failover.mjs
// describes them). Times are wall-clock milliseconds since the epoch.
type foEvent struct {
	Ev      string  `json:"ev"`
	Op      int     `json:"op"`
	W       int     `json:"w"`
	T       float64 `json:"t"`
	T0      float64 `json:"t0"`
	T1      float64 `json:"t1"`
	V       int64   `json:"v"`
	Msg     string  `json:"msg"`
	Pending int     `json:"pending"`
}

func nowMs() float64 { return float64(time.Now().UnixMicro()) / 1000 }

// foDriver is a running client: its events so far, and how to stop it.
type foDriver struct {
	mu      sync.Mutex
	events  []foEvent
	ready   bool
	counter bool // every operation INCRs one key (redis-cli -r)
	done    chan struct{}
	stop    func() // stop issuing operations, settle, end (idempotent)
	abort   func() // end now
	stderr  func() string
}

func (d *foDriver) add(e foEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.Ev == "ready" {
		d.ready = true
	}
	d.events = append(d.events, e)
}

func (d *foDriver) snapshot() (ready bool, events []foEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ready, append([]foEvent(nil), d.events...)
}

func (d *foDriver) ended() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// lockedBuffer collects a process's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcessDriver runs a driver that prints JSON lines and stops on a
// "stop" line.
func startProcessDriver(t *testing.T, prog string, args ...string) *foDriver {
	t.Helper()
	cmd := exec.Command(prog, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s %v: %v", prog, args, err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	d := &foDriver{done: make(chan struct{}), stderr: stderr.String}
	var once sync.Once
	d.stop = func() {
		once.Do(func() {
			io.WriteString(stdin, "stop\n")
			stdin.Close()
		})
	}
	d.abort = func() { cmd.Process.Kill() }
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e foEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				d.add(foEvent{Ev: "junk", Msg: sc.Text(), T: nowMs()})
				continue
			}
			d.add(e)
		}
		cmd.Wait()
	}()
	return d
}

// startCLILoop runs redis-cli -c once per operation, as a shell loop does,
// seeded with a follower (its one seed must survive).
func startCLILoop(t *testing.T, cli string, e foEnv) *foDriver {
	host, port, _ := strings.Cut(e.follower, ":")
	d := &foDriver{done: make(chan struct{}), stderr: func() string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	run := func(key string) (string, error) {
		c, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		out, err := exec.CommandContext(c, cli, "-c", "-h", host, "-p", port, "INCR", key).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	var stopping atomic.Bool
	var once sync.Once
	d.stop = func() { once.Do(func() { stopping.Store(true) }) }
	d.abort = cancel
	go func() {
		defer close(d.done)
		if out, err := run(e.prefix + "{fo}:ready"); err != nil {
			d.add(foEvent{Ev: "junk", Msg: fmt.Sprintf("%s: %v", out, err), T: nowMs()})
			return
		}
		d.add(foEvent{Ev: "ready", T: nowMs()})
		var next atomic.Int64
		var wg sync.WaitGroup
		for w := 0; w < e.workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopping.Load() && ctx.Err() == nil {
					op := int(next.Add(1) - 1)
					t0 := nowMs()
					out, err := run(fmt.Sprintf("%s{fo}:%d", e.prefix, op))
					ev := foEvent{Op: op, W: w, T0: t0, T1: nowMs()}
					if v, perr := strconv.ParseInt(out, 10, 64); perr == nil && err == nil {
						ev.Ev, ev.V = "ok", v
					} else {
						ev.Ev, ev.Msg = "err", out
						if err != nil {
							ev.Msg += " (" + err.Error() + ")"
						}
					}
					d.add(ev)
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		d.add(foEvent{Ev: "done", T: nowMs()})
	}()
	return d
}

// startCLIRepeat runs one redis-cli -c -r process INCRing one key every
// 5 ms through a follower: one connection, no reconnection.
func startCLIRepeat(t *testing.T, cli string, e foEnv) *foDriver {
	host, port, _ := strings.Cut(e.follower, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, cli, "-c", "-h", host, "-p", port, "-r", "100000000", "-i", "0.005", "INCR", e.prefix+"{fo}:r")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &foDriver{done: make(chan struct{}), counter: true, stderr: stderr.String}
	d.stop = func() { cmd.Process.Kill() }
	d.abort = d.stop
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(stdout)
		prev, op := 0.0, 0
		for sc.Scan() {
			now := nowMs()
			line := strings.TrimSpace(sc.Text())
			if v, err := strconv.ParseInt(line, 10, 64); err == nil {
				if op == 0 {
					d.add(foEvent{Ev: "ready", T: now})
				}
				d.add(foEvent{Ev: "ok", Op: op, T0: prev, T1: now, V: v})
			} else {
				d.add(foEvent{Ev: "err", Op: op, T0: prev, T1: now, Msg: line})
			}
			prev = now
			op++
		}
		err := cmd.Wait()
		msg := strings.TrimSpace(stderr.String())
		if err != nil {
			msg += " (" + err.Error() + ")"
		}
		if ctx.Err() == nil || msg != "" {
			d.add(foEvent{Ev: "exit", Op: op, T0: prev, T1: nowMs(), Msg: msg})
		}
		d.add(foEvent{Ev: "done", T: nowMs()})
	}()
	return d
}

// foCluster is three sluice-server processes in one Raft group.
type foCluster struct {
	addrs []string
	cmds  []*exec.Cmd
	alive []bool
}

func startFailoverCluster(t *testing.T) *foCluster {
	t.Helper()
	// The server's own Raft timings: failover as users get it.
	addrs, cmds := startGroup(t, defaultRaftTimings()...)
	c := &foCluster{addrs: addrs, cmds: cmds, alive: []bool{true, true, true}}
	// Every member knows all three and the leader.
	for _, a := range c.addrs {
		rdb := client(a)
		waitNodes(t, rdb, 3)
		rdb.Close()
	}
	return c
}

// leader is the index of the member that says it leads, or -1.
func (c *foCluster) leader() int {
	for i, a := range c.addrs {
		if !c.alive[i] {
			continue
		}
		rdb := client(a)
		info, _ := rdb.Do(context.Background(), "CLUSTER", "INFO").Text()
		rdb.Close()
		if strings.Contains(info, "raft_state:Leader") {
			return i
		}
	}
	return -1
}

// term is the highest Raft term a live member reports.
func (c *foCluster) term() int64 {
	var term int64
	for i, a := range c.addrs {
		if !c.alive[i] {
			continue
		}
		rdb := client(a)
		info, _ := rdb.Do(context.Background(), "CLUSTER", "INFO").Text()
		rdb.Close()
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "cluster_current_epoch:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				term = max(term, n)
			}
		}
	}
	return term
}

func (c *foCluster) kill(i int) {
	c.cmds[i].Process.Kill()
	c.alive[i] = false
}

func (c *foCluster) close() {
	for i, cmd := range c.cmds {
		cmd.Process.Kill()
		if c.alive[i] {
			cmd.Wait()
		}
	}
}

// foResult is what one client did around one kill. Times are milliseconds
// after the kill.
type foResult struct {
	spec    foSpec
	round   int
	started bool
	elected float64 // when a survivor first said it leads
	// leaderless: after that, when a survivor knew no leader, if ever
	leaderless string
	// firstOK: the first answer from the new leader (an operation sent
	// after the kill, or answered more than 100 ms after it: the old leader
	// was dead and no election ends sooner); allOK: every worker had one.
	firstOK, allOK, lastErr float64
	ops, oks, errs          int
	errMsgs                 map[string]int
	errSpan                 map[string][2]float64 // first and last, ms after the kill
	dupOps                  int                   // operations applied more than once
	errApplied              int                   // operations answered with an error, yet applied
	lost                    int                   // acknowledged operations the survivors do not have
	unsettled               int                   // unanswered when the client was stopped
	preKill                 []string              // errors before the kill
	receipts                string                // REQID retries the new leader answered from a receipt
	exit                    string
}

func (r foResult) recovered() bool { return r.firstOK >= 0 }

var addrRE = regexp.MustCompile(`\[?[0-9a-f.:]*\]?:\d{2,5}\b|\b\d+\.\d+\.\d+\.\d+\b`)

func normalizeErr(msg string) string {
	msg = addrRE.ReplaceAllString(msg, "ADDR")
	msg = regexp.MustCompile(`MOVED \d+`).ReplaceAllString(msg, "MOVED SLOT")
	if len(msg) > 140 {
		msg = msg[:140] + "..."
	}
	return msg
}

func (r foResult) line() string {
	if !r.started {
		return fmt.Sprintf("%s (round %d): did not start", r.spec.name(), r.round)
	}
	var kinds []string
	for m, n := range r.errMsgs {
		kinds = append(kinds, fmt.Sprintf("%d× %q (%.0f to %.0f ms)", n, m, r.errSpan[m][0], r.errSpan[m][1]))
	}
	sort.Strings(kinds)
	rec := "never answered again"
	if r.recovered() {
		rec = fmt.Sprintf("first decision %.0f ms after the kill, every worker by %.0f ms", r.firstOK, r.allOK)
	}
	last := ""
	if r.lastErr >= 0 {
		last = fmt.Sprintf(", last error at %.0f ms", r.lastErr)
	}
	s := fmt.Sprintf("%s (round %d, leader elected at %.0f ms): %s%s; %d operations, %d errors, %d applied twice or more, %d errors that were applied, %d unanswered at the end",
		r.spec.name(), r.round, r.elected, rec, last, r.ops, r.errs, r.dupOps, r.errApplied, r.unsettled)
	if len(kinds) > 0 {
		s += "; errors: " + strings.Join(kinds, ", ")
	}
	if r.exit != "" {
		s += "; exited: " + r.exit
	}
	if r.receipts != "" {
		s += "; the new leader answered " + r.receipts + " retries from a REQID receipt"
	}
	if len(r.preKill) > 0 {
		s += "; errors before the kill: " + strings.Join(r.preKill, ", ")
	}
	if r.leaderless != "" {
		s += "; after the election a survivor knew no leader at " + r.leaderless
	}
	return s
}

// runFailoverRound starts a group, runs specs' clients against it, kills
// the leader, waits until each client answers again (or its bound passes),
// stops them and checks what they were answered against the survivors.
//
// A group whose leadership moves before the kill (a fresh group on a busy
// machine sometimes loses its first leader to the 250 ms lease) is thrown
// away and the round run again, up to three times.
func runFailoverRound(t *testing.T, specs []foSpec, workers int, round int) []foResult {
	t.Helper()
	for attempt := 1; ; attempt++ {
		results, moved := failoverAttempt(t, specs, workers, round, attempt)
		if moved == "" {
			return results
		}
		if attempt == 3 {
			t.Fatalf("round %d: %s, three times", round, moved)
		}
		t.Logf("round %d: %s; starting it again", round, moved)
	}
}

func failoverAttempt(t *testing.T, specs []foSpec, workers int, round, attempt int) (results []foResult, moved string) {
	t.Helper()
	c := startFailoverCluster(t)
	defer c.close()
	sluicetest.WaitFor(t, 10*time.Second, "a leader", func() bool { return c.leader() >= 0 })
	old, term := c.leader(), c.term()
	leaderMoved := func() string {
		if l, now := c.leader(), c.term(); l != old || now != term {
			return fmt.Sprintf("leadership moved before the kill (node %d in term %d, then node %d in term %d)", old, term, l, now)
		}
		return ""
	}
	follower := c.addrs[(old+1)%3]
	drivers := make([]*foDriver, len(specs))
	results = make([]foResult, len(specs))
	prefix := func(i int) string { return fmt.Sprintf("r%d.%d-%d:", round, attempt, i) }
	for i, s := range specs {
		results[i] = foResult{spec: s, round: round, firstOK: -1, allOK: -1, lastErr: -1, errMsgs: map[string]int{}, errSpan: map[string][2]float64{}}
		drivers[i] = s.start(t, foEnv{seeds: c.addrs, follower: follower, prefix: prefix(i), workers: workers})
	}
	defer func() {
		for _, d := range drivers {
			d.abort()
		}
	}()

	// Load before the kill: every client ready and answered a few times.
	warm := time.Now()
	for {
		all := true
		for i, d := range drivers {
			ready, evs := d.snapshot()
			oks := 0
			for _, e := range evs {
				if e.Ev == "ok" {
					oks++
				}
			}
			if d.ended() && !ready {
				if m := leaderMoved(); m != "" {
					return nil, m
				}
				t.Fatalf("%s ended before it was ready: %v\n%s", specs[i].name(), evs, d.stderr())
			}
			if !ready || oks < 5 {
				all = false
			}
		}
		if all && time.Since(warm) > 300*time.Millisecond {
			break
		}
		if time.Since(warm) > 30*time.Second {
			for i, d := range drivers {
				_, evs := d.snapshot()
				t.Logf("%s: %d events; stderr: %s", specs[i].name(), len(evs), d.stderr())
			}
			if m := leaderMoved(); m != "" {
				return nil, m
			}
			t.Fatal("the clients did not all start within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := leaderMoved(); m != "" {
		return nil, m
	}

	c.kill(old)
	tKill := nowMs()
	c.cmds[old].Wait()
	// The survivors' view until the clients end: when one first says it
	// leads (the floor under every client), and any later time a survivor
	// knows no leader (CLUSTER SLOTS is then empty).
	watch := startLeaderWatch(c, old, tKill)

	// Until each client has answered every worker again, then 1 s more to
	// see whether errors follow, or bound.
	stopAt := make([]time.Time, len(drivers))
	stopped := make([]bool, len(drivers))
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	bound := func(s foSpec) time.Duration {
		if s.mustRecover {
			return 30 * time.Second
		}
		return 10 * time.Second
	}
	for {
		pending := false
		for i, d := range drivers {
			if d.ended() {
				continue
			}
			pending = true
			if stopped[i] {
				continue
			}
			_, evs := d.snapshot()
			if stopAt[i].IsZero() && everyWorkerAnswered(evs, tKill) {
				stopAt[i] = time.Now().Add(time.Second)
			}
			if (!stopAt[i].IsZero() && time.Now().After(stopAt[i])) || time.Since(start) > bound(specs[i]) {
				d.stop()
				stopped[i] = true
			}
		}
		if !pending {
			break
		}
		if time.Now().After(deadline.Add(15 * time.Second)) {
			for i, d := range drivers {
				if !d.ended() {
					t.Errorf("%s did not end within 15 s of being stopped; killed it", specs[i].name())
					d.abort()
					<-d.done
				}
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The survivors' state: the new leader answers from what it applied,
	// which covers every acknowledged write.
	var rdb *redis.Client
	sluicetest.WaitFor(t, 10*time.Second, "a new leader", func() bool { return c.leader() >= 0 })
	rdb = client(c.addrs[c.leader()])
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Incr(ctx, "{fo}:barrier").Err(); err != nil {
		t.Fatalf("a write on the new leader: %v", err)
	}
	electedAt, leaderless := watch()
	receipts := infoValue(t, rdb, "stats", "reqid_retries_answered")
	for i, d := range drivers {
		_, evs := d.snapshot()
		results[i].started = true
		results[i].elected, results[i].leaderless = electedAt, leaderless
		if specs[i].decide {
			results[i].receipts = receipts // no other client sends REQID
		}
		analyzeFailover(t, &results[i], d, evs, tKill, rdb, prefix(i))
		r := results[i]
		if r.spec.mustRecover && !r.recovered() {
			t.Errorf("%s never answered a decision from the new leader within %v of the kill:\n%s\nstderr: %s", r.spec.name(), bound(r.spec), r.line(), d.stderr())
		}
		if r.lost > 0 {
			t.Errorf("%s: %d acknowledged operations are not in the survivors' state (answered without commit)", r.spec.name(), r.lost)
		}
		if !r.spec.resends && r.dupOps > 0 {
			t.Errorf("%s applied %d operations twice, yet never sends a command again", r.spec.name(), r.dupOps)
		}
	}
	return results, ""
}

// startLeaderWatch polls the survivors' CLUSTER INFO every 5 ms; the
// function it returns stops it and gives when a survivor first said it led
// (ms after the kill; -1 if none did) and the spans in which a survivor knew
// no leader after both had known the new one.
func startLeaderWatch(c *foCluster, dead int, tKill float64) func() (float64, string) {
	var survivors []*redis.Client
	for i, a := range c.addrs {
		if i != dead {
			survivors = append(survivors, client(a))
		}
	}
	stop := make(chan struct{})
	type res struct {
		elected    float64
		leaderless string
	}
	out := make(chan res, 1)
	go func() {
		defer func() {
			for _, s := range survivors {
				s.Close()
			}
		}()
		r := res{elected: -1}
		var spans []string
		gapStart, settled := -1.0, false
		stopped := false
		for {
			select {
			case <-stop:
				stopped = true
			default:
			}
			// A client that ends at the kill (redis-cli -r) must not hide
			// the election: go on until it (or 15 s).
			if stopped && (r.elected >= 0 || nowMs()-tKill > 15000) {
				if gapStart >= 0 {
					spans = append(spans, fmt.Sprintf("%.0f-", gapStart))
				}
				r.leaderless = strings.Join(spans, ", ")
				out <- r
				return
			}
			leader, unknown := false, false
			for _, s := range survivors {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				info, _ := s.Do(ctx, "CLUSTER", "INFO").Text()
				cancel()
				leader = leader || strings.Contains(info, "raft_state:Leader")
				unknown = unknown || !strings.Contains(info, "cluster_state:ok")
			}
			at := nowMs() - tKill
			if r.elected < 0 && leader {
				r.elected = at
			}
			if r.elected >= 0 && !settled && !unknown {
				settled = true // both know the new leader
			}
			if settled {
				switch {
				case unknown && gapStart < 0:
					gapStart = at
				case !unknown && gapStart >= 0:
					spans = append(spans, fmt.Sprintf("%.0f-%.0f ms", gapStart, at))
					gapStart = -1
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() (float64, string) {
		close(stop)
		r := <-out
		return r.elected, r.leaderless
	}
}

// everyWorkerAnswered: every worker that ran before the kill has had an
// operation it sent after the kill answered.
func everyWorkerAnswered(evs []foEvent, tKill float64) bool {
	workers := map[int]bool{}
	for _, e := range evs {
		if e.Ev == "ok" || e.Ev == "err" {
			if _, ok := workers[e.W]; !ok {
				workers[e.W] = false
			}
			if e.Ev == "ok" && e.T0 >= tKill {
				workers[e.W] = true
			}
		}
	}
	for _, ok := range workers {
		if !ok {
			return false
		}
	}
	return len(workers) > 0
}

func analyzeFailover(t *testing.T, r *foResult, d *foDriver, evs []foEvent, tKill float64, rdb *redis.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	type opState struct {
		ok, err bool
		v       int64
	}
	ops := map[int]*opState{}
	firstByWorker := map[int]float64{}
	maxOp := -1
	for _, e := range evs {
		switch e.Ev {
		case "ok", "err":
			s := ops[e.Op]
			if s == nil {
				s = &opState{}
				ops[e.Op] = s
			}
			maxOp = max(maxOp, e.Op)
			if _, seen := firstByWorker[e.W]; !seen {
				firstByWorker[e.W] = -1
			}
			if e.Ev == "ok" {
				r.oks++
				s.ok, s.v = true, e.V
				if e.T0 >= tKill || e.T1 >= tKill+100 {
					at := e.T1 - tKill
					if r.firstOK < 0 || at < r.firstOK {
						r.firstOK = at
					}
					if f := firstByWorker[e.W]; f < 0 || at < f {
						firstByWorker[e.W] = at
					}
				}
			} else {
				s.err = true
				m := normalizeErr(e.Msg)
				at := e.T1 - tKill
				if at < 0 {
					// Not the kill's doing: a leader that stepped down on its
					// own (its lease) while the load started.
					r.preKill = append(r.preKill, fmt.Sprintf("%q at %.0f ms", m, at))
					continue
				}
				r.errs++
				span, seen := r.errSpan[m]
				if !seen {
					span = [2]float64{at, at}
				}
				r.errSpan[m] = [2]float64{min(span[0], at), max(span[1], at)}
				r.errMsgs[m]++
				r.lastErr = max(r.lastErr, at)
			}
		case "exit":
			r.exit = e.Msg
		case "done":
			r.unsettled += e.Pending
		case "junk":
			t.Logf("%s printed %q", r.spec.name(), e.Msg)
		}
	}
	r.ops = len(ops)
	if r.recovered() {
		for _, f := range firstByWorker {
			if f < 0 {
				r.allOK = -1
				break
			}
			r.allOK = max(r.allOK, f)
		}
	}
	if d.counter {
		// One key: its value against the acknowledged increments.
		n, err := rdb.Get(ctx, prefix+"{fo}:r").Int64()
		if err != nil && err != redis.Nil {
			t.Fatalf("GET: %v", err)
		}
		var maxV int64
		for _, s := range ops {
			maxV = max(maxV, s.v)
		}
		if n < maxV {
			r.lost = int(maxV - n)
		}
		r.errApplied = int(n) - r.oks
		return
	}
	keys := make([]string, 0, maxOp+1)
	for op := 0; op <= maxOp; op++ {
		keys = append(keys, fmt.Sprintf("%s{fo}:%d", prefix, op))
	}
	// applied: how many times each operation was applied; answered: how
	// many its reply says (INCR's value; for a decision, 11 less the
	// remaining count).
	applied := func(lo, hi int) []int64 {
		out := make([]int64, hi-lo)
		if !r.spec.decide {
			vals, err := rdb.MGet(ctx, keys[lo:hi]...).Result()
			if err != nil {
				t.Fatalf("MGET on the new leader: %v", err)
			}
			for j, v := range vals {
				if s, ok := v.(string); ok {
					out[j], _ = strconv.ParseInt(s, 10, 64)
				}
			}
			return out
		}
		// A peek (cost 0) gives the remaining count of a limit of 11.
		pipe := rdb.Pipeline()
		cmds := make([]*redis.Cmd, hi-lo)
		for j := range cmds {
			cmds[j] = pipe.Do(ctx, "CL.THROTTLE", keys[lo+j], 10, 10, 3600, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("peeks on the new leader: %v", err)
		}
		for j, c := range cmds {
			v, err := c.Int64Slice()
			if err != nil || len(v) != 5 {
				t.Fatalf("peek: %v %v", v, err)
			}
			out[j] = 11 - v[2]
		}
		return out
	}
	answered := func(v int64) int64 {
		if r.spec.decide {
			return 11 - v
		}
		return v
	}
	for lo := 0; lo < len(keys); lo += 500 {
		hi := min(lo+500, len(keys))
		for j, n := range applied(lo, hi) {
			op := lo + j
			s := ops[op]
			if s == nil {
				continue // unanswered when stopped: its fate is open
			}
			switch {
			case s.ok && (n == 0 || answered(s.v) > n):
				r.lost++
				t.Logf("%s: operation %d was answered %d, the survivors have %d", r.spec.name(), op, s.v, n)
			case s.err && n >= 1:
				r.errApplied++
			}
			if n >= 2 {
				r.dupOps++
			}
		}
	}
}

// foSummary is one table row per client and setting over the rounds.
func foSummary(specs []foSpec, results []foResult) string {
	var b strings.Builder
	b.WriteString("| client | setting | leader elected: median / max | first decision: median / max | every worker: median / max | errors per kill: median / max | kinds of error | applied twice | errors applied | never answered |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range specs {
		var elected, first, all, errs []float64
		kinds := map[string]bool{}
		dups, applied, never, receipts := 0, 0, 0, 0
		for _, r := range results {
			if r.spec.name() != s.name() || !r.started {
				continue
			}
			elected = append(elected, r.elected)
			if r.recovered() {
				first = append(first, r.firstOK)
				all = append(all, r.allOK)
			} else {
				never++
			}
			errs = append(errs, float64(r.errs))
			for m := range r.errMsgs {
				kinds[m] = true
			}
			dups += r.dupOps
			applied += r.errApplied
			if n, err := strconv.Atoi(r.receipts); err == nil {
				receipts += n
			}
		}
		var ks []string
		for k := range kinds {
			ks = append(ks, "`"+k+"`")
		}
		sort.Strings(ks)
		twice := strconv.Itoa(dups)
		if s.decide {
			twice += fmt.Sprintf(" (%d resends answered from a receipt)", receipts)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n", s.client, s.setting,
			medMax(elected, " ms"), medMax(first, " ms"), medMax(all, " ms"), medMax(errs, ""), strings.Join(ks, "<br>"), twice, applied, never)
	}
	for _, r := range results {
		if len(r.preKill) > 0 {
			fmt.Fprintf(&b, "before the kill, not counted above: %s round %d: %s\n", r.spec.name(), r.round, strings.Join(r.preKill, ", "))
		}
		if r.leaderless != "" {
			fmt.Fprintf(&b, "leaderless again after the election: %s round %d: %s\n", r.spec.name(), r.round, r.leaderless)
		}
	}
	return b.String()
}

func medMax(v []float64, unit string) string {
	if len(v) == 0 {
		return "-"
	}
	sort.Float64s(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf("%.0f / %.0f%s", med, v[len(v)-1], unit)
}
