package engine

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/sluicehq/sluice/shard"
)

// Long lists. A moving-window limiter (Python limits, and the LPUSH, LTRIM
// to the newest n, LINDEX at n-1 pattern generally) keeps a list as long
// as its limit and on every hit reads its element limit-1, pushes at the
// head and cuts the list back to limit elements: on the plain layout
// reading and cutting walk the list from the head and a push copies the
// record, so a hit cost O(limit). Past listIdxMin elements, LPUSH onto the
// head gives a list a sparse index and slack at both ends of its elements:
//
//	count word (listIndexed set) | front slack | elements | tail slack |
//	entries (m x u32, the highest ordinal first) | R | B | firstT | m | front | tail (u32 each)
//
// Element positions are counted from the tail, where the list loses its
// oldest elements, and from the end of the elements, so that neither a
// push at the head nor a cut at the tail moves the positions of the
// elements that stay: an element's ordinal T is its place from the tail
// plus R, the number of elements ever cut from the tail, and its distance
// V is the bytes from its start to the end of the elements plus B, the
// bytes ever cut from the tail (both modulo 2^32; a record is far smaller).
// The entries are the V of the elements whose T is a multiple of
// listStride, from firstT up: every such element, none other. They are
// stored from the trailer down, so that a new one takes 4 bytes of the
// tail slack and dropped ones give them back.
//
// LINDEX and a tail-cutting LTRIM then find an element from the nearest
// entry, walking at most listStride-1 elements; LPUSH onto the head writes
// into the front slack, and a cut adds to the tail slack, so neither moves
// the elements until a slack runs out (or the tail's grows past a bound)
// and the record is laid out again with fresh slack: O(1) per element,
// amortised. LLEN reads the count; LRANGE and LPOS read the elements in
// place. Every other list command (a write) gives the list its plain
// layout back (plainList) once it knows it will change the list, and works
// as on any list: the index is rebuilt by a later LPUSH. So the layout
// follows the changes alone, which the journal and the Raft log both
// carry: a replay, and every node of a cluster, holds the same bytes. A
// read, or a write that changes nothing (and is not journaled), leaves the
// layout alone. The elements and their order are the
// same in both layouts; only the record's size and these commands' cost
// differ.
const (
	listIndexed  = 1 << 31
	listIdxMin   = 128 // elements at which a head push indexes a list
	listStride   = 32  // a power of two: T's multiples of it stay so modulo 2^32
	listTrailer  = 24
	listCountBit = listIndexed - 1
)

func listIsIndexed(p []byte) bool { return binary.LittleEndian.Uint32(p)&listIndexed != 0 }

// listCount is a list's length in either layout.
func listCount(p []byte) int { return int(binary.LittleEndian.Uint32(p) & listCountBit) }

// listSlack is the slack a layout gives each end of data bytes of
// elements: an eighth of them, so that the copies a new layout makes cost
// O(1) per byte pushed or cut.
func listSlack(data int) int { return max(64, data/8) }

// lIdx is a view of an indexed list's layout; it aliases the payload.
type lIdx struct {
	p       []byte
	tr      int // where the trailer starts
	start   int // where the elements start
	dataEnd int // where they end
}

func lIdxOf(p []byte) lIdx {
	tr := len(p) - listTrailer
	x := lIdx{p: p, tr: tr}
	x.start = collHeader + int(x.word(4))
	x.dataEnd = tr - 4*x.m() - int(x.word(5))
	return x
}

func (x lIdx) word(i int) uint32       { return binary.LittleEndian.Uint32(x.p[x.tr+4*i:]) }
func (x lIdx) setWord(i int, v uint32) { binary.LittleEndian.PutUint32(x.p[x.tr+4*i:], v) }
func (x lIdx) cutElems() uint32        { return x.word(0) } // R
func (x lIdx) cutBytes() uint32        { return x.word(1) } // B
func (x lIdx) firstT() uint32          { return x.word(2) }
func (x lIdx) m() int                  { return int(x.word(3)) }
func (x lIdx) frontSlack() int         { return int(x.word(4)) }
func (x lIdx) tailSlack() int          { return int(x.word(5)) }
func (x lIdx) entry(k int) uint32      { return binary.LittleEndian.Uint32(x.p[x.tr-4*(k+1):]) }
func (x lIdx) putEntry(k int, v uint32) {
	binary.LittleEndian.PutUint32(x.p[x.tr-4*(k+1):], v)
}

// elements is the list's encoded elements.
func (x lIdx) elements() []byte { return x.p[x.start:x.dataEnd] }

// offset is the byte offset in the payload of element i (from the head)
// of an indexed list of n elements.
func (x lIdx) offset(i, n int) int {
	t := uint32(n-1-i) + x.cutElems()
	up := (t + listStride - 1) &^ (listStride - 1) // the nearest indexed ordinal toward the head
	from, walk := x.start, i
	if d := up - x.firstT(); d < uint32(x.m())*listStride {
		from, walk = x.dataEnd-int(x.entry(int(d/listStride))-x.cutBytes()), int(up-t)
	}
	it := strIter{b: x.p[from:x.dataEnd]}
	for ; walk > 0; walk-- {
		it.next()
	}
	return x.dataEnd - len(it.rest())
}

// listElems is a list's count and its encoded elements, in either
// layout, for the reads (which never change the layout: they are not
// replicated, so the change would be this node's alone).
func listElems(p []byte) (int, []byte) {
	if listIsIndexed(p) {
		return listCount(p), lIdxOf(p).elements()
	}
	return collCount(p), p[collHeader:]
}

// listAt is the offset of element i of a list of n elements and where its
// elements end, in either layout.
func listAt(p []byte, i, n int) (off, end int) {
	if listIsIndexed(p) {
		x := lIdxOf(p)
		return x.offset(i, n), x.dataEnd
	}
	return listOffset(p, i), len(p)
}

// listHas reports whether the list holds v, in either layout.
func listHas(p, v []byte) bool {
	_, elems := listElems(p)
	for it := (strIter{b: elems}); it.more(); {
		if bytes.Equal(it.next(), v) {
			return true
		}
	}
	return false
}

// plainList gives an indexed list its plain layout back, for the writes
// that work on it; the elements do not change. On an error (the shard's
// storage full) the list is as it was.
func (j *shardJob) plainList(t *shard.Table, e shard.Entry) (shard.Entry, error) {
	if !listIsIndexed(e.Payload) {
		return e, nil
	}
	n := listCount(e.Payload)
	x := lIdxOf(e.Payload)
	size := copy(e.Payload[collHeader:], x.elements())
	grown, err := t.Resize(e, collHeader+size)
	if err != nil {
		copy(e.Payload[x.start:], e.Payload[collHeader:collHeader+size])
		return e, err
	}
	binary.LittleEndian.PutUint32(grown.Payload, uint32(n))
	return grown, nil
}

// layOut gives the list whose count is n, elements elems and index the
// ordinals, distances and entries given (entries ascending), the indexed
// layout with fresh slack at both ends, plus front extra bytes at the
// front and tail extra at the tail. It builds the record in the job's
// scratch (elems and entries may alias the old record) and refuses growth
// as a push would.
func (j *shardJob) layOut(t *shard.Table, e shard.Entry, n int, elems []byte, cutElems, cutBytes, firstT uint32, entries func(k int) uint32, m, frontExtra, tailExtra int) (shard.Entry, error) {
	front := listSlack(len(elems)) + frontExtra
	tail := listSlack(len(elems)) + tailExtra
	size := collHeader + front + len(elems) + tail + 4*m + listTrailer
	if size > len(e.Payload) {
		if err := j.growable(); err != nil {
			return e, err
		}
	}
	buf := slices.Grow(j.scratch[:0], size)[:size]
	clear(buf)
	binary.LittleEndian.PutUint32(buf, uint32(n)|listIndexed)
	copy(buf[collHeader+front:], elems)
	x := lIdx{p: buf, tr: size - listTrailer}
	for k := range m {
		x.putEntry(k, entries(k))
	}
	for i, v := range [6]uint32{cutElems, cutBytes, firstT, uint32(m), uint32(front), uint32(tail)} {
		x.setWord(i, v)
	}
	j.scratch = buf
	e, err := t.Resize(e, size)
	if err != nil {
		return e, err
	}
	copy(e.Payload, buf)
	return e, nil
}

// indexList gives a plain list of n elements its index. It is an
// optimisation only: refused growth (maxmemory, the record's limit)
// leaves the list plain.
func (j *shardJob) indexList(t *shard.Table, e shard.Entry, n int) {
	elems := e.Payload[collHeader:]
	m := (n-1)/listStride + 1 // ordinals 0, S, 2S, ... up to n-1
	if collHeader+len(elems)+2*listSlack(len(elems))+4*m+listTrailer+len(e.Key)+64 > shard.MaxRecord {
		// Too close to the record's limit for the index and its slack:
		// it stays plain rather than try (and walk it) on every push.
		return
	}
	dist := make([]uint32, m)
	it := strIter{b: elems}
	for i := 0; i < n; i++ {
		if tt := n - 1 - i; tt%listStride == 0 {
			dist[tt/listStride] = uint32(len(it.rest())) // from its start to the end
		}
		it.next()
	}
	_, _ = j.layOut(t, e, n, elems, 0, 0, 0, func(k int) uint32 { return dist[k] }, m, 0, 0)
}

// pushHeadIndexed serves LPUSH onto an indexed list of n elements: the
// elements go into the front slack, the last pushed at the head, and those
// whose ordinal is a multiple of the stride get entries, from the tail
// slack; a slack too small for them lays the record out again first.
func (j *shardJob) pushHeadIndexed(t *shard.Table, e shard.Entry, n int, vals [][]byte) (int, error) {
	// A push grows the list, slack or not: past maxmemory it is refused,
	// as on the plain layout (and on every node alike).
	if err := j.growable(); err != nil {
		return 0, err
	}
	x := lIdxOf(e.Payload)
	top := uint32(n-1) + x.cutElems() // the head's ordinal before the push
	add, q := 0, 0
	for i, v := range vals {
		add += encLen(v)
		if (top+uint32(i)+1)%listStride == 0 {
			q++
		}
	}
	if add > x.frontSlack() || 4*q > x.tailSlack() {
		old := x
		var err error
		e, err = j.layOut(t, e, n, old.elements(), old.cutElems(), old.cutBytes(), old.firstT(), old.entry, old.m(), add, 4*q)
		if err != nil {
			return 0, err
		}
		x = lIdxOf(e.Payload)
	}
	p := e.Payload
	w := x.start
	oldM, m := x.m(), x.m()
	for i, v := range vals {
		w -= encLen(v)
		putElem(p[w:], v)
		if tt := top + uint32(i) + 1; tt%listStride == 0 {
			x.putEntry(m, uint32(x.dataEnd-w)+x.cutBytes())
			m++
		}
	}
	x.setWord(5, uint32(x.tailSlack()-4*(m-oldM)))
	x.setWord(3, uint32(m))
	x.setWord(4, uint32(w-collHeader))
	count := n + len(vals)
	binary.LittleEndian.PutUint32(p, uint32(count)|listIndexed)
	return count, nil
}

// cutTailIndexed keeps the first keep elements of an indexed list of n
// (0 < keep < n): the elements after them become tail slack, and the
// entries of those go. A tail slack grown past its bound lays the record
// out again.
func (j *shardJob) cutTailIndexed(t *shard.Table, e shard.Entry, n, keep int) error {
	x := lIdxOf(e.Payload)
	cut := x.offset(keep, n)
	cutElems := x.cutElems() + uint32(n-keep)
	cutBytes := x.cutBytes() + uint32(x.dataEnd-cut)
	first, m := x.firstT(), x.m()
	drop := 0 // the entries of ordinals now cut: below cutElems
	if d := int(int32(cutElems - first)); d > 0 {
		drop = min(m, (d+listStride-1)/listStride)
	}
	p := e.Payload
	// The entries that stay move up to the trailer by the dropped ones.
	copy(p[x.tr-4*(m-drop):x.tr], p[x.tr-4*m:x.tr-4*drop])
	tail := x.tailSlack() + (x.dataEnd - cut) + 4*drop
	x.setWord(0, cutElems)
	x.setWord(1, cutBytes)
	x.setWord(2, first+uint32(drop)*listStride)
	x.setWord(3, uint32(m-drop))
	x.setWord(5, uint32(tail))
	binary.LittleEndian.PutUint32(p, uint32(keep)|listIndexed)
	if tail > 2*listSlack(cut-x.start) {
		// The cut is done either way: a layout that fails leaves it
		// with its slack.
		y := lIdxOf(p)
		_, _ = j.layOut(t, e, keep, y.elements(), y.cutElems(), y.cutBytes(), y.firstT(), y.entry, y.m(), 0, 0)
	}
	return nil
}
