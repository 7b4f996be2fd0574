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
