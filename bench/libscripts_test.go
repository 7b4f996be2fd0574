package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

var libModes = []string{"redis-rate", "redis-rate-atmost", "rlflex", "rate-limit-redis"}

// The SHA1 of each script as the library computes it from its own source
// (go-redis NewScript, ioredis Script, and what Redis answered to
// rate-limit-redis's SCRIPT LOAD), recorded when the scripts were copied.
func TestLibScriptsAreTheLibrariesText(t *testing.T) {
	for _, tc := range []struct {
		name, body, sha, capture string
	}{
		{"redis_rate allowN", redisRateLib.body, "f52a5b566060d79fd321d695df55bc918339c4aa", "redis-rate"},
		{"rlflex incrTtl", rlflexLib.body, "a1de965f42e177aa339706bd580f049065eca79a", "rlflex"},
		{"rate-limit-redis increment", rateLimitRedisLib.body, "895b92e1712734e1b464999be23953485475357b", "rate-limit-redis"},
		{"rate-limit-redis get", rateLimitRedisLib.load[1], "6aeb97ed6086dcdeafdc6fda3999a0d0e38ec96a", "rate-limit-redis"},
	} {
		if got := sha1Hex(tc.body); got != tc.sha {
			t.Errorf("%s: SHA1 %s, the library's is %s (the embedded copy changed)", tc.name, got, tc.sha)
		}
		capture, err := os.ReadFile("testdata/libcapture/" + tc.capture + ".capture")
		if err != nil {
			t.Fatal(err)
		}
		// The library sent the script itself (EVAL or SCRIPT LOAD) as a
		// bulk string of exactly these bytes.
		if !bytes.Contains(capture, redcon.AppendBulkString(nil, tc.body)) {
			t.Errorf("%s: the text is not in what the library sent", tc.name)
		}
	}
}

// captureCommands parses a capture into its commands, keeping those whose
// name is in names, each as the exact bytes sent.
func captureCommands(t *testing.T, data []byte, names ...string) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		n, resp := redcon.ReadNextRESP(data)
		if n == 0 || resp.Type != redcon.Array || resp.Count < 1 {
			t.Fatalf("capture does not parse at %q", data[:min(len(data), 40)])
		}
		_, first := redcon.ReadNextRESP(resp.Data)
		for _, name := range names {
			if strings.EqualFold(string(first.Data), name) {
				out = append(out, data[:n])
			}
		}
		data = data[n:]
	}
	return out
}

// recordingProxy sits between one client and a redis-server, one command
// at a time: it keeps the exact bytes of every command the client sends and,
// once flushAfter script calls have been answered without error, sends
// SCRIPT FLUSH to the server of its own before the next command.
type recordingProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	cmds     [][]byte
	err      error
	done     chan struct{}
}

func startRecordingProxy(t *testing.T, upstream string, flushAfter int) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln, upstream: upstream, done: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); <-p.done })
	go func() {
		defer close(p.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if err := p.serve(c, flushAfter); err != nil {
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *recordingProxy) serve(c net.Conn, flushAfter int) error {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return err
	}
	defer up.Close()
	deadline := time.Now().Add(20 * time.Second)
	c.SetDeadline(deadline)
	up.SetDeadline(deadline)
	in := newReplyReader(4096) // commands are RESP arrays too
	upRd := newReplyReader(4096)
	answered := 0
	for {
		cmd, ok, err := in.next()
		if err != nil {
			return err
		}
		if !ok {
			if err := in.fill(c); err != nil {
				return nil // the client went away: done
			}
			continue
		}
		raw := append([]byte(nil), cmd.Raw...)
		p.mu.Lock()
		p.cmds = append(p.cmds, raw)
		p.mu.Unlock()
		if answered == flushAfter {
			answered++
			if r, err := roundTrip(up, &upRd, "SCRIPT", "FLUSH"); err != nil || r.Type == redcon.Error {
				return fmt.Errorf("SCRIPT FLUSH: %v %q", err, r.Raw)
			}
		}
		if _, err := up.Write(raw); err != nil {
			return err
		}
		for {
			r, ok, err := upRd.next()
			if err != nil {
				return err
			}
			if !ok {
				if err := upRd.fill(up); err != nil {
					return err
				}
				continue
			}
			if _, err := c.Write(r.Raw); err != nil {
				return err
			}
			_, name := redcon.ReadNextRESP(cmd.Data)
			if n := strings.ToLower(string(name.Data)); (n == "eval" || n == "evalsha") && r.Type != redcon.Error && answered < flushAfter {
				answered++
			}
			break
		}
	}
}

func (p *recordingProxy) commands() ([][]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmds, p.err
}

// Each mode sends, byte for byte, what its library sent in the capture
// (testdata/libcapture, made by capture.sh from the libraries themselves):
// on a fresh connection with an empty script cache, two calls on one key,
// then SCRIPT FLUSH, then a third call, so that both the first call's and
// the NOSCRIPT path's commands are compared. Only the script commands are
// compared: the libraries' connection handshakes (HELLO, CLIENT SETINFO)
// are theirs, not the limiter's; sluice-bench must send nothing else.
func TestLibModesSendWhatTheLibrariesSend(t *testing.T) {
	s, rdb := startRedis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		mode      string
		fallbacks int64
	}{
		{"redis-rate", 2},       // evalsha NOSCRIPT, eval; evalsha; [flush] evalsha NOSCRIPT, eval
		{"rlflex", 1},           // eval; evalsha; [flush] evalsha NOSCRIPT, eval
		{"rate-limit-redis", 1}, // SCRIPT LOAD x2; EVALSHA; EVALSHA; [flush] EVALSHA NOSCRIPT, SCRIPT LOAD, EVALSHA
	} {
		t.Run(tc.mode, func(t *testing.T) {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			capture, err := os.ReadFile("testdata/libcapture/" + tc.mode + ".capture")
			if err != nil {
				t.Fatal(err)
			}
			want := captureCommands(t, capture, "eval", "evalsha", "script")
			p := startRecordingProxy(t, s.Addr, 2)
			res, err := Run(ctx, Config{
				Target: Target{Kind: KindRedis, Addr: p.ln.Addr().String()}, Mode: tc.mode,
				Requests: 3, Conns: 1, Pipeline: 1, Keys: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != 3 || !res.OK() || res.ScriptFallbacks != tc.fallbacks {
				t.Fatalf("allowed %d, errors %d (%s), fallbacks %d, want 3 allowed and %d fallbacks",
					res.Allowed, res.Errors, res.FirstError, res.ScriptFallbacks, tc.fallbacks)
			}
			p.ln.Close()
			<-p.done
			got, err := p.commands()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("sent %d commands, the library %d:\n%s", len(got), len(want), showCommands(got))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("command %d:\n sent    %q\n library %q", i, clip(got[i]), clip(want[i]))
				}
			}
		})
	}
}

func clip(b []byte) []byte {
	if len(b) > 300 {
		return append(append([]byte(nil), b[:150]...), append([]byte(" ... "), b[len(b)-150:]...)...)
	}
	return b
}

func showCommands(cmds [][]byte) string {
	var b strings.Builder
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %q\n", clip(c))
	}
	return b.String()
}

// What the libraries do with a limit each cannot send is refused before any
// traffic, and the arguments are the libraries' own for the rest.
func TestLibModeArguments(t *testing.T) {
	for _, tc := range []struct {
		mode string
		lim  Limit
		args string // space-separated; "" = refused
	}{
		{"redis-rate", Limit{}, "100 100 1 1"},                                           // Allow(ctx, key, PerSecond(100))
		{"redis-rate", Limit{Count: 10, Burst: 20, Period: 1.5, Cost: 3}, "20 10 1.5 3"}, // AllowN(Limit{10, 20, 1.5s}, 3)
		{"redis-rate", Limit{Count: 60, Period: 60}, "60 60 60 1"},                       // PerMinute(60)
		{"rlflex", Limit{}, "1 1 100 1"},
		{"rlflex", Limit{Count: 5, Period: 2.5, Cost: 2}, "2 2 5 2.5"},
		{"rlflex", Limit{Period: 0.5}, ""},
		{"rate-limit-redis", Limit{}, "1000"},
		{"rate-limit-redis", Limit{Period: 60}, "60000"},
		{"rate-limit-redis", Limit{Period: 0.0005}, ""},
		{"rate-limit-redis", Limit{Cost: 2}, ""},
	} {
		m, err := lookupMode(tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		_, _, perr := Config{Target: Target{Addr: "127.0.0.1:1"}, Mode: tc.mode, Limit: tc.lim}.prepare()
		args, err := m.lib.args(libDefaults(tc.lim))
		if tc.args == "" {
			if err == nil || perr == nil {
				t.Errorf("%s %+v: accepted (%v)", tc.mode, tc.lim, args)
			}
			continue
		}
		if err != nil || perr != nil || strings.Join(args, " ") != tc.args {
			t.Errorf("%s %+v: args %q, %v, %v; want %q", tc.mode, tc.lim, args, err, perr, tc.args)
		}
	}
	cfg, _, err := Config{Target: Target{Addr: "127.0.0.1:1"}, Mode: "rlflex"}.prepare()
	if err != nil || cfg.KeyPrefix != "rlflx:sluice-bench:rlflex:" {
		t.Fatalf("key prefix %q, %v", cfg.KeyPrefix, err)
	}
}

// Malformed, unexpected and error replies count as errors with a message,
// and never panic.
func TestLibDecideRejectsBadShapes(t *testing.T) {
	lim := libDefaults(Limit{})
	parse := func(s string) redcon.RESP {
		n, r := redcon.ReadNextRESP([]byte(s))
		if n != len(s) {
			t.Fatalf("test reply %q does not parse", s)
		}
		return r
	}
	good := map[string][]string{
		"redis-rate":        {"*4\r\n:1\r\n:99\r\n$2\r\n-1\r\n$4\r\n0.01\r\n", "*4\r\n:0\r\n:0\r\n$4\r\n0.25\r\n$3\r\n1.5\r\n"},
		"redis-rate-atmost": {"*4\r\n:1\r\n:0\r\n$2\r\n-1\r\n$4\r\n0.01\r\n", "*4\r\n:0\r\n:0\r\n$4\r\n0.25\r\n$3\r\n1.5\r\n"},
		"rlflex":            {"*2\r\n:1\r\n:1000\r\n", "*2\r\n:101\r\n:3\r\n"},
		"rate-limit-redis":  {"*2\r\n:1\r\n:1000\r\n", "*2\r\n:101\r\n:999\r\n"},
	}
	bad := map[string][]string{
		"redis-rate": {
			"*4\r\n:2\r\n:99\r\n$2\r\n-1\r\n$4\r\n0.01\r\n",      // allowed is neither 0 nor the cost
			"*4\r\n:1\r\n:99\r\n$3\r\n0.5\r\n$4\r\n0.01\r\n",     // admitted with a retry time
			"*4\r\n:0\r\n:5\r\n$4\r\n0.25\r\n$3\r\n1.5\r\n",      // refused with room left
			"*4\r\n:1\r\n:99\r\n:-1\r\n$4\r\n0.01\r\n",           // retry_after not a string
			"*4\r\n:1\r\n:101\r\n$2\r\n-1\r\n$4\r\n0.01\r\n",     // remaining above the burst
			"*4\r\n:1\r\n:99\r\n$2\r\n-1\r\n$3\r\nnan\r\n",       // reset_after NaN
			"*3\r\n:1\r\n:99\r\n$2\r\n-1\r\n",                    // three fields
			"*4\r\n$1\r\n1\r\n:99\r\n$2\r\n-1\r\n$4\r\n0.01\r\n", // allowed as a string
		},
		"redis-rate-atmost": {
			"*4\r\n:2\r\n:99\r\n$2\r\n-1\r\n$4\r\n0.01\r\n",      // more granted than the cost
			"*4\r\n:1\r\n:99\r\n:-1\r\n$4\r\n0.01\r\n",           // retry_after not a string
			"*4\r\n$1\r\n1\r\n:99\r\n$2\r\n-1\r\n$4\r\n0.01\r\n", // allowed as a string
		},
		"rlflex":           {"*2\r\n:0\r\n:1000\r\n", "*2\r\n:1\r\n:1001\r\n", "*2\r\n:1\r\n:-1\r\n", "*1\r\n:1\r\n", "*2\r\n$1\r\n1\r\n:1\r\n"},
		"rate-limit-redis": {"*2\r\n:0\r\n:1000\r\n", "*2\r\n:1\r\n:-2\r\n", "*2\r\n*0\r\n:1\r\n", "$-1\r\n"},
	}
	common := []string{"-ERR unknown command 'evalsha'\r\n", "+OK\r\n", ":1\r\n", "*-1\r\n", "*0\r\n", "$-1\r\n"}
	for _, name := range libModes {
		m, _ := lookupMode(name)
		for i, s := range good[name] {
			out, why := m.lib.decide(parse(s), lim, true)
			if want := []outcome{outAllowed, outLimited}[i]; out != want {
				t.Errorf("%s %q: outcome %d (%s), want %d", name, s, out, why, want)
			}
		}
		for _, s := range append(bad[name], common...) {
			if out, why := m.lib.decide(parse(s), lim, true); out != outError || why == "" {
				t.Errorf("%s %q: outcome %d %q, want an error with a message", name, s, out, why)
			}
		}
	}
}

// scriptingMissing returns what a server answers to a one-line EVAL, or ""
// when it answers the script's 1.
func scriptingMissing(t *testing.T, addr string) string {
	t.Helper()
	c := sluicetest.DialRaw(t, "tcp", addr)
	c.Conn().SetDeadline(time.Now().Add(5 * time.Second))
	rd := newReplyReader(4096)
	resp, err := roundTrip(c.Conn(), &rd, "EVAL", "return 1", "0")
	if err != nil {
		return err.Error()
	}
	if string(resp.Raw) != ":1\r\n" {
		return strings.TrimSpace(string(resp.Raw))
	}
	return ""
}

// libExact is a run whose outcome does not depend on timing: one key, a
// window of an hour, 50 requests.
type libExact struct {
	lim              Limit
	allowed, counter int64 // counter: the key's value after the run; -1: not an integer
}

var libExactRuns = map[string]libExact{
	// Rate 10 per hour, burst 10, cost 3: room for 3 calls of 3 (the 4th
	// would need 12 units of 10), the TAT left as a float.
	"redis-rate": {Limit{Count: 10, Period: 3600, Cost: 3}, 3, -1},
	// The same, granting what is left: 3, 3, 3, then the last 1.
	"redis-rate-atmost": {Limit{Count: 10, Period: 3600, Cost: 3}, 4, -1},
	"rlflex":            {Limit{Count: 10, Period: 3600}, 10, 50}, // every call counts, refused or not
	"rate-limit-redis":  {Limit{Count: 10, Period: 3600}, 10, 50},
}

// The library modes run on both servers without an error reply, count one
// decision per request, decide exactly on a one-key run and leave the state
// their library keeps. Sluice has no EVAL yet: its half first checks that
// the modes report that promptly and clearly, then skips with the server's
// answer; the moment Sluice's EVAL answers a script, the same checks as
// Redis's run there and its exact outcomes must equal Redis's. With
// SLUICE_BENCH_REQUIRE_EVAL=1 the missing EVAL is a failure instead.
func TestLibModesRunOnBothServers(t *testing.T) {
	r, _ := startRedis(t)
	s := sluicetest.Start(t, sluicetest.Options{})
	ctx := context.Background()
	redisExact := map[string]Result{}
	for _, srv := range []struct {
		name   string
		target Target
		rdb    *redis.Client
	}{
		{"redis", redisTarget(r), redis.NewClient(&redis.Options{Addr: r.Addr, Protocol: 2})},
		{"sluice", Target{Kind: KindSluice, Addr: s.Addr}, s.Client},
	} {
		t.Run(srv.name, func(t *testing.T) {
			if why := scriptingMissing(t, srv.target.Addr); why != "" {
				if srv.name == "redis" {
					t.Fatalf("redis-server cannot run EVAL: %s", why)
				}
				checkReportsMissingEval(t, srv.target)
				if os.Getenv("SLUICE_BENCH_REQUIRE_EVAL") != "" {
					t.Fatalf("%s cannot run scripts: EVAL \"return 1\" 0 answered %s", srv.name, why)
				}
				t.Skipf("%s cannot run scripts yet (EVAL \"return 1\" 0 answered %s); the modes reported it clearly", srv.name, why)
			}
			for _, mode := range libModes {
				t.Run(mode, func(t *testing.T) {
					const n = 3000
					res, err := Run(ctx, Config{Target: srv.target, Mode: mode, Requests: n, Conns: 4, Pipeline: 8, Keys: 20})
					if err != nil {
						t.Fatal(err)
					}
					if res.Requests != n || !res.OK() || res.Allowed+res.Limited != n || res.Allowed == 0 {
						t.Fatalf("requests %d, allowed %d, limited %d, errors %d (%s), unanswered %d",
							res.Requests, res.Allowed, res.Limited, res.Errors, res.FirstError, res.Unanswered)
					}

					ex := libExactRuns[mode]
					prefix := "exact:" + srv.name + ":" + mode + ":"
					res, err = Run(ctx, Config{Target: srv.target, Mode: mode, Requests: 50, Conns: 2, Pipeline: 4, Keys: 1,
						KeyPrefix: prefix, Limit: ex.lim})
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed != ex.allowed || res.Limited != 50-ex.allowed || !res.OK() {
						t.Fatalf("one key, 50 requests: allowed %d, limited %d, errors %d (%s); want %d allowed",
							res.Allowed, res.Limited, res.Errors, res.FirstError, ex.allowed)
					}
					m, _ := lookupMode(mode)
					key := m.lib.keyPrefix + prefix + "0"
					ttl := srv.rdb.PTTL(ctx, key).Val()
					if ttl <= 0 || ttl > time.Hour {
						t.Errorf("%s: PTTL %v, want within the hour", key, ttl)
					}
					v, err := srv.rdb.Get(ctx, key).Result()
					if err != nil {
						t.Fatalf("GET %s: %v", key, err)
					}
					if ex.counter >= 0 && v != fmt.Sprint(ex.counter) {
						t.Errorf("GET %s = %q, want %d", key, v, ex.counter)
					}
					if srv.name == "redis" {
						redisExact[mode] = res
					} else if want, ok := redisExact[mode]; ok && (res.Allowed != want.Allowed || res.Limited != want.Limited) {
						t.Errorf("sluice allowed %d limited %d; redis %d %d", res.Allowed, res.Limited, want.Allowed, want.Limited)
					}
				})
			}
		})
	}
}

// checkReportsMissingEval: against a server without scripting each mode
// ends promptly, every request counted as an error (or the run refused at
// its SCRIPT LOAD), with the server's own error text in the result.
func checkReportsMissingEval(t *testing.T, target Target) {
	t.Helper()
	for _, mode := range libModes {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		start := time.Now()
		res, err := Run(ctx, Config{Target: target, Mode: mode, Requests: 200, Conns: 2, Pipeline: 8, Keys: 20, Timeout: 5 * time.Second})
		cancel()
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %v against a server without EVAL", mode, d)
		}
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), "SCRIPT LOAD") || !strings.Contains(res.Failure, "ERR") {
				t.Errorf("%s: failed with %v, want the server's answer to SCRIPT LOAD", mode, err)
			}
		case res.Errors != 200 || !strings.HasPrefix(res.FirstError, "ERR") || res.Unanswered != 0:
			t.Errorf("%s: errors %d of 200, unanswered %d, first %q; want every request an error with the server's text",
				mode, res.Errors, res.Unanswered, res.FirstError)
		}
		var table bytes.Buffer
		if err := WriteTable(&table, []Result{res}); err != nil || !strings.Contains(table.String(), "ERR") {
			t.Errorf("%s: the table does not show the server's error:\n%s", mode, table.String())
		}
	}
}

// A script cache flushed under load is recovered from the library's way
// (EVAL, or SCRIPT LOAD and EVALSHA again) with the connections pipelining.
// A flush can land between a fallback's SCRIPT LOAD or EVAL and the calls
// after it on the same connection; the library then fails that call too,
// so such NOSCRIPT errors are allowed, never more than the fallbacks.
func TestLibModesSurviveScriptFlush(t *testing.T) {
	s, rdb := startRedis(t)
	ctx := context.Background()
	for _, mode := range libModes {
		t.Run(mode, func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(25 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						rdb.ScriptFlush(ctx)
					}
				}
			}()
			res, err := Run(ctx, Config{Target: redisTarget(s), Mode: mode, Duration: 400 * time.Millisecond, Conns: 2, Pipeline: 16, Keys: 50})
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if res.ScriptFallbacks == 0 || res.Unanswered != 0 || res.Requests != res.Allowed+res.Limited+res.Errors || res.Requests == 0 {
				t.Fatalf("requests %d, fallbacks %d, unanswered %d", res.Requests, res.ScriptFallbacks, res.Unanswered)
			}
			if res.Errors > 0 && (!strings.HasPrefix(res.FirstError, "NOSCRIPT") || res.Errors > res.ScriptFallbacks) {
				t.Fatalf("errors %d (%s) with %d fallbacks", res.Errors, res.FirstError, res.ScriptFallbacks)
			}
		})
	}
}
