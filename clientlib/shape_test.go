package clientlib_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/clientlib"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Shaping in real time: 20 workers, each on its own connection, Wait
// through "100 per second, burst 1" for 5 s and note when each went.
// Together they went at least 95 times a second (no slot wasted), and in
// no rolling second more than 100 + burst. A start is seen after the
// reply's trip and the worker's timer, so it is never early but can be
// late: a worker the machine stalls for a whole slot (10 ms) starts beside
// the next one, and the rolling second that begins at it holds one start
// too many. So the test measures the stalls (a probe goroutine's lateness
// waking from 1 ms sleeps, which a stall of the process delays as it
// delays the workers) and allows one start per slot of the worst stall:
// none on a quiet machine, where the criterion is exact. The schedule
// itself is exact whatever the machine does (TestLBShapesTwentyWorkers in
// the engine, on a virtual clock).
func TestWaitShapesTwentyWorkers(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	sched := clientlib.Schedule{Rate: 100, Period: time.Second, Burst: 1}
	const workers = 20
	var mu sync.Mutex
	var starts []time.Time
	var wg sync.WaitGroup
	limiters := make([]*clientlib.Limiter, workers)
	for i := range limiters {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		// Each worker's connection is open before the clock starts, as
		// a fleet's long-lived connections are.
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		limiters[i] = clientlib.NewLimiter(rdb, clientlib.WithTimeout(2*time.Second), clientlib.WithFailurePolicy(clientlib.FailError))
	}
	begin := time.Now()
	end := begin.Add(5 * time.Second)
	stall := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		for time.Now().Before(end) {
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			worst = max(worst, time.Since(t0)-time.Millisecond)
		}
		stall <- worst
	}()
	errs := make(chan error, workers)
	for _, l := range limiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ctx, cancel := context.WithDeadline(context.Background(), end)
				err := l.Wait(ctx, "shape:api", sched)
				cancel()
				now := time.Now()
				if err != nil {
					if !errors.Is(err, clientlib.ErrWaitTooLong) && !errors.Is(err, context.DeadlineExceeded) {
						errs <- err
					}
					return
				}
				if now.After(end) {
					return
				}
				mu.Lock()
				starts = append(starts, now)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	worst := 0
	for i := range starts {
		j := sort.Search(len(starts), func(k int) bool { return !starts[k].Before(starts[i].Add(time.Second)) })
		worst = max(worst, j-i)
	}
	rate := float64(len(starts)) / end.Sub(begin).Seconds()
	worstStall := <-stall
	// A start late by less than a slot can only fill the second's
	// boundary, which the half-open window leaves out; each further slot
	// of lateness can bring one more start in.
	slot := sched.Period / time.Duration(sched.Rate)
	allowed := 100 + int(sched.Burst) + int(worstStall/slot)
	t.Logf("%d starts in 5 s (%.1f/s), at most %d in any rolling second; worst stall %v, so at most %d allowed",
		len(starts), rate, worst, worstStall, allowed)
	if worst > allowed {
		t.Errorf("%d starts within one second, want at most %d (100 + burst, + %d for stalls of %v)", worst, allowed, allowed-101, worstStall)
	}
	if rate < 95 {
		t.Errorf("%.1f starts per second, want at least 95", rate)
	}
}

// A Wait whose context ends first cancels its reservation: the callers
// behind it do not wait for a slot nobody uses.
func TestWaitCancelledGivesItsSlotBack(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	l := newLimiter(newClient(t, s.Addr))
	sched := clientlib.Schedule{Rate: 2, Period: time.Second, Burst: 1} // one slot per 500 ms
	ctx := context.Background()
	if err := l.Wait(ctx, "slow", sched); err != nil { // goes now
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if err := l.Wait(short, "slow", sched); !errors.Is(err, context.Canceled) {
		t.Fatalf("a Wait whose context was cancelled: %v", err)
	}
	// Without the cancel the next caller would wait about 1 s; with it,
	// about 450 ms (the first caller's slot only).
	r, err := l.Reserve(ctx, "slow", sched, 1, -1)
	if err != nil || !r.Admitted || r.Wait > 600*time.Millisecond {
		t.Fatalf("after a cancelled Wait: %+v %v, want a wait of under 600 ms", r, err)
	}
	// A deadline closer than the slot reserves nothing: a peek (cost 0)
	// before and after sees the same schedule.
	before, err := l.Reserve(ctx, "slow", sched, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	near, cancel2 := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel2()
	if err := l.Wait(near, "slow", sched); !errors.Is(err, clientlib.ErrWaitTooLong) {
		t.Fatalf("a slot past the deadline: %v", err)
	}
	if after, err := l.Reserve(ctx, "slow", sched, 0, -1); err != nil || after.Ahead != before.Ahead || after.ResetAfter > before.ResetAfter {
		t.Fatalf("the refused Wait reserved something: %+v, before it %+v (%v)", after, before, err)
	}
}
