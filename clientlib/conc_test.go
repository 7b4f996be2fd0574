package clientlib_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// The Must show, over real TCP through Acquire and Release: 64
// goroutines contend for max 5 with random hold times, and the holders
// themselves count how many are inside at once: never more than 5. They
// leave (decrement) before they release, so a count above 5 can only come
// from a sixth lease. FailError, so that no failure policy can grant a
// lease the server did not.
func TestAcquireNeverMoreThanMax(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	l := newLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailError))
	const (
		workers = 64
		max     = 5
		run     = 2 * time.Second
	)
	ctx := context.Background()
	var inside, peak, granted, refused, over, badReplies atomic.Int64
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for time.Now().Before(deadline) {
				lease, ok, err := l.Acquire(ctx, "conc:jobs", max, 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					refused.Add(1)
					if lease.Holders != max {
						badReplies.Add(1) // refused below max
					}
					time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
					continue
				}
				granted.Add(1)
				n := inside.Add(1)
				if n > max {
					over.Add(1)
				}
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if lease.Holders < 1 || lease.Holders > max {
					badReplies.Add(1)
				}
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				inside.Add(-1)
				if err := lease.Release(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	t.Logf("%d workers, max %d, %v: %d leases granted, %d refused, at most %d held at once", workers, max, run, granted.Load(), refused.Load(), peak.Load())
	if over.Load() != 0 || peak.Load() > max {
		t.Fatalf("%d times more than %d held at once (peak %d)", over.Load(), max, peak.Load())
	}
	for err := range errs {
		t.Fatal(err)
	}
	if badReplies.Load() != 0 {
		t.Fatalf("%d replies reported holders outside 1..max, or refused below max", badReplies.Load())
	}
	// Contention reached the limit (every refusal reported max holders,
	// checked above: the client-side peak can lag the server's, since a
	// worker counts itself out before its release arrives), and releases
	// gave slots back.
	if refused.Load() == 0 || granted.Load() < 200 {
		t.Fatalf("peak %d, %d refused, %d granted: the test did not contend", peak.Load(), refused.Load(), granted.Load())
	}
	if v, err := s.Client.Do(ctx, "EXISTS", "conc:jobs").Int64(); err != nil || v != 0 {
		t.Fatalf("after every lease was released the key still exists: %v %v", v, err)
	}
}

// Holders killed without releasing (their leases simply dropped) keep
// their slots for the whole lease and free them exactly at its end, on the
// server's debug clock, each lease at its own end while the key lives on:
// three killed at t=0 and two at t=5 s (10 s leases) leave the key full
// until 1 ms before t=10 s, three free at t=10 s, and the other two at
// t=15 s.
func TestKilledHoldersFreeSlotsAtLeaseEnd(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	sluicetest.FreezeClock(t, s.Client)
	l := newLimiter(newClient(t, s.Addr), clientlib.WithFailurePolicy(clientlib.FailError))
	ctx := context.Background()
	acquire := func(what string, want bool, holders int64, next time.Duration) {
		t.Helper()
		lease, ok, err := l.Acquire(ctx, "conc:killed", 5, 10*time.Second)
		if err != nil || ok != want || lease.Source != clientlib.FromServer || lease.Holders != holders || lease.NextExpiry != next {
			t.Fatalf("%s: %+v ok=%v %v; want ok=%v, %d holders, next expiry %v", what, lease, ok, err, want, holders, next)
		}
		// Killed: the lease is dropped, never released.
	}
	for i := range 3 {
		acquire("holder at 0", true, int64(i+1), 10*time.Second)
	}
	sluicetest.AdvanceClock(t, s.Client, 5*time.Second)
	acquire("holder at 5 s", true, 4, 5*time.Second)
	acquire("holder at 5 s", true, 5, 5*time.Second)
	acquire("a sixth", false, 5, 5*time.Second)
	sluicetest.AdvanceClock(t, s.Client, 5*time.Second-time.Millisecond)
	acquire("1 ms before the first three end", false, 5, time.Millisecond)
	sluicetest.AdvanceClock(t, s.Client, time.Millisecond)
	// t=10 s: the first three are free; the two from t=5 s end next.
	for i := range 3 {
		acquire("at 10 s", true, int64(3+i), 5*time.Second)
	}
	acquire("a sixth at 10 s", false, 5, 5*time.Second)
	sluicetest.AdvanceClock(t, s.Client, 5*time.Second-time.Millisecond)
	acquire("1 ms before the two end", false, 5, time.Millisecond)
	sluicetest.AdvanceClock(t, s.Client, time.Millisecond)
	acquire("at 15 s", true, 4, 5*time.Second)
	acquire("at 15 s", true, 5, 5*time.Second)
	acquire("a sixth at 15 s", false, 5, 5*time.Second)
}

// RENEW keeps a lease alive past its first end, exactly until the renewed
// one; a released or ended lease renews nothing.
func TestRenewKeepsLeaseAlive(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	sluicetest.FreezeClock(t, s.Client)
	rdb := newClient(t, s.Addr)
	hook := &countHook{}
	rdb.AddHook(hook)
	l := newLimiter(rdb, clientlib.WithFailurePolicy(clientlib.FailError))
	ctx := context.Background()
	other := func() bool {
		t.Helper()
		_, ok, err := l.Acquire(ctx, "conc:renew", 1, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	lease, ok, err := l.Acquire(ctx, "conc:renew", 1, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("%+v %v %v", lease, ok, err)
	}
	sluicetest.AdvanceClock(t, s.Client, 9*time.Second)
	if ok, err := lease.Renew(ctx, 10*time.Second); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	// Unrenewed, the slot would be free from t=10 s.
	sluicetest.AdvanceClock(t, s.Client, 9*time.Second)
	if other() {
		t.Fatal("another holder got in at t=18 s: the renewal did not hold")
	}
	sluicetest.AdvanceClock(t, s.Client, time.Second-time.Millisecond)
	if other() {
		t.Fatal("another holder got in 1 ms before the renewed end")
	}
	sluicetest.AdvanceClock(t, s.Client, time.Millisecond)
	if ok, err := lease.Renew(ctx, 10*time.Second); err != nil || ok {
		t.Fatalf("renewing an ended lease: %v %v, want false", ok, err)
	}
	if !other() {
		t.Fatal("the renewed lease's slot was not free at its end")
	}

	// Release once, and then never again; a released lease renews nothing.
	lease, ok, err = l.Acquire(ctx, "conc:renew2", 1, 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("%+v %v %v", lease, ok, err)
	}
	for range 2 {
		if err := lease.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if n := hook.count("conc.release"); n != 1 {
		t.Fatalf("two Releases sent %d CONC.RELEASE, want 1", n)
	}
	if ok, err := lease.Renew(ctx, time.Second); ok || err != nil {
		t.Fatalf("renewing a released lease: %v %v", ok, err)
	}
	if n := hook.count("conc.renew"); n != 2 {
		t.Fatalf("%d CONC.RENEW sent, want 2 (none for the released lease)", n)
	}
	var none *clientlib.Lease
	if err := none.Release(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Acquire(ctx, "k", 0, time.Second); !errors.Is(err, clientlib.ErrInvalidLimit) {
		t.Fatalf("max 0: %v", err)
	}
	if _, _, err := l.Acquire(ctx, "k", 1, 0); !errors.Is(err, clientlib.ErrInvalidLimit) {
		t.Fatalf("lease 0: %v", err)
	}
	if _, _, err := l.Acquire(ctx, "conc:renew2", clientlib.MaxConcurrency+1, time.Second); !errors.Is(err, clientlib.ErrInvalidLimit) {
		t.Fatalf("max %d: %v", clientlib.MaxConcurrency+1, err)
	}
	if err := rdb.Set(ctx, "str", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Acquire(ctx, "str", 1, time.Second); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
		t.Fatalf("a string key: %v", err)
	}
}

// While the server cannot be reached, each failure policy answers an
// acquisition as it answers a decision, and says so; FailFallback holds
// this process's leases to max, ends them after their lease, and frees
// them on Release.
func TestAcquireFailurePolicies(t *testing.T) {
	ctx := context.Background()
	for _, p := range []clientlib.Policy{clientlib.FailOpen, clientlib.FailClosed, clientlib.FailError} {
		l, _, _, _ := downLimiter(t, clientlib.WithFailurePolicy(p))
		lease, ok, err := l.Acquire(ctx, "conc:k", 2, time.Second)
		switch p {
		case clientlib.FailError:
			if !errors.Is(err, clientlib.ErrUnavailable) || lease != nil {
				t.Errorf("%v: %+v %v %v", p, lease, ok, err)
			}
		case clientlib.FailOpen:
			if err != nil || !ok || lease.Source != clientlib.FromFailOpen || !errors.Is(lease.Err, clientlib.ErrUnavailable) || lease.Holders != -1 {
				t.Errorf("%v: %+v %v %v", p, lease, ok, err)
			}
			if ok, err := lease.Renew(ctx, time.Second); !ok || err != nil {
				t.Errorf("%v renew: %v %v", p, ok, err)
			}
		case clientlib.FailClosed:
			if err != nil || ok || lease.Source != clientlib.FromFailClosed || !errors.Is(lease.Err, clientlib.ErrUnavailable) {
				t.Errorf("%v: %+v %v %v", p, lease, ok, err)
			}
		}
		if err := lease.Release(); err != nil {
			t.Errorf("%v release: %v", p, err)
		}
	}

	l, clock, _, _ := downLimiter(t, clientlib.WithFailurePolicy(clientlib.FailFallback))
	acquire := func(key string) (*clientlib.Lease, bool) {
		t.Helper()
		lease, ok, err := l.Acquire(ctx, key, 2, time.Second)
		if err != nil || lease.Source != clientlib.FromFallback || !errors.Is(lease.Err, clientlib.ErrUnavailable) {
			t.Fatalf("fallback: %+v %v %v", lease, ok, err)
		}
		return lease, ok
	}
	a, ok1 := acquire("conc:f")
	_, ok2 := acquire("conc:f")
	if _, ok3 := acquire("conc:f"); !ok1 || !ok2 || ok3 {
		t.Fatalf("fallback max 2: %v %v %v, want two granted then refused", ok1, ok2, ok3)
	}
	if _, ok := acquire("conc:other"); !ok {
		t.Fatal("another key shares the first one's slots")
	}
	a.Release()
	b, ok := acquire("conc:f")
	if !ok {
		t.Fatal("a released fallback slot was not given again")
	}
	if _, ok := acquire("conc:f"); ok {
		t.Fatal("a third fallback lease after a release")
	}
	// Renewed, b outlives the other, which ends after its second.
	clock.Advance(900 * time.Millisecond)
	if ok, err := b.Renew(ctx, time.Second); !ok || err != nil {
		t.Fatalf("fallback renew: %v %v", ok, err)
	}
	clock.Advance(100 * time.Millisecond)
	if _, ok := acquire("conc:f"); !ok {
		t.Fatal("an ended fallback lease kept its slot")
	}
	if _, ok := acquire("conc:f"); ok {
		t.Fatal("the renewed fallback lease lost its slot")
	}
	clock.Advance(900 * time.Millisecond)
	if ok, err := b.Renew(ctx, time.Second); ok || err != nil {
		t.Fatalf("renewing an ended fallback lease: %v %v", ok, err)
	}
}

// behindProxy starts a server and a Limiter (100 ms timeout) that reaches
// it through a fault proxy, counting the commands it sends.
func behindProxy(t *testing.T) (*sluicetest.Server, *faultproxy.Proxy, *countHook, *clientlib.Limiter) {
	t.Helper()
	s := sluicetest.Start(t, sluicetest.Options{})
	px := sluicetest.Proxy(t, s.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	hook := &countHook{}
	rdb.AddHook(hook)
	l := clientlib.NewLimiter(rdb, clientlib.WithTimeout(100*time.Millisecond))
	return s, px, hook, l
}

// An acquisition whose answers are lost (replies held back past the
// timeout) is sent twice with one id and takes one slot on the server; the
// fallback answers meanwhile, and once the server answers again, Release
// gives the server's slot back too.
func TestAcquireAfterLostAnswers(t *testing.T) {
	s, px, hook, l := behindProxy(t)
	ctx := context.Background()
	untilServer(t, l, "warm", clientlib.PerMinute(100))
	px.SetDelay(faultproxy.Replies, 400*time.Millisecond)
	lease, ok, err := l.Acquire(ctx, "conc:lost", 3, time.Minute)
	if err != nil || !ok || lease.Source != clientlib.FromFallback || lease.ID == "" {
		t.Fatalf("%+v %v %v, want a fallback lease naming the id sent", lease, ok, err)
	}
	if n := hook.count("conc.acquire"); n != 2 {
		t.Fatalf("%d CONC.ACQUIRE sent, want 2 (the retry after a lost answer)", n)
	}
	px.SetDelay(faultproxy.Replies, 0)
	sluicetest.WaitFor(t, 5*time.Second, "the server holding the lease", func() bool {
		v, err := s.Client.Do(ctx, "LIMIT.INFO", "conc:lost").Slice()
		return err == nil && len(v) > 5 && v[5] == int64(1)
	})
	// Both sends arrived; they hold one slot.
	if v, err := s.Client.Do(ctx, "LIMIT.INFO", "conc:lost").Slice(); err != nil || v[5] != int64(1) {
		t.Fatalf("LIMIT.INFO %v %v, want 1 holder", v, err)
	}
	untilServer(t, l, "warm", clientlib.PerMinute(100))
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Client.Do(ctx, "EXISTS", "conc:lost").Int64(); err != nil || v != 0 {
		t.Fatalf("after Release the server still holds the lease: %v %v", v, err)
	}
}

// A refund whose answers are lost (replies held back past the timeout) is
// sent twice with one id and gives its units back once on the server.
func TestRefundAfterLostAnswers(t *testing.T) {
	s, px, hook, l := behindProxy(t)
	ctx := context.Background()
	rule := clientlib.FixedWindow(10, time.Hour)
	untilServer(t, l, "refund:key", rule)
	for range 5 {
		if res, err := l.Allow(ctx, "refund:key", rule); err != nil || res.Source != clientlib.FromServer {
			t.Fatalf("%+v %v", res, err)
		}
	}
	px.SetDelay(faultproxy.Replies, 400*time.Millisecond)
	if _, _, err := l.Refund(ctx, "refund:key", 2); err == nil {
		t.Fatal("a refund whose answers were lost reported success")
	}
	if n := hook.count("limit.refund"); n != 2 {
		t.Fatalf("%d LIMIT.REFUND sent, want 2 (the retry after a lost answer)", n)
	}
	px.SetDelay(faultproxy.Replies, 0)
	// untilServer's call and the five: 6 charged, 4 left; the refund of 2
	// once: 6 left, not 8.
	sluicetest.WaitFor(t, 5*time.Second, "both refunds applied", func() bool {
		v, err := s.Client.Do(ctx, "FW.CHECK", "refund:key", 10, 3600, 0).Slice()
		return err == nil && v[2] == int64(6)
	})
	time.Sleep(500 * time.Millisecond) // a second, doubled refund would land by now
	if v, err := s.Client.Do(ctx, "FW.CHECK", "refund:key", 10, 3600, 0).Slice(); err != nil || v[2] != int64(6) {
		t.Fatalf("after the refund sent twice: %v %v, want 6 left", v, err)
	}
}

// A caller's request id covers both halves of "charge, then refund": the
// refund sent with the decision's id gives its units back.
func TestRefundWithTheDecisionsRequestID(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	l := clientlib.NewLimiter(s.Client, clientlib.WithFailurePolicy(clientlib.FailError))
	ctx := clientlib.WithRequestID(context.Background(), "request-7")
	rule := clientlib.FixedWindow(10, time.Hour)
	if res, err := l.AllowN(ctx, "refund:same-id", rule, 6); err != nil || !res.Allowed || res.Remaining != 4 {
		t.Fatalf("AllowN: %+v %v", res, err)
	}
	if left, ok, err := l.Refund(ctx, "refund:same-id", 2); err != nil || !ok || left != 6 {
		t.Fatalf("Refund with the decision's id: %d %v %v, want 6 left", left, ok, err)
	}
}
