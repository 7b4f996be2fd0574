package engine

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// listRun executes one command and returns its reply.
func listRun(e *Engine, b *Batch, now int64, op Op, n0, n1 int64, key string, args ...string) Reply {
	b.Reset()
	c := b.Add()
	c.Op, c.Key = op, []byte(key)
	c.N[0], c.N[1] = n0, n1
	for _, a := range args {
		c.Args = append(c.Args, []byte(a))
	}
	e.Execute(b, now)
	return b.Replies[0]
}

// listModel is the plain-slice list the engine is checked against, with
// LPOS and LREM written as Redis's loops are (from the tail for negative
// ranks and counts) rather than as the engine does them.
type listModel map[string][]string

func (m listModel) lpos(k, v string, rank, count, maxlen int64) Reply {
	l := m[k]
	tail := rank > 0
	if !tail {
		rank = -rank // the most negative rank stays negative, as in C
	}
	var items []Reply
	matches := int64(0)
	for n := int64(0); n < int64(len(l)) && (maxlen == 0 || n < maxlen); n++ {
		idx := n
		if !tail {
			idx = int64(len(l)) - 1 - n
		}
		if l[idx] != v {
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
	return Reply{Kind: ReplyArray, Items: items}
}

func (m listModel) lrem(k string, count int64, v string) int64 {
	l := m[k]
	fromTail := count < 0
	if fromTail {
		count = -count
	}
	var kept []string
	removed := int64(0)
	for n := range l {
		i := n
		if fromTail {
			i = len(l) - 1 - n
		}
		if l[i] == v && (count <= 0 || removed < count) {
			removed++
			continue
		}
		kept = append(kept, l[i])
	}
	if fromTail {
		slices.Reverse(kept)
	}
	m.set(k, kept)
	return removed
}

func (m listModel) set(k string, l []string) {
	if len(l) == 0 {
		delete(m, k)
		return
	}
	m[k] = l
}

func replyStrings(r Reply) []string {
	var out []string
	for _, it := range r.Items {
		out = append(out, string(it.Bulk))
	}
	return out
}

func sameReply(a, b Reply) bool {
	if a.Kind != b.Kind || a.Int != b.Int || !bytes.Equal(a.Bulk, b.Bulk) || len(a.Items) != len(b.Items) {
		return false
	}
	for i := range a.Items {
		if !sameReply(a.Items[i], b.Items[i]) {
			return false
		}
	}
	return true
}

// Random list commands against the model: contents, lengths and replies
// agree, and nothing panics (a panic would come back as an error reply).
func TestListMatchesModel(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	var b Batch
	m := listModel{}
	r := rand.New(rand.NewPCG(7, 7))
	keys := []string{"a", "b", "c"}
	elems := []string{"x", "y", "", "long-element-" + string(bytes.Repeat([]byte("z"), 200))}
	elem := func() string { return elems[r.IntN(len(elems))] }
	small := func() int64 { return int64(r.IntN(13) - 6) }
	now := time.Now().UnixNano()
	for step := range 20000 {
		k := keys[r.IntN(len(keys))]
		l := m[k]
		n := int64(len(l))
		var got, want Reply
		what := ""
		switch r.IntN(10) {
		case 0, 1:
			tail := r.IntN(2) == 1
			var vs []string
			for range 1 + r.IntN(4) {
				vs = append(vs, elem())
			}
			if r.IntN(30) == 0 {
				for range 200 {
					vs = append(vs, elem())
				}
			}
			what = "push"
			got = listRun(e, &b, now, OpLPush, map[bool]int64{true: 1}[tail], 0, k, vs...)
			for _, v := range vs {
				if tail {
					l = append(l, v)
				} else {
					l = append([]string{v}, l...)
				}
			}
			m.set(k, l)
			want = intReply(int64(len(l)))
		case 2:
			tail := r.IntN(2) == 1
			cnt := int64(r.IntN(5))
			what = "pop"
			got = listRun(e, &b, now, OpLPop, map[bool]int64{true: 1}[tail], 0, k, strconv.FormatInt(cnt, 10))
			kk := int(min(cnt, n))
			var popped []string
			if tail {
				popped = slices.Clone(l[len(l)-kk:])
				slices.Reverse(popped)
				m.set(k, l[:len(l)-kk])
			} else {
				popped = slices.Clone(l[:kk])
				m.set(k, l[kk:])
			}
			switch {
			case n == 0:
				want = Reply{Kind: ReplyNilArray}
			default:
				want = Reply{Kind: ReplyArray}
				for _, p := range popped {
					want.Items = append(want.Items, bulkReply([]byte(p)))
				}
			}
		case 3:
			s, en := small(), small()
			what = "ltrim " + strconv.FormatInt(s, 10) + " " + strconv.FormatInt(en, 10)
			got = listRun(e, &b, now, OpLTrim, 0, 0, k, strconv.FormatInt(s, 10), strconv.FormatInt(en, 10))
			if n > 0 {
				first, last, ok := listRange(s, en, int(n))
				if ok {
					m.set(k, slices.Clone(l[first:last+1]))
				} else {
					m.set(k, nil)
				}
			}
			want = okReply()
			got.Int = 0
		case 4:
			i := small()
			what = "lindex"
			got = listRun(e, &b, now, OpLIndex, 0, 0, k, strconv.FormatInt(i, 10))
			want = nilReply()
			if idx, ok := listIndex(i, int(n)); ok {
				want = bulkReply([]byte(l[idx]))
			}
		case 5:
			i, v := small(), elem()
			what = "lset"
			got = listRun(e, &b, now, OpLSet, 0, 0, k, strconv.FormatInt(i, 10), v)
			idx, ok := listIndex(i, int(n))
			switch {
			case n == 0:
				want = errReply(ErrNoSuchKey)
			case !ok:
				want = errReply(ErrIndexRange)
			default:
				l[idx] = v
				want = okReply()
			}
		case 6:
			cnt, v := small(), elem()
			if r.IntN(10) == 0 {
				cnt = math.MinInt64
			}
			what = "lrem"
			got = listRun(e, &b, now, OpLRem, 0, 0, k, strconv.FormatInt(cnt, 10), v)
			want = intReply(m.lrem(k, cnt, v))
		case 7:
			after := r.IntN(2) == 1
			pivot, v := elem(), elem()
			what = "linsert"
			got = listRun(e, &b, now, OpLInsert, 0, 0, k, map[bool]string{true: "AFTER", false: "before"}[after], pivot, v)
			want = intReply(0)
			if n > 0 {
				want = intReply(-1)
				if i := slices.Index(l, pivot); i >= 0 {
					if after {
						i++
					}
					l = slices.Insert(l, i, v)
					m.set(k, l)
					want = intReply(int64(len(l)))
				}
			}
		case 8:
			v := elem()
			rank := small()
			if rank == 0 || r.IntN(10) == 0 {
				rank = math.MinInt64
			}
			count := int64(r.IntN(5)) - 1
			maxlen := int64(r.IntN(6))
			args := []string{v, "RANK", strconv.FormatInt(rank, 10), "MAXLEN", strconv.FormatInt(maxlen, 10)}
			if count >= 0 {
				args = append(args, "COUNT", strconv.FormatInt(count, 10))
			}
			what = "lpos " + strconv.FormatInt(rank, 10) + " " + strconv.FormatInt(count, 10) + " " + strconv.FormatInt(maxlen, 10)
			got = listRun(e, &b, now, OpLPos, 0, 0, k, args...)
			switch {
			case n == 0 && count >= 0:
				want = Reply{Kind: ReplyArray}
			case n == 0:
				want = nilReply()
			default:
				want = m.lpos(k, v, rank, count, maxlen)
			}
		default:
			what = "lrange"
			s, en := small(), small()
			got = listRun(e, &b, now, OpLRange, 0, 0, k, strconv.FormatInt(s, 10), strconv.FormatInt(en, 10))
			want = Reply{Kind: ReplyArray}
			if first, last, ok := listRange(s, en, int(n)); ok {
				for _, v := range l[first : last+1] {
					want.Items = append(want.Items, bulkReply([]byte(v)))
				}
			}
		}
		if !sameReply(got, want) {
			t.Fatalf("step %d %s on %q %q: got %+v, want %+v", step, what, k, l, got, want)
		}
		// The whole list and its length, after every step.
		whole := listRun(e, &b, now, OpLRange, 0, 0, k, "0", "-1")
		if s := replyStrings(whole); !slices.Equal(s, m[k]) {
			t.Fatalf("step %d %s on %q: list is %q, want %q", step, what, k, s, m[k])
		}
		if got := listRun(e, &b, now, OpLLen, 0, 0, k); got.Int != int64(len(m[k])) {
			t.Fatalf("step %d %s on %q: LLEN %d, want %d", step, what, k, got.Int, len(m[k]))
		}
	}
}

// Commands built from journal records or by hand may carry any number of
// arguments: none may panic.
func TestListOddArguments(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	now := time.Now().UnixNano()
	listRun(e, &b, now, OpLPush, 0, 0, "k", "a", "b")
	for _, op := range []Op{OpLPush, OpLPop, OpLLen, OpLIndex, OpLRange, OpLTrim, OpLSet, OpLRem, OpLInsert, OpLPos} {
		for n := range 6 {
			args := make([]string, n)
			for i := range args {
				args[i] = "1"
			}
			for _, key := range []string{"k", "missing"} {
				if r := listRun(e, &b, now, op, 0, 0, key, args...); r.Kind == ReplyError && r.Err == errInternal {
					t.Errorf("%v with %d arguments panicked", op, n)
				}
			}
		}
	}
}

var argZero, argNine, argLast = []byte("0"), []byte("9"), []byte("-1")

// rateLimitBatch fills b with the rate limiter's pipeline: per key, LPUSH
// the event, LTRIM to the newest ten, LINDEX the oldest kept.
func rateLimitBatch(b *Batch, keys [][]byte, elem []byte) {
	b.Reset()
	for _, k := range keys {
		c := b.Add()
		c.Op, c.Key = OpLPush, k
		c.Args = append(c.Args, elem)
		c = b.Add()
		c.Op, c.Key = OpLTrim, k
		c.Args = append(c.Args, argZero, argNine)
		c = b.Add()
		c.Op, c.Key = OpLIndex, k
		c.Args = append(c.Args, argLast)
	}
}

// LPUSH, LTRIM and LINDEX on short lists allocate nothing in steady state,
// and LTRIM that keeps everything leaves the record as it was.
func TestListRateLimitPatternAllocatesNothing(t *testing.T) {
	e := New(Config{Shards: 4})
	defer e.Close()
	var b Batch
	keys := make([][]byte, 5)
	for i := range keys {
		keys[i] = []byte("events:" + strconv.Itoa(i))
	}
	elem := []byte("1700000000123")
	now := time.Now().UnixNano()
	for range 20 {
		rateLimitBatch(&b, keys, elem)
		e.Execute(&b, now)
	}
	for i, r := range b.Replies {
		if r.Kind == ReplyError {
			t.Fatalf("reply %d: %v", i, r.Err)
		}
	}
	if allocs := testing.AllocsPerRun(200, func() {
		rateLimitBatch(&b, keys, elem)
		e.Execute(&b, now)
	}); allocs != 0 {
		t.Errorf("rate-limit pipeline: %v allocations per batch, want 0", allocs)
	}
	if r := listRun(e, &b, now, OpLLen, 0, 0, string(keys[0])); r.Int != 10 {
		t.Errorf("LLEN after trimming: %d", r.Int)
	}
	// A trim that keeps everything reports no change (so it is not
	// journaled).
	r := listRun(e, &b, now, OpLTrim, 0, 0, string(keys[0]), "0", "-1")
	if trimmed(nil, &r) {
		t.Errorf("LTRIM 0 -1 claims a change")
	}
	r = listRun(e, &b, now, OpLTrim, 0, 0, string(keys[0]), "0", "4")
	if !trimmed(nil, &r) {
		t.Errorf("LTRIM 0 4 claims no change")
	}
}

func BenchmarkListRateLimit(b *testing.B) {
	e := New(Config{Shards: 8})
	defer e.Close()
	var batch Batch
	keys := make([][]byte, 16)
	elem := []byte("1700000000123")
	x := uint64(1)
	now := time.Now().UnixNano()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 3 * len(keys) {
		for k := range keys {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			keys[k] = strconv.AppendUint(append(keys[k][:0], "ev:"...), x%10000, 10)
		}
		rateLimitBatch(&batch, keys, elem)
		e.Execute(&batch, now)
	}
}

func TestListEncLen(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 21, 1<<21 + 5} {
		v := make([]byte, n)
		buf := make([]byte, n+10)
		if got, want := encLen(v), putElem(buf, v); got != want {
			t.Errorf("encLen(%d bytes) = %d, want %d", n, got, want)
		}
	}
}

// Lists rebuilt from the journal match the live ones: every command that
// changed a list was journaled (those that changed nothing need not be).
func TestListJournalReplay(t *testing.T) {
	live, j, clk := journaledEngine(t)
	r := rand.New(rand.NewPCG(3, 3))
	var b Batch
	num := func() string { return strconv.Itoa(r.IntN(11) - 5) }
	elem := func() string { return []string{"a", "b", "c", ""}[r.IntN(4)] }
	for step := range 3000 {
		b.Reset()
		for range 1 + r.IntN(6) {
			c := b.Add()
			c.Key = []byte("l" + strconv.Itoa(r.IntN(6)))
			var args []string
			switch r.IntN(40) {
			case 0:
				c.Op, c.Value = OpSet, []byte("v") // a wrong type now and then
			case 1:
				c.Op = OpDel
			case 2, 3, 4, 5, 6, 7, 8, 9, 10, 11:
				c.Op, c.N[0], c.N[1] = OpLPush, int64(r.IntN(2)), int64(r.IntN(2))
				args = []string{elem(), elem()}
			case 12, 13, 14:
				c.Op, c.N[0] = OpLPop, int64(r.IntN(2))
				if r.IntN(2) == 0 {
					args = []string{strconv.Itoa(r.IntN(3))}
				}
			case 15, 16, 17, 18:
				c.Op, args = OpLTrim, []string{num(), num()}
			case 19, 20, 21:
				c.Op, args = OpLSet, []string{num(), elem()}
			case 22, 23, 24:
				c.Op, args = OpLRem, []string{num(), elem()}
			case 25, 26, 27:
				c.Op, args = OpLInsert, []string{[]string{"before", "after"}[r.IntN(2)], elem(), elem()}
			case 28, 29:
				c.Op, args = OpLIndex, []string{num()}
			default:
				c.Op, args = OpLRange, []string{num(), num()}
			}
			for _, a := range args {
				c.Args = append(c.Args, []byte(a))
			}
		}
		live.Execute(&b, clk.Now())
		if step%100 == 99 {
			checkReplay(t, j, live, clk.Now(), step+1)
		}
	}
}

// checkReplay rebuilds the journal's state in a new engine and compares
// it with live's, record for record, byte for byte.
func checkReplay(t *testing.T, j *memJournal, live *Engine, now int64, batches int) {
	t.Helper()
	rebuilt := New(Config{Shards: 2})
	defer rebuilt.Close()
	for i, rec := range j.snapshot() {
		if _, err := rebuilt.Replay(rec, nil); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if got, want := dump(t, rebuilt, now), dump(t, live, now); got != want {
		t.Fatalf("after %d batches, replayed lists differ\n got %.600s\nwant %.600s", batches, got, want)
	}
}
