package engine

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/engine/ratelimit"
	"github.com/sluicehq/sluice/internal/vectors"
	"github.com/sluicehq/sluice/shard"
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

// infoFields is LIMIT.INFO's reply as a map of its values' text.
func infoFields(t *testing.T, e *Engine, now int64, key string) map[string]string {
	t.Helper()
	r := exec1(e, now, Command{Op: OpInfo, Key: []byte(key)})
	if r.Kind != ReplyMap {
		t.Fatalf("LIMIT.INFO %s: %+v", key, r)
	}
	m := map[string]string{}
	for i := 0; i+1 < len(r.Items); i += 2 {
		v := r.Items[i+1]
		m[r.Items[i].Str] = v.Str + string(v.Bulk)
		if v.Kind == ReplyInt {
			m[r.Items[i].Str] = fmt.Sprint(v.Int)
		}
	}
	return m
}

// A GCRA key keeps max_burst, count and period as given: in 16 bytes when
// they fit the packed layout, 24 when they do not, moving between the two
// as the parameters change; a legacy record (the emission interval) still
// decides and refunds, and reports what it knows.
func TestGCRAKeepsItsParameters(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	now := int64(1e12)
	gcra := func(key string, burst, count, period, qty int64) Reply {
		return exec1(e, now, Command{Op: OpThrottle, Key: []byte(key), N: [4]int64{burst, count, period, qty}})
	}
	payload := func(key string) []byte {
		t.Helper()
		var got []byte
		for _, s := range e.SnapshotUnshared(now) {
			s.Each(func(r SnapshotRecord) error {
				if string(r.Key) == key {
					got = append([]byte(nil), r.Payload...)
				}
				return nil
			})
		}
		return got
	}
	cases := []struct {
		burst, count, period int64
		size                 int
		periodText           string
	}{
		{15, 30, 60e9, 16, "60"},
		{3, 30, 1.5e9, 16, "1.5"},
		{0, 1, 1, 16, "0.000000001"},
		{gcraMaxBurst, gcraMaxCount, gcraMaxCount * 1000, 16, "2147.483647"},
		{gcraMaxBurst + 1, 1000, 1e9, 24, "1"},
		{1, gcraMaxCount + 1, (gcraMaxCount + 1) * 1e6, 24, "2147483.648"},
		{2, 10, 1e9, 16, "1"}, // back to packed: the record shrinks
	}
	for _, c := range cases {
		if err := (ratelimit.GCRAParams{MaxBurst: c.burst, Count: c.count, Period: c.period}).Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if r := gcra("k", c.burst, c.count, c.period, 1); r.Kind != ReplyDecision || r.Dec.Limited {
			t.Fatalf("%+v: %+v", c, r)
		}
		if n := len(payload("k")); n != c.size {
			t.Errorf("%+v: a %d-byte payload, want %d", c, n, c.size)
		}
		info := infoFields(t, e, now, "k")
		want := map[string]string{"max_burst": fmt.Sprint(c.burst), "count": fmt.Sprint(c.count), "period": c.periodText,
			"emission_interval_ns": fmt.Sprint(c.period / c.count)}
		for k, v := range want {
			if info[k] != v {
				t.Errorf("%+v: %s = %q, want %q (%v)", c, k, info[k], v, info)
			}
		}
		exec1(e, now, Command{Op: OpDel, Key: []byte("k")})
	}
	// A legacy record: the emission interval and max_burst, top bit clear.
	legacy := make([]byte, 16)
	putI(legacy, 0, 6e9) // 10 per minute
	putI(legacy, 1, 9)
	// 12 s ahead: two of ten units used.
	if err := e.Restore([]SnapshotRecord{{Kind: uint8(shard.KindGCRA), ExpireAt: now + 12e9, Key: []byte("old"), Payload: legacy}}); err != nil {
		t.Fatal(err)
	}
	info := infoFields(t, e, now, "old")
	if _, ok := info["period"]; ok || info["emission_interval_ns"] != "6000000000" || info["max_burst"] != "9" || info["remaining"] != "8" {
		t.Fatalf("a legacy record: %v", info)
	}
	if r := exec1(e, now, Command{Op: OpRefund, Key: []byte("old"), N: [4]int64{1}}); r.Kind != ReplyInt || r.Int != 9 {
		t.Fatalf("refund on a legacy record: %+v", r)
	}
	// Its next decision writes the parameters.
	if r := gcra("old", 9, 10, 60e9, 1); r.Dec.Remaining != 8 {
		t.Fatalf("a decision on a legacy record: %+v", r)
	}
	if info := infoFields(t, e, now, "old"); info["count"] != "10" || info["period"] != "60" {
		t.Fatalf("after its next decision: %v", info)
	}
}

func TestSecondsText(t *testing.T) {
	for ns, want := range map[int64]string{0: "0", 1: "0.000000001", 1.5e9: "1.5", 60e9: "60", 250e6: "0.25", 1e9 + 1: "1.000000001", -5e8: "-0.5"} {
		if got := SecondsText(ns); got != want {
			t.Errorf("SecondsText(%d) = %q, want %q", ns, got, want)
		}
	}
}
