package clientlib_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// clientMetricNames are the collector's metrics, for GatherAndCompare.
var clientMetricNames = []string{
	"sluice_client_decisions_total",
	"sluice_client_fallback_episodes_total",
	"sluice_client_fallback_active",
	"sluice_client_overlimit_cache_hits_total",
	"sluice_client_server_errors_total",
}

// clientMetricsText is the exposition the collector should produce for
// limiter name with the given values.
func clientMetricsText(name string, server, fallback, failOpen, failClosed, episodes, active, cacheHits, serverErrors int) string {
	return fmt.Sprintf(`
# HELP sluice_client_decisions_total Rate-limit decisions, by who answered: the server or the failure policy (fallback, fail_open, fail_closed).
# TYPE sluice_client_decisions_total counter
sluice_client_decisions_total{limiter=%[1]q,source="fail_closed"} %[5]d
sluice_client_decisions_total{limiter=%[1]q,source="fail_open"} %[4]d
sluice_client_decisions_total{limiter=%[1]q,source="fallback"} %[3]d
sluice_client_decisions_total{limiter=%[1]q,source="server"} %[2]d
# HELP sluice_client_fallback_active 1 while the failure policy answers instead of the server, else 0.
# TYPE sluice_client_fallback_active gauge
sluice_client_fallback_active{limiter=%[1]q} %[7]d
# HELP sluice_client_fallback_episodes_total Times the server stopped answering and the failure policy took over.
# TYPE sluice_client_fallback_episodes_total counter
sluice_client_fallback_episodes_total{limiter=%[1]q} %[6]d
# HELP sluice_client_overlimit_cache_hits_total Decisions refused locally by the over-limit cache.
# TYPE sluice_client_overlimit_cache_hits_total counter
sluice_client_overlimit_cache_hits_total{limiter=%[1]q} %[8]d
# HELP sluice_client_server_errors_total Calls that found the server unreachable or unable to serve.
# TYPE sluice_client_server_errors_total counter
sluice_client_server_errors_total{limiter=%[1]q} %[9]d
`, name, server, fallback, failOpen, failClosed, episodes, active, cacheHits, serverErrors)
}

func expectClientMetrics(t *testing.T, reg *prometheus.Registry, want string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), clientMetricNames...); err != nil {
		t.Error(err)
	}
}

// A Limiter in front of a real server, then cut off from it: the counters
// say who answered each decision, the gauge and the episode counter follow
// the outage, and the server's return clears the gauge.
func TestCollectorFollowsAnOutage(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	px := sluicetest.Proxy(t, s.Addr)
	// No go-redis retries, and the generous timeout of newLimiter: each
	// call below is answered by exactly the source the test expects,
	// whatever the machine's load (the proxy refuses at once).
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	l := newLimiter(rdb, clientlib.WithOverLimitCache(64))
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.Collector("api"))
	ctx := context.Background()
	expectClientMetrics(t, reg, clientMetricsText("api", 0, 0, 0, 0, 0, 0, 0, 0))

	limit := clientlib.PerMinute(2)
	for i, wantAllowed := range []bool{true, true, false} {
		if r, err := l.Allow(ctx, "user:1", limit); err != nil || r.Source != clientlib.FromServer || r.Allowed != wantAllowed {
			t.Fatalf("call %d: %+v %v", i, r, err)
		}
	}
	if r, err := l.Allow(ctx, "user:1", limit); err != nil || r.Source != clientlib.FromCache {
		t.Fatalf("the refusal was not cached: %+v %v", r, err)
	}
	if res, err := l.All(ctx, clientlib.Request{Key: "user:2", Limit: limit, Cost: 1}); err != nil || res.Source != clientlib.FromServer {
		t.Fatalf("All: %+v %v", res, err)
	}
	ls, ok, err := l.Acquire(ctx, "jobs", 2, time.Minute)
	if err != nil || !ok || ls.Source != clientlib.FromServer {
		t.Fatalf("Acquire: %+v %v %v", ls, ok, err)
	}
	if err := ls.Release(); err != nil {
		t.Fatal(err)
	}
	expectClientMetrics(t, reg, clientMetricsText("api", 5, 0, 0, 0, 0, 0, 1, 0))

	px.SetMode(faultproxy.Refuse)
	if r, err := l.Allow(ctx, "user:3", limit); err != nil || r.Source != clientlib.FromFallback {
		t.Fatalf("during the outage: %+v %v", r, err)
	}
	if res, err := l.All(ctx, clientlib.Request{Key: "user:4", Limit: limit, Cost: 1}); err != nil || res.Source != clientlib.FromFallback {
		t.Fatalf("All during the outage: %+v %v", res, err)
	}
	if ls, _, err := l.Acquire(ctx, "jobs", 2, time.Minute); err != nil || ls.Source != clientlib.FromFallback {
		t.Fatalf("Acquire during the outage: %+v %v", ls, err)
	}
	// A failed refund is a server error too, and starts no second episode.
	if _, _, err := l.Refund(ctx, "user:3", 1); err == nil {
		t.Fatal("Refund during the outage succeeded")
	}
	expectClientMetrics(t, reg, clientMetricsText("api", 5, 3, 0, 0, 1, 1, 1, 4))

	px.SetMode(faultproxy.Forward)
	// The pool's first call after the cut may still meet a broken
	// connection and go to the fallback: count from the server's answer.
	untilServer(t, l, "user:5", limit)
	if v, _ := valueOf(t, reg, "sluice_client_fallback_active", "api", ""); v != 0 {
		t.Errorf("fallback_active %v after the server answered again", v)
	}
	if v, _ := valueOf(t, reg, "sluice_client_fallback_episodes_total", "api", ""); v != 1 {
		t.Errorf("episodes %v after one outage", v)
	}
	if v, _ := valueOf(t, reg, "sluice_client_decisions_total", "api", "server"); v < 6 {
		t.Errorf("server decisions %v after the server answered again, want at least 6", v)
	}
}

// valueOf reads one gathered series: name's value for the limiter label
// (and source, for the decisions metric). ok is false when it is absent.
func valueOf(t *testing.T, reg *prometheus.Registry, name, limiter, source string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["limiter"] == limiter && labels["source"] == source {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// Each policy's answers are counted under its own source; FailError's
// decisions return the error and count only as server errors, but the
// gauge still says the server is not answering.
func TestCollectorCountsEachPolicy(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	for _, tc := range []struct {
		policy                         clientlib.Policy
		fallback, failOpen, failClosed int
	}{
		{clientlib.FailFallback, 2, 0, 0},
		{clientlib.FailOpen, 0, 2, 0},
		{clientlib.FailClosed, 0, 0, 2},
		{clientlib.FailError, 0, 0, 0},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			px := sluicetest.Proxy(t, s.Addr)
			rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			l := newLimiter(rdb, clientlib.WithFailurePolicy(tc.policy))
			reg := prometheus.NewRegistry()
			reg.MustRegister(l.Collector(tc.policy.String()))
			ctx := context.Background()
			if r, err := l.Allow(ctx, "k", clientlib.PerMinute(10)); err != nil || r.Source != clientlib.FromServer {
				t.Fatalf("%+v %v", r, err)
			}
			px.SetMode(faultproxy.Refuse)
			l.Allow(ctx, "k", clientlib.PerMinute(10))
			l.All(ctx, clientlib.Request{Key: "k2", Limit: clientlib.PerMinute(10), Cost: 1})
			expectClientMetrics(t, reg, clientMetricsText(tc.policy.String(), 1, tc.fallback, tc.failOpen, tc.failClosed, 1, 1, 0, 2))
		})
	}
}

// Several Limiters in one process register side by side under their
// names; one name twice is refused, as Prometheus refuses any duplicate.
func TestCollectorsOfSeveralLimiters(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	login := clientlib.NewLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailClosed))
	api := clientlib.NewLimiter(rdb)
	reg := prometheus.NewRegistry()
	if err := reg.Register(login.Collector("login")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(api.Collector("api")); err != nil {
		t.Fatalf("a second limiter: %v", err)
	}
	if err := reg.Register(clientlib.NewLimiter(rdb).Collector("api")); err == nil {
		t.Fatal("a second collector named api was registered")
	}
	// Nothing listens on port 1: login's decision is refused locally.
	if r, err := login.Allow(context.Background(), "u", clientlib.PerMinute(5)); err != nil || r.Source != clientlib.FromFailClosed {
		t.Fatalf("%+v %v", r, err)
	}
	// Both limiters' series sit side by side under each metric.
	if n, err := testutil.GatherAndCount(reg, clientMetricNames...); err != nil || n != 2*8 {
		t.Errorf("gathered %d series (%v), want 16", n, err)
	}
	for _, c := range []struct {
		name, limiter, source string
		want                  float64
	}{
		{"sluice_client_fallback_active", "login", "", 1},
		{"sluice_client_fallback_episodes_total", "login", "", 1},
		{"sluice_client_decisions_total", "login", "fail_closed", 1},
		{"sluice_client_server_errors_total", "login", "", 1},
		{"sluice_client_fallback_active", "api", "", 0},
		{"sluice_client_decisions_total", "api", "fail_closed", 0},
	} {
		if v, ok := valueOf(t, reg, c.name, c.limiter, c.source); !ok || v != c.want {
			t.Errorf("%s{limiter=%q,source=%q} = %v (present %v), want %v", c.name, c.limiter, c.source, v, ok, c.want)
		}
	}
}
