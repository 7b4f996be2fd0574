package clientlib_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// alarmLog records a Limiter's alarms.
type alarmLog struct {
	mu     sync.Mutex
	events []clientlib.Alarm
}

func (a *alarmLog) record(e clientlib.Alarm) {
	a.mu.Lock()
	a.events = append(a.events, e)
	a.mu.Unlock()
}

// states returns the Active flag of each alarm so far.
func (a *alarmLog) states() []bool { return a.since(0) }

// since returns the Active flags of the alarms after the first n.
func (a *alarmLog) since(n int) []bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	var s []bool
	for _, e := range a.events[min(n, len(a.events)):] {
		s = append(s, e.Active)
	}
	return s
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// timeout is the per-call timeout the failure tests use; slack covers a
// loaded machine and the race detector, while staying far below the 5 s a
// go-redis client would wait on its own.
const (
	timeout = 50 * time.Millisecond
	slack   = 450 * time.Millisecond
)

// Each policy answers within the timeout while the server is unreachable,
// marks its answers, raises the alarm once per outage, and clears it when
// the server answers again.
func TestFailurePolicies(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	modes := []struct {
		name string
		mode faultproxy.Mode
	}{{"blackhole", faultproxy.Blackhole}, {"refused", faultproxy.Refuse}}
	policies := []struct {
		policy  clientlib.Policy
		source  clientlib.Source
		allowed bool
	}{
		{clientlib.FailOpen, clientlib.FromFailOpen, true},
		{clientlib.FailClosed, clientlib.FromFailClosed, false},
		{clientlib.FailFallback, clientlib.FromFallback, true},
		{clientlib.FailError, 0, false},
	}
	// A default go-redis client ignores context deadlines, so the Limiter
	// enforces its timeout on a helper goroutine; a client built with
	// ContextTimeoutEnabled takes the deadline itself.
	clients := []struct {
		name        string
		ctxDeadline bool
	}{{"default-client", false}, {"context-client", true}}
	ctx := context.Background()
	for _, m := range modes {
		for _, p := range policies {
			for _, c := range clients {
				t.Run(m.name+"/"+p.policy.String()+"/"+c.name, func(t *testing.T) {
					px := sluicetest.Proxy(t, s.Addr)
					rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), ContextTimeoutEnabled: c.ctxDeadline})
					t.Cleanup(func() { rdb.Close() })
					alarms := &alarmLog{}
					l := clientlib.NewLimiter(rdb, clientlib.WithTimeout(timeout),
						clientlib.WithFailurePolicy(p.policy), clientlib.WithAlarm(alarms.record))
					limit := clientlib.PerMinute(100)
					key := "policy:" + m.name + ":" + p.policy.String()

					// A stall on a loaded machine may already time out here;
					// count alarms and answers from the first server reply.
					untilServer(t, l, key, limit)
					seen, base := len(alarms.states()), l.Stats()
					px.SetMode(m.mode)
					for i := range 3 {
						start := time.Now()
						r, err := l.Allow(ctx, key, limit)
						if took := time.Since(start); took > timeout+slack {
							t.Errorf("call %d took %v, timeout %v", i, took, timeout)
						}
						if p.policy == clientlib.FailError {
							if !errors.Is(err, clientlib.ErrUnavailable) {
								t.Errorf("call %d: err %v, want ErrUnavailable", i, err)
							}
							continue
						}
						if err != nil || r.Source != p.source || r.Allowed != p.allowed || !errors.Is(r.Err, clientlib.ErrUnavailable) {
							t.Errorf("call %d: %+v %v, want source %v allowed %v", i, r, err, p.source, p.allowed)
						}
					}
					// All answers the same way.
					res, err := l.All(ctx, clientlib.Request{Key: key, Limit: limit, Cost: 1}, clientlib.Request{Key: key + ":2", Limit: limit, Cost: 1})
					if p.policy == clientlib.FailError {
						if !errors.Is(err, clientlib.ErrUnavailable) {
							t.Errorf("All: err %v", err)
						}
					} else if err != nil || res.Source != p.source || res.Allowed != p.allowed {
						t.Errorf("All: %+v %v", res, err)
					}
					if got := alarms.since(seen); !equalBools(got, []bool{true}) {
						t.Errorf("alarms during the outage %v, want one", got)
					}
					if st := l.Stats(); !st.Degraded || st.Alarms != base.Alarms+1 || st.PolicyAnswers != base.PolicyAnswers+4 {
						t.Errorf("stats %+v, before the outage %+v", st, base)
					}

					px.SetMode(faultproxy.Forward)
					untilServer(t, l, key, limit)
					if got := alarms.since(seen); !equalBools(got, []bool{true, false}) {
						t.Errorf("alarms %v, want raised then cleared", got)
					}
					if st := l.Stats(); st.Degraded || st.Alarms != base.Alarms+1 {
						t.Errorf("stats %+v", st)
					}
				})
			}
		}
	}
}

// Commands abandoned at the timeout keep running on a client that ignores
// deadlines; past a bound, calls stop sending and go to the policy at once.
func TestAbandonedCallsAreBounded(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	px := sluicetest.Proxy(t, s.Addr)
	rdb := newClient(t, px.Addr())
	hook := &countHook{}
	rdb.AddHook(hook)
	l := clientlib.NewLimiter(rdb, clientlib.WithTimeout(timeout), clientlib.WithFailurePolicy(clientlib.FailOpen),
		clientlib.WithMaxStuck(2))
	ctx := context.Background()
	limit := clientlib.PerMinute(10)
	untilServer(t, l, "k", limit)
	px.SetMode(faultproxy.Blackhole)
	// The first call, made while the server answered, is sent twice with
	// one request id (the second attempt after the first's timeout).
	sent := hook.count("cl.throttle")
	start := time.Now()
	r, _ := l.Allow(ctx, "k", limit)
	if took := time.Since(start); r.Source != clientlib.FromFailOpen || took < 2*timeout || took > 2*timeout+slack {
		t.Errorf("first call: %v after %v, want fail-open after two timeouts", r.Source, took)
	}
	if n := hook.count("cl.throttle") - sent; n != 2 {
		t.Errorf("first call sent %d commands, want 2", n)
	}
	// Two commands are stuck: the next call is not sent at all.
	sent = hook.count("cl.throttle")
	if r, _ := l.Allow(ctx, "k", limit); r.Source != clientlib.FromFailOpen || hook.count("cl.throttle") != sent {
		t.Errorf("third call: %v, %d commands sent, want fail-open without sending", r.Source, hook.count("cl.throttle")-sent)
	}
	// Breaking the stuck connections frees the slots.
	px.SetMode(faultproxy.Refuse)
	px.SetMode(faultproxy.Forward)
	untilServer(t, l, "k", limit)
}

// Stopping the server and starting another on the same address: the policy
// answers in between, and the alarm clears when the new server answers.
func TestServerRestart(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	alarms := &alarmLog{}
	l := clientlib.NewLimiter(rdb, clientlib.WithTimeout(timeout),
		clientlib.WithFailurePolicy(clientlib.FailClosed), clientlib.WithAlarm(alarms.record))
	ctx := context.Background()
	limit := clientlib.PerMinute(10)

	untilServer(t, l, "k", limit)
	seen := len(alarms.states())
	s.Close()
	for range 2 {
		start := time.Now()
		r, err := l.Allow(ctx, "k", limit)
		if err != nil || r.Source != clientlib.FromFailClosed || r.Allowed || r.RetryAfter != time.Second {
			t.Errorf("server down: %+v %v", r, err)
		}
		if took := time.Since(start); took > timeout+slack {
			t.Errorf("took %v", took)
		}
	}
	// Inspection has no made-up answer: the error comes back.
	if _, err := l.Info(ctx, "k"); !errors.Is(err, clientlib.ErrUnavailable) {
		t.Errorf("Info while down: %v", err)
	}
	sluicetest.Restart(t, s.Addr, sluicetest.Options{})
	// The new server starts empty: the first charge leaves 9 (unless a
	// stall made a call time out after the server had charged it).
	before := l.Stats().PolicyAnswers
	if r := untilServer(t, l, "k", limit); r.Remaining != 9 && l.Stats().PolicyAnswers == before {
		t.Errorf("after restart: %+v", r)
	}
	if got := alarms.since(seen); !equalBools(got, []bool{true, false}) {
		t.Errorf("alarms %v", got)
	}
}

// downLimiter returns a Limiter whose server refuses connections, on a
// local clock the test moves.
func downLimiter(t *testing.T, opts ...clientlib.Option) (*clientlib.Limiter, *fakeClock, *faultproxy.Proxy, *countHook) {
	t.Helper()
	s := sluicetest.Start(t, sluicetest.Options{})
	px := sluicetest.Proxy(t, s.Addr)
	px.SetMode(faultproxy.Refuse)
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	hook := &countHook{}
	rdb.AddHook(hook)
	clock := newFakeClock()
	// The proxy accepts and hangs up, so failures are immediate: the
	// generous timeout only keeps a stall on a loaded machine from looking
	// like an outage once the proxy forwards again.
	opts = append([]clientlib.Option{clientlib.WithClock(clock.Now)}, opts...)
	return newLimiter(rdb, opts...), clock, px, hook
}

// The fallback limiter enforces the same shapes, locally.
func TestFallbackShapes(t *testing.T) {
	l, clock, _, _ := downLimiter(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		limit clientlib.Limit
		retry time.Duration // after the burst of 3, from the instant it ended
	}{
		{"gcra", clientlib.GCRA(1, time.Second, 3), time.Second},
		{"sliding-window", clientlib.SlidingWindow(3, time.Second), -2},
		{"sliding-log", clientlib.SlidingLog(3, time.Second), -2},
		{"fixed-window", clientlib.FixedWindow(3, time.Second), -2},
	}
	for _, c := range cases {
		for i := range 3 {
			r, err := l.Allow(ctx, c.name, c.limit)
			if err != nil || !r.Allowed || r.Source != clientlib.FromFallback || r.Remaining != int64(2-i) {
				t.Fatalf("%s %d: %+v %v", c.name, i, r, err)
			}
		}
		r, err := l.Allow(ctx, c.name, c.limit)
		if err != nil || r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > 2*time.Second || (c.retry > 0 && r.RetryAfter != c.retry) {
			t.Fatalf("%s over the limit: %+v %v", c.name, r, err)
		}
		// Cost beyond the limit can never pass.
		if r, _ := l.AllowN(ctx, c.name, c.limit, 4); r.Allowed || r.RetryAfter != -1 {
			t.Errorf("%s cost 4: %+v", c.name, r)
		}
		clock.Advance(r.RetryAfter)
		if r, err := l.Allow(ctx, c.name, c.limit); err != nil || !r.Allowed {
			t.Errorf("%s after RetryAfter: %+v %v", c.name, r, err)
		}
	}

	// All-or-nothing holds in the fallback too.
	full := clientlib.Request{Key: "full", Limit: clientlib.GCRA(1, time.Hour, 1), Cost: 1}
	if r, _ := l.Allow(ctx, full.Key, full.Limit); !r.Allowed {
		t.Fatalf("filling: %+v", r)
	}
	fresh := clientlib.Request{Key: "fresh", Limit: clientlib.PerMinute(5), Cost: 1}
	res, err := l.All(ctx, fresh, full)
	if err != nil || res.Allowed || res.Index != 1 || res.Source != clientlib.FromFallback {
		t.Errorf("All: %+v %v", res, err)
	}
	if r, _ := l.Peek(ctx, "fresh", fresh.Limit); r.Remaining != 5 {
		t.Errorf("fresh was charged by a refused All: %+v", r)
	}
}

func TestFallbackShareAndCapacity(t *testing.T) {
	l, _, _, _ := downLimiter(t, clientlib.WithFallbackShare(4), clientlib.WithFallbackCapacity(8))
	ctx := context.Background()
	// 10 per minute shared by 4 processes: this one admits ceil(10/4) = 3.
	admitted := 0
	for range 10 {
		if r, _ := l.Allow(ctx, "shared", clientlib.PerMinute(10)); r.Allowed {
			admitted++
		}
	}
	if admitted != 3 {
		t.Errorf("admitted %d, want 3", admitted)
	}
	for i := range 20 {
		l.Allow(ctx, "k"+string(rune('a'+i)), clientlib.SlidingWindow(10, time.Minute))
	}
	if n := clientlib.FallbackLen(l); n != 8 {
		t.Errorf("fallback holds %d entries, want its capacity 8", n)
	}
}

// With a probe interval, a degraded Limiter asks the server once per
// interval and answers the rest from the policy without waiting.
func TestProbeInterval(t *testing.T) {
	alarms := &alarmLog{}
	l, clock, px, hook := downLimiter(t, clientlib.WithProbeInterval(time.Second), clientlib.WithAlarm(alarms.record),
		clientlib.WithFailurePolicy(clientlib.FailOpen))
	ctx := context.Background()
	limit := clientlib.PerMinute(10)
	for range 5 {
		if r, _ := l.Allow(ctx, "k", limit); r.Source != clientlib.FromFailOpen {
			t.Fatalf("%+v", r)
		}
	}
	// One probe: the first call, made while the Limiter still thought the
	// server up, which is sent twice (its retry, with the same id).
	if n := hook.count("cl.throttle"); n != 2 {
		t.Errorf("%d commands within one interval, want the first call's 2", n)
	}
	px.SetMode(faultproxy.Forward)
	// Still inside the interval: no probe, so still the policy.
	if r, _ := l.Allow(ctx, "k", limit); r.Source != clientlib.FromFailOpen {
		t.Errorf("%+v", r)
	}
	clock.Advance(time.Second)
	if r, err := l.Allow(ctx, "k", limit); err != nil || r.Source != clientlib.FromServer {
		t.Errorf("probe after the interval: %+v %v", r, err)
	}
	if n := hook.count("cl.throttle"); n != 3 {
		t.Errorf("%d requests, want 3 (a degraded Limiter's probe is not retried)", n)
	}
	if got := alarms.states(); !equalBools(got, []bool{true, false}) {
		t.Errorf("alarms %v", got)
	}
}

// A refund while the server is down goes to the fallback, which charged.
func TestFallbackRefund(t *testing.T) {
	l, _, _, _ := downLimiter(t)
	ctx := context.Background()
	limit := clientlib.PerMinute(3)
	for range 3 {
		l.Allow(ctx, "k", limit)
	}
	if _, _, err := l.Refund(ctx, "k", 2); !errors.Is(err, clientlib.ErrUnavailable) {
		t.Errorf("Refund err %v", err)
	}
	if r, _ := l.Peek(ctx, "k", limit); r.Remaining != 2 || r.Source != clientlib.FromFallback {
		t.Errorf("after refund: %+v", r)
	}
	if _, err := l.Reset(ctx, "k"); !errors.Is(err, clientlib.ErrUnavailable) {
		t.Errorf("Reset err %v", err)
	}
	if r, _ := l.Peek(ctx, "k", limit); r.Remaining != 3 {
		t.Errorf("after reset: %+v", r)
	}
}
