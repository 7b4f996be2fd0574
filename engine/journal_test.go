package engine

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/shard"
)

// memJournal is an in-memory Journal for tests.
type memJournal struct {
	mu   sync.Mutex
	recs [][]byte
}

func (m *memJournal) Append(rec []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, bytes.Clone(rec))
	return uint64(len(m.recs)), nil
}
func (m *memJournal) Err() error { return nil }

func (m *memJournal) snapshot() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recs)
}

// dump renders an engine's whole state, sorted, for comparison.
func dump(t *testing.T, e *Engine, now int64) string {
	t.Helper()
	var lines []string
	for _, s := range e.Snapshot(now) {
		s.Each(func(r SnapshotRecord) error {
			lines = append(lines, fmt.Sprintf("%d %d %q %x", r.Kind, r.ExpireAt, r.Key, r.Payload))
			return nil
		})
	}
	sort.Strings(lines)
	return fmt.Sprint(len(lines), lines)
}

// workload runs random commands from several goroutines at a frozen,
// stepping clock and returns when done.
func workload(e *Engine, clk *clock.Clock, seed uint64, steps int, mid func()) {
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, w))
			var b Batch
			for i := 0; i < steps; i++ {
				if w == 0 && i == steps/2 && mid != nil {
					mid()
				}
				b.Reset()
				for k := 0; k < 1+rng.IntN(8); k++ {
					c := b.Add()
					key := []byte(fmt.Sprintf("k%d", rng.IntN(40)))
					if rng.IntN(10) == 0 {
						// The leaky bucket's schedules, on keys of their own.
						key = []byte(fmt.Sprintf("lb%d", rng.IntN(5)))
						if rng.IntN(4) == 0 {
							c.Op, c.N = OpLBCancel, [4]int64{int64(rng.IntN(3))}
						} else {
							c.Op, c.N, c.Flags = OpLBReserve, [4]int64{5e7, int64(1 + rng.IntN(3)), int64(rng.IntN(3)), int64(rng.IntN(3)-1) * 1e8}, FlagMS
							if rng.IntN(2) == 0 { // as written: 20 per second
								c.N[0], c.N[1], _ = LBPack(20, 1e9, c.N[1])
								c.Flags |= FlagAsWritten
							}
						}
						c.Key = key
						continue
					}
					switch rng.IntN(12) {
					case 0:
						c.Op, c.N = OpThrottle, [4]int64{4, 10, 1e9, int64(rng.IntN(3))}
					case 1:
						c.Op, c.N = OpSWCheck, [4]int64{5, 5e8, int64(rng.IntN(3))}
					case 2:
						c.Op, c.N = OpSLCheck, [4]int64{5, 3e8, 1}
					case 3:
						c.Op, c.N = OpFWCheck, [4]int64{5, 2e8, 1}
					case 4:
						c.Op, c.N = OpRefund, [4]int64{int64(rng.IntN(3))}
					case 5:
						c.Op, c.Value = OpSet, []byte("v")
						c.Flags, c.N[0] = FlagRelative, int64(1+rng.IntN(500))*1e6
					case 6:
						c.Op, c.N = OpIncrBy, [4]int64{int64(rng.IntN(5))}
						key = append([]byte("n"), key...)
					case 7:
						c.Op, c.Multi = OpDel, MultiSum
						c.Sub = append(c.Sub[:0], Command{Op: OpDel, Key: key}, Command{Op: OpDel, Key: []byte("k1")})
					case 9, 10, 11:
						concWorkload(rng, c)
						if rng.IntN(4) > 0 {
							key = []byte(fmt.Sprintf("c%d", rng.IntN(8)))
						}
					case 8:
						c.Op = OpLimitAll
						c.Sub = append(c.Sub[:0],
							Command{Op: OpThrottle, Key: []byte(fmt.Sprintf("a%d", rng.IntN(5))), N: [4]int64{4, 10, 1e9, 1}},
							Command{Op: OpFWCheck, Key: []byte(fmt.Sprintf("b%d", rng.IntN(5))), N: [4]int64{5, 2e8, 1}})
						if rng.IntN(2) == 0 {
							// A concurrency slot taken with the rate slots, or not at all.
							conc := concAcquireCmd(fmt.Sprintf("m%d", rng.IntN(3)), 2, int64(1+rng.IntN(300))*1e6, "")
							if rng.IntN(2) == 0 {
								conc.Value = []byte(fmt.Sprintf("l%d", rng.IntN(4)))
							}
							c.Sub = append(c.Sub, conc)
						}
						withReqID(rng, c)
						continue
					}
					c.Key = key
					if spec := c.Op.spec(); spec.takesReqID() {
						withReqID(rng, c)
					}
				}
				if rng.IntN(10) == 0 {
					clk.Advance(int64(rng.IntN(50)) * 1e6)
				}
				e.Execute(&b, clk.Now())
			}
		}(uint64(w))
	}
	wg.Wait()
}

// withReqID gives a third of the decisions a request id from a small set,
// so that retries, ids reused on other keys and expired receipts all
// occur, and the receipts must be rebuilt with the state.
func withReqID(rng *rand.Rand, c *Command) {
	if rng.IntN(3) == 0 {
		c.ReqID = []byte(fmt.Sprintf("r%d", rng.IntN(20)))
		c.ReqTTL = int64(1+rng.IntN(3000)) * 1e6
	}
}

// journaledEngine is an engine on a frozen clock journaling to memory;
// it closes when the test ends.
func journaledEngine(t *testing.T) (*Engine, *memJournal, *clock.Clock) {
	t.Helper()
	j := &memJournal{}
	clk := clock.New(nil)
	clk.Set(clk.Now() + 1e9)
	e := New(Config{Shards: 4})
	e.SetJournal(j)
	t.Cleanup(e.Close)
	return e, j, clk
}

func TestJournalReplayRebuildsState(t *testing.T) {
	live, j, clk := journaledEngine(t)
	workload(live, clk, 1, 300, nil)
	if live.Stats().ReceiptHits == 0 || !strings.Contains(dump(t, live, clk.Now()), fmt.Sprintf(" %d ", shard.KindReceipt)) {
		t.Fatal("the workload left no receipt or answered no retry from one; the test proves nothing about them")
	}

	// Replay into engines with the same and with a different shard count.
	for _, shards := range []int{4, 8, 1} {
		rebuilt := New(Config{Shards: shards})
		for i, rec := range j.snapshot() {
			if _, err := rebuilt.Replay(rec, nil); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		// Compare at the live engine's current time.
		if got, want := dump(t, rebuilt, clk.Now()), dump(t, live, clk.Now()); got != want {
			t.Fatalf("%d shards: replayed state differs\n got %.400s\nwant %.400s", shards, got, want)
		}
		rebuilt.Close()
	}
}

func TestSnapshotPlusJournalTail(t *testing.T) {
	live, j, clk := journaledEngine(t)
	var snap []ShardSnapshot
	workload(live, clk, 2, 300, func() { snap = live.Snapshot(clk.Now()) })

	rebuilt := New(Config{Shards: 2})
	defer rebuilt.Close()
	pos := make(Positions, len(snap))
	var recs []SnapshotRecord
	for _, s := range snap {
		pos[s.Shard] = s.Seq
		s.Each(func(r SnapshotRecord) error {
			recs = append(recs, SnapshotRecord{r.Kind, r.ExpireAt, bytes.Clone(r.Key), bytes.Clone(r.Payload)})
			return nil
		})
	}
	if err := rebuilt.Restore(recs); err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for i, rec := range j.snapshot() {
		_, err := rebuilt.Replay(rec, func(shard int, seq uint64) bool {
			if pos.Covers(shard, seq) {
				skipped++
				return true
			}
			return false
		})
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if skipped == 0 {
		t.Fatal("the snapshot covered no journal record; the test proves nothing")
	}
	if got, want := dump(t, rebuilt, clk.Now()), dump(t, live, clk.Now()); got != want {
		t.Fatalf("snapshot + tail differs\n got %.400s\nwant %.400s", got, want)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	var w journalWriter
	w.begin(3, 7, 123456789)
	w.add(&Command{Op: OpThrottle, Key: []byte("k"), N: [4]int64{4, 1, 1e9, 1}})
	w.add(&Command{Op: OpSet, Key: []byte("s"), Value: []byte("v"), Flags: FlagRelative, N: [4]int64{5e9}})
	rec := w.finish()
	f.Add(bytes.Clone(rec))
	f.Add(bytes.Clone(rec[:len(rec)/2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d DecodedRecord
		if err := DecodeRecord(data, &d); err != nil {
			return
		}
		// Accepted records round-trip (up to non-canonical varints).
		var w2 journalWriter
		w2.begin(d.Shard, d.Seq, d.Now)
		for i := range d.Cmds {
			w2.add(&d.Cmds[i])
		}
		var again DecodedRecord
		if err := DecodeRecord(w2.finish(), &again); err != nil || fmt.Sprint(again) != fmt.Sprint(d) {
			t.Fatalf("round trip of %x: %v, %v vs %v", data, err, again, d)
		}
	})
}

func TestJournalWorkloadIsNotTrivial(t *testing.T) {
	live, j, clk := journaledEngine(t)
	workload(live, clk, 1, 300, nil)
	var keys int
	for _, s := range live.Snapshot(clk.Now()) {
		keys += s.Count
	}
	if keys < 20 || len(j.snapshot()) < 500 {
		t.Fatalf("workload left %d keys and %d records: too little to prove replay", keys, len(j.snapshot()))
	}
}

// failingJournal fails while broken is set.
type failingJournal struct {
	memJournal
	broken bool
}

func (f *failingJournal) Err() error {
	if f.broken {
		return errors.New("disk full")
	}
	return nil
}

func TestMisconfRefusesWritesKeepsReads(t *testing.T) {
	j := &failingJournal{}
	e := New(Config{Shards: 2})
	e.SetJournal(j)
	defer e.Close()
	run := func(cmds ...Command) []Reply {
		var b Batch
		b.Cmds = cmds
		e.Execute(&b, time.Now().UnixNano())
		return b.Replies
	}
	run(Command{Op: OpSet, Key: []byte("a"), Value: []byte("1")})
	j.broken = true
	r := run(Command{Op: OpGet, Key: []byte("a")},
		Command{Op: OpThrottle, Key: []byte("g"), N: [4]int64{4, 1, 1e9, 1}},
		Command{Op: OpSet, Key: []byte("a"), Value: []byte("2")},
		Command{Op: OpThrottle, Key: []byte("g"), N: [4]int64{4, 1, 1e9, 0}}) // a peek reads
	if string(r[0].Bulk) != "1" || !errors.Is(r[1].Err, ErrMisconf) || !errors.Is(r[2].Err, ErrMisconf) ||
		r[3].Kind != ReplyDecision || r[3].Dec.Remaining != 5 {
		t.Fatalf("with a failing journal: %+v", r)
	}
	j.broken = false
	if r := run(Command{Op: OpThrottle, Key: []byte("g"), N: [4]int64{4, 1, 1e9, 1}}); r[0].Kind != ReplyDecision || r[0].Dec.Remaining != 4 {
		t.Fatalf("after the journal recovered: %+v", r[0])
	}
}

// FailWrites takes back what a batch's writes answered, and only theirs:
// what could not be made durable must not be claimed.
func TestFailWritesTouchesOnlySuccessfulWrites(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	b := &Batch{Cmds: []Command{
		{Op: OpSet, Key: []byte("s"), Value: []byte("1")},
		{Op: OpGet, Key: []byte("s")},
		{Op: OpIncrBy, Key: []byte("s"), N: [4]int64{1}},
		{Op: OpThrottle, Key: []byte("g"), N: [4]int64{4, 1, 1e9, 1}},
	}}
	e.Execute(b, time.Now().UnixNano())
	b.Replies[2] = errReply(ErrNotInteger) // a write that had failed anyway
	b.FailWrites(ErrMisconf)
	if r := b.Replies; r[0].Err != ErrMisconf || string(r[1].Bulk) != "1" || r[2].Err != ErrNotInteger || r[3].Err != ErrMisconf {
		t.Fatalf("after FailWrites: %+v", r)
	}
}

// TestJournalRecordsStayUnderTheLogLimit: a pipeline of large values on
// one shard, and a run of multi-key commands, are journaled in several
// records, none past JournalSplitAt plus one command's bound; a command
// that could journal more than MaxJournaledCommand is refused, changing
// nothing; and the records replay to the same state.
func TestJournalRecordsStayUnderTheLogLimit(t *testing.T) {
	live, j, clk := journaledEngine(t)
	value := bytes.Repeat([]byte("v"), 1_000_000)
	var pipeline, held Batch
	for i := range 40 {
		pipeline.Cmds = append(pipeline.Cmds, Command{Op: OpSet, Key: fmt.Appendf(nil, "p%d", i), Value: value})
		held.Cmds = append(held.Cmds, Command{Op: OpSet, Multi: MultiOK, Sub: []Command{
			{Op: OpSet, Key: fmt.Appendf(nil, "a%d", i), Value: value},
			{Op: OpSet, Key: fmt.Appendf(nil, "b%d", i), Value: value},
		}})
	}
	live.Execute(&pipeline, clk.Now())
	live.Execute(&held, clk.Now())
	tooBig := Batch{Cmds: []Command{{Op: OpSet, Multi: MultiOK}}}
	for i := range 17 {
		tooBig.Cmds[0].Sub = append(tooBig.Cmds[0].Sub, Command{Op: OpSet, Key: fmt.Appendf(nil, "t%d", i), Value: value})
	}
	live.Execute(&tooBig, clk.Now())
	for _, b := range []*Batch{&pipeline, &held} {
		for i, r := range b.Replies {
			if r.Kind == ReplyError {
				t.Fatalf("command %d: %v", i, r.Err)
			}
		}
	}
	if r := tooBig.Replies[0]; r.Kind != ReplyError || !errors.Is(r.Err, ErrTooBigToJournal) {
		t.Fatalf("MSET of 17 MB: %+v, want ErrTooBigToJournal", r)
	}
	recs := j.snapshot()
	biggest := 0
	for _, rec := range recs {
		biggest = max(biggest, len(rec))
	}
	if len(recs) < 6 || biggest > JournalSplitAt+2*MaxJournaledCommand {
		t.Fatalf("%d records, the largest %d bytes: want the 80 MB written in several, none past %d", len(recs), biggest, JournalSplitAt+2*MaxJournaledCommand)
	}
	rebuilt := New(Config{Shards: 2})
	defer rebuilt.Close()
	for i, rec := range recs {
		if _, err := rebuilt.Replay(rec, nil); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	got, want := records(rebuilt, clk.Now()), records(live, clk.Now())
	if len(want) != 120 || !maps.EqualFunc(got, want, func(a, b SnapshotRecord) bool {
		return a.Kind == b.Kind && a.ExpireAt == b.ExpireAt && bytes.Equal(a.Payload, b.Payload)
	}) {
		t.Fatalf("the replayed state differs, or the refused MSET left keys: %d keys replayed, %d live (want 120)", len(got), len(want))
	}
}

// records is an engine's state by key (dump without the rendering, for
// large values).
func records(e *Engine, now int64) map[string]SnapshotRecord {
	out := map[string]SnapshotRecord{}
	for _, s := range e.Snapshot(now) {
		s.Each(func(r SnapshotRecord) error {
			out[string(r.Key)] = SnapshotRecord{r.Kind, r.ExpireAt, bytes.Clone(r.Key), bytes.Clone(r.Payload)}
			return nil
		})
	}
	return out
}
