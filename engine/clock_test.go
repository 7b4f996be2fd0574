package engine

import (
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/shard"
)

// TestShardTimeNeverRunsBackwards: batches stamped out of order (two
// connections stamp as their pipelines arrive) run on a shard at the
// later time, so an expiry set by the later stamp is never read back
// longer than it was set, whether the reader runs on the owner or in a
// hold of several shards (EXEC).
func TestShardTimeNeverRunsBackwards(t *testing.T) {
	e := New(Config{Shards: 4})
	defer e.Close()
	const sec = int64(1e9)
	set := &Batch{Cmds: []Command{{Op: OpSet, Key: []byte("k"), Value: []byte("v"), Flags: FlagRelative, N: [4]int64{sec}}}}
	e.Execute(set, 100*sec)
	other := ""
	for i := 0; other == ""; i++ {
		if k := "o" + strconv.Itoa(i); e.shardOf(shard.Hash([]byte(k))) != e.shardOf(shard.Hash([]byte("k"))) {
			other = k
		}
	}
	pttl := Command{Op: OpTTL, Key: []byte("k"), N: [4]int64{TTLMillis}}
	for _, b := range []*Batch{
		{Cmds: []Command{pttl}},
		{Cmds: []Command{{Op: OpExec, Sub: []Command{pttl, {Op: OpGet, Key: []byte(other)}}}}},
	} {
		e.Execute(b, 100*sec-5e8) // stamped half a second earlier
		r := b.Replies[0]
		if r.Kind == ReplyArray {
			r = r.Items[0]
		}
		if r.Kind != ReplyInt || r.Int != 1000 {
			t.Fatalf("%v: PTTL %+v, want 1000", b.Cmds[0].Op, r)
		}
	}
}
