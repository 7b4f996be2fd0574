package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/shard"
)

// MSETNX sets all of its keys or none, across shards: a key that exists,
// or a pair too large for a record, leaves every other key unset; what it
// sets replays from the journal.
func TestMSetNXSetsAllOrNone(t *testing.T) {
	e, j, clk := journaledEngine(t)
	now := clk.Now()
	msetnx := func(pairs ...[]byte) Reply {
		c := Command{Op: OpMSetNX}
		for i := 0; i < len(pairs); i += 2 {
			c.Sub = append(c.Sub, Command{Op: OpMSetNX, Key: pairs[i], Value: pairs[i+1]})
		}
		return exec1(e, now, c)
	}
	var pairs [][]byte
	for i := range 16 { // over the four shards
		pairs = append(pairs, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
	}
	exists := func() int {
		n := 0
		for i := 0; i < len(pairs); i += 2 {
			if exec1(e, now, Command{Op: OpGet, Key: pairs[i]}).Kind == ReplyBulk {
				n++
			}
		}
		return n
	}

	tooBig := append(append([][]byte{}, pairs...), []byte("big"), bytes.Repeat([]byte("x"), shard.MaxRecord))
	if r := msetnx(tooBig...); r.Kind != ReplyError || !errors.Is(r.Err, shard.ErrTooLarge) {
		t.Fatalf("MSETNX with a pair too large: %+v, want ErrTooLarge", r)
	}
	if n := exists(); n != 0 {
		t.Fatalf("a refused MSETNX set %d keys", n)
	}
	exec1(e, now, Command{Op: OpSet, Key: pairs[len(pairs)-2], Value: []byte("there")})
	if r := msetnx(pairs...); r.Kind != ReplyInt || r.Int != 0 {
		t.Fatalf("MSETNX over an existing key: %+v, want 0", r)
	}
	if n := exists(); n != 1 {
		t.Fatalf("MSETNX over an existing key left %d keys, want the 1 that was there", n)
	}
	exec1(e, now, Command{Op: OpDel, Key: pairs[len(pairs)-2]})
	if r := msetnx(pairs...); r.Kind != ReplyInt || r.Int != 1 {
		t.Fatalf("MSETNX of new keys: %+v, want 1", r)
	}
	if n := exists(); n != len(pairs)/2 {
		t.Fatalf("MSETNX set %d of %d keys", n, len(pairs)/2)
	}

	rebuilt := New(Config{Shards: 2})
	defer rebuilt.Close()
	for i, rec := range j.snapshot() {
		if _, err := rebuilt.Replay(rec, nil); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if got, want := dump(t, rebuilt, now), dump(t, e, now); got != want {
		t.Fatalf("replayed state differs:\n got %s\nwant %s", got, want)
	}
}

// A set algebra STORE whose result would not fit a record is refused
// before the destination is touched.
func TestSetStoreTooLargeChangesNothing(t *testing.T) {
	e, _, clk := journaledEngine(t)
	now := clk.Now()
	big := Command{Op: OpSAdd, Key: []byte("a")}
	for i := range 3000 { // 200-byte members: each set about 600 KB
		big.Args = append(big.Args, fmt.Appendf(nil, "member-%0193d", i))
	}
	if r := exec1(e, now, big); r.Kind != ReplyInt {
		t.Fatalf("SADD a: %+v", r)
	}
	more := Command{Op: OpSAdd, Key: []byte("b")}
	for i := range 3000 {
		more.Args = append(more.Args, fmt.Appendf(nil, "other-%0194d", i))
	}
	if r := exec1(e, now, more); r.Kind != ReplyInt {
		t.Fatalf("SADD b: %+v", r)
	}
	exec1(e, now, Command{Op: OpSet, Key: []byte("dst"), Value: []byte("kept")})
	store := Command{Op: OpSetAlgebraStore, N: [4]int64{SetUnion}, Sub: []Command{
		{Op: OpSetAlgebraStore, Key: []byte("dst")}, {Op: OpSetAlgebraStore, Key: []byte("a")}, {Op: OpSetAlgebraStore, Key: []byte("b")}}}
	if r := exec1(e, now, store); r.Kind != ReplyError || !errors.Is(r.Err, shard.ErrTooLarge) {
		t.Fatalf("SUNIONSTORE past a record: %+v, want ErrTooLarge", r)
	}
	if r := exec1(e, now, Command{Op: OpGet, Key: []byte("dst")}); string(r.Bulk) != "kept" {
		t.Fatalf("the refused SUNIONSTORE changed its destination: %+v", r)
	}
}
