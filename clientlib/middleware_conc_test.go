package clientlib_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// A concurrency rule in the middleware: at most Max requests per key in
// the handler at once; the next gets 429 with Retry-After, and what the
// rate rules charged it is refunded; a slot comes back when the handler
// returns, a panicking one included.
func TestMiddlewareConcurrencyRule(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := newClient(t, s.Addr)
	l := newLimiter(rdb)
	release := make(chan struct{})
	inside := make(chan struct{}, 4)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("the handler failed")
		}
		inside <- struct{}{}
		<-release
		w.Write([]byte("ok"))
	})
	h := clientlib.Middleware(l, clientlib.MiddlewareOptions{
		Rules:      []clientlib.Rule{{Name: "rate", Limit: clientlib.PerMinute(100)}},
		Concurrent: []clientlib.ConcurrencyRule{{Name: "inflight", Max: 2, Lease: time.Minute}},
	})(handler)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); get(h, "/slow", "") }()
	}
	<-inside
	<-inside
	// Two in the handler: a third is refused, and its rate charge given
	// back (two charged so far).
	w := get(h, "/slow", "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("third request in flight: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if info, err := l.Info(t.Context(), "rate:192.0.2.1"); err != nil || info.Remaining != 98 {
		t.Fatalf("the refused request's rate charge: %+v %v, want 98 remaining", info, err)
	}
	close(release)
	wg.Wait()
	if info, err := l.Info(t.Context(), "inflight:192.0.2.1"); err != nil || info != nil {
		t.Fatalf("leases left after the handlers returned: %+v %v", info, err)
	}
	// A panicking handler gives its slot back too.
	func() {
		defer func() { recover() }()
		get(h, "/panic", "")
	}()
	if info, err := l.Info(t.Context(), "inflight:192.0.2.1"); err != nil || info != nil {
		t.Fatalf("a lease left after a panic: %+v %v", info, err)
	}
}

// A shape rule in the middleware: requests wait their turn on the schedule
// (10 per second, burst 1: 100 ms apart) and run; one whose wait would pass
// MaxWait is refused with Retry-After, and nothing is reserved for it.
func TestMiddlewareShapeRule(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	l := newLimiter(newClient(t, s.Addr))
	h := clientlib.Middleware(l, clientlib.MiddlewareOptions{
		Shape: []clientlib.ShapeRule{{Name: "out", Schedule: clientlib.Schedule{Rate: 10, Period: time.Second, Burst: 1}, MaxWait: 250 * time.Millisecond}},
	})(app)
	start := time.Now()
	for i := range 3 {
		if w := get(h, "/", ""); w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	// Three slots 100 ms apart: the third ran 200 ms after the first.
	if took := time.Since(start); took < 190*time.Millisecond {
		t.Fatalf("three shaped requests took %v, want at least 200 ms", took)
	}
	// Fill the schedule 300 ms ahead: the next wait would pass 250 ms.
	if _, err := l.Reserve(t.Context(), "out:192.0.2.1", clientlib.Schedule{Rate: 10, Period: time.Second, Burst: 1}, 3, -1); err != nil {
		t.Fatal(err)
	}
	before, _ := l.Reserve(t.Context(), "out:192.0.2.1", clientlib.Schedule{Rate: 10, Period: time.Second, Burst: 1}, 0, -1)
	w := get(h, "/", "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a wait past MaxWait: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if after, _ := l.Reserve(t.Context(), "out:192.0.2.1", clientlib.Schedule{Rate: 10, Period: time.Second, Burst: 1}, 0, -1); after.Ahead != before.Ahead || after.ResetAfter > before.ResetAfter {
		t.Fatalf("the refused request reserved a slot: %+v, before %+v", after, before)
	}
}
