package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"

	"github.com/sluicehq/sluice/shard"
)

// Lists: LPUSH, RPUSH and their X forms, LPOP, RPOP, LLEN, LINDEX, LRANGE,
// LTRIM, LSET, LREM, LINSERT and LPOS, with Redis 7.0's semantics. A list
// is an inline collection payload (see collection.go), head first.
//
// The rate-limiting pattern (LPUSH, LTRIM to the newest n, LINDEX) is the
// hot path: pushes, pops, trims, LSET and LINSERT resize the record and
// move only the bytes after the change (spliceList, keepList), with no
// allocation and no full rewrite; LINDEX only walks; a trim that keeps
// everything writes nothing and is not journaled.

// List ops. Their numbers are fixed forever (journals, Raft logs).
const (
	OpLPush   Op = 70 // LPUSH, RPUSH, LPUSHX, RPUSHX: N[0] = 1 at the tail; N[1] = 1 only onto an existing list
	OpLPop    Op = 71 // LPOP, RPOP: N[0] = 1 from the tail
	OpLLen    Op = 72 // LLEN
	OpLIndex  Op = 73 // LINDEX
	OpLRange  Op = 74 // LRANGE
	OpLTrim   Op = 75 // LTRIM
	OpLSet    Op = 76 // LSET
	OpLRem    Op = 77 // LREM
	OpLInsert Op = 78 // LINSERT
	OpLPos    Op = 79 // LPOS
)

// Errors of the list commands, in Redis's words.
var (
	ErrNotPositive    = errors.New("value is out of range, must be positive")
	errRankZero       = errors.New("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
	errCountNegative  = errors.New("COUNT can't be negative")
	errMaxlenNegative = errors.New("MAXLEN can't be negative")
	errLPopArity      = arityError("lpop")
	errRPopArity      = arityError("rpop")
)

func arityError(name string) error {
	return errors.New("wrong number of arguments for '" + name + "' command")
}

func listOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpLPush:   {Name: "lpush", Writes: true, Creates: true, Keys: KeysOne, changed: positiveInt, apply: (*shardJob).lpush},
		OpLPop:    {Name: "lpop", Writes: true, Keys: KeysOne, changed: popped, apply: (*shardJob).lpop},
		OpLLen:    {Name: "llen", Keys: KeysOne, apply: (*shardJob).llen},
		OpLIndex:  {Name: "lindex", Keys: KeysOne, apply: (*shardJob).lindex},
		OpLRange:  {Name: "lrange", Keys: KeysOne, apply: (*shardJob).lrange},
		OpLTrim:   {Name: "ltrim", Writes: true, Keys: KeysOne, changed: trimmed, apply: (*shardJob).ltrim},
		OpLSet:    {Name: "lset", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).lset},
		OpLRem:    {Name: "lrem", Writes: true, Keys: KeysOne, changed: positiveInt, apply: (*shardJob).lrem},
		OpLInsert: {Name: "linsert", Writes: true, Creates: true, Keys: KeysOne, changed: positiveInt, apply: (*shardJob).linsert},
		OpLPos:    {Name: "lpos", Keys: KeysOne, apply: (*shardJob).lpos},
	}
}

// positiveInt: LPUSHX onto no list, LREM that found nothing and LINSERT
// without its pivot (0 or -1) change nothing.
func positiveInt(_ *Command, r *Reply) bool { return r.Kind == ReplyInt && r.Int > 0 }

// popped: a pop changed the list when it returned elements.
func popped(_ *Command, r *Reply) bool {
	return r.Kind == ReplyBulk || (r.Kind == ReplyArray && len(r.Items) > 0)
}

// trimmed: LTRIM answers OK whether or not it removed anything; its reply
// carries Int 1 (never sent) when it did.
func trimmed(_ *Command, r *Reply) bool { return r.Kind == ReplyOK && r.Int != 0 }

// encLen is the encoded size of an element.
func encLen(v []byte) int {
	w := 1
	for x := uint(len(v)); x >= 0x80; x >>= 7 {
		w++
	}
	return w + len(v)
}

// putElem writes v's encoding at the start of dst and returns its size.
func putElem(dst, v []byte) int {
	n := binary.PutUvarint(dst, uint64(len(v)))
	return n + copy(dst[n:], v)
}

// listOffset returns the byte offset in p of element i (0 <= i <= count;
// count gives the payload's end).
func listOffset(p []byte, i int) int {
	it := iterStrings(p)
	for ; i > 0; i-- {
		it.next()
	}
	return len(p) - len(it.rest())
}

// spliceList replaces del bytes at offset at of the list's payload (whose
// lookup gave e and ok) with add bytes, left for the caller to fill, and
// makes count the list's length. Beyond the copy the table's Resize makes,
// only the bytes after the change move: in a record that grows they move
// up inside it; from one that shrinks they are saved aside first (so a
// failed Resize leaves the list as it was), and a tail cut moves nothing. A count of 0 deletes the key. Growth is
// refused past maxmemory; on any error nothing has changed.
func (j *shardJob) spliceList(t *shard.Table, c *Command, e shard.Entry, ok bool, at, del, add, count int) (shard.Entry, error) {
	if count == 0 {
		if ok {
			t.Delete(e)
		}
		return shard.Entry{}, nil
	}
	var err error
	switch {
	case !ok:
		// An expired list may still sit in e: Insert replaces it.
		e, err = j.create(t, c, shard.KindList, 0, collHeader+add)
	case add > del:
		if err = j.growable(); err == nil {
			old := len(e.Payload)
			if e, err = t.Resize(e, old-del+add); err == nil {
				copy(e.Payload[at+add:], e.Payload[at+del:old])
			}
		}
	case add < del:
		j.scratch = append(j.scratch[:0], e.Payload[at+del:]...)
		if e, err = t.Resize(e, len(e.Payload)-del+add); err == nil {
			copy(e.Payload[at+add:], j.scratch)
		}
	}
	if err != nil {
		return e, err
	}
	binary.LittleEndian.PutUint32(e.Payload, uint32(count))
	return e, nil
}

// keepList keeps the bytes [from, to) of the list's elements, count
// elements; nothing else moves.
func (j *shardJob) keepList(t *shard.Table, c *Command, e shard.Entry, from, to, count int) error {
	if from == collHeader || count == 0 {
		// The head stays (or nothing does): only the tail goes.
		_, err := j.spliceList(t, c, e, true, to, len(e.Payload)-to, 0, count)
		return err
	}
	j.scratch = append(j.scratch[:0], e.Payload[from:to]...)
	e, err := t.Resize(e, collHeader+to-from)
	if err != nil {
		return err
	}
	copy(e.Payload[collHeader:], j.scratch)
	binary.LittleEndian.PutUint32(e.Payload, uint32(count))
	return nil
}

// listRange clamps start and end as Redis does for LRANGE and LTRIM:
// negative indexes count from the tail. It returns the first and last
// index kept, and false for an empty range.
func listRange(start, end int64, n int) (int, int, bool) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if end < 0 {
		end += ln
	}
	if start < 0 {
		start = 0
	}
	if start > end || start >= ln {
		return 0, 0, false
	}
	if end >= ln {
		end = ln - 1
	}
	return int(start), int(end), true
}

// lpush serves LPUSH, RPUSH, LPUSHX and RPUSHX.
func (j *shardJob) lpush(t *shard.Table, c *Command, now int64) Reply {
	tail := c.N[0] != 0
	if len(c.Args) == 0 {
		return errReply(arityError(pushName(c)))
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok && c.N[1] != 0 {
		return intReply(0)
	}
	if ok && listIsIndexed(e.Payload) {
		if !tail {
			n, err := j.pushHeadIndexed(t, e, listCount(e.Payload), c.Args)
			if err == nil {
				return intReply(int64(n))
			}
			if errors.Is(err, ErrOOM) {
				return errReply(err)
			}
			// Past the record's limit with its index: as a plain list.
		}
		if e, err = j.plainList(t, e); err != nil {
			return errReply(err)
		}
	}
	add := 0
	for _, v := range c.Args {
		add += encLen(v)
	}
	at, count := collHeader, 0
	if ok {
		count = collCount(e.Payload)
		if tail {
			at = len(e.Payload)
		}
	}
	count += len(c.Args)
	if e, err = j.spliceList(t, c, e, ok, at, 0, add, count); err != nil {
		return errReply(err)
	}
	hole := e.Payload[at : at+add]
	if tail {
		w := 0
		for _, v := range c.Args {
			w += putElem(hole[w:], v)
		}
	} else {
		// Each element goes to the head in turn: the last one ends first.
		w := add
		for _, v := range c.Args {
			w -= encLen(v)
			putElem(hole[w:], v)
		}
		if count >= listIdxMin {
			j.indexList(t, e, count)
		}
	}
	return intReply(int64(count))
}

func pushName(c *Command) string {
	name := "lpush"
	if c.N[0] != 0 {
		name = "rpush"
	}
	if c.N[1] != 0 {
		name += "x"
	}
	return name
}

// lpop serves LPOP and RPOP, with or without a count.
func (j *shardJob) lpop(t *shard.Table, c *Command, now int64) Reply {
	tail := c.N[0] != 0
	if len(c.Args) > 1 {
		if tail {
			return errReply(errRPopArity)
		}
		return errReply(errLPopArity)
	}
	hasCount := len(c.Args) == 1
	var want int64
	if hasCount {
		var err error
		if want, err = ParseInt64(c.Args[0]); err != nil || want < 0 {
			return errReply(ErrNotPositive)
		}
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		if hasCount {
			return Reply{Kind: ReplyNilArray}
		}
		return nilReply()
	}
	if hasCount && want == 0 {
		return emptyArray()
	}
	if e, err = j.plainList(t, e); err != nil {
		return errReply(err)
	}
	p := e.Payload
	n := collCount(p)
	k := n
	if !hasCount || want < int64(n) {
		k = int(max(want, 1))
	}
	var r Reply
	var from, to int
	if tail {
		from, to = collHeader, listOffset(p, n-k)
		it := strIter{b: p[to:]}
		if hasCount {
			items := make([]Reply, k)
			for i := k - 1; i >= 0; i-- {
				items[i] = j.bulk(it.next())
			}
			r = arrayReply(items)
		} else {
			r = j.bulk(it.next())
		}
	} else {
		it := iterStrings(p)
		if hasCount {
			items := make([]Reply, k)
			for i := range items {
				items[i] = j.bulk(it.next())
			}
			r = arrayReply(items)
		} else {
			r = j.bulk(it.next())
		}
		from, to = len(p)-len(it.rest()), len(p)
	}
	if err := j.keepList(t, c, e, from, to, n-k); err != nil {
		return errReply(err)
	}
	return r
}

func (j *shardJob) llen(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 0 {
		return errReply(arityError("llen"))
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	return intReply(int64(listCount(e.Payload)))
}

// listIndex resolves a LINDEX or LSET index (negative from the tail) to an
// element number, false when out of range.
func listIndex(idx int64, n int) (int, bool) {
	if idx < 0 {
		idx += int64(n)
	}
	if idx < 0 || idx >= int64(n) {
		return 0, false
	}
	return int(idx), true
}

func (j *shardJob) lindex(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 1 {
		return errReply(arityError("lindex"))
	}
	// Redis looks the key up before it reads the index.
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	idx, err := ParseInt64(c.Args[0])
	if err != nil {
		return errReply(ErrNotInteger)
	}
	n := listCount(e.Payload)
	i, in := listIndex(idx, n)
	if !in {
		return nilReply()
	}
	off, end := listAt(e.Payload, i, n)
	it := strIter{b: e.Payload[off:end]}
	return j.bulk(it.next())
}

// parseRange reads LRANGE's and LTRIM's start and stop.
func parseRange(c *Command, name string) (start, end int64, err error) {
	if len(c.Args) != 2 {
		return 0, 0, arityError(name)
	}
	if start, err = ParseInt64(c.Args[0]); err != nil {
		return 0, 0, ErrNotInteger
	}
	if end, err = ParseInt64(c.Args[1]); err != nil {
		return 0, 0, ErrNotInteger
	}
	return start, end, nil
}

func (j *shardJob) lrange(t *shard.Table, c *Command, now int64) Reply {
	start, end, err := parseRange(c, "lrange")
	if err != nil {
		return errReply(err)
	}
	// A read: it leaves the layout as it is (reads are not replicated, so
	// a change here would be this node's alone).
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return emptyArray()
	}
	n := listCount(e.Payload)
	first, last, nonEmpty := listRange(start, end, n)
	if !nonEmpty {
		return emptyArray()
	}
	off, elemsEnd := listAt(e.Payload, first, n)
	it := strIter{b: e.Payload[off:elemsEnd]}
	items := make([]Reply, last-first+1)
	for i := range items {
		items[i] = j.bulk(it.next())
	}
	return arrayReply(items)
}

func (j *shardJob) ltrim(t *shard.Table, c *Command, now int64) Reply {
	start, end, err := parseRange(c, "ltrim")
	if err != nil {
		return errReply(err)
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return okReply()
	}
	n := listCount(e.Payload)
	first, last, nonEmpty := listRange(start, end, n)
	switch {
	case !nonEmpty:
		t.Delete(e)
		return Reply{Kind: ReplyOK, Int: 1}
	case first == 0 && last == n-1:
		// Everything stays: nothing to write.
		return okReply()
	case first == 0 && listIsIndexed(e.Payload):
		// The newest elements stay (the moving window's trim).
		if err := j.cutTailIndexed(t, e, n, last+1); err != nil {
			return errReply(err)
		}
		return Reply{Kind: ReplyOK, Int: 1}
	}
	if e, err = j.plainList(t, e); err != nil {
		return errReply(err)
	}
	p := e.Payload
	it := iterStrings(p)
	for i := 0; i < first; i++ {
		it.next()
	}
	from := len(p) - len(it.rest())
	for i := first; i <= last; i++ {
		it.next()
	}
	if err := j.keepList(t, c, e, from, len(p)-len(it.rest()), last-first+1); err != nil {
		return errReply(err)
	}
	return Reply{Kind: ReplyOK, Int: 1}
}

func (j *shardJob) lset(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 2 {
		return errReply(arityError("lset"))
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return errReply(ErrNoSuchKey)
	}
	idx, err := ParseInt64(c.Args[0])
	if err != nil {
		return errReply(ErrNotInteger)
	}
	n := listCount(e.Payload)
	i, in := listIndex(idx, n)
	if !in {
		return errReply(ErrIndexRange)
	}
	if e, err = j.plainList(t, e); err != nil {
		return errReply(err)
	}
	at := listOffset(e.Payload, i)
	it := strIter{b: e.Payload[at:]}
	old := it.next()
	v := c.Args[1]
	if e, err = j.spliceList(t, c, e, true, at, encLen(old), encLen(v), n); err != nil {
		return errReply(err)
	}
	putElem(e.Payload[at:], v)
	return okReply()
}

func (j *shardJob) lrem(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 2 {
		return errReply(arityError("lrem"))
	}
	toRemove, err := ParseInt64(c.Args[0])
	if err != nil {
		return errReply(ErrNotInteger)
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	v := c.Args[1]
	_, elems := listElems(e.Payload)
	matches := 0
	for it := (strIter{b: elems}); it.more(); {
		if bytes.Equal(it.next(), v) {
			matches++
		}
	}
	// The matches removed, numbered from 1 at the head: the first
	// toRemove, the last -toRemove, or all of them.
	lo, hi := 1, matches
	switch {
	case toRemove > 0 && toRemove < int64(matches):
		hi = int(toRemove)
	case toRemove < 0 && toRemove != math.MinInt64 && -toRemove < int64(matches):
		lo = matches - int(-toRemove) + 1
	}
	removed := hi - lo + 1
	if removed <= 0 {
		return intReply(0)
	}
	if e, err = j.plainList(t, e); err != nil {
		return errReply(err)
	}
	p := e.Payload
	n := collCount(p)
	if removed == n {
		t.Delete(e)
		return intReply(int64(removed))
	}
	j.beginCollection()
	seen := 0
	for it := iterStrings(p); it.more(); {
		start := it.rest()
		el := it.next()
		if bytes.Equal(el, v) {
			seen++
			if seen >= lo && seen <= hi {
				continue
			}
		}
		j.scratch = append(j.scratch, start[:len(start)-len(it.rest())]...)
	}
	if err := j.storeCollection(t, c, e, true, shard.KindList, n-removed); err != nil {
		return errReply(err)
	}
	return intReply(int64(removed))
}

func (j *shardJob) linsert(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) != 3 {
		return errReply(arityError("linsert"))
	}
	var after bool
	switch {
	case isWord(c.Args[0], "after"):
		after = true
	case isWord(c.Args[0], "before"):
	default:
		return errReply(ErrSyntax)
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	pivot, v := c.Args[1], c.Args[2]
	if !listHas(e.Payload, pivot) {
		return intReply(-1)
	}
	if e, err = j.plainList(t, e); err != nil {
		return errReply(err)
	}
	p := e.Payload
	at := -1
	for it := iterStrings(p); it.more(); {
		start := len(p) - len(it.rest())
		if bytes.Equal(it.next(), pivot) {
			at = start
			if after {
				at = len(p) - len(it.rest())
			}
			break
		}
	}
	if at < 0 {
		return intReply(-1)
	}
	n := collCount(p) + 1
	if e, err = j.spliceList(t, c, e, true, at, 0, encLen(v), n); err != nil {
		return errReply(err)
	}
	putElem(e.Payload[at:], v)
	return intReply(int64(n))
}

// isWord reports whether b is word, ignoring ASCII case (word is lower
// case).
func isWord(b []byte, word string) bool {
	if len(b) != len(word) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

func (j *shardJob) lpos(t *shard.Table, c *Command, now int64) Reply {
	if len(c.Args) == 0 {
		return errReply(arityError("lpos"))
	}
	v := c.Args[0]
	rank, count, maxlen := int64(1), int64(-1), int64(0) // count -1: no COUNT
	for i := 1; i < len(c.Args); i++ {
		more := i+1 < len(c.Args)
		var err error
		switch {
		case more && isWord(c.Args[i], "rank"):
			i++
			if rank, err = ParseInt64(c.Args[i]); err != nil {
				return errReply(ErrNotInteger)
			}
			if rank == 0 {
				return errReply(errRankZero)
			}
		case more && isWord(c.Args[i], "count"):
			i++
			if count, err = ParseInt64(c.Args[i]); err != nil || count < 0 {
				return errReply(errCountNegative)
			}
		case more && isWord(c.Args[i], "maxlen"):
			i++
			if maxlen, err = ParseInt64(c.Args[i]); err != nil || maxlen < 0 {
				return errReply(errMaxlenNegative)
			}
		default:
			return errReply(ErrSyntax)
		}
	}
	e, ok, err := collection(t, c, now, shard.KindList)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		if count != -1 {
			return emptyArray()
		}
		return nilReply()
	}
	n, elems := listElems(e.Payload)
	if rank > 0 {
		return lposForward(elems, v, rank, count, maxlen)
	}
	return lposBackward(n, elems, v, rank, count, maxlen)
}

// lposForward scans from the head: the matches from the rank-th on, up to
// count of them (0: all), among the first maxlen elements (0: all).
func lposForward(elems, v []byte, rank, count, maxlen int64) Reply {
	var items []Reply
	matches := int64(0)
	idx := int64(0)
	for it := (strIter{b: elems}); it.more() && (maxlen == 0 || idx < maxlen); idx++ {
		if !bytes.Equal(it.next(), v) {
			continue
		}
		matches++
		if matches < rank {
			continue
		}
		if count == -1 {
			return intReply(idx)
		}
		items = append(items, intReply(idx))
		if count != 0 && matches-rank+1 >= count {
			break
		}
	}
	if count == -1 {
		return nilReply()
	}
	if items == nil {
		return emptyArray()
	}
	return arrayReply(items)
}

// lposBackward scans from the tail, as a negative rank asks: the matches
// counted from the tail, found by counting them from the head first.
func lposBackward(n int, elems, v []byte, rank, count, maxlen int64) Reply {
	lo := 0 // the scan covers the last maxlen elements
	if maxlen > 0 && maxlen < int64(n) {
		lo = n - int(maxlen)
	}
	it := strIter{b: elems}
	for i := 0; i < lo; i++ {
		it.next()
	}
	region := it
	m := int64(0)
	for it.more() {
		if bytes.Equal(it.next(), v) {
			m++
		}
	}
	// Matches numbered from 1 at the tail: kFrom to kTo. Redis negates
	// the rank in a C long, where the most negative one stays negative and
	// so every match qualifies and COUNT never stops the scan.
	kFrom, kTo := -rank, m
	if rank == math.MinInt64 {
		kFrom = 1
	} else if count > 0 && count-1 < m-kFrom {
		kTo = kFrom + count - 1
	}
	if count == -1 {
		kTo = kFrom
	}
	if kFrom > m {
		if count == -1 {
			return nilReply()
		}
		return emptyArray()
	}
	// As numbered from the head: fFrom to fTo, replied in reverse.
	fFrom, fTo := m-kTo+1, m-kFrom+1
	var items []Reply
	if count != -1 {
		items = make([]Reply, fTo-fFrom+1)
	}
	f := int64(0)
	for idx := lo; region.more(); idx++ {
		if !bytes.Equal(region.next(), v) {
			continue
		}
		f++
		if f < fFrom {
			continue
		}
		if count == -1 {
			return intReply(int64(idx))
		}
		items[fTo-f] = intReply(int64(idx))
		if f == fTo {
			break
		}
	}
	return arrayReply(items)
}
