package replication

import (
	"bytes"
	"maps"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
)

// newTestFSM is an FSM over a fresh engine, without Raft around it.
func newTestFSM(t *testing.T) *fsm {
	eng := engine.New(engine.Config{Shards: 4})
	t.Cleanup(eng.Close)
	n := &Node{cfg: Config{Clock: clock.New(nil)}, eng: eng, pending: map[uint64]*proposal{}, origin: 1}
	n.members.m = map[string]member{}
	f := &fsm{n: n, eng: eng, log: testLogger(t), gate: -1}
	n.fsm = f
	return f
}

var testIndex uint64

func applyEntry(f *fsm, data []byte) {
	testIndex++
	f.Apply(&raft.Log{Index: testIndex, Type: raft.LogCommand, Data: data})
}

func batchEntry(now int64, flags byte, cmds ...engine.Command) []byte {
	return engine.EncodeCommands(appendBatchHeader(nil, batchHeader{now: now, origin: 99, seq: 1, flags: flags}), cmds)
}

func info(t *testing.T, eng *engine.Engine, key, field string) int64 {
	t.Helper()
	b := run(eng, limitInfo(key))
	v, ok := infoField(b.Replies[0], field)
	if !ok {
		t.Fatalf("LIMIT.INFO %s: no %s in %+v", key, field, b.Replies[0])
	}
	return v
}

func TestFSMClampsNow(t *testing.T) {
	f := newTestFSM(t)
	t0 := time.Now().UnixNano()
	applyEntry(f, batchEntry(t0, 0, slCheck("k", 10, 1)))
	// A new leader whose clock is an hour behind.
	applyEntry(f, batchEntry(t0-hour, 0, slCheck("k", 10, 1)))
	if f.lastNow != t0 {
		t.Errorf("lastNow = %d, want %d", f.lastNow, t0)
	}
	if now := f.n.cfg.Clock.Now(); now < t0 {
		t.Errorf("node clock %d behind the applied now %d", now, t0)
	}
	// Applied at t0, the second unit is inside the window with the first.
	if got := info(t, f.eng, "k", "remaining"); got != 8 {
		t.Errorf("remaining = %d, want 8", got)
	}
}

func TestFSMSkipsMalformedEntries(t *testing.T) {
	f := newTestFSM(t)
	good := batchEntry(time.Now().UnixNano(), 0, slCheck("k", 10, 1))
	for _, data := range [][]byte{{}, {0}, {77, 1, 2}, good[:len(good)-1], {entryMember, 9}, encodeMember(memberChange{op: memberSet})} {
		applyEntry(f, data)
	}
	if n := len(dump(f.eng)); n != 0 {
		t.Errorf("malformed entries changed state: %d keys", n)
	}
	applyEntry(f, good)
	if n := len(dump(f.eng)); n != 1 {
		t.Errorf("keys = %d after a good entry, want 1", n)
	}
}

func TestFSMAppliesLeadersMemoryVerdict(t *testing.T) {
	f := newTestFSM(t)
	now := time.Now().UnixNano()
	applyEntry(f, batchEntry(now, flagOverMemory, slCheck("refused", 10, 1)))
	if len(dump(f.eng)) != 0 {
		t.Fatalf("an entry stamped over maxmemory created state")
	}
	applyEntry(f, batchEntry(now, 0, slCheck("created", 10, 1)))
	if len(dump(f.eng)) != 1 {
		t.Fatalf("an entry stamped under maxmemory created no state")
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func TestFSMSnapshotRoundTrip(t *testing.T) {
	a := newTestFSM(t)
	now := time.Now().UnixNano()
	var cmds []engine.Command
	for i := range 2000 {
		cmds = append(cmds, slCheck("sl:"+string(rune('a'+i%26))+string(rune(i)), 5, 1), fwCheck("fw:"+string(rune(i)), 100, 3))
	}
	applyEntry(a, batchEntry(now, 0, cmds...))
	applyEntry(a, encodeMember(memberChange{op: memberSet, id: "n1", raftAddr: "r1", clientAddr: "c1"}))

	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || sink.cancelled {
		t.Fatalf("persist: %v (cancelled %v)", err, sink.cancelled)
	}
	snap.Release()

	b := newTestFSM(t)
	applyEntry(b, batchEntry(now, 0, slCheck("stale", 5, 1)))
	if err := b.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if da, db := dump(a.eng), dump(b.eng); !maps.Equal(da, db) {
		t.Fatalf("restored state differs: %d keys vs %d", len(da), len(db))
	}
	if b.lastNow != a.lastNow {
		t.Errorf("lastNow = %d, want %d", b.lastNow, a.lastNow)
	}
	if m, _ := b.n.members.get("n1"); m.ClientAddr != "c1" {
		t.Errorf("members not restored: %+v", b.n.members.snapshot())
	}
	// A damaged snapshot is refused.
	bad := bytes.Clone(sink.Bytes())
	bad[len(bad)/2] ^= 1
	if err := b.Restore(readCloser{bytes.NewReader(bad)}); err == nil {
		t.Error("a corrupt snapshot restored without error")
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
