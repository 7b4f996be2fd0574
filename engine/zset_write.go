package engine

import (
	"bytes"
	"math"

	"github.com/sluicehq/sluice/shard"
)

// The sorted-set writes: ZADD, ZINCRBY, ZREM, the ZREMRANGE family,
// ZPOPMIN and ZPOPMAX.

// zaddOpts are ZADD's options.
type zaddOpts struct{ nx, xx, gt, lt, ch, incr bool }

// zaddAction is what one score-member pair does.
type zaddAction uint8

const (
	zaddNop    zaddAction = iota // nothing (NX, XX, GT or LT said no)
	zaddSame                     // processed, the score did not change
	zaddAdd                      // a new member
	zaddUpdate                   // a new score for a member
)

// step decides one pair against the member's current score (found false
// when absent), as Redis's zsetAdd: the score it ends with.
func (o *zaddOpts) step(found bool, cur, score float64) (float64, zaddAction, error) {
	if !found {
		if o.xx {
			return 0, zaddNop, nil
		}
		return score, zaddAdd, nil
	}
	if o.nx {
		return 0, zaddNop, nil
	}
	if o.incr {
		score += cur
		if math.IsNaN(score) {
			return 0, zaddNop, errZNaN
		}
	}
	if (o.lt && score >= cur) || (o.gt && score <= cur) {
		return 0, zaddNop, nil
	}
	if score == cur {
		return score, zaddSame, nil
	}
	return score, zaddUpdate, nil
}

func (j *shardJob) zadd(t *shard.Table, c *Command, now int64) Reply {
	return j.zaddGeneric(t, c, now, zaddOpts{})
}

func (j *shardJob) zincrby(t *shard.Table, c *Command, now int64) Reply {
	return j.zaddGeneric(t, c, now, zaddOpts{incr: true})
}

// zaddGeneric is ZADD and ZINCRBY (ZADD with INCR), checking in Redis's
// order: options, the pair count, option clashes, every score, then the
// key.
func (j *shardJob) zaddGeneric(t *shard.Table, c *Command, now int64, o zaddOpts) Reply {
	args := c.Args
	i := 0
options:
	for ; i < len(args); i++ {
		switch a := args[i]; {
		case zWord(a, "nx"):
			o.nx = true
		case zWord(a, "xx"):
			o.xx = true
		case zWord(a, "ch"):
			o.ch = true
		case zWord(a, "incr"):
			o.incr = true
		case zWord(a, "gt"):
			o.gt = true
		case zWord(a, "lt"):
			o.lt = true
		default:
			break options
		}
	}
	pairs := args[i:]
	switch {
	case len(pairs) == 0 || len(pairs)%2 != 0:
		return errReply(ErrSyntax)
	case o.nx && o.xx:
		return errReply(errZXXNX)
	case (o.gt && o.nx) || (o.lt && o.nx) || (o.gt && o.lt):
		return errReply(errZGTLTNX)
	case o.incr && len(pairs) > 2:
		return errReply(errZIncrPair)
	}
	for k := 0; k < len(pairs); k += 2 {
		if _, ok := zParseScore(pairs[k]); !ok {
			return errReply(ErrNotFloat)
		}
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok && o.xx {
		return o.reply(0, 0, false)
	}
	if len(pairs) == 2 {
		return j.zaddOne(t, c, e, ok, &o, pairs[0], pairs[1])
	}
	return j.zaddMany(t, c, e, ok, &o, pairs)
}

// reply is ZADD's answer: the score with INCR (nil when nothing was
// processed), else the members added (and updated, with CH).
func (o *zaddOpts) reply(added, updated int, processed bool, score ...float64) Reply {
	if o.incr {
		if !processed {
			return nilReply()
		}
		return doubleReply(score[0])
	}
	if o.ch {
		return intReply(int64(added + updated))
	}
	return intReply(int64(added))
}

// zaddOne adds or updates one member, editing the record in place: a
// walk to find the member and its new place, then one resize for a new
// member or one shift inside the record for a new score.
func (j *shardJob) zaddOne(t *shard.Table, c *Command, e shard.Entry, ok bool, o *zaddOpts, scoreArg, member []byte) Reply {
	score, _ := zParseScore(scoreArg)
	if !ok {
		// Redis makes the new key a skiplist when its first member is long.
		big := len(member) > zMaxListpackValue
		if err := j.zInsert(t, c, e, false, collHeader, zNorm(score, big), member, 1, big); err != nil {
			return errReply(err)
		}
		return o.reply(1, 0, true, score)
	}
	p := zData(e.Payload)
	count, big := zHeader(p)
	off, end, cur, ins := zLocate(p, member, score)
	ns, act, err := o.step(off >= 0, cur, score)
	if err != nil {
		return errReply(err)
	}
	switch act {
	case zaddNop:
		return o.reply(0, 0, false)
	case zaddSame:
		return o.reply(0, 0, true, ns)
	case zaddAdd:
		big = big || count+1 > zMaxListpackEntries || len(member) > zMaxListpackValue
		if err := j.zInsert(t, c, e, true, ins, zNorm(ns, big), member, count+1, big); err != nil {
			return errReply(err)
		}
		return o.reply(1, 0, true, ns)
	}
	if ns != score {
		// INCR: the place found was for the increment.
		ins = zInsertPos(p, ns, member, off)
	}
	zMove(p, off, end, ins, zNorm(ns, big), member)
	return o.reply(0, 1, true, ns)
}

// zaddMany applies several pairs in order, editing a copy in the job's
// scratch buffer, and stores it once if anything changed.
func (j *shardJob) zaddMany(t *shard.Table, c *Command, e shard.Entry, ok bool, o *zaddOpts, pairs [][]byte) Reply {
	var count int
	var big bool
	if ok {
		j.scratch = append(j.scratch[:0], zData(e.Payload)...)
		count, big = zHeader(j.scratch)
	} else {
		j.beginCollection()
		big = len(pairs[1]) > zMaxListpackValue
	}
	added, updated := 0, 0
	for k := 0; k < len(pairs); k += 2 {
		score, _ := zParseScore(pairs[k])
		member := pairs[k+1]
		p := j.scratch
		off, end, cur, ins := zLocate(p, member, score)
		ns, act, err := o.step(off >= 0, cur, score)
		if err != nil {
			return errReply(err)
		}
		switch act {
		case zaddAdd:
			big = big || count+1 > zMaxListpackEntries || len(member) > zMaxListpackValue
			size := zEntrySize(member)
			n := len(p)
			p = append(p, make([]byte, size)...)
			copy(p[ins+size:], p[ins:n])
			zPutEntry(p[ins:], zNorm(ns, big), member)
			j.scratch = p
			count++
			added++
		case zaddUpdate:
			zMove(p, off, end, ins, zNorm(ns, big), member)
			updated++
		}
	}
	if added+updated == 0 {
		return o.reply(0, 0, false)
	}
	zPutHeader(j.scratch, count, big, 0)
	if err := j.storeCollection(t, c, e, ok, shard.KindZSet, zStoreCount(count, big)); err != nil {
		return errReply(err)
	}
	return o.reply(added, updated, true)
}

func (j *shardJob) zrem(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	p := zData(e.Payload)
	count, big := zHeader(p)
	if len(c.Args) == 1 {
		off, end, _ := zFind(p, c.Args[0])
		if off < 0 {
			return intReply(0)
		}
		if err := j.zCut(t, e, off, end, count-1, big); err != nil {
			return errReply(err)
		}
		return intReply(1)
	}
	// Several members: one pass keeping the entries none of them names.
	j.beginCollection()
	removed := 0
	keep := collHeader // start of the run of kept entries not copied yet
	for off := collHeader; off < len(p); {
		_, m, end := zEntryAt(p, off)
		if zNamed(c.Args, m) {
			j.scratch = append(j.scratch, p[keep:off]...)
			keep = end
			removed++
		}
		off = end
	}
	if removed == 0 {
		return intReply(0)
	}
	j.scratch = append(j.scratch, p[keep:]...)
	if err := j.storeCollection(t, c, e, true, shard.KindZSet, zStoreCount(count-removed, big)); err != nil {
		return errReply(err)
	}
	return intReply(int64(removed))
}

// zNamed reports whether m is one of names.
func zNamed(names [][]byte, m []byte) bool {
	for _, n := range names {
		if len(n) == len(m) && bytes.Equal(n, m) {
			return true
		}
	}
	return false
}

// zremrangebyscore removes a score range: the entries from the first at
// or above min while they stay at or below max, one contiguous run (the
// oldest entries of a sliding log are a prefix: a short walk, one copy).
func (j *shardJob) zremrangebyscore(t *shard.Table, c *Command, now int64) Reply {
	r, ok := zParseScoreRange(c.Args[0], c.Args[1])
	if !ok {
		return errReply(errZMinMaxFloat)
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	p := zData(e.Payload)
	count, big := zHeader(p)
	from := collHeader
	for from < len(p) && !r.gteMin(zScoreAt(p, from)) {
		from = zNext(p, from)
	}
	to, removed := from, 0
	for to < len(p) && r.lteMax(zScoreAt(p, to)) {
		to = zNext(p, to)
		removed++
	}
	if removed == 0 {
		return intReply(0)
	}
	if err := j.zCut(t, e, from, to, count-removed, big); err != nil {
		return errReply(err)
	}
	return intReply(int64(removed))
}

func (j *shardJob) zremrangebylex(t *shard.Table, c *Command, now int64) Reply {
	r, ok := zParseLexRange(c.Args[0], c.Args[1])
	if !ok {
		return errReply(errZMinMaxLex)
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	x := j.zIndexOf(zData(e.Payload))
	first := x.firstInLex(&r)
	if first < 0 {
		return intReply(0)
	}
	last := first
	for last+1 < x.n && r.lteMax(x.member(last+1)) {
		last++
	}
	return j.zRemoveRanks(t, e, x, first, last)
}

func (j *shardJob) zremrangebyrank(t *shard.Table, c *Command, now int64) Reply {
	start, err := ParseInt64(c.Args[0])
	if err != nil {
		return errReply(ErrNotInteger)
	}
	stop, err := ParseInt64(c.Args[1])
	if err != nil {
		return errReply(ErrNotInteger)
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	count, _ := zHeader(e.Payload)
	lo, hi, ok := zRankRange(start, stop, count)
	if !ok {
		return intReply(0)
	}
	return j.zRemoveRanks(t, e, j.zIndexOf(zData(e.Payload)), lo, hi)
}

// zRemoveRanks removes the entries of ranks first to last (indexed in x).
func (j *shardJob) zRemoveRanks(t *shard.Table, e shard.Entry, x zIndex, first, last int) Reply {
	_, big := zHeader(e.Payload)
	removed := last - first + 1
	if err := j.zCut(t, e, x.off(first), x.off(last+1), x.n-removed, big); err != nil {
		return errReply(err)
	}
	return intReply(int64(removed))
}

// zRankRange turns Redis's start and stop ranks (negative from the end)
// into an inclusive range of indexes of a set of n; ok is false when it
// is empty.
func zRankRange(start, stop int64, n int) (lo, hi int, ok bool) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if stop < 0 {
		stop += ln
	}
	if start < 0 {
		start = 0
	}
	if start > stop || start >= ln {
		return 0, 0, false
	}
	if stop >= ln {
		stop = ln - 1
	}
	return int(start), int(stop), true
}

func (j *shardJob) zpopmin(t *shard.Table, c *Command, now int64) Reply {
	return j.zpop(t, c, now, false)
}

func (j *shardJob) zpopmax(t *shard.Table, c *Command, now int64) Reply {
	return j.zpop(t, c, now, true)
}

// zpop is ZPOPMIN and ZPOPMAX: without a count, one member and its score
// as a flat array (in both protocols); with one, pairs.
func (j *shardJob) zpop(t *shard.Table, c *Command, now int64, max bool) Reply {
	if len(c.Args) > 1 {
		return errReply(ErrSyntax)
	}
	count := int64(-1)
	if len(c.Args) == 1 {
		// Redis words a malformed count as a negative one.
		n, err := ParseInt64(c.Args[0])
		if err != nil || n < 0 {
			return errReply(errZNotPositive)
		}
		count = n
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok || count == 0 {
		return emptyArray()
	}
	kind := ReplyPairs
	if count < 0 {
		count, kind = 1, ReplyArray
	}
	x := j.zIndexOf(zData(e.Payload))
	k := int(min(count, int64(x.n)))
	items := make([]Reply, 0, 2*k)
	from, to := x.off(0), x.off(k)
	if max {
		from, to = x.off(x.n-k), x.off(x.n)
		for i := x.n - 1; i >= x.n-k; i-- {
			items = append(items, j.bulk(x.member(i)), doubleReply(x.score(i)))
		}
	} else {
		for i := range k {
			items = append(items, j.bulk(x.member(i)), doubleReply(x.score(i)))
		}
	}
	_, big := zHeader(e.Payload)
	if err := j.zCut(t, e, from, to, x.n-k, big); err != nil {
		return errReply(err)
	}
	return Reply{Kind: kind, Items: items}
}
