package shard

import (
	"encoding/binary"
	"errors"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Kind tags what a record holds. Zero marks a dead record in a page.
type Kind uint8

// Record kinds. The engine gives them meaning; the table only stores bytes.
// The values are stored in snapshots: never renumber one.
const (
	KindDead          Kind = 0
	KindString        Kind = 1
	KindGCRA          Kind = 2
	KindSlidingWindow Kind = 3
	KindSlidingLog    Kind = 4
	KindFixedWindow   Kind = 5
	KindHash          Kind = 6
	KindList          Kind = 7
	KindSet           Kind = 8
	KindZSet          Kind = 9
	KindLeakyBucket   Kind = 10
	KindConcurrency   Kind = 11
	// KindLast is the highest kind in use in the key space.
	KindLast = KindConcurrency
	// KindReceipt marks a record of the side table (see Table.Side): the
	// engine's remembered replies to request ids, never a key. It sits at
	// the top so that key-space kinds stay contiguous below KindLast.
	KindReceipt Kind = 255
)

// Errors returned by the table.
var (
	// ErrTooLarge: a record must fit in one page; Sluice stores limiter state, not blobs.
	ErrTooLarge = errors.New("value too large: a key plus its value may take at most 1 MiB")
	// ErrFull: every page handle of the shard is in use.
	ErrFull = errors.New("shard storage exhausted")
)

const (
	offsetBits   = 20
	maxPageSize  = 1 << offsetBits // a record ref addresses 1 MiB inside a page
	firstPage    = 4 << 10         // small pages first so an idle shard costs little
	maxPages     = 1 << (32 - offsetBits)
	minIndexBits = 6
	// A record is: kind(1) | expireAt(8) | uvarint keyLen | key | uvarint payloadLen | payload.
	recordFixed = 1 + 8
	// MaxRecord is the largest record a page can hold.
	MaxRecord = maxPageSize
)

type page struct {
	buf  []byte // len(buf) is the append position, cap(buf) the page size
	live int    // bytes of live records; the compactor evacuates sparse pages
}

// Hash returns the 64-bit hash of key used for shard striping and the index.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Table stores records in pointer-free pages indexed by an open-addressing
// hash table of integers, so that a million limiters cost the garbage
// collector nothing to scan. It is not safe for concurrent use: exactly one
// goroutine (the shard owner) may touch it.
//
// Index: linear probing with the home slot taken from the hash's top bits, so
// slot order follows hash order (SCAN's cursor relies on this), and
// backward-shift deletion, so there are no tombstones.
type Table struct {
	tags  []uint8  // 0 = empty slot; otherwise 0x80 | 7 bits of the hash
	refs  []uint32 // page<<offsetBits | offset of the record
	shift uint     // home(h) = h >> shift
	count int

	pages     []page
	cur       int   // page being appended to
	freePages []int // page handles whose buffers were released
	arena     int   // sum of page capacities
	garbage   int   // bytes of dead records in pages

	scanPos int // expiry sweep position in the index
	evac    evacuation
	keyBuf  []byte // CutFront's copy of a key

	// side holds records kept with the shard's state but outside its key
	// space (nil until first used): cloned, swept, cleared and counted in
	// memory with the table, invisible to its Len, ForEach and Scan.
	side *Table
}

type evacuation struct {
	page   int // page being emptied, -1 when none
	offset int // next record to look at
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{evac: evacuation{page: -1}}
	t.initIndex(minIndexBits)
	t.pages = []page{{buf: make([]byte, 0, firstPage)}}
	t.arena = firstPage
	return t
}

func (t *Table) initIndex(bitsN uint) {
	t.tags = make([]uint8, 1<<bitsN)
	t.refs = make([]uint32, 1<<bitsN)
	t.shift = 64 - bitsN
}

// Len reports the number of records, live or expired-but-unswept.
func (t *Table) Len() int { return t.count }

// MemoryUsage is the bytes the table holds: pages plus index, its side
// table's included.
func (t *Table) MemoryUsage() int {
	n := t.arena + len(t.tags) + 4*len(t.refs)
	if t.side != nil {
		n += t.side.MemoryUsage()
	}
	return n
}

// EntryBytes is what e costs the table: its record and its index slot
// (MEMORY USAGE).
func (t *Table) EntryBytes(e Entry) int { return recordSize(len(e.Key), len(e.Payload)) + 1 + 4 }

// Side returns the table's side table, made on first use when create is
// set (nil otherwise). Its records share the shard's owner, snapshots and
// memory, not its key space: the engine keeps request receipts there.
func (t *Table) Side(create bool) *Table {
	if t.side == nil && create {
		t.side = NewTable()
	}
	return t.side
}

func tagOf(h uint64) uint8 { return uint8(h>>24) | 0x80 }

func (t *Table) home(h uint64) int { return int(h >> t.shift) }

// Entry is a view of one record. Payload aliases the page: writes to it
// update the record in place. An Entry is valid until the next call that
// inserts, deletes, resizes or sweeps.
type Entry struct {
	slot    int
	Kind    Kind
	Key     []byte
	Payload []byte
}

func (t *Table) record(ref uint32) []byte {
	return t.pages[ref>>offsetBits].buf[ref&(maxPageSize-1):]
}

// uvarint decodes a length; lengths under 128 (nearly all keys and
// payloads) take the one-byte fast path.
func uvarint(b []byte) (int, int) {
	if b[0] < 0x80 {
		return int(b[0]), 1
	}
	v, n := binary.Uvarint(b)
	return int(v), n
}

// recordKey returns a record's key and the offset just past it.
func recordKey(rec []byte) ([]byte, int) {
	kl, n := uvarint(rec[recordFixed:])
	p := recordFixed + n
	return rec[p : p+kl], p + kl
}

// parse splits a record into its parts and its total size.
func parse(rec []byte) (kind Kind, expireAt int64, key, payload []byte, size int) {
	kind = Kind(rec[0])
	expireAt = int64(binary.LittleEndian.Uint64(rec[1:9]))
	key, p := recordKey(rec)
	pl, n := uvarint(rec[p:])
	p += n
	payload = rec[p : p+pl : p+pl]
	return kind, expireAt, key, payload, p + pl
}

// Fits reports whether a record of a key of keyLen bytes and a payload of
// payloadLen fits one page: what Insert and Resize refuse with ErrTooLarge,
// checked before anything changes (LIMIT.ALL's dry run).
func Fits(keyLen, payloadLen int) bool { return recordSize(keyLen, payloadLen) <= MaxRecord }

func recordSize(keyLen, payloadLen int) int {
	return recordFixed + uvarintLen(uint64(keyLen)) + keyLen + uvarintLen(uint64(payloadLen)) + payloadLen
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// Warm reads the head of the record key would be found in, and returns a
// byte of it (for the caller to keep, so the read is not dropped). A
// pipeline warms all its keys before running them: the loads of distinct
// keys do not depend on each other, so the processor overlaps their cache
// misses, where the commands one by one would wait for each in turn.
func (t *Table) Warm(key []byte, h uint64) byte {
	mask := len(t.tags) - 1
	tag := tagOf(h)
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return 0
		case tag:
			return t.record(t.refs[i])[recordFixed]
		}
	}
}

// find returns the slot holding key, or -1.
func (t *Table) find(key []byte, h uint64) int {
	mask := len(t.tags) - 1
	tag := tagOf(h)
	for i := t.home(h); ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return -1
		case tag:
			if k, _ := recordKey(t.record(t.refs[i])); string(k) == string(key) {
				return i
			}
		}
	}
}

// ExpireAt returns the stored absolute expiry (0 = none) of the entry.
func (t *Table) ExpireAt(e Entry) int64 {
	return int64(binary.LittleEndian.Uint64(t.record(t.refs[e.slot])[1:9]))
}

// SetExpireAt stores an absolute expiry (0 = none).
func (t *Table) SetExpireAt(e Entry, at int64) {
	binary.LittleEndian.PutUint64(t.record(t.refs[e.slot])[1:9], uint64(at))
}

// Get returns the record for key if it is live at now. An entry whose expiry
// has passed is reported absent whether or not the sweeper has freed it yet,
// so an answer never depends on sweep timing; Get deletes it on the way.
func (t *Table) Get(key []byte, h uint64, now int64) (Entry, bool) {
	slot := t.find(key, h)
	if slot < 0 {
		return Entry{}, false
	}
	kind, exp, k, payload, _ := parse(t.record(t.refs[slot]))
	if exp != 0 && exp <= now {
		t.deleteSlot(slot)
		return Entry{}, false
	}
	return Entry{slot: slot, Kind: kind, Key: k, Payload: payload}, true
}

// Lookup is Get for callers that can reuse an expired record in place: it
// returns the record whether or not it has expired, and live reports which.
// An expired record must be treated as absent; overwriting its payload and
// expiry (same kind, same size) revives it without a delete and an insert.
func (t *Table) Lookup(key []byte, h uint64, now int64) (e Entry, found, live bool) {
	slot := t.find(key, h)
	if slot < 0 {
		return Entry{}, false, false
	}
	kind, exp, k, payload, _ := parse(t.record(t.refs[slot]))
	return Entry{slot: slot, Kind: kind, Key: k, Payload: payload}, true, exp == 0 || exp > now
}

// Insert stores a new record for key with a zeroed payload of payloadLen
// bytes and returns it. Any previous record for key is replaced.
func (t *Table) Insert(key []byte, h uint64, kind Kind, expireAt int64, payloadLen int) (Entry, error) {
	return t.insert(key, h, kind, expireAt, payloadLen, true)
}

// InsertAbsent is Insert for a key the caller has just looked up and not
// found (with no insert or delete since): it skips the search for a record
// to replace. Inserting a key that is present leaves two records for it.
func (t *Table) InsertAbsent(key []byte, h uint64, kind Kind, expireAt int64, payloadLen int) (Entry, error) {
	return t.insert(key, h, kind, expireAt, payloadLen, false)
}

func (t *Table) insert(key []byte, h uint64, kind Kind, expireAt int64, payloadLen int, replace bool) (Entry, error) {
	size := recordSize(len(key), payloadLen)
	if size > MaxRecord {
		return Entry{}, ErrTooLarge
	}
	ref, err := t.alloc(size)
	if err != nil {
		return Entry{}, err
	}
	rec := t.record(ref)[:size]
	rec[0] = byte(kind)
	binary.LittleEndian.PutUint64(rec[1:9], uint64(expireAt))
	p := recordFixed + binary.PutUvarint(rec[recordFixed:], uint64(len(key)))
	p += copy(rec[p:], key)
	p += binary.PutUvarint(rec[p:], uint64(payloadLen))
	clear(rec[p:])
	keyStart := recordFixed + uvarintLen(uint64(len(key)))
	e := Entry{Kind: kind, Key: rec[keyStart : keyStart+len(key)], Payload: rec[p:size:size]}
	if slot := -1; replace {
		if slot = t.find(key, h); slot >= 0 {
			t.free(t.refs[slot])
			t.refs[slot] = ref
			e.slot = slot
			return e, nil
		}
	}
	if (t.count+1)*4 > len(t.tags)*3 {
		t.resize(uint(64-t.shift) + 1)
	}
	e.slot = t.place(h, ref)
	t.count++
	return e, nil
}

// Reserve grows the index to hold n records without resizing. Loading keys
// in hash order (as a snapshot stores them) into a small index would pile
// them into one probe run; reserving first spreads them over the table.
func (t *Table) Reserve(n int) {
	bitsN := uint(64 - t.shift)
	for n*4 > (1<<bitsN)*3 {
		bitsN++
	}
	if bitsN > uint(64-t.shift) {
		t.resize(bitsN)
	}
}

// Resize gives e a payload of a new length, keeping the first bytes of the
// old payload, and returns the moved entry.
func (t *Table) Resize(e Entry, payloadLen int) (Entry, error) {
	if payloadLen == len(e.Payload) {
		return e, nil
	}
	oldRef := t.refs[e.slot]
	kind, exp, key, old, _ := parse(t.record(oldRef))
	size := recordSize(len(key), payloadLen)
	if size > MaxRecord {
		return e, ErrTooLarge
	}
	ref, err := t.alloc(size)
	if err != nil {
		return e, err
	}
	// alloc never moves existing pages, so key and old still alias valid bytes.
	rec := t.record(ref)[:size]
	rec[0] = byte(kind)
	binary.LittleEndian.PutUint64(rec[1:9], uint64(exp))
	p := recordFixed + binary.PutUvarint(rec[recordFixed:], uint64(len(key)))
	keyStart := p
	p += copy(rec[p:], key)
	p += binary.PutUvarint(rec[p:], uint64(payloadLen))
	n := copy(rec[p:size], old)
	clear(rec[p+n : size])
	t.free(oldRef)
	t.refs[e.slot] = ref
	return Entry{slot: e.slot, Kind: kind, Key: rec[keyStart : keyStart+len(key)], Payload: rec[p:size:size]}, nil
}

// CutFront removes n bytes of e's payload starting at offset keep
// (payload[:keep] stays) without moving the bytes after them: the record's
// head (its key and the kept prefix) moves forward over them, and what it
// leaves behind becomes a dead record, freed by the compactor like any
// other. Removing the oldest entries of a big collection then costs the
// size of its head, not of the collection. ok is false, and nothing
// changes, when the space left behind would be too small for a dead
// record; the caller then moves the bytes itself.
func (t *Table) CutFront(e Entry, keep, n int) (Entry, bool) {
	ref := t.refs[e.slot]
	rec := t.record(ref)
	kind, exp, key, payload, size := parse(rec)
	if keep < 0 || n <= 0 || keep+n > len(payload) {
		return e, false
	}
	headLen := size - len(payload)
	newLen := len(payload) - n
	newHead := recordSize(len(key), newLen) - newLen
	dead := headLen + n - newHead
	width := deadWidth(dead)
	if width == 0 {
		return e, false
	}
	// The kept prefix first (it moves into bytes nothing else needs), then
	// the record's head, assembled in place from a copy of the key.
	tail := headLen + keep + n // where the untouched bytes start
	copy(rec[tail-keep:tail], payload[:keep])
	t.keyBuf = append(t.keyBuf[:0], key...)
	start := dead
	h := rec[start:]
	h[0] = byte(kind)
	binary.LittleEndian.PutUint64(h[1:9], uint64(exp))
	p := recordFixed + binary.PutUvarint(h[recordFixed:], uint64(len(t.keyBuf)))
	p += copy(h[p:], t.keyBuf)
	p += binary.PutUvarint(h[p:], uint64(newLen))
	putDeadRecord(rec[:dead], width)
	pi := ref >> offsetBits
	t.pages[pi].live -= dead
	t.garbage += dead
	t.refs[e.slot] = ref + uint32(dead)
	keyStart := start + recordFixed + uvarintLen(uint64(len(t.keyBuf)))
	pay := start + p
	return Entry{slot: e.slot, Kind: kind, Key: rec[keyStart : keyStart+len(t.keyBuf)], Payload: rec[pay : pay+newLen : pay+newLen]}, true
}

// deadWidth is the width of the payload length of a dead record of size
// bytes (kind, expiry, an empty key, the length, the payload), or 0 when
// no dead record has that size.
func deadWidth(size int) int {
	for w := 1; w <= 3; w++ {
		if pl := size - recordFixed - 1 - w; pl >= 0 && uvarintLen(uint64(pl)) <= w {
			return w
		}
	}
	return 0
}

// putDeadRecord fills b with one dead record whose payload length takes
// width bytes (a uvarint padded with continuation bytes, which the reader
// accepts).
func putDeadRecord(b []byte, width int) {
	b[0] = byte(KindDead)
	clear(b[1:recordFixed])
	b[recordFixed] = 0 // key length
	pl := uint64(len(b) - recordFixed - 1 - width)
	at := recordFixed + 1
	for i := 0; i < width-1; i++ {
		b[at+i] = byte(pl) | 0x80
		pl >>= 7
	}
	b[at+width-1] = byte(pl)
}

// Delete removes the entry.
func (t *Table) Delete(e Entry) { t.deleteSlot(e.slot) }

// place puts ref into the first free slot from h's home and returns it.
func (t *Table) place(h uint64, ref uint32) int {
	mask := len(t.tags) - 1
	i := t.home(h)
	for t.tags[i] != 0 {
		i = (i + 1) & mask
	}
	t.tags[i] = tagOf(h)
	t.refs[i] = ref
	return i
}

func (t *Table) deleteSlot(slot int) {
	t.free(t.refs[slot])
	t.count--
	mask := len(t.tags) - 1
	// Backward-shift: pull later entries of the probe run into the hole when
	// the hole lies between their home and their slot, so lookups that stop
	// at the first empty slot still find them.
	hole := slot
	for j := (hole + 1) & mask; t.tags[j] != 0; j = (j + 1) & mask {
		_, _, k, _, _ := parse(t.record(t.refs[j]))
		home := t.home(Hash(k))
		if (j-home)&mask >= (j-hole)&mask {
			t.tags[hole], t.refs[hole] = t.tags[j], t.refs[j]
			hole = j
		}
	}
	t.tags[hole] = 0
	t.refs[hole] = 0
}

func (t *Table) resize(bitsN uint) {
	oldTags, oldRefs := t.tags, t.refs
	t.initIndex(bitsN)
	for i, tag := range oldTags {
		if tag == 0 {
			continue
		}
		_, _, k, _, _ := parse(t.record(oldRefs[i]))
		t.place(Hash(k), oldRefs[i])
	}
	t.scanPos = 0
}

// alloc reserves size bytes in a page and returns their ref. Pages never
// move once allocated, so refs and slices into them stay valid.
func (t *Table) alloc(size int) (uint32, error) {
	p := &t.pages[t.cur]
	if cap(p.buf)-len(p.buf) < size {
		next := min(2*cap(p.buf), maxPageSize)
		next = max(next, size)
		idx, err := t.newPage(next)
		if err != nil {
			return 0, err
		}
		t.cur = idx
		p = &t.pages[idx]
	}
	off := len(p.buf)
	p.buf = p.buf[:off+size]
	p.live += size
	return uint32(t.cur)<<offsetBits | uint32(off), nil
}

func (t *Table) newPage(size int) (int, error) {
	buf := make([]byte, 0, size)
	t.arena += size
	if n := len(t.freePages); n > 0 {
		idx := t.freePages[n-1]
		t.freePages = t.freePages[:n-1]
		t.pages[idx] = page{buf: buf}
		return idx, nil
	}
	if len(t.pages) >= maxPages {
		t.arena -= size
		return 0, ErrFull
	}
	t.pages = append(t.pages, page{buf: buf})
	return len(t.pages) - 1, nil
}

// free marks the record at ref dead and releases its page once empty.
func (t *Table) free(ref uint32) {
	pi := int(ref >> offsetBits)
	rec := t.record(ref)
	_, _, _, _, size := parse(rec)
	rec[0] = byte(KindDead)
	p := &t.pages[pi]
	p.live -= size
	t.garbage += size
	if p.live == 0 && pi != t.cur {
		t.releasePage(pi)
	}
}

func (t *Table) releasePage(pi int) {
	p := &t.pages[pi]
	t.garbage -= len(p.buf)
	t.arena -= cap(p.buf)
	*p = page{}
	t.freePages = append(t.freePages, pi)
	if t.evac.page == pi {
		t.evac.page = -1
	}
}

// Sweep does a bounded amount of housekeeping: it looks at up to budget index
// slots for expired records and frees them, moves up to budget records out
// of the sparsest page when dead bytes dominate, and shrinks an index that
// has become mostly empty. It only frees memory; answers never depend on it
// because Get already treats expired records as absent.
func (t *Table) Sweep(now int64, budget int) (freed int) {
	n := len(t.tags)
	for seen := 0; seen < budget && seen < n; seen++ {
		if t.scanPos >= len(t.tags) {
			t.scanPos = 0
		}
		i := t.scanPos
		if t.tags[i] != 0 {
			_, exp, _, _, _ := parse(t.record(t.refs[i]))
			if exp != 0 && exp <= now {
				// The backward shift may pull another record into slot i:
				// look at the same slot again.
				t.deleteSlot(i)
				freed++
				continue
			}
		}
		t.scanPos++
	}
	freed += t.evacuate(now, budget)
	if t.side != nil {
		t.side.Sweep(now, budget) // not keys: not counted as freed ones
	}
	if t.count == 0 && t.arena > firstPage {
		side := t.side
		t.Clear() // give an emptied shard's pages back
		t.side = side
		return freed
	}
	if bitsN := uint(64 - t.shift); bitsN > minIndexBits && t.count*8 < len(t.tags) {
		t.resize(bitsN - 1)
	}
	return freed
}

// evacuate copies live records out of a sparse page so the page can be
// released; it works in steps of at most budget records.
func (t *Table) evacuate(now int64, budget int) (freed int) {
	if t.evac.page < 0 {
		if t.garbage < 64<<10 || t.garbage*4 < t.arena {
			return 0
		}
		best, bestLive := -1, 0.5
		for i := range t.pages {
			p := &t.pages[i]
			if i == t.cur || cap(p.buf) == 0 {
				continue
			}
			if r := float64(p.live) / float64(cap(p.buf)); r < bestLive {
				best, bestLive = i, r
			}
		}
		if best < 0 {
			return 0
		}
		t.evac = evacuation{page: best}
	}
	pi := t.evac.page
	for moved := 0; moved < budget && t.evac.page == pi; {
		buf := t.pages[pi].buf
		if t.evac.offset >= len(buf) {
			// Only dead bytes remain (the current page is never chosen).
			t.releasePage(pi)
			break
		}
		off := t.evac.offset
		kind, exp, key, _, size := parse(buf[off:])
		t.evac.offset += size
		if kind == KindDead {
			continue
		}
		oldRef := uint32(pi)<<offsetBits | uint32(off)
		slot := t.slotOf(key, oldRef)
		if exp != 0 && exp <= now {
			t.deleteSlot(slot)
			freed++
			continue
		}
		ref, err := t.alloc(size)
		if err != nil {
			return freed
		}
		copy(t.record(ref)[:size], buf[off:off+size])
		t.refs[slot] = ref
		t.free(oldRef) // may release page pi, which ends the loop
		moved++
	}
	return freed
}

// slotOf returns the index slot that points at ref, whose record has key.
func (t *Table) slotOf(key []byte, ref uint32) int {
	mask := len(t.tags) - 1
	for i := t.home(Hash(key)); ; i = (i + 1) & mask {
		if t.refs[i] == ref && t.tags[i] != 0 {
			return i
		}
	}
}

// Scan visits the live records whose hash's top 32 bits are at or above
// cursor, in hash order, stopping after roughly count index slots. It returns
// the cursor to continue from, or 1<<32 when the whole table was covered.
// The cursor lives in hash space, not slot space, so a resize between calls
// neither repeats nor skips records that stayed in the table (Redis's SCAN
// guarantee).
func (t *Table) Scan(cursor uint64, count int, now int64, fn func(key []byte, kind Kind)) (next uint64) {
	bitsN := uint(64 - t.shift)
	n := uint64(len(t.tags))
	start := cursor >> (32 - bitsN)
	if start >= n {
		return 1 << 32
	}
	end := min(start+uint64(max(count, 1)), n)
	next = end << (32 - bitsN)
	mask := n - 1
	// Records whose home lies in [start, end) sit between their home and the
	// first empty slot after it, possibly wrapped past the table's end.
	for i := start; ; i++ {
		s := i & mask
		if i >= end && t.tags[s] == 0 {
			break
		}
		if i >= start+n {
			break
		}
		if t.tags[s] == 0 {
			continue
		}
		_, exp, key, _, _ := parse(t.record(t.refs[s]))
		top := Hash(key) >> 32
		if top < cursor || top >= next {
			continue
		}
		if exp != 0 && exp <= now {
			continue
		}
		kind := Kind(t.record(t.refs[s])[0])
		fn(key, kind)
	}
	return next
}

// ForEach calls fn for every live record until fn returns false. fn must not
// modify the table.
func (t *Table) ForEach(now int64, fn func(e Entry, expireAt int64) bool) {
	for i, tag := range t.tags {
		if tag == 0 {
			continue
		}
		kind, exp, key, payload, _ := parse(t.record(t.refs[i]))
		if exp != 0 && exp <= now {
			continue
		}
		if !fn(Entry{slot: i, Kind: kind, Key: key, Payload: payload}, exp) {
			return
		}
	}
}

// Clone returns a copy of the table that shares nothing with it: a
// snapshot copies a shard's pages in one memmove each, on the owner, and
// reads the copy elsewhere, so the owner pauses for a copy, not an encode.
func (t *Table) Clone() *Table { return t.CloneInto(nil) }

// CloneInto is Clone reusing the memory of dst, an earlier clone (or nil):
// the copy is then a plain memmove into memory already mapped, with no
// allocation or page faults, which keeps the owner's pause short.
func (t *Table) CloneInto(dst *Table) *Table {
	if dst == nil {
		dst = &Table{}
	}
	dst.tags = append(dst.tags[:0], t.tags...)
	dst.refs = append(dst.refs[:0], t.refs...)
	dst.shift, dst.count, dst.cur, dst.arena = t.shift, t.count, t.cur, t.arena
	dst.evac = evacuation{page: -1}
	if cap(dst.pages) < len(t.pages) {
		dst.pages = append(dst.pages[:cap(dst.pages)], make([]page, len(t.pages)-cap(dst.pages))...)
	}
	if t.side != nil {
		dst.side = t.side.CloneInto(dst.side)
	} else {
		dst.side = nil
	}
	dst.pages = dst.pages[:len(t.pages)]
	for i, p := range t.pages {
		if p.buf == nil {
			dst.pages[i] = page{}
			continue
		}
		buf := dst.pages[i].buf
		if cap(buf) < len(p.buf) {
			buf = make([]byte, 0, cap(p.buf))
		}
		dst.pages[i] = page{buf: append(buf[:0], p.buf...), live: p.live}
	}
	return dst
}

// Clear drops every record, the side table's too.
func (t *Table) Clear() {
	*t = *NewTable()
}
