package engine

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/shard"
)

// Long lists. A moving-window limiter (Python limits, and the LPUSH, LTRIM
// to the newest n, LINDEX at n-1 pattern generally) keeps a list as long
// as its limit and on every hit reads its element limit-1 and cuts the
// list back to limit elements: on the plain layout both walk the list from
// the head, so a hit cost O(limit). Past listIdxMin elements, LPUSH onto
// the head gives a list a sparse index of its elements, at the end of its
// record:
//
//	count word (listIndexed set) | elements | entries (m x u32) | R u32 | B u32 | firstT u32 | m u32
//
// Element positions are counted from the tail, where the list loses its
// oldest elements, and from the end of the elements, so that neither a
// push at the head nor a cut at the tail moves the positions of the
// elements that stay: an element's ordinal T is its place from the tail
// plus R, the number of elements ever cut from the tail, and its distance
// V is the bytes from its start to the end of the elements plus B, the
// bytes ever cut from the tail (both modulo 2^32; a record is far smaller).
// The entries are the V of the elements whose T is a multiple of
// listStride, ascending from firstT: every such element, none other.
//
// LINDEX and a tail-cutting LTRIM then find an element from the nearest
// entry, walking at most listStride-1 elements; LPUSH onto the head adds
// the entries of its new elements; LLEN reads the count. Every other list
// command gives the list its plain layout back first (plainList) and works
// as on any list: the index is rebuilt by a later LPUSH. The elements and
// their order are the same in both layouts; only the record's size and
// these commands' cost differ.
const (
	listIndexed  = 1 << 31
	listIdxMin   = 128 // elements at which a head push indexes a list
	listStride   = 32  // a power of two: T's multiples of it stay so modulo 2^32
	listTrailer  = 16
	listCountBit = listIndexed - 1
)

func listIsIndexed(p []byte) bool { return binary.LittleEndian.Uint32(p)&listIndexed != 0 }

// listCount is a list's length in either layout.
func listCount(p []byte) int { return int(binary.LittleEndian.Uint32(p) & listCountBit) }

// lIdx is a view of an indexed list's index; it aliases the payload.
type lIdx struct {
	p    []byte
	tr   int // where the trailer starts
	ents int // where the entries start: the end of the elements
}

func lIdxOf(p []byte) lIdx {
	tr := len(p) - listTrailer
	m := int(binary.LittleEndian.Uint32(p[tr+12:]))
	return lIdx{p: p, tr: tr, ents: tr - 4*m}
}

func (x lIdx) word(i int) uint32        { return binary.LittleEndian.Uint32(x.p[x.tr+4*i:]) }
func (x lIdx) cutElems() uint32         { return x.word(0) } // R
func (x lIdx) cutBytes() uint32         { return x.word(1) } // B
func (x lIdx) firstT() uint32           { return x.word(2) }
func (x lIdx) m() int                   { return int(x.word(3)) }
func (x lIdx) entry(k int) uint32       { return binary.LittleEndian.Uint32(x.p[x.ents+4*k:]) }
func (x lIdx) putEntry(k int, v uint32) { binary.LittleEndian.PutUint32(x.p[x.ents+4*k:], v) }

func putListTrailer(dst []byte, cutElems, cutBytes, firstT uint32, m int) {
	binary.LittleEndian.PutUint32(dst, cutElems)
	binary.LittleEndian.PutUint32(dst[4:], cutBytes)
	binary.LittleEndian.PutUint32(dst[8:], firstT)
	binary.LittleEndian.PutUint32(dst[12:], uint32(m))
}

// offset is the byte offset in the payload of element i (from the head)
// of an indexed list of n elements.
func (x lIdx) offset(i, n int) int {
	t := uint32(n-1-i) + x.cutElems()
	up := (t + listStride - 1) &^ (listStride - 1) // the nearest indexed ordinal toward the head
	k := int((up - x.firstT()) / listStride)
	from, walk := collHeader, i
	if up-x.firstT() < uint32(x.m())*listStride && k < x.m() {
		from, walk = x.ents-int(x.entry(k)-x.cutBytes()), int(up-t)
	}
	it := strIter{b: x.p[from:x.ents]}
	for ; walk > 0; walk-- {
		it.next()
	}
	return x.ents - len(it.rest())
}

// plainList gives an indexed list its plain layout back, for the commands
// that work on it; the elements do not change.
func (j *shardJob) plainList(t *shard.Table, e shard.Entry) (shard.Entry, error) {
	if !listIsIndexed(e.Payload) {
		return e, nil
	}
	n := listCount(e.Payload)
	e, err := t.Resize(e, lIdxOf(e.Payload).ents)
	if err != nil {
		return e, err
	}
	binary.LittleEndian.PutUint32(e.Payload, uint32(n))
	return e, nil
}

// indexList gives a plain list of n elements its index. It is an
// optimisation only: refused growth (maxmemory, the record's limit)
// leaves the list plain.
func (j *shardJob) indexList(t *shard.Table, e shard.Entry, n int) {
	if j.growable() != nil {
		return
	}
	end := len(e.Payload)
	m := (n-1)/listStride + 1 // ordinals 0, S, 2S, ... up to n-1
	grown, err := t.Resize(e, end+4*m+listTrailer)
	if err != nil {
		return
	}
	p := grown.Payload
	x := lIdx{p: p, tr: len(p) - listTrailer, ents: end}
	it := iterStrings(p[:end])
	for i := 0; i < n; i++ {
		if tt := n - 1 - i; tt%listStride == 0 {
			x.putEntry(tt/listStride, uint32(len(it.rest()))) // from its start to the end
		}
		it.next()
	}
	putListTrailer(p[x.tr:], 0, 0, 0, m)
	binary.LittleEndian.PutUint32(p, uint32(n)|listIndexed)
}

// pushHeadIndexed serves LPUSH onto an indexed list of n elements: the
// elements go to the head as on the plain layout, and those whose ordinal
// is a multiple of the stride get entries after the others.
func (j *shardJob) pushHeadIndexed(t *shard.Table, e shard.Entry, n int, vals [][]byte) (int, error) {
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
	var tr [listTrailer]byte
	copy(tr[:], e.Payload[x.tr:])
	old, oldEnts, m := len(e.Payload), x.ents, x.m()
	grown, err := t.Resize(e, old+add+4*q)
	if err != nil {
		return 0, err
	}
	p := grown.Payload
	// Elements and entries move up by the new elements' size; the new
	// entries and the trailer go after them.
	copy(p[collHeader+add:], p[collHeader:old-listTrailer])
	ents := oldEnts + add
	newEnd := ents + 4*(m+q)
	cutBytes := binary.LittleEndian.Uint32(tr[4:])
	// Each element goes to the head in turn: the last one ends first, and
	// the ordinals grow from the first pushed.
	w := collHeader + add
	k := m
	for i, v := range vals {
		w -= encLen(v)
		putElem(p[w:], v)
		if tt := top + uint32(i) + 1; tt%listStride == 0 {
			binary.LittleEndian.PutUint32(p[ents+4*k:], uint32(ents-w)+cutBytes)
			k++
		}
	}
	copy(p[newEnd:], tr[:])
	binary.LittleEndian.PutUint32(p[newEnd+12:], uint32(m+q))
	count := n + len(vals)
	binary.LittleEndian.PutUint32(p, uint32(count)|listIndexed)
	return count, nil
}

// cutTailIndexed keeps the first keep elements of an indexed list of n
// (0 < keep < n): the elements after them go, and the entries of those.
func (j *shardJob) cutTailIndexed(t *shard.Table, e shard.Entry, n, keep int) error {
	x := lIdxOf(e.Payload)
	cut := x.offset(keep, n)
	cutElems := x.cutElems() + uint32(n-keep)
	cutBytes := x.cutBytes() + uint32(x.ents-cut)
	first, m := x.firstT(), x.m()
	drop := 0 // the entries of ordinals now cut: below cutElems
	if d := int(int32(cutElems - first)); d > 0 {
		drop = min(m, (d+listStride-1)/listStride)
	}
	j.scratch = append(j.scratch[:0], e.Payload[x.ents+4*drop:x.tr]...)
	e, err := t.Resize(e, cut+len(j.scratch)+listTrailer)
	if err != nil {
		return err
	}
	p := e.Payload
	copy(p[cut:], j.scratch)
	putListTrailer(p[cut+len(j.scratch):], cutElems, cutBytes, first+uint32(drop)*listStride, m-drop)
	binary.LittleEndian.PutUint32(p, uint32(keep)|listIndexed)
	return nil
}
