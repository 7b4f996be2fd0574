package clientlib_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// app answers by path: /304 with Not Modified, /invalid with 400 after
// marking the request free, anything else with 200.
var app = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/304":
		w.WriteHeader(http.StatusNotModified)
	case "/invalid":
		clientlib.MarkFree(r)
		http.Error(w, "bad input", http.StatusBadRequest)
	default:
		w.Write([]byte("ok"))
	}
})

func get(h http.Handler, path, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil) // RemoteAddr 192.0.2.1:1234
	if user != "" {
		r.Header.Set("X-User", user)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// wantHeaders compares the rate-limit headers exactly; "" means absent.
func wantHeaders(t *testing.T, what string, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
		"RateLimit-Policy", "RateLimit", "Retry-After"} {
		if got := w.Header().Get(name); got != want[name] {
			t.Errorf("%s: %s = %q, want %q", what, name, got, want[name])
		}
	}
}

func TestMiddlewareHeaders(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	// Freeze the clock 43 s into a minute, so the sliding window's reset
	// (two windows minus the elapsed part) is a known 77 s.
	now := sluicetest.FreezeClock(t, rdb)
	sluicetest.SetClock(t, rdb, now-now%60000+60000+43000)
	l := newLimiter(rdb)
	h := clientlib.Middleware(l, clientlib.MiddlewareOptions{
		Rules: []clientlib.Rule{
			{Name: "user", Limit: clientlib.PerMinute(10), Key: clientlib.KeyByHeader("X-User")},
			{Name: "ip", Limit: clientlib.SlidingWindow(100, time.Minute)},
		},
	})(app)

	w := get(h, "/", "alice")
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("first request: %d %q", w.Code, w.Body.String())
	}
	wantHeaders(t, "first", w, map[string]string{
		"X-RateLimit-Limit":     "10",
		"X-RateLimit-Remaining": "9",
		"X-RateLimit-Reset":     "6",
		"RateLimit-Policy":      `"user";q=10;w=60, "ip";q=100;w=60`,
		"RateLimit":             `"user";r=9;t=6, "ip";r=99;t=77`,
	})

	// No user: only the ip rule applies.
	w = get(h, "/", "")
	wantHeaders(t, "anonymous", w, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "98",
		"X-RateLimit-Reset":     "77",
		"RateLimit-Policy":      `"ip";q=100;w=60`,
		"RateLimit":             `"ip";r=98;t=77`,
	})

	for range 9 {
		if w := get(h, "/", "alice"); w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
	}
	w = get(h, "/", "alice")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("11th request: %d", w.Code)
	}
	// The user limit refused: its headers, and a Retry-After of one
	// emission interval. The ip limit was not charged (the all-or-nothing
	// reply shows what it would have been).
	wantHeaders(t, "limited", w, map[string]string{
		"X-RateLimit-Limit":     "10",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "60",
		"Retry-After":           "6",
		"RateLimit-Policy":      `"user";q=10;w=60, "ip";q=100;w=60`,
		"RateLimit":             `"user";r=0;t=60, "ip";r=88;t=77`,
	})
	if r, _ := l.Peek(context.Background(), "ip:192.0.2.1", clientlib.SlidingWindow(100, time.Minute)); r.Remaining != 89 {
		t.Errorf("ip remaining %d after a refused request, want 89", r.Remaining)
	}
	if w := get(h, "/", "bob"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Errorf("another user: %d %v", w.Code, w.Header())
	}
}

// Free responses are refunded on every limit they charged.
func TestMiddlewareRefundsFreeResponses(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	sluicetest.FreezeClock(t, rdb)
	l := newLimiter(rdb)
	ip := clientlib.FixedWindow(100, time.Hour)
	h := clientlib.Middleware(l, clientlib.MiddlewareOptions{
		Rules: []clientlib.Rule{
			{Name: "user", Limit: clientlib.PerMinute(10), Key: clientlib.KeyByHeader("X-User")},
			{Name: "ip", Limit: ip},
		},
		FreeStatuses: []int{http.StatusNotModified},
		Cost:         func(r *http.Request) int64 { return 2 },
	})(app)
	ctx := context.Background()

	get(h, "/", "carol")
	get(h, "/", "carol")
	remaining := func() (user, ip int64) {
		t.Helper()
		info, err := l.Info(ctx, "user:carol")
		if err != nil || info == nil {
			t.Fatalf("Info: %v %v", info, err)
		}
		ipInfo, err := l.Info(ctx, "ip:192.0.2.1")
		if err != nil || ipInfo == nil {
			t.Fatalf("Info: %v %v", ipInfo, err)
		}
		return info.Remaining, ipInfo.Remaining
	}
	if u, i := remaining(); u != 6 || i != 96 {
		t.Fatalf("after two paid requests: user %d ip %d, want 6 96", u, i)
	}
	for _, path := range []string{"/304", "/invalid"} {
		w := get(h, path, "carol")
		// The headers were written before the handler ran: they show the
		// reservation, which the refund then gives back.
		if w.Header().Get("X-RateLimit-Remaining") != "4" {
			t.Errorf("%s: remaining header %q", path, w.Header().Get("X-RateLimit-Remaining"))
		}
		if u, i := remaining(); u != 6 || i != 96 {
			t.Errorf("after %s: user %d ip %d, want 6 96 (refunded)", path, u, i)
		}
	}
	// Not free: a 200 stays charged.
	get(h, "/", "carol")
	if u, i := remaining(); u != 4 || i != 94 {
		t.Errorf("after a paid request: user %d ip %d", u, i)
	}
	// MarkFree outside the middleware is a no-op that says so.
	if clientlib.MarkFree(httptest.NewRequest("GET", "/", nil)) {
		t.Errorf("MarkFree reported a request the middleware never saw")
	}
}

// Under FailOpen and FailClosed the values are unknown: the request passes
// or is refused with only the policy header (and Retry-After). Under the fallback, the fallback's numbers are shown and
// refunds go to it.
func TestMiddlewareDuringOutage(t *testing.T) {
	rules := []clientlib.Rule{{Name: "default", Limit: clientlib.PerMinute(2)}}

	open, _, _, _ := downLimiter(t, clientlib.WithFailurePolicy(clientlib.FailOpen))
	h := clientlib.Middleware(open, clientlib.MiddlewareOptions{Rules: rules})(app)
	for range 3 {
		w := get(h, "/", "")
		if w.Code != 200 {
			t.Fatalf("fail-open: %d", w.Code)
		}
		wantHeaders(t, "fail-open", w, map[string]string{"RateLimit-Policy": `"default";q=2;w=60`})
	}

	closed, _, _, _ := downLimiter(t, clientlib.WithFailurePolicy(clientlib.FailClosed))
	h = clientlib.Middleware(closed, clientlib.MiddlewareOptions{Rules: rules})(app)
	w := get(h, "/", "")
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("fail-closed: %d", w.Code)
	}
	wantHeaders(t, "fail-closed", w, map[string]string{"RateLimit-Policy": `"default";q=2;w=60`, "Retry-After": "1"})

	fb, _, _, _ := downLimiter(t, clientlib.WithFailurePolicy(clientlib.FailFallback))
	h = clientlib.Middleware(fb, clientlib.MiddlewareOptions{Rules: rules, FreeStatuses: []int{304}})(app)
	for range 5 {
		get(h, "/304", "") // free: refunded to the fallback
	}
	get(h, "/", "")
	get(h, "/", "")
	w = get(h, "/", "")
	wantHeaders(t, "fallback", w, map[string]string{
		"X-RateLimit-Limit":     "2",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "60",
		"Retry-After":           "30",
		"RateLimit-Policy":      `"default";q=2;w=60`,
		"RateLimit":             `"default";r=0;t=60`,
	})
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("fallback: %d", w.Code)
	}
}

func TestMiddlewareConfig(t *testing.T) {
	l := newLimiter(nil)
	bad := []clientlib.MiddlewareOptions{
		{},
		{Rules: []clientlib.Rule{{Name: "", Limit: clientlib.PerMinute(1)}}},
		{Rules: []clientlib.Rule{{Name: "a\nb", Limit: clientlib.PerMinute(1)}}},
		{Rules: []clientlib.Rule{{Name: "a", Limit: clientlib.PerMinute(0)}}},
		{Rules: []clientlib.Rule{{Name: "a", Limit: clientlib.PerMinute(1)}, {Name: "a", Limit: clientlib.PerMinute(2)}}},
	}
	for i, o := range bad {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("config %d: no panic", i)
				}
			}()
			clientlib.Middleware(l, o)
		}()
	}
	// Names are structured-field strings: quotes and backslashes escaped.
	h := clientlib.Middleware(l, clientlib.MiddlewareOptions{
		Rules: []clientlib.Rule{{Name: `a"b\c`, Limit: clientlib.GCRA(10, time.Second, 25), Key: func(*http.Request) string { return "" }}},
	})(app)
	if w := get(h, "/", ""); w.Code != 200 || w.Header().Get("RateLimit-Policy") != "" {
		t.Errorf("a rule with no key applies: %d %v", w.Code, w.Header())
	}
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	cases := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"direct", "203.0.113.7:5555", nil, "203.0.113.7"},
		{"untrusted peer's header is ignored", "203.0.113.7:5555", []string{"1.2.3.4"}, "203.0.113.7"},
		{"one proxy", "10.0.0.2:80", []string{"198.51.100.9"}, "198.51.100.9"},
		{"spoofed left part is ignored", "10.0.0.2:80", []string{"6.6.6.6, 198.51.100.9"}, "198.51.100.9"},
		{"chain of proxies", "10.0.0.2:80", []string{"198.51.100.9, 10.1.1.1", "10.2.2.2"}, "198.51.100.9"},
		{"all trusted", "10.0.0.2:80", []string{"10.9.9.9"}, "10.9.9.9"},
		{"no header", "10.0.0.2:80", nil, "10.0.0.2"},
		{"malformed hop", "10.0.0.2:80", []string{"198.51.100.9, garbage"}, "10.0.0.2"},
		{"ipv6", "[fd00::1]:443", []string{"2001:db8::5"}, "2001:db8::5"},
		{"hop with port", "10.0.0.2:80", []string{"[2001:db8::5]:9999"}, "2001:db8::5"},
		{"mapped ipv4", "[::ffff:10.0.0.2]:80", []string{"::ffff:198.51.100.9"}, "198.51.100.9"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := clientlib.ClientIP(r, trusted); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.9")
	if got := clientlib.ClientIP(r, nil); got != "10.0.0.2" {
		t.Errorf("no trusted proxies: %q", got)
	}
}
