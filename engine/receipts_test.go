package engine

import (
	"fmt"
	"testing"
	"time"
)

// exec1 runs one command at now and returns its reply.
func exec1(e *Engine, now int64, c Command) Reply {
	b := Batch{Cmds: []Command{c}}
	e.Execute(&b, now)
	return b.Replies[0]
}

func throttle(key, id string, qty int64) Command {
	c := Command{Op: OpThrottle, Key: []byte(key), N: [4]int64{2, 1, 10e9, qty}}
	if id != "" {
		c.ReqID, c.ReqTTL = []byte(id), 60e9
	}
	return c
}

// remaining peeks at a GCRA key's remaining (cost 0 writes nothing).
func remaining(t *testing.T, e *Engine, now int64, key string) int64 {
	t.Helper()
	r := exec1(e, now, throttle(key, "", 0))
	if r.Kind != ReplyDecision {
		t.Fatalf("peek %s: %+v", key, r)
	}
	return r.Dec.Remaining
}

func TestReqIDDecidesOnce(t *testing.T) {
	e := New(Config{Shards: 4})
	defer e.Close()
	now := int64(1e12)

	first := exec1(e, now, throttle("k", "a", 1))
	if first.Kind != ReplyDecision || first.Dec.Limited || first.Dec.Remaining != 2 {
		t.Fatalf("first decision: %+v", first)
	}
	// A retry later, when the state has moved on, gets the first reply
	// again, and is charged nothing.
	again := exec1(e, now+3e8, throttle("k", "a", 1))
	if again.Dec != first.Dec {
		t.Fatalf("retry: %+v, want the first reply %+v", again.Dec, first.Dec)
	}
	if got := remaining(t, e, now, "k"); got != 2 {
		t.Fatalf("remaining %d after a decision and its retry, want 2", got)
	}
	if hits := e.Stats().ReceiptHits; hits != 1 {
		t.Fatalf("ReceiptHits %d, want 1", hits)
	}
	// Another id is another request; the same id on another key too.
	exec1(e, now, throttle("k", "b", 1))
	exec1(e, now, throttle("other", "a", 1))
	if k, o := remaining(t, e, now, "k"), remaining(t, e, now, "other"); k != 1 || o != 2 {
		t.Fatalf("remaining k=%d other=%d, want 1 and 2", k, o)
	}

	// A refusal is remembered too: its retry is refused although the
	// bucket has room again by then.
	exec1(e, now, throttle("k", "c", 1))
	refused := exec1(e, now, throttle("k", "d", 1))
	if !refused.Dec.Limited {
		t.Fatalf("fourth unit of a burst of 3: %+v", refused)
	}
	later := now + 15e9
	if r := exec1(e, later, throttle("k", "d", 1)); r.Dec != refused.Dec {
		t.Fatalf("retry of a refusal: %+v, want %+v", r.Dec, refused.Dec)
	}
	if r := exec1(e, later, throttle("k", "e", 1)); r.Dec.Limited {
		t.Fatalf("a new request once the bucket has room: %+v", r)
	}

	// Past its window the id is forgotten: the same id decides afresh.
	expired := now + 60e9 + 1
	before := remaining(t, e, expired, "k")
	if r := exec1(e, expired, throttle("k", "a", 1)); r.Dec.Limited || r.Dec.Remaining != before-1 {
		t.Fatalf("id after its window: %+v, want a new charge from %d", r, before)
	}

	// A peek with an id is a read: it leaves no receipt.
	keys, mem := e.Keys(), e.UsedMemory()
	peek := throttle("k", "p", 0)
	exec1(e, expired, peek)
	if r := exec1(e, expired, throttle("k", "p", 1)); r.Dec.Remaining != before-2 {
		t.Fatalf("a charge after a peek with the same id: %+v, want remaining %d", r, before-2)
	}
	if e.Keys() != keys {
		t.Fatalf("receipts counted as keys: %d, want %d", e.Keys(), keys)
	}

	// Receipts take memory, counted in UsedMemory, and are not keys.
	for i := range 5000 {
		exec1(e, expired, throttle("m", fmt.Sprintf("id-%d", i), 0+1))
	}
	if e.Keys() != keys+1 || e.UsedMemory() < mem+5000*40 {
		t.Fatalf("after 5000 receipts: %d keys (want %d), %d bytes (want at least %d)", e.Keys(), keys+1, e.UsedMemory(), mem+5000*40)
	}
	grown := e.UsedMemory()
	// Expired receipts are swept like expired keys.
	gone := expired + 61e9
	// Sweeps run on the owners, in the background: ask until done.
	deadline := time.Now().Add(10 * time.Second)
	for e.UsedMemory() > grown-5000*30 {
		if time.Now().After(deadline) {
			t.Fatalf("expired receipts not freed: %d bytes, %d before", e.UsedMemory(), grown)
		}
		e.Sweep(gone)
		time.Sleep(time.Millisecond)
	}

	// FLUSHALL forgets receipts with the keys.
	exec1(e, gone, throttle("k", "f", 1))
	exec1(e, gone, Command{Op: OpFlushAll})
	if r := exec1(e, gone, throttle("k", "f", 1)); r.Dec.Remaining != 2 {
		t.Fatalf("after FLUSHALL, a retry decides afresh on a fresh key: %+v", r)
	}
}

func TestReqIDOnLimitAll(t *testing.T) {
	e := New(Config{Shards: 4})
	defer e.Close()
	now := int64(1e12)
	all := func(id string, costA int64) Command {
		c := Command{Op: OpLimitAll, Sub: []Command{throttle("a", "", costA), throttle("b", "", 1)}}
		if id != "" {
			c.ReqID, c.ReqTTL = []byte(id), 5e9
		}
		return c
	}
	first := exec1(e, now, all("x", 1))
	if first.Kind != ReplyArray || first.Items[0].Int != 0 {
		t.Fatalf("first LIMIT.ALL: %+v", first)
	}
	if got := exec1(e, now, all("x", 1)); shape(got) != shape(first) {
		t.Fatalf("retry: %+v, want %+v", got, first)
	}
	if a, b := remaining(t, e, now, "a"), remaining(t, e, now, "b"); a != 2 || b != 2 {
		t.Fatalf("remaining a=%d b=%d after a LIMIT.ALL and its retry, want 2 and 2", a, b)
	}
	// A refused LIMIT.ALL's reply is remembered as well.
	refused := exec1(e, now, all("y", 5))
	if refused.Items[0].Int != 1 || refused.Items[1].Int != 0 {
		t.Fatalf("a cost past the burst: %+v", refused)
	}
	if got := exec1(e, now, all("y", 1)); shape(got) != shape(refused) {
		t.Fatalf("retry of a refusal: %+v, want %+v", got, refused)
	}
	if b := remaining(t, e, now, "b"); b != 2 {
		t.Fatalf("remaining b=%d: the refused LIMIT.ALL or its retry charged", b)
	}
}

// shape renders a reply's content (not its bookkeeping) for comparison.
func shape(r Reply) string {
	s := fmt.Sprint(r.Kind, r.Int, r.Str+string(r.Bulk))
	if r.Kind == ReplyDecision || r.Kind == ReplyReservation {
		s += fmt.Sprint(r.Dec, r.MS)
	}
	for _, it := range r.Items {
		s += " [" + shape(it) + "]"
	}
	return s
}

// The codec carries the id and the window, and refuses ids where no
// command takes them.
func TestReqIDCodec(t *testing.T) {
	cmds := []Command{throttle("k", "id-1", 1), {Op: OpLimitAll, Sub: []Command{throttle("a", "", 1)}, ReqID: []byte("z"), ReqTTL: 7},
		{Op: OpReceipt, Key: []byte("a"), Value: []byte{receiptInt, 2}, ReqID: []byte("z"), ReqTTL: 7}}
	got, rest, err := DecodeCommands(EncodeCommands(nil, cmds), nil)
	if err != nil || len(rest) != 0 || len(got) != 3 {
		t.Fatalf("decode: %v %d %d", err, len(rest), len(got))
	}
	for i := range cmds {
		if string(got[i].ReqID) != string(cmds[i].ReqID) || got[i].ReqTTL != cmds[i].ReqTTL {
			t.Fatalf("command %d: id %q ttl %d, want %q %d", i, got[i].ReqID, got[i].ReqTTL, cmds[i].ReqID, cmds[i].ReqTTL)
		}
	}
	bad := [][]Command{
		{{Op: OpSet, Key: []byte("k"), Value: []byte("v"), ReqID: []byte("x"), ReqTTL: 1}},
		{{Op: OpLimitAll, Sub: []Command{throttle("a", "inner", 1)}}},
		{{Op: OpReceipt, Key: []byte("a"), Value: []byte{receiptInt, 2}}},
		{throttle("k", "x", 1)}, // with the window cut to 0 below
	}
	bad[3][0].ReqTTL = 0
	for i, c := range bad {
		if _, _, err := DecodeCommands(EncodeCommands(nil, c), nil); err == nil {
			t.Errorf("case %d decoded: %+v", i, c)
		}
	}
}

// TestPeeksAreNotCountedAsDecisions: decisions_allowed and
// decisions_limited count decisions with a cost; a peek (cost 0) on a free
// or a used-up key counts in neither.
func TestPeeksAreNotCountedAsDecisions(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	now := int64(1e18)
	exec1(e, now, throttle("p", "", 0))
	for range 3 {
		exec1(e, now, throttle("p", "", 1)) // some allowed, then refused
	}
	exec1(e, now, throttle("p", "", 0))
	st := e.Stats()
	if st.Allowed+st.Limited != 3 {
		t.Fatalf("allowed %d + limited %d, want the 3 decisions with a cost", st.Allowed, st.Limited)
	}
}

// TestRefundWithReqIDGivesBackOnce: a refund retried with its request id
// gets the first reply and gives nothing back again; another id refunds
// again; a refund of a key with no state leaves no receipt, so the same id
// refunds once the key exists.
func TestRefundWithReqIDGivesBackOnce(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	now := int64(1e18)
	fw := func(cost int64) Command {
		return Command{Op: OpFWCheck, Key: []byte("r"), N: [4]int64{10, 3600e9, cost}}
	}
	refund := func(key, id string, n int64) Command {
		c := Command{Op: OpRefund, Key: []byte(key), N: [4]int64{n}}
		if id != "" {
			c.ReqID, c.ReqTTL = []byte(id), 60e9
		}
		return c
	}
	exec1(e, now, fw(6)) // 4 left
	for range 3 {
		if r := exec1(e, now, refund("r", "once", 2)); r.Kind != ReplyInt || r.Int != 6 {
			t.Fatalf("refund with id once: %+v, want 6 left every time", r)
		}
	}
	if r := exec1(e, now, refund("r", "other", 2)); r.Int != 8 {
		t.Fatalf("another id: %+v, want 8 left", r)
	}
	if r := exec1(e, now, fw(0)); r.Dec.Remaining != 8 {
		t.Fatalf("after the refunds %d left, want 8", r.Dec.Remaining)
	}

	if r := exec1(e, now, refund("absent", "early", 1)); r.Kind != ReplyNil {
		t.Fatalf("refund of nothing: %+v", r)
	}
	exec1(e, now, Command{Op: OpFWCheck, Key: []byte("absent"), N: [4]int64{10, 3600e9, 5}})
	if r := exec1(e, now, refund("absent", "early", 1)); r.Kind != ReplyInt || r.Int != 6 {
		t.Fatalf("the id of a refund of nothing, once the key exists: %+v, want 6 left", r)
	}
}

// TestRefundAndDecisionWithOneReqID: a decision and the refund that
// follows it, sent with one request id (one logical request's two halves),
// each take effect once: the refund is not answered with the decision's
// receipt, nor a later decision with the refund's.
func TestRefundAndDecisionWithOneReqID(t *testing.T) {
	e := New(Config{Shards: 2})
	defer e.Close()
	now := int64(1e18)
	with := func(c Command) Command { c.ReqID, c.ReqTTL = []byte("one-request"), 60e9; return c }
	fw := func(cost int64) Command {
		return Command{Op: OpFWCheck, Key: []byte("k"), N: [4]int64{10, 3600e9, cost}}
	}
	if r := exec1(e, now, with(fw(6))); r.Kind != ReplyDecision || r.Dec.Remaining != 4 {
		t.Fatalf("the decision: %+v", r)
	}
	for range 2 {
		if r := exec1(e, now, with(Command{Op: OpRefund, Key: []byte("k"), N: [4]int64{2}})); r.Kind != ReplyInt || r.Int != 6 {
			t.Fatalf("the refund with the decision's id: %+v, want 6 left", r)
		}
	}
	if r := exec1(e, now, with(fw(6))); r.Kind != ReplyDecision || r.Dec.Remaining != 4 {
		t.Fatalf("the decision retried: %+v, want its first reply (4 left)", r)
	}
	if r := exec1(e, now, fw(0)); r.Dec.Remaining != 6 {
		t.Fatalf("%d left, want 6: one charge of 6, one refund of 2", r.Dec.Remaining)
	}
}
