package engine

import (
	"math"
	"strconv"

	"github.com/sluicehq/sluice/engine/glob"

	"github.com/sluicehq/sluice/shard"
)

// The sorted-set reads: ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT,
// ZLEXCOUNT, the ZRANGE family and ZSCAN.
//
// Ranges are found as Redis finds them in a listpack, which for a lex
// range over members of different scores (where Redis promises nothing)
// is what a small Redis sorted set answers.

func (j *shardJob) zcard(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return intReply(0)
	}
	n, _ := zHeader(e.Payload)
	return intReply(int64(n))
}

func (j *shardJob) zscore(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	off, _, score := zFind(zData(e.Payload), c.Args[0])
	if off < 0 {
		return nilReply()
	}
	return doubleReply(score)
}

func (j *shardJob) zmscore(t *shard.Table, c *Command, now int64) Reply {
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	items := make([]Reply, len(c.Args))
	for i, m := range c.Args {
		items[i] = nilReply()
		if ok {
			if off, _, score := zFind(zData(e.Payload), m); off >= 0 {
				items[i] = doubleReply(score)
			}
		}
	}
	return arrayReply(items)
}

func (j *shardJob) zrank(t *shard.Table, c *Command, now int64) Reply {
	return j.zrankGeneric(t, c, now, false)
}

func (j *shardJob) zrevrank(t *shard.Table, c *Command, now int64) Reply {
	return j.zrankGeneric(t, c, now, true)
}

func (j *shardJob) zrankGeneric(t *shard.Table, c *Command, now int64, rev bool) Reply {
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return nilReply()
	}
	p := zData(e.Payload)
	n, _ := zHeader(p)
	member := c.Args[0]
	rank := 0
	for off := collHeader; off < len(p); rank++ {
		_, m, end := zEntryAt(p, off)
		if string(m) == string(member) {
			if rev {
				return intReply(int64(n - 1 - rank))
			}
			return intReply(int64(rank))
		}
		off = end
	}
	return nilReply()
}

func (j *shardJob) zcount(t *shard.Table, c *Command, now int64) Reply {
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
	off := collHeader
	for off < len(p) && !r.gteMin(zScoreAt(p, off)) {
		off = zNext(p, off)
	}
	n := 0
	for off < len(p) && r.lteMax(zScoreAt(p, off)) {
		off = zNext(p, off)
		n++
	}
	return intReply(int64(n))
}

func (j *shardJob) zlexcount(t *shard.Table, c *Command, now int64) Reply {
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
	i := first
	for i < x.n && r.lteMax(x.member(i)) {
		i++
	}
	return intReply(int64(i - first))
}

// firstInLex is the index of the first member in the lex range, -1 for
// none, as Redis's zzlFirstInLexRange finds it: nothing when the range
// is empty, the last member is below min or the first above max; else
// the first member at or above min, if it is at or below max.
func (x zIndex) firstInLex(r *zLexRange) int {
	if !x.lexPossible(r) {
		return -1
	}
	for i := 0; i < x.n; i++ {
		if r.gteMin(x.member(i)) {
			if r.lteMax(x.member(i)) {
				return i
			}
			return -1
		}
	}
	return -1
}

// lastInLex is zzlLastInLexRange: the last member at or below max, if it
// is at or above min.
func (x zIndex) lastInLex(r *zLexRange) int {
	if !x.lexPossible(r) {
		return -1
	}
	for i := x.n - 1; i >= 0; i-- {
		if r.lteMax(x.member(i)) {
			if r.gteMin(x.member(i)) {
				return i
			}
			return -1
		}
	}
	return -1
}

func (x zIndex) lexPossible(r *zLexRange) bool {
	return !r.empty() && x.n > 0 && r.gteMin(x.member(x.n-1)) && r.lteMax(x.member(0))
}

// ZRANGE's range kinds and directions (auto: ZRANGE's options decide).
const (
	zrAuto uint8 = iota
	zrByRank
	zrByScore
	zrByLex
	zrForward
	zrReverse
)

// zrangeOp is the apply function of one member of the ZRANGE family.
func zrangeOp(by, dir uint8) func(j *shardJob, t *shard.Table, c *Command, now int64) Reply {
	return func(j *shardJob, t *shard.Table, c *Command, now int64) Reply {
		return j.zrange(t, c, now, by, dir)
	}
}

// zrange is ZRANGE and its older forms, checking in Redis's order: the
// options, their clashes, the range, then the key.
func (j *shardJob) zrange(t *shard.Table, c *Command, now int64, by, dir uint8) Reply {
	args := c.Args
	withScores := false
	offset, limit := int64(0), int64(-1)
	for i := 2; i < len(args); i++ {
		left := len(args) - i - 1
		a := args[i]
		switch {
		case zWord(a, "withscores"):
			withScores = true
		case zWord(a, "limit") && left >= 2:
			var err error
			if offset, err = ParseInt64(args[i+1]); err != nil {
				return errReply(ErrNotInteger)
			}
			if limit, err = ParseInt64(args[i+2]); err != nil {
				return errReply(ErrNotInteger)
			}
			i += 2
		case dir == zrAuto && zWord(a, "rev"):
			dir = zrReverse
		case by == zrAuto && zWord(a, "bylex"):
			by = zrByLex
		case by == zrAuto && zWord(a, "byscore"):
			by = zrByScore
		default:
			return errReply(ErrSyntax)
		}
	}
	if dir == zrAuto {
		dir = zrForward
	}
	if by == zrAuto {
		by = zrByRank
	}
	if limit != -1 && by == zrByRank {
		return errReply(errZLimitByRank)
	}
	if withScores && by == zrByLex {
		return errReply(errZWithScoresLex)
	}
	rev := dir == zrReverse
	minArg, maxArg := args[0], args[1]
	if rev && by != zrByRank {
		// Given as max, min.
		minArg, maxArg = maxArg, minArg
	}
	var start, stop int64
	var sr zScoreRange
	var lr zLexRange
	switch by {
	case zrByRank:
		var err error
		if start, err = ParseInt64(minArg); err != nil {
			return errReply(ErrNotInteger)
		}
		if stop, err = ParseInt64(maxArg); err != nil {
			return errReply(ErrNotInteger)
		}
	case zrByScore:
		var ok bool
		if sr, ok = zParseScoreRange(minArg, maxArg); !ok {
			return errReply(errZMinMaxFloat)
		}
	default:
		var ok bool
		if lr, ok = zParseLexRange(minArg, maxArg); !ok {
			return errReply(errZMinMaxLex)
		}
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return emptyArray()
	}
	x := j.zIndexOf(zData(e.Payload))
	// lo..hi (inclusive) are the indexes to answer, in order, or reversed.
	lo, hi := 0, -1
	switch by {
	case zrByRank:
		if a, b, ok := zRankRange(start, stop, x.n); ok {
			lo, hi = a, b
			if rev {
				lo, hi = x.n-1-b, x.n-1-a
			}
		}
	case zrByScore:
		if rev {
			lo, hi = x.reverseRun(offset, limit, x.lastInScore(&sr), func(i int) bool { return sr.gteMin(x.score(i)) })
		} else {
			lo, hi = x.forwardRun(offset, limit, x.firstInScore(&sr), func(i int) bool { return sr.lteMax(x.score(i)) })
		}
	default:
		if rev {
			lo, hi = x.reverseRun(offset, limit, x.lastInLex(&lr), func(i int) bool { return lr.gteMin(x.member(i)) })
		} else {
			lo, hi = x.forwardRun(offset, limit, x.firstInLex(&lr), func(i int) bool { return lr.lteMax(x.member(i)) })
		}
	}
	if lo > hi {
		return emptyArray()
	}
	per := 1
	if withScores {
		per = 2
	}
	items := make([]Reply, 0, per*(hi-lo+1))
	for k := lo; k <= hi; k++ {
		i := k
		if rev {
			i = hi - (k - lo)
		}
		items = append(items, j.bulk(x.member(i)))
		if withScores {
			items = append(items, doubleReply(x.score(i)))
		}
	}
	if withScores {
		return Reply{Kind: ReplyPairs, Items: items}
	}
	return arrayReply(items)
}

// firstInScore is the first entry at or above min, if it is at or below
// max (-1 for none); lastInScore the last at or below max, if at or
// above min.
func (x zIndex) firstInScore(r *zScoreRange) int {
	for i := 0; i < x.n; i++ {
		if s := x.score(i); r.gteMin(s) {
			if r.lteMax(s) {
				return i
			}
			return -1
		}
	}
	return -1
}

func (x zIndex) lastInScore(r *zScoreRange) int {
	for i := x.n - 1; i >= 0; i-- {
		if s := x.score(i); r.lteMax(s) {
			if r.gteMin(s) {
				return i
			}
			return -1
		}
	}
	return -1
}

// forwardRun is what Redis answers walking up from first: skip offset
// entries (a negative offset skips them all), then take up to limit (all
// when negative) while in holds.
func (x zIndex) forwardRun(offset, limit int64, first int, in func(int) bool) (lo, hi int) {
	if first < 0 || offset < 0 || offset >= int64(x.n-first) {
		return 0, -1
	}
	lo = first + int(offset)
	hi = lo - 1
	for hi+1 < x.n && (limit < 0 || int64(hi+1-lo) < limit) && in(hi+1) {
		hi++
	}
	return lo, hi
}

// reverseRun is forwardRun walking down from last.
func (x zIndex) reverseRun(offset, limit int64, last int, in func(int) bool) (lo, hi int) {
	if last < 0 || offset < 0 || offset > int64(last) {
		return 0, -1
	}
	hi = last - int(offset)
	lo = hi + 1
	for lo-1 >= 0 && (limit < 0 || int64(hi-(lo-1)) < limit) && in(lo-1) {
		lo--
	}
	return lo, hi
}

// zscan answers a whole sorted set in one reply with cursor 0, as Redis
// does for a listpack, filtered by MATCH. The cursor is checked first,
// then the key; the options only for a sorted set that exists.
func (j *shardJob) zscan(t *shard.Table, c *Command, now int64) Reply {
	if !zScanCursorOK(c.Args[0]) {
		return errReply(errZInvalidCursor)
	}
	e, ok, err := zsetLookup(t, c, now)
	if err != nil {
		return errReply(err)
	}
	if !ok {
		return arrayReply([]Reply{strReply("0"), emptyArray()})
	}
	var pattern string
	usePattern := false
	args := c.Args
	for i := 1; i < len(args); {
		left := len(args) - i
		switch {
		case zWord(args[i], "count") && left >= 2:
			n, err := ParseInt64(args[i+1])
			if err != nil {
				return errReply(ErrNotInteger)
			}
			if n < 1 {
				return errReply(ErrSyntax)
			}
			i += 2
		case zWord(args[i], "match") && left >= 2:
			pattern = string(args[i+1])
			usePattern = pattern != "*"
			i += 2
		default:
			return errReply(ErrSyntax)
		}
	}
	p := zData(e.Payload)
	n, big := zHeader(p)
	items := make([]Reply, 0, 2*n)
	var num [32]byte
	for off := collHeader; off < len(p); {
		score, m, end := zEntryAt(p, off)
		off = end
		if usePattern && !glob.Match(pattern, string(m)) {
			continue
		}
		items = append(items, j.bulk(m), j.bulk(zScanScore(num[:0], score, big)))
	}
	return arrayReply([]Reply{strReply("0"), arrayReply(items)})
}

// zScanScore formats a score as ZSCAN shows it: from a listpack, which
// holds an integral score within 2^62 as an integer, as that integer
// (else %.17g); from a skiplist, %.17Lg of the score (the same digits as
// %.17g).
func zScanScore(buf []byte, f float64, big bool) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(buf, "inf"...)
	case math.IsInf(f, -1):
		return append(buf, "-inf"...)
	case !big && f >= -(1<<62) && f <= 1<<62 && f == math.Trunc(f):
		return strconv.AppendInt(buf, int64(f), 10)
	}
	return strconv.AppendFloat(buf, f, 'g', 17, 64)
}
