package engine

import (
	"testing"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/internal/vectors"
)

// TestGCRAVectors replays every vector row in order, carrying state per key
// the way the engine does: a TAT at or before now is no state at all.
func TestGCRAVectors(t *testing.T) {
	rows, err := vectors.ThrottleRows()
	if err != nil {
		t.Fatalf("the CL.THROTTLE vectors must parse: %v", err)
	}

	type state struct {
		tat     int64
		present bool
	}
	keys := map[string]*state{}
	for _, row := range rows {
		line, args := row.Line, row.Args
		period, err := ParseDurationSeconds([]byte(args[2]))
		if err != nil {
			t.Fatalf("line %d: period %q: %v", line, args[2], err)
		}
		p := ratelimit.GCRAParams{MaxBurst: mustInt(t, line, args[0]), Count: mustInt(t, line, args[1]), Period: period}
		if err := p.Validate(); err != nil {
			t.Fatalf("line %d: %+v: %v", line, p, err)
		}
		qty := mustInt(t, line, args[3])
		now := row.TMs * 1e6

		st := keys[row.Key]
		if st == nil {
			st = &state{}
			keys[row.Key] = st
		}
		if st.present && st.tat <= now {
			st.present = false
		}
		newTAT, write, d := ratelimit.GCRADecide(st.tat, st.present, p, qty, now)
		if write {
			st.tat, st.present = newTAT, true
		}
		got := [5]int64{b2i(d.Limited), d.Limit, d.Remaining, SecondsRoundedUp(d.RetryAfter), SecondsRoundedUp(d.ResetAfter)}
		if got != row.Want {
			t.Errorf("line %d: %s: got %v, want %v (raw %+v)", line, row.Text, got, row.Want, d)
		}
	}
	if len(rows) == 0 {
		t.Fatal("no vector rows found")
	}
	t.Logf("%d vector rows replayed", len(rows))
}

func mustInt(t *testing.T, line int, s string) int64 {
	t.Helper()
	v, err := ParseInt64([]byte(s))
	if err != nil {
		t.Fatalf("line %d: %q: %v", line, s, err)
	}
	return v
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
