package engine

import (
	"fmt"
	"sort"
	"testing"
)

func lbReserve(key string, interval, burst, cost, maxWait int64) Command {
	return Command{Op: OpLBReserve, Key: []byte(key), N: [4]int64{interval, burst, cost, maxWait}, Flags: FlagMS}
}

// Shaping, deterministically: 20 workers reserve through "100 per second,
// burst 1" on one key for 5 s of a virtual clock, each going at its slot
// and reserving its next unit right away. In every rolling second at most
// 100 + burst start, and together they start at least 95% of 100 per
// second: no slot is wasted.
func TestLBShapesTwentyWorkers(t *testing.T) {
	for _, burst := range []int64{1, 5} {
		t.Run(fmt.Sprint("burst=", burst), func(t *testing.T) {
			e := New(Config{Shards: 4})
			defer e.Close()
			const workers, interval = 20, int64(1e7) // 100 per second
			start := int64(1e12)
			// next[w] is when worker w asks again; starts are when each went.
			next := make([]int64, workers)
			for w := range next {
				next[w] = start + int64(w)*1e5 // they arrive over 2 ms
			}
			var starts []int64
			end := start + 5e9
			for {
				w := 0
				for i := range next {
					if next[i] < next[w] {
						w = i
					}
				}
				now := next[w]
				if now >= end {
					break
				}
				r := exec1(e, now, lbReserve("api", interval, burst, 1, -1))
				v := ReservationFields(&r)
				if r.Kind != ReplyReservation || v[0] != 1 {
					t.Fatalf("reserve at %d: %+v", now, r)
				}
				goAt := now + v[1]*1e6 // the wait, in ms rounded up
				if goAt < end {
					starts = append(starts, goAt)
				}
				next[w] = goAt
			}
			sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
			worst := 0
			for i := range starts {
				j := sort.Search(len(starts), func(k int) bool { return starts[k] >= starts[i]+1e9 })
				worst = max(worst, j-i)
			}
			if worst > 100+int(burst) {
				t.Fatalf("%d starts within one second, want at most %d", worst, 100+burst)
			}
			if rate := float64(len(starts)) / 5; rate < 95 {
				t.Fatalf("%.1f starts per second, want at least 95", rate)
			}
			t.Logf("%d starts in 5 s, at most %d in any second", len(starts), worst)
		})
	}
}

// A refused reservation (MAXWAIT) reserves nothing; a cancelled one gives
// its slot to the callers behind it; a peek writes nothing.
func TestLBMaxWaitCancelPeek(t *testing.T) {
	e := New(Config{Shards: 4})
	defer e.Close()
	now := int64(1e12)
	const iv = int64(1e8) // 10 per second
	waits := func(r Reply) [4]int64 {
		if r.Kind != ReplyReservation {
			t.Fatalf("not a reservation: %+v", r)
		}
		return ReservationFields(&r)
	}
	for i, want := range [][]int64{{1, 0, 0, 100}, {1, 100, 0, 200}, {1, 200, 1, 300}} {
		if got := waits(exec1(e, now, lbReserve("k", iv, 1, 1, -1))); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reserve %d: %v, want %v", i, got, want)
		}
	}
	// 300 ms would be the wait: past MAXWAIT 250, nothing reserved.
	if got := waits(exec1(e, now, lbReserve("k", iv, 1, 1, 250e6))); fmt.Sprint(got) != "[0 300 2 300]" {
		t.Fatalf("past MAXWAIT: %v", got)
	}
	if got := waits(exec1(e, now, lbReserve("k", iv, 1, 0, -1))); fmt.Sprint(got) != "[1 200 2 300]" {
		t.Fatalf("peek: %v", got)
	}
	// Cancel two units: the next caller waits 100 ms, not 300.
	if r := exec1(e, now, Command{Op: OpLBCancel, Key: []byte("k"), N: [4]int64{2}}); r.Int != 1 {
		t.Fatalf("cancel: %+v, want 1 unit still scheduled", r)
	}
	if got := waits(exec1(e, now, lbReserve("k", iv, 1, 1, -1))); fmt.Sprint(got) != "[1 100 0 200]" {
		t.Fatalf("after the cancel: %v", got)
	}
	// Cancelling everything leaves no key.
	exec1(e, now, Command{Op: OpLBCancel, Key: []byte("k"), N: [4]int64{10}})
	if e.Keys() != 0 {
		t.Fatalf("%d keys after cancelling the whole schedule", e.Keys())
	}
	// The schedule's end is the key's expiry: idle again once it passes.
	exec1(e, now, lbReserve("k", iv, 1, 3, -1))
	if got := waits(exec1(e, now+3e8, lbReserve("k", iv, 1, 1, -1))); fmt.Sprint(got) != "[1 0 0 100]" {
		t.Fatalf("at the schedule's end: %v", got)
	}
}

// TestLBKeepsParametersAsWritten: a reservation as written (FlagAsWritten)
// keeps its rate and period for LIMIT.INFO, on the same schedule as one
// that carries the interval; an interval-only command (a rate too wide to
// pack, or a record from before) leaves the record without them until the
// next reservation as written.
func TestLBKeepsParametersAsWritten(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	now := int64(1e12)
	run := func(c Command) Reply {
		var b Batch
		*b.Add() = c
		e.Execute(&b, now)
		return b.Replies[0]
	}
	info := func(key string) map[string]string {
		r := run(Command{Op: OpInfo, Key: []byte(key)})
		m := map[string]string{}
		for i := 0; i+1 < len(r.Items); i += 2 {
			v := r.Items[i+1]
			if v.Kind == ReplyInt {
				m[r.Items[i].Str] = fmt.Sprint(v.Int)
			} else {
				m[r.Items[i].Str] = v.Str
			}
		}
		return m
	}
	asWritten := func(key string, rate, period, burst, cost int64) Command {
		c := lbReserve(key, 0, 0, cost, -1)
		var ok bool
		if c.N[0], c.N[1], ok = LBPack(rate, period, burst); !ok {
			t.Fatalf("LBPack(%d, %d, %d) does not pack", rate, period, burst)
		}
		c.Flags |= FlagAsWritten
		return c
	}
	// 3 per 1.5 s with a burst of 2: the interval is 500 ms, either way.
	a := run(asWritten("a", 3, 15e8, 2, 3))
	b := run(lbReserve("b", 5e8, 2, 3, -1))
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("as written %+v, by interval %+v", a, b)
	}
	ia, ib := info("a"), info("b")
	if ia["rate"] != "3" || ia["period"] != "1.5" || ia["burst"] != "2" || ia["interval_ns"] != "500000000" {
		t.Fatalf("as written: %v", ia)
	}
	delete(ia, "rate")
	delete(ia, "period")
	if fmt.Sprint(ia) != fmt.Sprint(ib) {
		t.Fatalf("the same schedule differs: %v and %v", ia, ib)
	}
	// An interval-only reservation rewrites the record without them; the
	// next one as written puts them back.
	run(lbReserve("a", 5e8, 2, 1, -1))
	if _, ok := info("a")["rate"]; ok {
		t.Fatalf("interval-only reservation kept the rate: %v", info("a"))
	}
	run(asWritten("a", 3, 15e8, 2, 1))
	if info("a")["rate"] != "3" {
		t.Fatalf("rate not kept again: %v", info("a"))
	}
	if _, _, ok := LBPack(1<<31, 1e10, 1); ok {
		t.Fatal("a rate of 2^31 packed")
	}
	if _, _, ok := LBPack(1, 1e9, 1<<32); ok {
		t.Fatal("a burst of 2^32 packed")
	}
	// A bad command (no server sends it) is refused, and changes nothing.
	bad := asWritten("c", 3, 1e9, 1, 1)
	bad.N[0] = 2 // a period of 2 ns for 3 a period: too fast
	if r := run(bad); r.Kind != ReplyError {
		t.Fatalf("too fast as written: %+v", r)
	}
}
