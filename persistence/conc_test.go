package persistence

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func concAcquire(key string, max, lease int64, id string) engine.Command {
	return engine.Command{Op: engine.OpConcAcquire, Key: []byte(key), N: [4]int64{max, lease}, Value: []byte(id)}
}

// leases is what LIMIT.INFO reports of a concurrency key at now: holders
// and next_expiry_ms (-1, -1 when the key holds nothing).
func leases(t *testing.T, x interface{ Execute(*engine.Batch, int64) }, key string, now int64) (holders, nextMS int64) {
	t.Helper()
	b := &engine.Batch{Cmds: []engine.Command{{Op: engine.OpInfo, Key: []byte(key)}}}
	x.Execute(b, now)
	r := b.Replies[0]
	if r.Kind == engine.ReplyNil {
		return -1, -1
	}
	holders, nextMS = -1, -1
	for i := 0; i+1 < len(r.Items); i += 2 {
		switch r.Items[i].Str {
		case "holders":
			holders = r.Items[i+1].Int
		case "next_expiry_ms":
			nextMS = r.Items[i+1].Int
		}
	}
	return holders, nextMS
}

// Leases survive a restart, from the final snapshot after a clean close
// and from the log after a crash: the holders, each lease's own end (the
// first still ends exactly when it did) and the ids, the engine's own
// included, which still name their leases.
func TestDurableKeepsLeases(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := t.TempDir()
		d, eng, clk := durableAt(t, dir, FsyncAlways)
		t0 := clk.Now() + 1e9
		if err := clk.Set(t0); err != nil {
			t.Fatal(err)
		}
		b := &engine.Batch{Cmds: []engine.Command{
			concAcquire("jobs", 3, 10e9, ""),
			concAcquire("jobs", 3, 20e9, "b"),
			concAcquire("jobs", 3, 30e9, "c"),
			concAcquire("gen", 1, 10e9, ""),
			{Op: engine.OpConcRenew, Key: []byte("jobs"), N: [4]int64{40e9}, Value: []byte("c")},
			{Op: engine.OpConcRelease, Key: []byte("jobs"), Value: []byte("b")},
		}}
		d.Execute(b, t0)
		gen := fmt.Sprintf("%d-1", t0)
		for _, i := range []int{0, 3} {
			if r := b.Replies[i]; r.Kind != engine.ReplyArray || r.Items[1].Str != gen {
				t.Fatalf("acquisition %d: %+v, want the id %s", i, r, gen)
			}
		}
		if clean {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			d.mu.Lock()
			d.cur.Close()
			d.mu.Unlock()
		}
		eng.Close()

		d2, eng2, _ := durableAt(t, dir, FsyncAlways)
		// The id the engine made names its lease after the restart.
		rel := &engine.Batch{Cmds: []engine.Command{{Op: engine.OpConcRelease, Key: []byte("gen"), Value: []byte(gen)}}}
		d2.Execute(rel, t0)
		if r := rel.Replies[0]; r.Kind != engine.ReplyInt || r.Int != 1 {
			t.Errorf("clean=%v: releasing %s after restart: %+v, want 1", clean, gen, r)
		}
		if h, next := leases(t, d2, "jobs", t0); h != 2 || next != 10000 {
			t.Errorf("clean=%v: after restart %d holders, next expiry %d ms; want 2 and 10000", clean, h, next)
		}
		if h, _ := leases(t, d2, "jobs", t0+10e9-1); h != 2 {
			t.Errorf("clean=%v: %d holders 1ns before the first lease ends, want 2", clean, h)
		}
		if h, next := leases(t, d2, "jobs", t0+10e9); h != 1 || next != 30000 {
			t.Errorf("clean=%v: %d holders, next %d ms when the first lease ends; want 1 and 30000 (c, renewed)", clean, h, next)
		}
		// The ids still name their leases.
		b = &engine.Batch{Cmds: []engine.Command{
			{Op: engine.OpConcRelease, Key: []byte("jobs"), Value: []byte("c")},
			{Op: engine.OpConcRelease, Key: []byte("jobs"), Value: []byte("c")},
		}}
		d2.Execute(b, t0+10e9)
		if r0, r1 := b.Replies[0], b.Replies[1]; r0.Kind != engine.ReplyInt || r0.Int != 1 || r1.Kind != engine.ReplyInt || r1.Int != 0 {
			t.Errorf("clean=%v: releasing c twice after restart: %+v %+v, want 1 then 0", clean, r0, r1)
		}
		if h, _ := leases(t, d2, "jobs", t0+10e9); h != -1 {
			t.Errorf("clean=%v: the key outlived its last lease", clean)
		}
		if err := d2.Close(); err != nil {
			t.Fatal(err)
		}
		eng2.Close()
	}
}

// TestEngineRecordsFitTheLog: the engine ends a record once it reaches
// its split size and refuses a command that could journal more than
// MaxJournaledCommand, so its largest record (the split size plus two
// commands' bound: an EXEC and a script inside it) must fit MaxRecordSize.
func TestEngineRecordsFitTheLog(t *testing.T) {
	if largest := engine.JournalSplitAt + 2*engine.MaxJournaledCommand; largest >= MaxRecordSize {
		t.Fatalf("the engine may write a %d-byte record; the log takes %d", largest, MaxRecordSize)
	}
}
