package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
)

type modelEntry struct {
	kind    Kind
	exp     int64
	payload []byte
}

// checkAgainst verifies that the table holds exactly the model's live entries.
func checkAgainst(t *testing.T, tb *Table, model map[string]modelEntry, now int64) {
	t.Helper()
	for k, m := range model {
		e, ok := tb.Get([]byte(k), Hash([]byte(k)), now)
		live := m.exp == 0 || m.exp > now
		if ok != live {
			t.Fatalf("key %q: present=%v, want %v", k, ok, live)
		}
		if !live {
			delete(model, k)
			continue
		}
		if e.Kind != m.kind || !bytes.Equal(e.Payload, m.payload) || tb.ExpireAt(e) != m.exp || string(e.Key) != k {
			t.Fatalf("key %q: got kind %d payload %x exp %d", k, e.Kind, e.Payload, tb.ExpireAt(e))
		}
	}
	seen := 0
	tb.ForEach(now, func(e Entry, exp int64) bool {
		if _, ok := model[string(e.Key)]; !ok {
			t.Fatalf("table holds %q which the model does not", e.Key)
		}
		seen++
		return true
	})
	if seen != len(model) {
		t.Fatalf("ForEach saw %d records, model has %d", seen, len(model))
	}
}

func TestTableAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tb := NewTable()
	model := map[string]modelEntry{}
	now := int64(1000)
	for step := 0; step < 200000; step++ {
		k := fmt.Sprintf("key:%d", rng.IntN(5000))
		h := Hash([]byte(k))
		switch op := rng.IntN(10); {
		case op < 4: // insert or overwrite
			pl := rng.IntN(40)
			exp := int64(0)
			if rng.IntN(2) == 0 {
				exp = now + int64(rng.IntN(500)) + 1
			}
			e, err := tb.Insert([]byte(k), h, KindGCRA, exp, pl)
			if err != nil {
				t.Fatal(err)
			}
			for i := range e.Payload {
				e.Payload[i] = byte(rng.Uint32())
			}
			model[k] = modelEntry{KindGCRA, exp, bytes.Clone(e.Payload)}
		case op < 6: // resize the payload
			e, ok := tb.Get([]byte(k), h, now)
			if !ok {
				continue
			}
			n := rng.IntN(80)
			e, err := tb.Resize(e, n)
			if err != nil {
				t.Fatal(err)
			}
			m := model[k]
			old := m.payload
			m.payload = make([]byte, n)
			copy(m.payload, old)
			if !bytes.Equal(e.Payload, m.payload) {
				t.Fatalf("resize of %q lost the payload prefix", k)
			}
			model[k] = m
		case op < 7:
			if e, ok := tb.Get([]byte(k), h, now); ok {
				tb.Delete(e)
				delete(model, k)
			}
		case op < 8:
			now += int64(rng.IntN(20))
		default:
			tb.Sweep(now, 64)
		}
		if step%20000 == 0 {
			checkAgainst(t, tb, model, now)
		}
	}
	checkAgainst(t, tb, model, now)
	// Everything expires; sweeping must free it all and release the pages.
	now += 1 << 20
	for k, m := range model {
		if m.exp == 0 {
			e, _ := tb.Get([]byte(k), Hash([]byte(k)), now)
			tb.Delete(e)
		}
	}
	for i := 0; i < 1000; i++ {
		tb.Sweep(now, 1024)
	}
	if tb.Len() != 0 {
		t.Fatalf("after sweeping everything %d records remain", tb.Len())
	}
	if tb.MemoryUsage() > 64<<10 {
		t.Fatalf("empty table still holds %d bytes", tb.MemoryUsage())
	}
}

func TestScanCoversEveryKeyOnceAcrossResizes(t *testing.T) {
	tb := NewTable()
	keys := map[string]bool{}
	for i := 0; i < 3000; i++ {
		k := fmt.Sprintf("k%d", i)
		keys[k] = true
		if _, err := tb.Insert([]byte(k), Hash([]byte(k)), KindString, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	cursor := uint64(0)
	for step := 0; cursor < 1<<32; step++ {
		cursor = tb.Scan(cursor, 37, 0, func(key []byte, _ Kind) { seen[string(key)]++ })
		if step == 10 { // grow the index mid-scan with keys the scan need not report
			for i := 0; i < 5000; i++ {
				k := fmt.Sprintf("extra%d", i)
				tb.Insert([]byte(k), Hash([]byte(k)), KindString, 0, 1)
			}
		}
	}
	for k := range keys {
		if seen[k] != 1 {
			t.Fatalf("key %s seen %d times", k, seen[k])
		}
	}
}

// TestBytesPerLimiter reports the table's memory per GCRA and sliding-window
// record at 1M keys of 16 bytes spread over 16 shard tables, the layout the
// server uses, measured from the heap after GC.
func TestBytesPerLimiter(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a million records")
	}
	for _, c := range []struct {
		name    string
		kind    Kind
		payload int
		budget  float64
	}{
		{"gcra", KindGCRA, 16, 64},
		{"sliding-window", KindSlidingWindow, 32, 80},
	} {
		const n, shards = 1_000_000, 16
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tables := make([]*Table, shards)
		for i := range tables {
			tables[i] = NewTable()
		}
		key := make([]byte, 16)
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint64(key[8:], uint64(i))
			copy(key, "user:id:")
			h := Hash(key)
			if _, err := tables[h%shards].Insert(key, h, c.kind, 1, c.payload); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := float64(after.HeapAlloc-before.HeapAlloc) / n
		t.Logf("%s: %.1f bytes per limiter (heap after GC, 1M keys of 16 bytes)", c.name, per)
		if per > c.budget {
			t.Errorf("%s: %.1f bytes per limiter, budget %.0f", c.name, per, c.budget)
		}
		runtime.KeepAlive(tables)
	}
}

// BenchmarkClone is the pause a snapshot costs one shard owner: a copy of
// a table holding 125k GCRA records (1M keys over 8 shards).
func BenchmarkClone(b *testing.B) {
	tb := NewTable()
	key := make([]byte, 16)
	for i := 0; i < 125_000; i++ {
		binary.BigEndian.PutUint64(key[8:], uint64(i))
		copy(key, "user:id:")
		tb.Insert(key, Hash(key), KindGCRA, 1, 16)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb.Clone()
	}
}

// CutFront drops payload bytes after a kept prefix without moving the
// rest; the record stays findable, its key and expiry intact, and the
// space it left is a dead record the compactor walks over.
func TestCutFront(t *testing.T) {
	tb := NewTable()
	key := []byte("log:1")
	h := Hash(key)
	payload := make([]byte, 5000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	e, err := tb.Insert(key, h, KindZSet, 123456, len(payload))
	if err != nil {
		t.Fatal(err)
	}
	copy(e.Payload, payload)
	want := append([]byte(nil), payload...)
	for _, cut := range []struct{ keep, n int }{{4, 100}, {4, 1}, {0, 300}, {4, 12}, {10, 2000}, {4, 139}} {
		e, _ = tb.Get(key, h, 0)
		ne, ok := tb.CutFront(e, cut.keep, cut.n)
		if !ok {
			// Too small for a dead record: nothing changed.
			if got, _ := tb.Get(key, h, 0); string(got.Payload) != string(want) {
				t.Fatalf("refused cut %v changed the record", cut)
			}
			continue
		}
		want = append(want[:cut.keep:cut.keep], want[cut.keep+cut.n:]...)
		if string(ne.Payload) != string(want) || string(ne.Key) != string(key) {
			t.Fatalf("after cut %v: payload or key differ", cut)
		}
		got, ok := tb.Get(key, h, 0)
		if !ok || string(got.Payload) != string(want) || tb.ExpireAt(got) != 123456 || got.Kind != KindZSet {
			t.Fatalf("after cut %v: lookup gives %v", cut, ok)
		}
	}
	// Many more records, then compaction over the dead ones.
	for i := 0; i < 20000; i++ {
		k := []byte("k" + strconv.Itoa(i))
		e, _ := tb.Insert(k, Hash(k), KindString, 0, 40)
		e.Payload[0] = byte(i)
	}
	for i := 0; i < 20000; i += 2 {
		k := []byte("k" + strconv.Itoa(i))
		e, _ := tb.Get(k, Hash(k), 0)
		tb.Delete(e)
	}
	for range 200 {
		tb.Sweep(0, 1024)
	}
	if got, ok := tb.Get(key, h, 0); !ok || string(got.Payload) != string(want) {
		t.Fatal("the cut record did not survive compaction")
	}
	c := tb.Clone()
	if got, ok := c.Get(key, h, 0); !ok || string(got.Payload) != string(want) {
		t.Fatal("the cut record did not survive a clone")
	}
}

// The side table goes with its table (clone, sweep, clear, memory) and is
// not part of its key space.
func TestSideTable(t *testing.T) {
	tab := NewTable()
	if tab.Side(false) != nil {
		t.Fatal("a side table before first use")
	}
	base := tab.MemoryUsage()
	side := tab.Side(true)
	for i := range 1000 {
		k := []byte(fmt.Sprintf("r%d", i))
		e, err := side.InsertAbsent(k, Hash(k), KindReceipt, int64(100+i%2*1000), 8)
		if err != nil {
			t.Fatal(err)
		}
		copy(e.Payload, "receipt!")
	}
	if tab.Len() != 0 || side.Len() != 1000 {
		t.Fatalf("Len %d, side Len %d, want 0 and 1000", tab.Len(), side.Len())
	}
	if tab.MemoryUsage() < base+1000*20 {
		t.Fatalf("MemoryUsage %d leaves out the side table (base %d)", tab.MemoryUsage(), base)
	}
	seen := 0
	tab.ForEach(0, func(Entry, int64) bool { seen++; return true })
	if seen != 0 {
		t.Fatalf("ForEach saw %d side records", seen)
	}
	clone := tab.Clone()
	// Half the side records expire at 100: sweeping frees them, and the
	// main table, empty, keeps its side table.
	for range 10 {
		tab.Sweep(500, 1<<20)
	}
	if side := tab.Side(false); side == nil || side.Len() != 500 {
		t.Fatalf("after the sweep: side %v", side)
	}
	if cs := clone.Side(false); cs == nil || cs.Len() != 1000 {
		t.Fatal("the clone's side table is not a copy")
	}
	k := []byte("r1")
	if e, ok := clone.Side(false).Get(k, Hash(k), 0); !ok || string(e.Payload) != "receipt!" {
		t.Fatalf("the clone's side record: %v %q", ok, e.Payload)
	}
	tab.Clear()
	if tab.Side(false) != nil {
		t.Fatal("Clear kept the side table")
	}
}
