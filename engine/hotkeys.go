package engine

import (
	"bytes"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/shard"
)

// Hot keys. Sharding does nothing for one hot key: every request on it lands
// on one shard, so operators must see it to shed it at the edge. Each shard
// keeps Space-Saving sketches (Metwally, Agrawal, El Abbadi 2005) of its
// keys by decisions and by refusals, on the shard's owner goroutine like the
// table itself: the decision path takes no lock. A sketch holds
// HotKeysCapacity counters; a decision on a tracked key costs a hash probe
// and an O(1) increment, one on an untracked key takes over a smallest counter
// (copying the key into the sketch's preallocated bytes) and records that
// counter's old value as the newcomer's error. So, per window and shard, of
// N decisions:
//
//   - every reported count overestimates the true count by at most the
//     error reported with it (count - error <= true <= count);
//   - any key with more than N/HotKeysCapacity decisions is tracked.
//
// Sampling. An update costs 40-50 ns alone but 100-350 ns among a big
// table's cache misses, up to half of the owner's work on a decision, and
// was a quarter more per decision in the engine. So a sketch counts every
// decision only until its window has seen hotExactDecisions (light traffic,
// where the cost does not matter, is counted exactly); past that it counts
// one decision in hotSampleEvery, picked at random, as hotSampleEvery of
// them (weighted Space-Saving: the bounds above hold for the weighted
// sample). The weighted count W of a key that had f decisions in the
// sampled part is f plus a zero-mean error of variance f(k-1), k =
// hotSampleEvery; a sampled sketch adds samplingError, hotSamplingSigmas
// standard deviations of it, to each error, and the bounds widen to
// count - error <= true <= count + error, outside which a key falls with a
// probability below 1e-6. A key with more than N/HotKeysCapacity decisions
// is then tracked unless its sample falls that far short.
//
// Decay: the counts are per window of HotKeysWindow of the shard's own time,
// a current and a previous sketch swapped when a decision finds the window
// over (a read past it sees what the swap would leave), as a sliding window
// counter does. A key's count is its
// decisions in the current and previous window (the last 10 to 20 s); its
// rate weighs the previous window by the part of it still inside the last
// HotKeysWindow, as SW.CHECK does.

const (
	// HotKeysCapacity is the counters per sketch: 128 keeps a sketch's
	// bytes (about 23 KiB with the keys) small enough that four per shard
	// cost nothing worth counting, while any key with more than 1/128 of
	// its shard's decisions in a window is guaranteed to be tracked, with
	// a count off by at most 1/128 of them.
	HotKeysCapacity = 128
	// HotKeysWindow is the window length, in ns of shard time.
	HotKeysWindow = int64(10e9)
	// hotKeyBytes is how much of a key a sketch stores. A longer key is
	// still told apart from others (by its hash and length) but reported
	// by its first hotKeyBytes bytes.
	hotKeyBytes = 128
	// hotIndexSize is the sketch's hash index: linear probing at load 1/8,
	// which makes an add about a third cheaper than at 1/2 (BenchmarkHotSketchAdd).
	hotIndexBits = 10
	hotIndexSize = 1 << hotIndexBits

	// hotExactDecisions is how many decisions a sketch counts one by one
	// in a window before it samples: 8192 in 10 s is 819/s per shard, and
	// counting them costs about 1 ms of the shard's 10 s.
	hotExactDecisions = 8192
	// hotSampleEvery is the sampling's 1 in k (a power of two). A sampled
	// update costs about 350 ns among a big table's cache misses, so 16
	// makes tracking cost about 25 ns a decision (benchmarks.md), for a
	// count's standard deviation of sqrt(15f): 4% of f = 10,000.
	hotSampleBits  = 4
	hotSampleEvery = 1 << hotSampleBits
	// hotSamplingSigmas is how many standard deviations samplingError
	// adds: five, so that the 256 entries of both rankings are all within
	// their bounds but about once in 7,000 reads.
	hotSamplingSigmas = 5
)

// samplingError is the part of an error bound that sampling adds to a
// count of n (0 when the sketch counted every decision). The count's
// spread, sqrt((k-1)f), is the true count f's, not n's: a key whose
// sample fell short has f above n, and more spread than n suggests. So the
// bound is the largest f that n is within hotSamplingSigmas of, the root
// of f - n = z*sqrt((k-1)f): f = ((z*sqrt(k-1) + sqrt((k-1)z^2 + 4n)) / 2)^2.
// It is wider than the lower side needs, and is used for both. A count of
// 0 gets 375: a key with that many decisions leaves no sample once in 3e10.
func (s *hotSketch) samplingError(n int64) int64 {
	if !s.sampled {
		return 0
	}
	z, v := float64(hotSamplingSigmas), float64(hotSampleEvery-1)
	root := (z*math.Sqrt(v) + math.Sqrt(v*z*z+4*float64(n))) / 2
	return int64(math.Ceil(root*root)) - n
}

// HotKeyBy says which decisions a hot-key ranking counts.
type HotKeyBy uint8

// Rankings.
const (
	HotByDecisions HotKeyBy = iota // every decision
	HotByRefusals                  // the refused ones
)

// HotKey is one key of a ranking.
type HotKey struct {
	Key []byte
	// Count is the key's decisions (or refusals) in the current and
	// previous window: the true count is within Err of it, and not above
	// it where the key's sketches counted every decision.
	Count, Err int64
	// Rate is the estimated decisions (or refusals) per second over the
	// last HotKeysWindow.
	Rate float64
}

// hotSketch is one Space-Saving summary, as a Stream-Summary: counters in
// slots, the slots grouped in buckets of equal count kept in ascending
// order (the smallest bucket holds the counters a new key may take over;
// an increment moves a slot to the next bucket up), and a hash index from
// key to slot. Every step is O(1). Fixed size: nothing allocates after it
// is made, and the zero value is empty. Bucket and slot references that
// may be absent are stored +1 (0: none).
type hotSketch struct {
	sampled bool // some decisions were sampled: the counts carry sampling error
	n       int  // slots in use
	slots   [HotKeysCapacity]hotSlot
	buckets [HotKeysCapacity]hotBucket
	bmin    uint8                  // the smallest bucket, +1
	nb      int                    // buckets ever taken
	bfree   [HotKeysCapacity]uint8 // buckets given back
	nfree   int
	index   [hotIndexSize]uint32 // tag(hash) | slot+1; 0 is empty
	keys    [HotKeysCapacity * hotKeyBytes]byte
}

// hotSlot is one counter; its fields share a cache line, as a probe and
// an increment read them together.
type hotSlot struct {
	hash       uint64
	err        int64
	klen       int   // the whole key's length
	bucket     uint8 // +1
	next, prev uint8 // its neighbours in its bucket (a ring)
}

// hotBucket is the slots of one count.
type hotBucket struct {
	count    int64
	head     uint8 // a slot of the bucket
	up, down uint8 // the next larger and smaller bucket, +1
}

func (s *hotSketch) count(slot int) int64 { return s.buckets[s.slots[slot].bucket-1].count }

// home is a hash's first index position. The low bits chose the shard, so
// the index takes the high ones.
func home(h uint64) int { return int(h >> (64 - hotIndexBits)) }

// tag is what an index entry keeps of a hash besides its slot: its home
// (so that removing an entry reads no slot) and 14 more bits (so that a
// probe reads a slot only when they match).
func tag(h uint64) uint32 {
	return uint32(home(h))<<(32-hotIndexBits) | uint32(h>>32)&(1<<(24-hotIndexBits)-1)<<8
}

func (s *hotSketch) stored(slot int) []byte {
	return s.keys[slot*hotKeyBytes : slot*hotKeyBytes+min(s.slots[slot].klen, hotKeyBytes)]
}

// find returns the slot tracking key, or -1 and the empty index position
// where it would go.
func (s *hotSketch) find(key []byte, h uint64) (slot, at int) {
	return s.findStored(key[:min(len(key), hotKeyBytes)], len(key), h)
}

// findStored is find given what a sketch stores of a key: its first
// hotKeyBytes bytes and its length.
func (s *hotSketch) findStored(prefix []byte, klen int, h uint64) (slot, at int) {
	want := tag(h)
	for i := home(h); ; i = (i + 1) & (hotIndexSize - 1) {
		v := s.index[i]
		if v == 0 {
			return -1, i
		}
		if v&^0xff != want {
			continue
		}
		slot := int(v&0xff) - 1
		if s.slots[slot].hash == h && s.slots[slot].klen == klen && bytes.Equal(s.stored(slot), prefix) {
			return slot, i
		}
	}
}

// add counts w decisions on key (h its hash).
func (s *hotSketch) add(key []byte, h uint64, w int64) {
	slot, at := s.find(key, h)
	if slot >= 0 {
		s.increment(slot, w)
		return
	}
	if s.n < HotKeysCapacity {
		slot = s.n
		s.n++
		s.slots[slot].err = 0
		s.keep(slot, key, h, at)
		s.insert(slot, w)
		return
	}
	// Space-Saving: the newcomer takes a smallest counter over; that
	// count is as much as it could have had while untracked.
	slot = int(s.buckets[s.bmin-1].head)
	s.unindex(slot)
	s.slots[slot].err = s.count(slot)
	_, at = s.find(key, h)
	s.keep(slot, key, h, at)
	s.increment(slot, w)
}

// insert puts a new slot, in no bucket yet, at count c. The buckets' counts
// are distinct and positive, so at most c of them are passed on the way.
func (s *hotSketch) insert(slot int, c int64) {
	if s.bmin == 0 || s.buckets[s.bmin-1].count > c {
		b := s.newBucket(c)
		s.buckets[b].up, s.buckets[b].down = s.bmin, 0
		if s.bmin != 0 {
			s.buckets[s.bmin-1].down = uint8(b + 1)
		}
		s.bmin = uint8(b + 1)
		s.attach(slot, b, true)
		return
	}
	s.settle(slot, int(s.bmin-1), c)
}

// increment adds w to slot's count: it moves up to the bucket of its new
// count, made if need be, or its bucket's count grows if it was alone there
// and no bucket lies between.
func (s *hotSketch) increment(slot int, w int64) {
	b := int(s.slots[slot].bucket - 1)
	c := s.buckets[b].count + w
	if up := s.buckets[b].up; up == 0 || s.buckets[up-1].count > c {
		if int(s.slots[slot].next) == slot {
			s.buckets[b].count = c // alone, and still below the bucket above
			return
		}
		s.detach(slot, b)
		s.attachAbove(slot, b, c)
		return
	}
	up := int(s.buckets[b].up - 1)
	if int(s.slots[slot].next) == slot {
		s.dropBucket(b)
	} else {
		s.detach(slot, b)
	}
	s.settle(slot, up, c)
}

// settle puts a slot that is in no bucket at count c, given bucket from's
// count is at most c: it walks up to the last bucket not above c.
func (s *hotSketch) settle(slot, from int, c int64) {
	u := from
	for up := s.buckets[u].up; up != 0 && s.buckets[up-1].count <= c; up = s.buckets[u].up {
		u = int(up - 1)
	}
	if s.buckets[u].count == c {
		s.attach(slot, u, false)
		return
	}
	s.attachAbove(slot, u, c)
}

// attachAbove puts a slot that is in no bucket alone in a new bucket of
// count c, linked just above bucket b.
func (s *hotSketch) attachAbove(slot, b int, c int64) {
	nb := s.newBucket(c)
	up := s.buckets[b].up
	s.buckets[nb].up, s.buckets[nb].down = up, uint8(b+1)
	s.buckets[b].up = uint8(nb + 1)
	if up != 0 {
		s.buckets[up-1].down = uint8(nb + 1)
	}
	s.attach(slot, nb, true)
}

func (s *hotSketch) newBucket(count int64) int {
	var b int
	if s.nfree > 0 {
		s.nfree--
		b = int(s.bfree[s.nfree])
	} else {
		b = s.nb
		s.nb++
	}
	s.buckets[b].count = count
	return b
}

// dropBucket unlinks an emptied bucket and gives it back.
func (s *hotSketch) dropBucket(b int) {
	up, down := s.buckets[b].up, s.buckets[b].down
	if down != 0 {
		s.buckets[down-1].up = up
	} else {
		s.bmin = up
	}
	if up != 0 {
		s.buckets[up-1].down = down
	}
	s.bfree[s.nfree] = uint8(b)
	s.nfree++
}

// attach puts slot in bucket b's ring (a new ring when b is empty).
func (s *hotSketch) attach(slot, b int, empty bool) {
	s.slots[slot].bucket = uint8(b + 1)
	if empty {
		s.slots[slot].next, s.slots[slot].prev = uint8(slot), uint8(slot)
		s.buckets[b].head = uint8(slot)
		return
	}
	head := s.buckets[b].head
	last := s.slots[head].prev
	s.slots[last].next, s.slots[slot].prev = uint8(slot), last
	s.slots[slot].next, s.slots[head].prev = head, uint8(slot)
}

// detach takes slot out of bucket b's ring, which it shares.
func (s *hotSketch) detach(slot, b int) {
	n, p := s.slots[slot].next, s.slots[slot].prev
	s.slots[p].next, s.slots[n].prev = n, p
	if int(s.buckets[b].head) == slot {
		s.buckets[b].head = n
	}
}

func (s *hotSketch) keep(slot int, key []byte, h uint64, at int) {
	s.slots[slot].hash, s.slots[slot].klen = h, len(key)
	copy(s.keys[slot*hotKeyBytes:slot*hotKeyBytes+hotKeyBytes], key)
	s.index[at] = tag(h) | uint32(slot+1)
}

// unindex removes slot from the index, shifting back the entries after it
// that would no longer be found (linear probing needs no tombstones).
func (s *hotSketch) unindex(slot int) {
	const mask = hotIndexSize - 1
	i := home(s.slots[slot].hash)
	for int(s.index[i]&0xff) != slot+1 {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		v := s.index[j]
		if v == 0 {
			s.index[i] = 0
			return
		}
		k := int(v >> (32 - hotIndexBits))
		// The entry at j stays if its home lies cyclically in (i, j].
		if (i <= j && i < k && k <= j) || (i > j && (i < k || k <= j)) {
			continue
		}
		s.index[i] = v
		i = j
	}
}

// floor is the most an untracked key can have had: the smallest count
// once every counter is taken, else 0.
func (s *hotSketch) floor() int64 {
	if s.n < HotKeysCapacity {
		return 0
	}
	return s.buckets[s.bmin-1].count
}

// hotWindow is one window's sketches.
type hotWindow struct {
	by [2]hotSketch // by HotKeyBy
}

// hotShard is one shard's hot-key state, touched only by the shard's
// owner or the coordinator holding the shard.
type hotShard struct {
	rng   uint64   // draw's state, never 0
	start int64    // the current window's start, a multiple of HotKeysWindow
	seen  [2]int64 // by HotKeyBy: decisions offered in the current window
	cur   int
	win   [2]hotWindow
}

// tick moves the windows on to the one holding now.
func (h *hotShard) tick(now int64) {
	age := now - h.start
	if age < HotKeysWindow {
		return
	}
	if age >= 2*HotKeysWindow {
		h.win[1-h.cur] = hotWindow{}
	}
	h.cur = 1 - h.cur
	h.win[h.cur] = hotWindow{}
	h.seen = [2]int64{}
	h.start = now - now%HotKeysWindow
}

// peek reports whether a decision has a cost of 0: it decides nothing, so
// hot keys do not count it. CONC.ACQUIRE has no cost and always counts.
func (spec *OpSpec) peek(c *Command) bool { return spec.costAt > 0 && c.N[spec.costAt-1] <= 0 }

// recordHot counts a decision, and a refusal when limited, in the shard's
// sketches. Only the shard's owner (or the coordinator holding it) calls it.
func (j *shardJob) recordHot(c *Command, limited bool, now int64) {
	if j.b != nil && j.b.replaying {
		return // old traffic, at old times
	}
	h := j.e.hot[j.shard]
	if h == nil {
		// Made once, when tracking starts on this shard.
		h = &hotShard{start: now - now%HotKeysWindow, rng: uint64(j.shard)<<32 | 0x9e3779b9}
		j.e.hot[j.shard] = h
	}
	h.tick(now)
	h.offer(HotByDecisions, c.Key, c.hash)
	if limited {
		h.offer(HotByRefusals, c.Key, c.hash)
	}
}

// offer counts one decision (or refusal) on key (hash its hash) in the
// current window: every one while the window has seen at most
// hotExactDecisions, then one in hotSampleEvery, weighted hotSampleEvery.
// The count and the draw are in the hotShard's first cache line, so a
// decision not sampled touches no sketch.
func (h *hotShard) offer(by HotKeyBy, key []byte, hash uint64) {
	h.seen[by]++
	if h.seen[by] <= hotExactDecisions {
		h.win[h.cur].by[by].add(key, hash, 1)
		return
	}
	if h.draw()>>(64-hotSampleBits) != 0 {
		return
	}
	s := &h.win[h.cur].by[by]
	s.sampled = true
	s.add(key, hash, hotSampleEvery)
}

// draw is the shard's next random number: xorshift64* (Vigna 2016), whose
// high bits, the ones offer tests, are well mixed. The sampling needs
// independence from the traffic's patterns, not cryptographic strength.
func (h *hotShard) draw() uint64 {
	x := h.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	h.rng = x
	return x * 0x2545f4914f6cdd1d
}

// view is a shard's ranking as of now: its current and previous sketch
// (nil when gone) and how much of the previous window still counts.
func (h *hotShard) view(by HotKeyBy, now int64) (cur, prev *hotSketch, prevWeight float64) {
	age := max(now-h.start, 0)
	switch {
	case age >= 2*HotKeysWindow:
		return nil, nil, 0
	case age >= HotKeysWindow:
		// Read past the window's end: what was current is previous.
		return nil, &h.win[h.cur].by[by], 1 - float64(age-HotKeysWindow)/float64(HotKeysWindow)
	}
	return &h.win[h.cur].by[by], &h.win[1-h.cur].by[by], 1 - float64(age)/float64(HotKeysWindow)
}

// estimate merges a key's counts from the two windows. A key missing from
// a full sketch may have had up to its floor there: that is added to both
// its count and its error, so the bounds hold for the sum.
func estimate(cur, prev *hotSketch, prevWeight float64, prefix []byte, klen int, h uint64) (count, errBound int64, rate float64, tracked bool) {
	part := func(s *hotSketch) (n, e int64, found bool) {
		if s == nil {
			return 0, 0, false
		}
		if slot, _ := s.findStored(prefix, klen, h); slot >= 0 {
			n = s.count(slot)
			return n, s.slots[slot].err + s.samplingError(n), true
		}
		f := s.floor()
		return f, f + s.samplingError(f), false
	}
	cn, ce, inCur := part(cur)
	pn, pe, inPrev := part(prev)
	if !inCur && !inPrev {
		return 0, 0, 0, false
	}
	rate = (float64(cn) + prevWeight*float64(pn)) * 1e9 / float64(HotKeysWindow)
	return cn + pn, ce + pe, rate, true
}

// top lists the shard's tracked keys, unordered; the keys are copies.
func (h *hotShard) top(by HotKeyBy, now int64) []HotKey {
	cur, prev, w := h.view(by, now)
	var out []HotKey
	for _, s := range []*hotSketch{cur, prev} {
		if s == nil {
			continue
		}
		for slot := 0; slot < s.n; slot++ {
			key, klen, hash := s.stored(slot), s.slots[slot].klen, s.slots[slot].hash
			if s == prev && cur != nil {
				if other, _ := cur.findStored(key, klen, hash); other >= 0 {
					continue // listed with the current window
				}
			}
			n, e, rate, _ := estimate(cur, prev, w, key, klen, hash)
			out = append(out, HotKey{Key: slices.Clone(key), Count: n, Err: e, Rate: rate})
		}
	}
	return out
}

// hotFreq is OBJECT FREQ's answer when tracking is on: the key's decisions
// in the current and previous window as LIMIT.HOTKEYS counts them, 0 when
// the key is not tracked.
func (j *shardJob) hotFreq(c *Command, now int64) int64 {
	h := j.e.hot[j.shard]
	if h == nil {
		return 0
	}
	cur, prev, w := h.view(HotByDecisions, now)
	n, _, _, _ := estimate(cur, prev, w, c.Key[:min(len(c.Key), hotKeyBytes)], len(c.Key), c.hash)
	return n
}

// hotTracking is the engine's switch and its shards' state.
type hotTracking struct {
	hotOff atomic.Bool
	hot    []*hotShard // by shard; nil until the shard first tracks
	// hotMu serialises SetHotKeysTracking's changes.
	hotMu sync.Mutex
}

// HotKeysTracking reports whether decisions are tracked.
func (e *Engine) HotKeysTracking() bool { return !e.hotOff.Load() }

// SetHotKeysTracking turns hot-key tracking on or off (CONFIG SET
// hotkeys-tracking). Off frees every shard's sketches, after the commands
// already queued; on starts them empty.
func (e *Engine) SetHotKeysTracking(on bool) {
	e.hotMu.Lock()
	defer e.hotMu.Unlock()
	if e.hotOff.Swap(!on) == !on || on || e.closing.Load() {
		return
	}
	e.onShards(func(s int, _ *shard.Table) { e.hot[s] = nil })
}

// HotKeys ranks the keys by decisions or refusals as of now, hottest (by
// rate, then count) first, at most n of them. Each shard's part is copied
// on its owner, so the ranking is consistent per shard.
func (e *Engine) HotKeys(by HotKeyBy, n int, now int64) []HotKey {
	if e.closing.Load() {
		return nil
	}
	parts := make([][]HotKey, len(e.shards))
	e.onShards(func(s int, _ *shard.Table) {
		if h := e.hot[s]; h != nil {
			parts[s] = h.top(by, now)
		}
	})
	all := slices.Concat(parts...)
	slices.SortFunc(all, func(a, b HotKey) int {
		switch {
		case a.Rate != b.Rate:
			return cmpDesc(a.Rate, b.Rate)
		case a.Count != b.Count:
			return cmpDesc(a.Count, b.Count)
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return all[:min(n, len(all))]
}

func cmpDesc[T int64 | float64](a, b T) int {
	if a > b {
		return -1
	}
	return 1
}

// shardFunc runs a function on one shard's owner.
type shardFunc struct {
	f    func(s int, t *shard.Table)
	s    int
	done *sync.WaitGroup
}

func (t *shardFunc) Run(tab *shard.Table) {
	t.f(t.s, tab)
	t.done.Done()
}

// onShards runs f on every shard's owner and waits for all.
func (e *Engine) onShards(f func(s int, t *shard.Table)) {
	var done sync.WaitGroup
	tasks := make([]shardFunc, len(e.shards))
	done.Add(len(tasks))
	for i := range tasks {
		tasks[i] = shardFunc{f: f, s: i, done: &done}
		e.shards[i].Submit(&tasks[i])
	}
	done.Wait()
}
