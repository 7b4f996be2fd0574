package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shard"
)

// checkSketch holds a sketch to Space-Saving's guarantees against the true
// counts of the stream it saw: every tracked key's count overestimates by
// at most its error, every key above N/capacity is tracked, the counts sum
// to N once the sketch is full, and the heap and index are consistent.
func checkSketch(t *testing.T, s *hotSketch, truth map[string]int64, n int64) {
	t.Helper()
	found := make([]bool, s.n)
	for key, tr := range truth {
		slot, _ := s.find([]byte(key), shard.Hash([]byte(key)))
		if slot < 0 {
			if tr > n/HotKeysCapacity {
				t.Fatalf("%.20q: %d of %d decisions, more than N/%d, not tracked", key, tr, n, HotKeysCapacity)
			}
			continue
		}
		if found[slot] {
			t.Fatalf("%.20q: slot %d tracks two keys", key, slot)
		}
		found[slot] = true
		if s.count(slot) < tr || s.count(slot)-s.slots[slot].err > tr {
			t.Fatalf("%.20q: count %d error %d, true %d", key, s.count(slot), s.slots[slot].err, tr)
		}
	}
	var sum int64
	for slot := 0; slot < s.n; slot++ {
		if !found[slot] {
			t.Fatalf("slot %d (%.20q) tracks no key of the stream", slot, s.stored(slot))
		}
		sum += s.count(slot)
	}
	// The buckets, smallest first: counts ascending, each ring's slots
	// naming their bucket, every slot in exactly one ring.
	inRing, last := 0, int64(0)
	for b := s.bmin; b != 0; b = s.buckets[b-1].up {
		if s.buckets[b-1].count <= last {
			t.Fatalf("bucket %d: count %d after %d", b-1, s.buckets[b-1].count, last)
		}
		last = s.buckets[b-1].count
		if up := s.buckets[b-1].up; up != 0 && s.buckets[up-1].down != b {
			t.Fatalf("bucket %d: links broken", b-1)
		}
		head := s.buckets[b-1].head
		for slot := head; ; {
			if s.slots[slot].bucket != b || s.slots[s.slots[slot].prev].next != slot {
				t.Fatalf("slot %d in bucket %d's ring: bucket %d, links broken", slot, b-1, s.slots[slot].bucket-1)
			}
			inRing++
			if slot = s.slots[slot].next; slot == head {
				break
			}
		}
	}
	if inRing != s.n {
		t.Fatalf("%d slots in the rings, %d in use", inRing, s.n)
	}
	if s.n == HotKeysCapacity && sum != n {
		t.Fatalf("counts sum to %d, want %d", sum, n)
	}
}

// TestHotSketchAdversarial feeds streams built to hurt Space-Saving: one
// more key than counters in turn (every insert evicts), heavy keys hidden
// behind floods of distinct keys and arriving last, keys that differ past
// the stored bytes, and a zipf mix; the guarantees hold throughout.
func TestHotSketchAdversarial(t *testing.T) {
	long := strings.Repeat("p", hotKeyBytes)
	streams := map[string]func(add func(string)){
		"round-robin k+1": func(add func(string)) {
			for i := range 50 * (HotKeysCapacity + 1) {
				add("k" + strconv.Itoa(i%(HotKeysCapacity+1)))
			}
		},
		"heavy last": func(add func(string)) {
			for i := range 20000 {
				add("flood" + strconv.Itoa(i))
			}
			for i := range 900 {
				add("late" + strconv.Itoa(i%3))
			}
		},
		"heavy hidden in floods": func(add func(string)) {
			for i := range 30000 {
				add("f" + strconv.Itoa(i))
				if i%50 == 0 {
					add("hidden")
				}
			}
		},
		"long keys sharing a prefix": func(add func(string)) {
			for i := range 20000 {
				add(long + strconv.Itoa(i%(2*HotKeysCapacity)))
				if i%20 == 0 {
					add(long + "hot")
				}
			}
		},
		"zipf": func(add func(string)) {
			z := rand.NewZipf(rand.New(rand.NewSource(1)), 1.1, 1, 1e6)
			for range 100000 {
				add("z" + strconv.FormatUint(z.Uint64(), 10))
			}
		},
	}
	// Weighted, as sampling adds them: the bounds hold for the weighted
	// counts. Weights up to 40 pass several buckets on the way up.
	for _, weights := range []string{"1", "sampled", "1 to 40"} {
		for name, stream := range streams {
			t.Run(name+"/weights="+weights, func(t *testing.T) {
				s := new(hotSketch)
				truth := map[string]int64{}
				r := rand.New(rand.NewSource(7))
				var n, adds int64
				stream(func(key string) {
					w := int64(1)
					switch weights {
					case "sampled":
						if adds > hotExactDecisions/4 {
							w = hotSampleEvery
						}
					case "1 to 40":
						w = 1 + r.Int63n(40)
					}
					s.add([]byte(key), shard.Hash([]byte(key)), w)
					truth[key] += w
					n += w
					if adds++; adds%997 == 0 {
						checkSketch(t, s, truth, n)
					}
				})
				checkSketch(t, s, truth, n)
			})
		}
	}
}

// TestHotKeysSampling feeds one shard's sketches far more decisions than
// they count exactly: zipf traffic over a million keys with planted heavy
// keys, some refused. Every listed key's true count must lie within its
// bounds (count - error <= true <= count + error), every planted key must
// be listed above every background key, and the sampling error must be
// what it says: the planted keys' errors are not all on one side, and are
// a few standard deviations at most.
func TestHotKeysSampling(t *testing.T) {
	now := 1000 * HotKeysWindow
	h := &hotShard{start: now, rng: 0x9e3779b9}
	r := rand.New(rand.NewSource(3))
	zipf := rand.NewZipf(r, 1.1, 50, 1_000_000-1)
	planted := map[string]int{"hot:1": 40_000, "hot:2": 25_000, "hot:3": 12_000, "hot:4": 6_000}
	refusedOf := map[string]bool{"hot:2": true, "hot:4": true}
	var stream []string
	for range 400_000 {
		stream = append(stream, "bg:"+strconv.FormatUint(zipf.Uint64(), 10))
	}
	for k, n := range planted {
		for range n {
			stream = append(stream, k)
		}
	}
	r.Shuffle(len(stream), func(i, j int) { stream[i], stream[j] = stream[j], stream[i] })
	truth := [2]map[string]int64{{}, {}}
	for i, k := range stream {
		key := []byte(k)
		hash := shard.Hash(key)
		h.offer(HotByDecisions, key, hash)
		truth[HotByDecisions][k]++
		// Planted refusals, and one background decision in five.
		if refusedOf[k] || (!isPlanted(planted, k) && i%5 == 0) {
			h.offer(HotByRefusals, key, hash)
			truth[HotByRefusals][k]++
		}
	}
	for _, by := range []HotKeyBy{HotByDecisions, HotByRefusals} {
		if !h.win[h.cur].by[by].sampled {
			t.Fatalf("by %d: %d decisions, not sampled", by, h.seen[by])
		}
		top := h.top(by, now)
		slices.SortFunc(top, func(a, b HotKey) int { return cmpDesc(a.Count, b.Count) })
		var above, below int
		for i, e := range top {
			tr := truth[by][string(e.Key)]
			if tr < e.Count-e.Err || tr > e.Count+e.Err {
				t.Fatalf("by %d: %s: count %d error %d, true %d", by, e.Key, e.Count, e.Err, tr)
			}
			if isPlanted(planted, string(e.Key)) && (by == HotByDecisions || refusedOf[string(e.Key)]) {
				if i >= len(planted) {
					t.Fatalf("by %d: %s ranked %d: %v", by, e.Key, i, top[:len(planted)+1])
				}
				sd := math.Sqrt(float64((hotSampleEvery - 1) * tr))
				dev := float64(e.Count-tr) / sd
				t.Logf("by %d: %s: count %d (%+.2f sd), error %d, true %d", by, e.Key, e.Count, dev, e.Err, tr)
				if dev > 0 {
					above++
				} else {
					below++
				}
			}
		}
		if by == HotByDecisions && (above == 0 || below == 0) {
			t.Fatalf("the planted keys' counts are all on one side of the truth: %d above, %d below", above, below)
		}
	}
}

func isPlanted(planted map[string]int, key string) bool { _, ok := planted[key]; return ok }

// TestHotKeysWindows drives decisions through the engine at chosen times:
// decisions and refusals are counted, peeks are not, a window's counts move
// to the previous window (weighted in the rate) and then drop out, OBJECT
// FREQ reads the same count, and turning tracking off forgets everything.
func TestHotKeysWindows(t *testing.T) {
	e := New(Config{Shards: 4})
	defer e.Close()
	run := func(now int64, cmds ...Command) []Reply {
		var b Batch
		for _, c := range cmds {
			*b.Add() = c
		}
		e.Execute(&b, now)
		return b.Replies
	}
	throttle := func(key string, burst, quantity int64, times int) []Command {
		var cs []Command
		for range times {
			cs = append(cs, Command{Op: OpThrottle, Key: []byte(key), N: [4]int64{burst, 1, int64(time.Minute), quantity}})
		}
		return cs
	}
	type entry struct {
		key        string
		count, err int64
		rate       float64
	}
	ranking := func(by HotKeyBy, now int64) []entry {
		var out []entry
		for _, h := range e.HotKeys(by, HotKeysCapacity, now) {
			out = append(out, entry{string(h.Key), h.Count, h.Err, h.Rate})
		}
		return out
	}
	expect := func(what string, got []entry, want ...entry) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
	// Mid-window, so that the next window starts half a window later.
	t0 := 1000*HotKeysWindow + HotKeysWindow/2
	var cmds []Command
	cmds = append(cmds, throttle("hot", 9, 1, 30)...) // 10 allowed, 20 refused
	cmds = append(cmds, throttle("warm", 100, 1, 10)...)
	cmds = append(cmds, throttle("warm", 100, 0, 50)...) // peeks
	refused := 0
	for _, r := range run(t0, cmds...) {
		if r.Dec.Limited {
			refused++
		}
	}
	if refused != 20 {
		t.Fatalf("%d refused, want 20", refused)
	}
	expect("decisions", ranking(HotByDecisions, t0), entry{"hot", 30, 0, 3}, entry{"warm", 10, 0, 1})
	expect("refusals", ranking(HotByRefusals, t0), entry{"hot", 20, 0, 2})
	freq := func(key string, now int64) Reply {
		return run(now, Command{Op: OpObject, Key: []byte(key), N: [4]int64{ObjectFreq}})[0]
	}
	if r := freq("hot", t0); r.Kind != ReplyInt || r.Int != 30 {
		t.Fatalf("OBJECT FREQ hot: %+v", r)
	}
	if r := freq("warm", t0); r.Kind != ReplyInt || r.Int != 10 {
		t.Fatalf("OBJECT FREQ warm: %+v", r)
	}

	// Half a window on, the next window starts: the counts are the
	// previous window's, weighted in the rate by the part of it still
	// inside the last window: all of it, then half.
	t1 := t0 + HotKeysWindow/2
	expect("next window, read", ranking(HotByDecisions, t1), entry{"hot", 30, 0, 3}, entry{"warm", 10, 0, 1})
	run(t1, throttle("hot", 9, 1, 4)...)
	expect("next window, decided", ranking(HotByDecisions, t1), entry{"hot", 34, 0, 3.4}, entry{"warm", 10, 0, 1})
	expect("next window, half way", ranking(HotByDecisions, t1+HotKeysWindow/2), entry{"hot", 34, 0, 1.9}, entry{"warm", 10, 0, 0.5})
	// A window later the first window is gone.
	t2 := t1 + HotKeysWindow
	expect("two windows on", ranking(HotByDecisions, t2), entry{"hot", 4, 0, 0.4})
	expect("three windows on", ranking(HotByDecisions, t2+HotKeysWindow))

	run(t2, throttle("hot", 9, 1, 1)...)
	e.SetHotKeysTracking(false)
	if e.HotKeysTracking() {
		t.Fatal("tracking still on")
	}
	if r := freq("hot", t2); r.Kind != ReplyError || r.Err != errNoLFU {
		t.Fatalf("OBJECT FREQ with tracking off: %+v", r)
	}
	run(t2, throttle("hot", 9, 1, 3)...)
	e.SetHotKeysTracking(true)
	expect("off and on again", ranking(HotByDecisions, t2))
	run(t2, throttle("hot", 9, 1, 2)...)
	expect("tracking again", ranking(HotByDecisions, t2), entry{"hot", 2, 0, 0.2})
}

// BenchmarkHotKeys is BenchmarkExecute's cl.throttle pipeline with hot-key
// tracking on and off: uniform keys (every decision on an untracked key
// evicts, the sketch's worst case) and zipf keys (a few keys take most
// decisions, as hot keys do), in the steady state of a window (past the
// decisions a sketch counts exactly). Compare with benchstat -col /tracking.
func BenchmarkHotKeys(b *testing.B) {
	const seqLen = 1 << 16
	for _, w := range []struct {
		name string
		keys int
		next func(r *rand.Rand) func() uint64
	}{
		{"uniform/keys=10000", 10_000, func(r *rand.Rand) func() uint64 { return func() uint64 { return uint64(r.Intn(10_000)) } }},
		{"uniform/keys=1000000", 1_000_000, func(r *rand.Rand) func() uint64 { return func() uint64 { return uint64(r.Intn(1_000_000)) } }},
		{"zipf/keys=1000000", 1_000_000, func(r *rand.Rand) func() uint64 { return rand.NewZipf(r, 1.1, 1, 1_000_000-1).Uint64 }},
	} {
		next := w.next(rand.New(rand.NewSource(1)))
		seq := make([]uint64, seqLen)
		for i := range seq {
			seq[i] = next()
		}
		for _, tracking := range []string{"on", "off"} {
			b.Run("cl.throttle/"+w.name+"/tracking="+tracking, func(b *testing.B) {
				e := New(Config{Shards: 8, HotKeysOff: tracking == "off"})
				defer e.Close()
				var batch Batch
				keyBuf := make([]byte, 16*16)
				run := func(from, n int) {
					for i := from; i < from+n; i += 16 {
						batch.Reset()
						for k := 0; k < 16; k++ {
							key := keyBuf[16*k : 16*k+16]
							copy(key, "user:id:")
							binary.BigEndian.PutUint64(key[8:], seq[(i+k)%seqLen])
							cmd := batch.Add()
							cmd.Op, cmd.N = OpThrottle, [4]int64{99, 100, 1e9, 1}
							cmd.Key = key
						}
						e.Execute(&batch, time.Now().UnixNano())
					}
				}
				// Past every shard's exact part of the window (the
				// steady state: at a few hundred thousand decisions a
				// second per shard, it is under 1% of a window).
				run(0, 4*8*hotExactDecisions)
				b.ReportAllocs()
				b.ResetTimer()
				run(0, b.N)
			})
		}
	}
}

// BenchmarkHotKeysOwner is the shard owner's CPU per decision with
// hot-key tracking on and off, on the owner's goroutine with nothing else
// between decisions: the table lookup, the decision and the sketches, no
// routing or goroutine hand-offs, whose scheduling noise hides a few
// percent in BenchmarkHotKeys. Keys as there; 2,000 decisions a simulated
// millisecond on the shard's clock (a window is 20M of them), timed past
// the window's exact part.
func BenchmarkHotKeysOwner(b *testing.B) {
	const seqLen = 1 << 16
	for _, w := range []struct {
		name string
		next func(r *rand.Rand) func() uint64
	}{
		{"uniform/keys=10000", func(r *rand.Rand) func() uint64 { return func() uint64 { return uint64(r.Intn(10_000)) } }},
		{"uniform/keys=1000000", func(r *rand.Rand) func() uint64 { return func() uint64 { return uint64(r.Intn(1_000_000)) } }},
		{"zipf/keys=1000000", func(r *rand.Rand) func() uint64 { return rand.NewZipf(r, 1.1, 1, 1_000_000-1).Uint64 }},
	} {
		next := w.next(rand.New(rand.NewSource(1)))
		keys := make([][]byte, seqLen)
		for i := range keys {
			keys[i] = binary.BigEndian.AppendUint64([]byte("user:id:"), next())
		}
		for _, tracking := range []string{"on", "off"} {
			b.Run("cl.throttle/"+w.name+"/tracking="+tracking, func(b *testing.B) {
				e := New(Config{Shards: 1, HotKeysOff: tracking == "off"})
				defer e.Close()
				now := 1000 * HotKeysWindow
				e.onShards(func(s int, t *shard.Table) {
					j := &shardJob{e: e, shard: s}
					c := Command{Op: OpThrottle, N: [4]int64{99, 100, 1e9, 1}}
					run := func(n int) {
						for i := range n {
							c.Key = keys[i%seqLen]
							c.hash = shard.Hash(c.Key)
							if r := j.apply(t, &c, now); r.Kind != ReplyDecision {
								b.Fatalf("%+v", r)
							}
							now += 500
						}
					}
					run(4 * hotExactDecisions)
					b.ReportAllocs()
					b.ResetTimer()
					run(b.N)
					b.StopTimer()
				})
			})
		}
	}
}

// BenchmarkHotSketchAdd is one sketch's cost per decision, alone: uniform
// keys over a million (every add evicts) and zipf keys.
func BenchmarkHotSketchAdd(b *testing.B) {
	for _, w := range []struct {
		name string
		gen  func(r *rand.Rand) func() uint64
	}{
		{"uniform", func(r *rand.Rand) func() uint64 { return func() uint64 { return uint64(r.Intn(1_000_000)) } }},
		{"zipf", func(r *rand.Rand) func() uint64 { return rand.NewZipf(r, 1.1, 1, 1_000_000-1).Uint64 }},
	} {
		g := w.gen(rand.New(rand.NewSource(1)))
		keys := make([][]byte, 1<<14)
		hashes := make([]uint64, len(keys))
		for i := range keys {
			keys[i] = binary.BigEndian.AppendUint64([]byte("user:id:"), g())
			hashes[i] = shard.Hash(keys[i])
		}
		b.Run(w.name, func(b *testing.B) {
			s := new(hotSketch)
			for i := 0; i < b.N; i++ {
				k := i & (len(keys) - 1)
				s.add(keys[k], hashes[k], 1)
			}
		})
	}
}

// TestHotKeysSamplingBoundOnSmallCounts: a key tracked exactly from its
// window's start, then sampled for a few dozen decisions, stays within its
// bound in every trial. Its Space-Saving error is 0 (few keys), so the
// sampling term alone must cover a sample that fell short (none of 86
// decisions sampled: once in 250): taken at the observed count, it did not.
func TestHotKeysSamplingBoundOnSmallCounts(t *testing.T) {
	now := 1000 * HotKeysWindow
	key, other := []byte("small"), []byte("other")
	kh, oh := shard.Hash(key), shard.Hash(other)
	misses := 0
	const trials = 1000
	for trial := range trials {
		h := &hotShard{start: now, rng: uint64(trial)*0x9e3779b97f4a7c15 + 1}
		h.offer(HotByDecisions, key, kh) // tracked from the start, exactly
		for range hotExactDecisions - 1 {
			h.offer(HotByDecisions, other, oh)
		}
		truth := int64(1)
		for i := range 4000 {
			if i%47 == 0 { // 86 decisions in the sampled part
				h.offer(HotByDecisions, key, kh)
				truth++
			} else {
				h.offer(HotByDecisions, other, oh)
			}
		}
		for _, e := range h.top(HotByDecisions, now) {
			if string(e.Key) == string(key) && (truth < e.Count-e.Err || truth > e.Count+e.Err) {
				misses++
			}
		}
	}
	if misses > 0 {
		t.Fatalf("%d of %d trials out of the bound", misses, trials)
	}
}
