package engine

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shard"
)

// listPayload is a copy of the payload of the list at key (nil: none),
// read on the shard's owner.
func listPayload(e *Engine, key string) []byte {
	var p []byte
	done := make(chan struct{})
	k := []byte(key)
	e.shards[e.shardOf(shard.Hash(k))].Submit(taskFunc(func(tb *shard.Table) {
		defer close(done)
		if en, found := tb.Get(k, shard.Hash(k), time.Now().UnixNano()); found && en.Kind == shard.KindList {
			p = slices.Clone(en.Payload)
		}
	}))
	<-done
	return p
}

// checkListIndex checks an indexed list's index against its elements:
// an entry for every ordinal that is a multiple of the stride, none
// other, each with its element's distance from the end.
func checkListIndex(t *testing.T, p []byte, want []string) {
	t.Helper()
	if listCount(p) != len(want) {
		t.Fatalf("count %d, want %d", listCount(p), len(want))
	}
	x := lIdxOf(p)
	if x.start != collHeader+x.frontSlack() || x.dataEnd < x.start || x.tr-4*x.m()-x.tailSlack() != x.dataEnd {
		t.Fatalf("layout: start %d, end %d, %d entries, slack %d and %d in %d bytes", x.start, x.dataEnd, x.m(), x.frontSlack(), x.tailSlack(), len(p))
	}
	it := strIter{b: x.elements()}
	var got []string
	var starts []int
	for it.more() {
		starts = append(starts, x.dataEnd-len(it.rest()))
		got = append(got, string(it.next()))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("elements %q, want %q", got, want)
	}
	n := len(want)
	k := 0
	for i := n - 1; i >= 0; i-- { // ascending ordinals: from the tail
		ord := uint32(n-1-i) + x.cutElems()
		if ord%listStride != 0 {
			continue
		}
		if k >= x.m() {
			t.Fatalf("no entry for ordinal %d (element %d of %d)", ord, i, n)
		}
		if k == 0 && x.firstT() != ord {
			t.Fatalf("first entry's ordinal %d, want %d", x.firstT(), ord)
		}
		if v := uint32(x.dataEnd-starts[i]) + x.cutBytes(); x.entry(k) != v {
			t.Fatalf("entry %d (element %d of %d): %d, want %d", k, i, n, x.entry(k), v)
		}
		k++
	}
	if k != x.m() {
		t.Fatalf("%d entries, want %d", x.m(), k)
	}
}

// A long list against a model under the moving window's commands (LPUSH
// of one or several, LINDEX, LTRIM to the newest n), which keep it
// indexed, mixed with the others, which give the index up until a later
// LPUSH builds it again; the index is checked after every write.
func TestLongListAgainstModel(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	now := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(7, 8))
	var m []string // head first
	seq := 0
	elem := func() string {
		seq++
		return strconv.Itoa(seq) + strings.Repeat("x", r.IntN(4)*r.IntN(60))
	}
	indexedSteps := 0
	for step := range 6000 {
		limit := 100 + r.IntN(300)
		switch op := r.IntN(20); {
		case op < 8: // LPUSH, the hot path
			k := 1 + r.IntN(3)*r.IntN(3)
			var args []string
			for range k {
				v := elem()
				args = append(args, v)
				m = append([]string{v}, m...)
			}
			if got := listRun(e, &b, now, OpLPush, 0, 0, "w", args...); got.Int != int64(len(m)) {
				t.Fatalf("step %d: LPUSH %d, want %d", step, got.Int, len(m))
			}
		case op < 12: // LTRIM to the newest limit
			listRun(e, &b, now, OpLTrim, 0, 0, "w", "0", strconv.Itoa(limit-1))
			m = m[:min(len(m), limit)]
		case op < 16: // LINDEX anywhere, negative too
			i := r.IntN(len(m)+10) - 5
			if r.IntN(2) == 0 {
				i = -1 - r.IntN(len(m)+3)
			}
			got := listRun(e, &b, now, OpLIndex, 0, 0, "w", strconv.Itoa(i))
			j := i
			if j < 0 {
				j += len(m)
			}
			switch {
			case j < 0 || j >= len(m):
				if got.Kind != ReplyNil {
					t.Fatalf("step %d: LINDEX %d of %d: %+v, want nil", step, i, len(m), got)
				}
			case string(got.Bulk) != m[j]:
				t.Fatalf("step %d: LINDEX %d of %d: %q, want %q", step, i, len(m), got.Bulk, m[j])
			}
		case op == 16: // RPUSH: the plain layout
			v := elem()
			listRun(e, &b, now, OpLPush, 1, 0, "w", v)
			m = append(m, v)
		case op == 17: // LPOP from the tail
			if len(m) > 0 {
				got := listRun(e, &b, now, OpLPop, 1, 0, "w")
				if string(got.Bulk) != m[len(m)-1] {
					t.Fatalf("step %d: RPOP %q, want %q", step, got.Bulk, m[len(m)-1])
				}
				m = m[:len(m)-1]
			}
		case op == 18: // LTRIM that drops the head too
			if len(m) > 3 {
				listRun(e, &b, now, OpLTrim, 0, 0, "w", "1", "-2")
				m = m[1 : len(m)-1]
			}
		case op == 19: // LSET in the middle
			if len(m) > 0 {
				i := r.IntN(len(m))
				v := elem()
				listRun(e, &b, now, OpLSet, 0, 0, "w", strconv.Itoa(i), v)
				m[i] = v
			}
		}
		if got := listRun(e, &b, now, OpLLen, 0, 0, "w"); got.Int != int64(len(m)) {
			t.Fatalf("step %d: LLEN %d, want %d", step, got.Int, len(m))
		}
		switch p := listPayload(e, "w"); {
		case p == nil:
			if len(m) != 0 {
				t.Fatalf("step %d: no list, want %d elements", step, len(m))
			}
		case listIsIndexed(p):
			indexedSteps++
			checkListIndex(t, p, m)
		case listCount(p) != len(m):
			t.Fatalf("step %d: plain list of %d, want %d", step, listCount(p), len(m))
		}
		if step%500 == 499 { // LRANGE reads it whole (and gives the index up)
			got := listRun(e, &b, now, OpLRange, 0, 0, "w", "0", "-1")
			var all []string
			for _, it := range got.Items {
				all = append(all, string(it.Bulk))
			}
			if !slices.Equal(all, m) {
				t.Fatalf("step %d: LRANGE differs from the model", step)
			}
		}
	}
	if indexedSteps < 2000 {
		t.Errorf("the list was indexed after only %d of 6000 steps", indexedSteps)
	}
}

// An indexed list as the writes and reads that are not the moving
// window's meet it: reads, and writes that change nothing, leave its
// layout alone (neither is journaled or replicated as a change), a push
// past maxmemory is refused whatever slack it has, and the WATCH
// fingerprint is the elements', whatever the layout.
func TestLongListLayoutAndItsNeighbours(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	now := time.Now().UnixNano()
	var elems []string
	for i := range 300 {
		elems = append(elems, "e"+strconv.Itoa(i))
	}
	listRun(e, &b, now, OpLPush, 0, 0, "w", elems...)
	listRun(e, &b, now, OpLPush, 0, 0, "w", "head") // a head push onto a long list indexes it
	if p := listPayload(e, "w"); p == nil || !listIsIndexed(p) {
		t.Fatal("a list of 301 elements pushed at its head is not indexed")
	}
	listRun(e, &b, now, OpLRange, 0, 0, "w", "5", "20")
	listRun(e, &b, now, OpLPos, 0, 0, "w", "e7", "RANK", "-1")
	if p := listPayload(e, "w"); !listIsIndexed(p) {
		t.Fatal("LRANGE or LPOS changed the list's layout")
	}
	if got := listRun(e, &b, now, OpLRange, 0, 0, "w", "0", "2"); len(got.Items) != 3 || string(got.Items[0].Bulk) != "head" || string(got.Items[1].Bulk) != "e299" {
		t.Fatalf("LRANGE 0 2 of the indexed list: %+v", got.Items)
	}
	if got := listRun(e, &b, now, OpLPos, 0, 0, "w", "e0"); got.Int != 300 {
		t.Fatalf("LPOS e0: %+v, want 300", got)
	}

	// A write that changes nothing leaves the layout as a replay of the
	// journal (which does not hold it) has it.
	if got := listRun(e, &b, now, OpLSet, 0, 0, "w", "100000", "x"); got.Kind != ReplyError {
		t.Fatalf("LSET out of range: %+v", got)
	}
	listRun(e, &b, now, OpLRem, 0, 0, "w", "0", "absent")
	listRun(e, &b, now, OpLInsert, 0, 0, "w", "before", "absent", "x")
	if !listIsIndexed(listPayload(e, "w")) {
		t.Fatal("a write that changed nothing gave the index up")
	}
	// The WATCH fingerprint is the elements', whatever the layout.
	var before, after int64
	done := make(chan struct{})
	e.shards[0].Submit(taskFunc(func(tb *shard.Table) {
		defer close(done)
		c := Command{Key: []byte("w")}
		c.hash = shard.Hash(c.Key)
		before = fingerprint(tb, &c, now)
		en, _ := tb.Get(c.Key, c.hash, now)
		j := &shardJob{e: e}
		if _, err := j.plainList(tb, en); err != nil {
			t.Errorf("plainList: %v", err)
		}
		after = fingerprint(tb, &c, now)
	}))
	<-done
	if listIsIndexed(listPayload(e, "w")) {
		t.Fatal("plainList kept the index")
	}
	if before != after {
		t.Error("the plain layout changed the list's WATCH fingerprint")
	}

	listRun(e, &b, now, OpLPush, 0, 0, "w", "again") // indexed again
	if !listIsIndexed(listPayload(e, "w")) {
		t.Fatal("the head push did not index the list again")
	}
	e.SetMaxMemory(1)
	if got := listRun(e, &b, now, OpLPush, 0, 0, "w", "over"); got.Kind != ReplyError || got.Err != ErrOOM {
		t.Fatalf("LPUSH onto an indexed list past maxmemory: %+v, want OOM", got)
	}
	e.SetMaxMemory(0)
	if got := listRun(e, &b, now, OpLLen, 0, 0, "w"); got.Int != 302 {
		t.Fatalf("LLEN %d after the refused push, want 302", got.Int)
	}
}

// Long lists rebuilt from the journal match the live ones, layout and
// all: the moving window's commands on lists past the indexed length,
// mixed with the writes that give the index up.
func TestLongListJournalReplay(t *testing.T) {
	live, j, clk := journaledEngine(t)
	r := rand.New(rand.NewPCG(5, 6))
	var b Batch
	seq, indexed := 0, 0
	for step := range 1500 {
		b.Reset()
		for range 1 + r.IntN(4) {
			c := b.Add()
			c.Key = []byte("w" + strconv.Itoa(r.IntN(3)))
			var args []string
			switch op := r.IntN(60); {
			case op >= 20: // the moving window, most of the time
				c.Op = OpLPush
				seq++
				args = []string{strconv.Itoa(seq)}
				if op >= 40 {
					c.Op, args = OpLTrim, []string{"0", "199"}
				}
			case op < 9:
				c.Op = OpLPush
				for range 1 + r.IntN(3) {
					seq++
					args = append(args, strconv.Itoa(seq)+strings.Repeat("y", r.IntN(30)))
				}
			case op < 13:
				c.Op, args = OpLTrim, []string{"0", strconv.Itoa(150 + r.IntN(150))}
			case op < 15:
				c.Op, args = OpLIndex, []string{strconv.Itoa(r.IntN(300) - 20)}
			case op == 15:
				c.Op, args = OpLRange, []string{"0", "5"}
			case op == 16:
				c.Op, c.N[0], args = OpLPush, 1, []string{"tail"}
			case op == 17:
				c.Op, args = OpLSet, []string{strconv.Itoa(r.IntN(200)), "set"}
			case op == 18:
				c.Op, c.N[0] = OpLPop, 1
			default:
				c.Op, args = OpLTrim, []string{"1", "-1"}
			}
			for _, a := range args {
				c.Args = append(c.Args, []byte(a))
			}
		}
		live.Execute(&b, clk.Now())
		if step%100 == 99 {
			for k := range 3 {
				if p := listPayload(live, "w"+strconv.Itoa(k)); p != nil && listIsIndexed(p) {
					indexed++
				}
			}
			checkReplay(t, j, live, clk.Now(), step+1)
		}
	}
	if indexed < 10 {
		t.Errorf("only %d of 45 checks found a list indexed: the replay hardly met the layout", indexed)
	}
}

// A long list too close to the record's limit for an index and its slack
// stays plain, and takes pushes up to the limit as before.
func TestLongListNearTheRecordLimit(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	now := time.Now().UnixNano()
	v := strings.Repeat("v", 1000)
	n := 0
	for ; n < 2000; n++ {
		if got := listRun(e, &b, now, OpLPush, 0, 0, "big", v); got.Kind == ReplyError {
			break
		}
		if n == 300 && !listIsIndexed(listPayload(e, "big")) {
			t.Fatal("a list of 300 KB is not indexed")
		}
	}
	if n < 1000 {
		t.Fatalf("only %d pushes of 1,000 bytes fit in a list", n)
	}
	if got := listRun(e, &b, now, OpLIndex, 0, 0, "big", "-1"); string(got.Bulk) != v {
		t.Fatalf("LINDEX -1 of the big list: %+v", got.Kind)
	}
	t.Logf("%d pushes of 1,000 bytes fit; the list is indexed: %v", n, listIsIndexed(listPayload(e, "big")))
}
