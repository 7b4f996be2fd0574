package ratelimit

import "testing"

func TestLBReserveBounds(t *testing.T) {
	p := LBParams{Interval: 1e9, Burst: 2}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	// Idle: a burst of 2 goes at once, the third waits one interval.
	tat, live := int64(0), false
	for i, wantWait := range []int64{0, 0, 1e9, 2e9} {
		end, write, r, err := LBReserve(tat, live, p, 1, -1, 0)
		if err != nil || !write || !r.Admitted || r.Wait != wantWait {
			t.Fatalf("reserve %d: wait %d (%+v, %v), want %d", i, r.Wait, r, err, wantWait)
		}
		tat, live = end, true
	}
	// A schedule cannot run past MaxDuration ahead.
	if _, _, _, err := LBReserve(tat, true, p, MaxDuration/1e9, -1, 0); err != ErrLBScheduled {
		t.Fatalf("a reservation 73 years long: %v", err)
	}
	for _, bad := range []LBParams{{Interval: 0, Burst: 1}, {Interval: 1, Burst: 0}, {Interval: 1e9, Burst: MaxDuration}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if _, err := LBInterval(3, 1); err != ErrLBTooFast {
		t.Errorf("3 per ns: %v", err)
	}
	if iv, err := LBInterval(3, 1e9); err != nil || iv != 333333333 {
		t.Errorf("3 per second: %d %v", iv, err)
	}
}
