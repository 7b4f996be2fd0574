package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/shard"
)

func concAcquireCmd(key string, max, lease int64, id string) Command {
	return Command{Op: OpConcAcquire, Key: []byte(key), N: [4]int64{max, lease}, Value: []byte(id)}
}

func concReleaseCmd(key, id string) Command {
	return Command{Op: OpConcRelease, Key: []byte(key), Value: []byte(id)}
}

func concRenewCmd(key, id string, lease int64) Command {
	return Command{Op: OpConcRenew, Key: []byte(key), N: [4]int64{lease}, Value: []byte(id)}
}

// concAns is ACQUIRE's reply: acquired, lease id ("" for nil), holders,
// next_expiry_ms.
type concAns struct {
	ok      bool
	id      string
	holders int64
	nextMS  int64
}

func concAnswer(t *testing.T, r Reply) concAns {
	t.Helper()
	if r.Kind != ReplyArray || len(r.Items) != 4 {
		t.Fatalf("ACQUIRE replied %+v, want a 4-item array", r)
	}
	a := concAns{ok: r.Items[0].Int == 1, holders: r.Items[2].Int, nextMS: r.Items[3].Int}
	switch id := r.Items[1]; {
	case id.Kind == ReplyBulk:
		a.id = id.Str + string(id.Bulk)
	case id.Kind != ReplyNil:
		t.Fatalf("lease id %+v", id)
	}
	if a.ok == (a.id == "") {
		t.Fatalf("acquired %v with lease id %q", a.ok, a.id)
	}
	return a
}

func acquireAt(t *testing.T, e *Engine, now int64, key string, max, lease int64, id string) concAns {
	t.Helper()
	return concAnswer(t, exec1(e, now, concAcquireCmd(key, max, lease, id)))
}

func intAt(t *testing.T, e *Engine, now int64, c Command) int64 {
	t.Helper()
	r := exec1(e, now, c)
	if r.Kind != ReplyInt {
		t.Fatalf("%v %s: %+v, want an integer", c.Op, c.Key, r)
	}
	return r.Int
}

func existsAt(t *testing.T, e *Engine, now int64, key string) bool {
	t.Helper()
	return intAt(t, e, now, Command{Op: OpExists, Key: []byte(key)}) == 1
}

func pttlAt(t *testing.T, e *Engine, now int64, key string) int64 {
	t.Helper()
	return intAt(t, e, now, Command{Op: OpTTL, Key: []byte(key), N: [4]int64{TTLMillis}})
}

// concInfoAt is LIMIT.INFO's integer fields, nil for no live state.
func concInfoAt(t *testing.T, e *Engine, now int64, key string) map[string]int64 {
	t.Helper()
	r := exec1(e, now, Command{Op: OpInfo, Key: []byte(key)})
	if r.Kind == ReplyNil {
		return nil
	}
	if r.Kind != ReplyMap || r.Items[1].Str != "concurrency" {
		t.Fatalf("LIMIT.INFO %s: %+v", key, r)
	}
	m := map[string]int64{}
	for i := 2; i < len(r.Items); i += 2 {
		m[r.Items[i].Str] = r.Items[i+1].Int
	}
	return m
}

func newConcEngine(t *testing.T) *Engine {
	t.Helper()
	e := New(Config{Shards: 2})
	t.Cleanup(e.Close)
	return e
}

// A lease ending at t is held at t-1ns and free at t, with nothing
// released or swept in between: a killed holder's slot comes back exactly
// at its lease's end, and so does the key when it was the last.
func TestConcLeaseEndsExactlyAtItsExpiry(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	const lease = 1_500_000_007 // 1.5 s and 7 ns: next_expiry_ms rounds up
	if got, want := acquireAt(t, e, t0, "k", 1, lease, "a"), (concAns{true, "a", 1, 1501}); got != want {
		t.Fatalf("first acquire %+v, want %+v", got, want)
	}
	end := t0 + lease
	// One nanosecond before the end, the holder still has its slot.
	if got, want := acquireAt(t, e, end-1, "k", 1, lease, "b"), (concAns{false, "", 1, 1}); got != want {
		t.Fatalf("at t-1ns: %+v, want %+v", got, want)
	}
	if !existsAt(t, e, end-1, "k") || pttlAt(t, e, end-1, "k") != 1 {
		t.Fatalf("at t-1ns the key must exist with 1 ms left, PTTL %d", pttlAt(t, e, end-1, "k"))
	}
	if info := concInfoAt(t, e, end-1, "k"); info["holders"] != 1 || info["max"] != 1 || info["next_expiry_ms"] != 1 || info["reset_after_ms"] != 1 {
		t.Fatalf("LIMIT.INFO at t-1ns: %v", info)
	}
	// At the end it is gone: the key too, with nobody having released it.
	if existsAt(t, e, end, "k") || concInfoAt(t, e, end, "k") != nil || pttlAt(t, e, end, "k") != -2 {
		t.Fatal("at t the key must be gone")
	}
	if got := intAt(t, e, end, concReleaseCmd("k", "a")); got != 0 {
		t.Fatalf("releasing the expired lease: %d, want 0", got)
	}
	if got, want := acquireAt(t, e, end, "k", 1, lease, "b"), (concAns{true, "b", 1, 1501}); got != want {
		t.Fatalf("at t: %+v, want %+v", got, want)
	}

	// Two leases: the first to end frees one slot while the key lives on
	// until the second's end. (Each shard's clock never runs backwards, so
	// the times go on from the end above.)
	t1 := end + 1e9
	acquireAt(t, e, t1, "two", 2, 1e9, "x")
	acquireAt(t, e, t1+5e8, "two", 2, 1e9, "y")
	if got, want := acquireAt(t, e, t1+1e9-1, "two", 2, 1e9, "z"), (concAns{false, "", 2, 1}); got != want {
		t.Fatalf("before x ends: %+v, want %+v", got, want)
	}
	if got, want := acquireAt(t, e, t1+1e9, "two", 2, 1e9, "z"), (concAns{true, "z", 2, 500}); got != want {
		t.Fatalf("when x ends: %+v, want %+v", got, want)
	}
	if got := intAt(t, e, t1+1e9, concReleaseCmd("two", "z")); got != 1 {
		t.Fatalf("release z: %d", got)
	}
	// The key's expiry is its latest lease's (y, at t1+1.5 s).
	if p := pttlAt(t, e, t1+1e9, "two"); p != 500 {
		t.Fatalf("PTTL %d, want 500 (y's end)", p)
	}
	if !existsAt(t, e, t1+15e8-1, "two") || existsAt(t, e, t1+15e8, "two") {
		t.Fatal("the key must live exactly until its last lease ends")
	}
}

func TestConcRenew(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	acquireAt(t, e, t0, "k", 1, 10e9, "a")
	if got := intAt(t, e, t0+9e9, concRenewCmd("k", "a", 10e9)); got != 1 {
		t.Fatalf("renew a live lease: %d, want 1", got)
	}
	// Without the renewal the slot would be free at t0+10 s.
	if got := acquireAt(t, e, t0+10e9, "k", 1, 10e9, "b"); got.ok {
		t.Fatalf("at the old end: %+v, want refused", got)
	}
	if got := acquireAt(t, e, t0+19e9-1, "k", 1, 10e9, "b"); got.ok || got.nextMS != 1 {
		t.Fatalf("1ns before the renewed end: %+v, want refused, 1 ms to go", got)
	}
	if got := acquireAt(t, e, t0+19e9, "k", 1, 10e9, "b"); !got.ok {
		t.Fatalf("at the renewed end: %+v, want acquired", got)
	}
	// An expired lease, an unknown id and a missing key renew nothing.
	if got := intAt(t, e, t0+19e9, concRenewCmd("k", "a", 10e9)); got != 0 {
		t.Fatalf("renew an expired lease: %d, want 0", got)
	}
	if got := intAt(t, e, t0+19e9, concRenewCmd("k", "nobody", 10e9)); got != 0 {
		t.Fatalf("renew an unknown id: %d, want 0", got)
	}
	if got := intAt(t, e, t0+19e9, concRenewCmd("missing", "a", 10e9)); got != 0 || existsAt(t, e, t0+19e9, "missing") {
		t.Fatalf("renew on a missing key: %d, and it must not create the key", got)
	}

	// A renewal may shorten a lease, and the key's expiry follows the
	// latest lease down.
	t1 := t0 + 100e9
	acquireAt(t, e, t1, "s", 2, 10e9, "long")
	acquireAt(t, e, t1, "s", 2, 5e9, "short")
	if p := pttlAt(t, e, t1, "s"); p != 10e3 {
		t.Fatalf("PTTL %d, want 10000", p)
	}
	if got := intAt(t, e, t1+1e9, concRenewCmd("s", "long", 1e9)); got != 1 {
		t.Fatalf("shorten: %d", got)
	}
	if p := pttlAt(t, e, t1+1e9, "s"); p != 4e3 {
		t.Fatalf("PTTL after shortening %d, want 4000 (short's end)", p)
	}
	if info := concInfoAt(t, e, t1+1e9, "s"); info["holders"] != 2 || info["next_expiry_ms"] != 1000 {
		t.Fatalf("LIMIT.INFO after shortening: %v", info)
	}
}

// Acquiring again with an id that holds a live lease renews it: it is
// admitted even when the key is full, and holds one slot.
func TestConcIdempotentAcquire(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	acquireAt(t, e, t0, "k", 2, 10e9, "a")
	if got, want := acquireAt(t, e, t0+4e9, "k", 2, 10e9, "a"), (concAns{true, "a", 1, 10000}); got != want {
		t.Fatalf("again with a: %+v, want %+v (renewed, one holder)", got, want)
	}
	acquireAt(t, e, t0+4e9, "k", 2, 10e9, "b")
	if got, want := acquireAt(t, e, t0+5e9, "k", 2, 20e9, "a"), (concAns{true, "a", 2, 9000}); got != want {
		t.Fatalf("a again while full: %+v, want %+v", got, want)
	}
	if got := acquireAt(t, e, t0+5e9, "k", 2, 10e9, "c"); got.ok || got.holders != 2 {
		t.Fatalf("c while full: %+v, want refused", got)
	}
	// a now ends at t0+25 s, b at t0+14 s.
	if got := acquireAt(t, e, t0+14e9, "k", 2, 10e9, "c"); !got.ok || got.holders != 2 {
		t.Fatalf("c when b ends: %+v", got)
	}
	if p := pttlAt(t, e, t0+14e9, "k"); p != 11e3 {
		t.Fatalf("PTTL %d, want 11000 (a's renewed end)", p)
	}
}

// A lowered max governs at once: the holders above it keep their leases,
// and nobody new gets in until they are under it.
func TestConcLoweredMax(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	for _, id := range []string{"a", "b", "c"} {
		acquireAt(t, e, t0, "k", 3, 60e9, id)
	}
	if got := acquireAt(t, e, t0, "k", 2, 60e9, "d"); got.ok || got.holders != 3 {
		t.Fatalf("max lowered to 2 with 3 holders: %+v, want refused", got)
	}
	intAt(t, e, t0, concReleaseCmd("k", "a"))
	if got := acquireAt(t, e, t0, "k", 2, 60e9, "d"); got.ok || got.holders != 2 {
		t.Fatalf("2 holders under max 2: %+v, want refused", got)
	}
	intAt(t, e, t0, concReleaseCmd("k", "b"))
	if got, want := acquireAt(t, e, t0, "k", 2, 60e9, "d"), (concAns{true, "d", 2, 60000}); got != want {
		t.Fatalf("1 holder under max 2: %+v, want %+v", got, want)
	}
	// A holder renewing under a max below the holders keeps its lease.
	if got := acquireAt(t, e, t0+1e9, "k", 1, 60e9, "c"); !got.ok || got.holders != 2 {
		t.Fatalf("c renewing under max 1: %+v", got)
	}
	if info := concInfoAt(t, e, t0+1e9, "k"); info["max"] != 1 || info["holders"] != 2 {
		t.Fatalf("LIMIT.INFO %v: max is the last acquisition's", info)
	}
	// A refusal changes nothing, max included.
	acquireAt(t, e, t0+1e9, "k", 2, 60e9, "e")
	if info := concInfoAt(t, e, t0+1e9, "k"); info["max"] != 1 {
		t.Fatalf("a refused acquisition stored its max: %v", info)
	}
	// Raised again, it admits at once.
	if got := acquireAt(t, e, t0+1e9, "k", 5, 60e9, "e"); !got.ok || got.holders != 3 {
		t.Fatalf("max raised to 5: %+v", got)
	}
}

// Ids the engine makes are "<now ns>-<serial>", distinct among the live
// leases of a key, never reused while the key lives, and the same on
// every engine that runs the same commands at the same times.
func TestConcGeneratedIDs(t *testing.T) {
	t0 := int64(1_000_000_000_000)
	run := func(e *Engine) []string {
		var ids []string
		get := func(now int64) string {
			a := acquireAt(t, e, now, "k", 100, 10e9, "")
			if !a.ok {
				t.Fatalf("refused: %+v", a)
			}
			ids = append(ids, a.id)
			return a.id
		}
		get(t0)
		second := get(t0)
		get(t0 + 1)
		if intAt(t, e, t0+1, concReleaseCmd("k", second)) != 1 {
			t.Fatalf("the generated id %q does not name its lease", second)
		}
		// A client that chose the next id the engine would make: the
		// engine passes over it.
		acquireAt(t, e, t0+2, "k", 100, 10e9, fmt.Sprintf("%d-4", t0+2))
		get(t0 + 2)
		// After every lease has ended, a new life of the key: its serials
		// start again, its ids differ by their time.
		get(t0 + 20e9)
		return ids
	}
	other := New(Config{Shards: 7})
	t.Cleanup(other.Close)
	a, b := run(newConcEngine(t)), run(other)
	want := []string{
		fmt.Sprintf("%d-1", t0), fmt.Sprintf("%d-2", t0), fmt.Sprintf("%d-3", t0+1),
		fmt.Sprintf("%d-5", t0+2), fmt.Sprintf("%d-1", t0+20e9),
	}
	if fmt.Sprint(a) != fmt.Sprint(want) || fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("ids\n%v\n%v\nwant %v", a, b, want)
	}

	// Many at one instant (a pipeline's commands share now): all distinct,
	// each releasable.
	e := newConcEngine(t)
	seen := map[string]bool{}
	for i := range 500 {
		a := acquireAt(t, e, t0, "many", 500, 10e9, "")
		if !a.ok || seen[a.id] || a.id != strconv.FormatInt(t0, 10)+"-"+strconv.Itoa(i+1) {
			t.Fatalf("acquisition %d: %+v (seen: %v)", i, a, seen[a.id])
		}
		seen[a.id] = true
	}
	for id := range seen {
		if intAt(t, e, t0, concReleaseCmd("many", id)) != 1 {
			t.Fatalf("release %s", id)
		}
	}
	if existsAt(t, e, t0, "many") {
		t.Fatal("the key must be gone once every lease is released")
	}
}

func TestConcWrongTypeAndOtherKeyOps(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	exec1(e, t0, Command{Op: OpSet, Key: []byte("str"), Value: []byte("v")})
	exec1(e, t0, throttle("gcra", "", 1))
	for _, key := range []string{"str", "gcra"} {
		for _, c := range []Command{concAcquireCmd(key, 1, 1e9, ""), concReleaseCmd(key, "a"), concRenewCmd(key, "a", 1e9)} {
			if r := exec1(e, t0, c); r.Kind != ReplyError || !errors.Is(r.Err, ErrWrongType) {
				t.Fatalf("%v on %s: %+v, want WRONGTYPE", c.Op, key, r)
			}
		}
	}
	acquireAt(t, e, t0, "k", 2, 10e9, "a")
	if r := exec1(e, t0, Command{Op: OpType, Key: []byte("k")}); r.Str != "concurrency" {
		t.Fatalf("TYPE %+v", r)
	}
	if r := exec1(e, t0, Command{Op: OpRefund, Key: []byte("k"), N: [4]int64{1}}); !errors.Is(r.Err, ErrConcRefund) {
		t.Fatalf("LIMIT.REFUND %+v", r)
	}
	if r := exec1(e, t0, Command{Op: OpExpire, Key: []byte("k"), N: [4]int64{1e9}, Flags: FlagRelative}); !errors.Is(r.Err, ErrLimiterExpiry) {
		t.Fatalf("EXPIRE %+v", r)
	}
	if got := intAt(t, e, t0, Command{Op: OpDel, Key: []byte("k"), Flags: FlagReset}); got != 1 || existsAt(t, e, t0, "k") {
		t.Fatalf("LIMIT.RESET %d", got)
	}
	if got := intAt(t, e, t0, concReleaseCmd("k", "a")); got != 0 || existsAt(t, e, t0, "k") {
		t.Fatalf("release after reset %d; it must not create the key", got)
	}
}

// concPayload is a key's stored payload, through a snapshot.
func concPayload(t *testing.T, e *Engine, now int64, key string) []byte {
	t.Helper()
	var p []byte
	for _, s := range e.Snapshot(now) {
		s.Each(func(r SnapshotRecord) error {
			if string(r.Key) == key {
				p = append([]byte(nil), r.Payload...)
			}
			return nil
		})
	}
	return p
}

// A key's memory is bounded by max: the record grows by doubling up to max
// slots and no further, gives memory back as leases go, and at the
// largest max (65536) the record of a key with a 1 KB name fits the 1 MiB
// record limit.
func TestConcMemoryBoundedByMax(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	const max = 100
	for i := range max {
		acquireAt(t, e, t0, "k", max, 10e9, strconv.Itoa(i))
	}
	if a := acquireAt(t, e, t0, "k", max, 10e9, "extra"); a.ok {
		t.Fatalf("acquisition %d admitted past max: %+v", max+1, a)
	}
	if n := len(concPayload(t, e, t0, "k")); n != concHeader+concSlot*max {
		t.Fatalf("payload of %d leases under max %d: %d bytes, want %d", max, max, n, concHeader+concSlot*max)
	}
	for i := range max - 3 {
		intAt(t, e, t0, concReleaseCmd("k", strconv.Itoa(i)))
	}
	if n := len(concPayload(t, e, t0, "k")); n > concHeader+concSlot*12 {
		t.Fatalf("payload of 3 leases after 97 releases: %d bytes, want at most 12 slots", n)
	}
	// Expired leases are dropped by the next change: 3 expired, one new.
	acquireAt(t, e, t0+10e9, "k", max, 10e9, "new")
	if n := len(concPayload(t, e, t0+10e9, "k")); n > concHeader+concSlot*4 {
		t.Fatalf("payload of 1 lease: %d bytes", n)
	}

	tab := shard.NewTable()
	long := make([]byte, 1000)
	if _, err := tab.Insert(long, shard.Hash(long), shard.KindConcurrency, 1, concHeader+concSlot*MaxConcLimit); err != nil {
		t.Fatalf("a record of %d leases does not fit: %v", MaxConcLimit, err)
	}
}

// The full-size case: a key holding 65535 leases (restored from a
// snapshot, since filling it one command at a time is quadratic) admits
// the 65536th with the engine's own id, growing its record to 65536 slots
// under a 1 KB key name, and refuses the next.
func TestConcLargestMax(t *testing.T) {
	e := newConcEngine(t)
	t0 := int64(1e12)
	const held = MaxConcLimit - 1
	payload := make([]byte, concHeader+concSlot*held)
	s := concLeases{payload}
	putI(payload, 0, MaxConcLimit)
	putI(payload, 1, held)
	putI(payload, 2, held)
	for i := range held {
		s.setLease(i, t0+60e9+int64(i), concHash([]byte(fmt.Sprintf("%d-%d", t0, i+1))))
	}
	key := string(make([]byte, 1000))
	if err := e.Restore([]SnapshotRecord{{Kind: uint8(shard.KindConcurrency), ExpireAt: t0 + 60e9 + held - 1, Key: []byte(key), Payload: payload}}); err != nil {
		t.Fatal(err)
	}
	if info := concInfoAt(t, e, t0, key); info["holders"] != held || info["next_expiry_ms"] != 60000 {
		t.Fatalf("restored: %v", info)
	}
	want := concAns{true, fmt.Sprintf("%d-%d", t0, MaxConcLimit), MaxConcLimit, 60000}
	if a := acquireAt(t, e, t0, key, MaxConcLimit, 120e9, ""); a != want {
		t.Fatalf("acquisition %d: %+v, want %+v", MaxConcLimit, a, want)
	}
	if n := len(concPayload(t, e, t0, key)); n != concHeader+concSlot*MaxConcLimit {
		t.Fatalf("payload %d bytes, want %d slots", n, MaxConcLimit)
	}
	if a := acquireAt(t, e, t0, key, MaxConcLimit, 60e9, ""); a.ok || a.holders != MaxConcLimit {
		t.Fatalf("acquisition %d: %+v, want refused", MaxConcLimit+1, a)
	}
	if intAt(t, e, t0, concReleaseCmd(key, fmt.Sprintf("%d-%d", t0, 17))) != 1 {
		t.Fatal("a restored lease's id does not release it")
	}
	if a := acquireAt(t, e, t0, key, MaxConcLimit, 60e9, "after"); !a.ok {
		t.Fatalf("after a release: %+v", a)
	}
}

// concWorkload fills c with a CONC command for the journal tests'
// workload: acquisitions with ids from a small set (so that some renew)
// or without (the engine makes the id), under a max that changes,
// releases and renewals, with leases short enough to end while it runs.
func concWorkload(rng *rand.Rand, c *Command) {
	id := []byte(fmt.Sprintf("l%d", rng.IntN(6)))
	lease := int64(1+rng.IntN(300)) * 1e6
	switch rng.IntN(4) {
	case 0, 1:
		c.Op, c.N = OpConcAcquire, [4]int64{int64(1 + rng.IntN(4)), lease}
		if rng.IntN(3) > 0 {
			c.Value = id
		}
	case 2:
		c.Op, c.Value = OpConcRelease, id
	case 3:
		c.Op, c.Value, c.N[0] = OpConcRenew, id, lease
	}
}

// The journal tests' workload leaves concurrency keys holding several
// leases, and refuses acquisitions, so that replaying its journal (and a
// snapshot plus its tail) rebuilding every record byte for byte covers
// this family.
func TestJournalWorkloadHoldsLeases(t *testing.T) {
	live, _, clk := journaledEngine(t)
	workload(live, clk, 1, 300, nil)
	var keys, multi int
	for _, s := range live.Snapshot(clk.Now()) {
		s.Each(func(r SnapshotRecord) error {
			if shard.Kind(r.Kind) == shard.KindConcurrency {
				keys++
				if (concLeases{r.Payload}).count() > 1 {
					multi++
				}
			}
			return nil
		})
	}
	if keys < 3 || multi == 0 {
		t.Fatalf("the workload left %d concurrency keys, %d with more than one lease: too little to prove replay", keys, multi)
	}
}

// BenchmarkConcAcquireRelease is one acquisition and its release on a key
// already holding n leases: each command reads the key's leases once or
// twice, so the cost grows with the holders.
func BenchmarkConcAcquireRelease(b *testing.B) {
	for _, held := range []int{0, 10, 1000, MaxConcLimit - 1} {
		b.Run(fmt.Sprintf("holders=%d", held), func(b *testing.B) {
			e := New(Config{Shards: 1})
			defer e.Close()
			t0 := int64(1e12)
			payload := make([]byte, concHeader+concSlot*max(held, 1))
			s := concLeases{payload}
			putI(payload, 0, MaxConcLimit)
			putI(payload, 2, int64(held))
			for i := range held {
				s.setLease(i, t0+3600e9, concHash([]byte(strconv.Itoa(i))))
			}
			if err := e.Restore([]SnapshotRecord{{Kind: uint8(shard.KindConcurrency), ExpireAt: t0 + 3600e9, Key: []byte("k"), Payload: payload}}); err != nil {
				b.Fatal(err)
			}
			batch := Batch{Cmds: []Command{concAcquireCmd("k", MaxConcLimit, 60e9, "x"), concReleaseCmd("k", "x")}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				e.Execute(&batch, t0)
				if r := batch.Replies[1]; r.Int != 1 {
					b.Fatalf("%+v %+v", batch.Replies[0], r)
				}
			}
		})
	}
}

// LIMIT.ALL takes a rate slot and a concurrency slot together or neither:
// a full concurrency key refuses the rate limit's charge, a refused rate
// limit takes no lease, and the dry run's reply is what the commit gives.
func TestConcInLimitAll(t *testing.T) {
	e := newConcEngine(t)
	now := int64(1e12)
	all := func(concID string) Command {
		return Command{Op: OpLimitAll, Sub: []Command{throttle("rate", "", 1), concAcquireCmd("conc", 2, 5e9, concID)}}
	}
	outcome := func(r Reply) (limited, trip int64, lease concAns) {
		t.Helper()
		if r.Kind != ReplyArray || len(r.Items) != 3 || len(r.Items[2].Items) != 2 {
			t.Fatalf("LIMIT.ALL replied %+v", r)
		}
		return r.Items[0].Int, r.Items[1].Int, concAnswer(t, r.Items[2].Items[1])
	}
	// Both fit: the lease is taken, with the id the server made.
	limited, trip, got := outcome(exec1(e, now, all("")))
	if limited != 0 || trip != -1 || !got.ok || got.holders != 1 || got.nextMS != 5000 {
		t.Fatalf("first LIMIT.ALL: limited %d trip %d lease %+v", limited, trip, got)
	}
	if got.id != "1000000000000-1" {
		t.Fatalf("made lease id %q", got.id)
	}
	if info := concInfoAt(t, e, now, "conc"); info["holders"] != 1 {
		t.Fatalf("after an admitted LIMIT.ALL: %v", info)
	}
	// The second holder, with its own id.
	if limited, _, got = outcome(exec1(e, now+1e9, all("b"))); limited != 0 || got.id != "b" || got.holders != 2 || got.nextMS != 4000 {
		t.Fatalf("second LIMIT.ALL: limited %d lease %+v", limited, got)
	}
	// Full: the concurrency limit trips and the rate limit is not charged.
	before := remaining(t, e, now+1e9, "rate")
	if limited, trip, got = outcome(exec1(e, now+1e9, all("c"))); limited != 1 || trip != 1 || got.ok || got.holders != 2 {
		t.Fatalf("LIMIT.ALL on a full key: limited %d trip %d lease %+v", limited, trip, got)
	}
	if after := remaining(t, e, now+1e9, "rate"); after != before {
		t.Fatalf("a LIMIT.ALL refused by its concurrency limit charged the rate limit: remaining %d -> %d", before, after)
	}
	// The rate limit trips (burst 2 spent): no lease is taken, though the
	// concurrency limit's reply says what it would have been.
	intAt(t, e, now+1e9, concReleaseCmd("conc", "b"))
	exec1(e, now+1e9, throttle("rate", "", remaining(t, e, now+1e9, "rate")))
	limited, trip, got = outcome(exec1(e, now+1e9, all("d")))
	if limited != 1 || trip != 0 || !got.ok || got.id != "d" || got.holders != 2 {
		t.Fatalf("LIMIT.ALL refused by its rate limit: limited %d trip %d lease %+v", limited, trip, got)
	}
	if info := concInfoAt(t, e, now+1e9, "conc"); info["holders"] != 1 {
		t.Fatalf("a refused LIMIT.ALL took a lease: %v", info)
	}
	if intAt(t, e, now+1e9, concReleaseCmd("conc", "d")) != 0 {
		t.Fatal("a refused LIMIT.ALL's lease id can be released")
	}
	// Renewing through LIMIT.ALL: the id already holding a lease moves
	// its end, taking no second slot.
	first := "1000000000000-1"
	if limited, _, got = outcome(exec1(e, now+30e9, all(first))); limited != 0 || !got.ok || got.holders != 1 {
		t.Fatalf("an expired holder's id again: limited %d lease %+v", limited, got)
	}
	// Wrong type: the error is LIMIT.ALL's reply, nothing charged.
	exec1(e, now+30e9, Command{Op: OpSet, Key: []byte("str"), Value: []byte("v")})
	before = remaining(t, e, now+30e9, "rate")
	r := exec1(e, now+30e9, Command{Op: OpLimitAll, Sub: []Command{throttle("rate", "", 1), concAcquireCmd("str", 2, 5e9, "")}})
	if r.Kind != ReplyError || !errors.Is(r.Err, ErrWrongType) {
		t.Fatalf("LIMIT.ALL over a string key: %+v", r)
	}
	if after := remaining(t, e, now+30e9, "rate"); after != before {
		t.Fatalf("a LIMIT.ALL that failed charged: %d -> %d", before, after)
	}
}

// A LIMIT.ALL with a request id keeps its reply, lease id and all, so a
// retry gets the same lease rather than another slot.
func TestConcInLimitAllWithReqID(t *testing.T) {
	e := newConcEngine(t)
	now := int64(1e12)
	c := Command{Op: OpLimitAll, Sub: []Command{throttle("rate", "", 1), concAcquireCmd("conc", 1, 5e9, "")}, ReqID: []byte("req-1"), ReqTTL: 10e9}
	first := exec1(e, now, c)
	again := exec1(e, now+1e9, c)
	if shape(first) != shape(again) || concAnswer(t, again.Items[2].Items[1]).id != concAnswer(t, first.Items[2].Items[1]).id {
		t.Fatalf("retry: %+v, want %+v", again, first)
	}
	if info := concInfoAt(t, e, now+1e9, "conc"); info["holders"] != 1 {
		t.Fatalf("after a LIMIT.ALL and its retry: %v", info)
	}
	// A refusal is remembered too: a nil lease id in the receipt.
	c.ReqID = []byte("req-2")
	refused := exec1(e, now+1e9, c)
	if refused.Items[0].Int != 1 || refused.Items[2].Items[1].Items[1].Kind != ReplyNil {
		t.Fatalf("LIMIT.ALL on a full key: %+v", refused)
	}
	if got := exec1(e, now+2e9, c); shape(got) != shape(refused) || got.Items[2].Items[1].Items[1].Kind != ReplyNil {
		t.Fatalf("retry of the refusal: %+v", got)
	}
}
