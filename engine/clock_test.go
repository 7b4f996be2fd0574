package engine

import (
	"strconv"
	"testing"
	"time"

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

// TestShardTimeFollowsSweepsAndSnapshots: a sweep or a snapshot copy
// acts as of its time, so a pipeline stamped earlier that reaches the
// shard after it runs at that time too: it neither finds a key the sweep
// freed nor the copy left out, which replay (each record at its own time)
// would find live.
func TestShardTimeFollowsSweepsAndSnapshots(t *testing.T) {
	const ms = int64(1e6)
	for _, act := range []string{"sweep", "snapshot"} {
		e := New(Config{Shards: 1})
		t0 := 1000 * ms
		for _, k := range []string{"short", "long"} {
			ttl := 100 * ms
			if k == "long" {
				ttl = 1000 * ms
			}
			e.Execute(&Batch{Cmds: []Command{{Op: OpSet, Key: []byte(k), Value: []byte("1"), Flags: FlagRelative, N: [4]int64{ttl}}}}, t0)
		}
		switch act {
		case "sweep":
			e.Sweep(t0 + 200*ms)
			// The sweep runs on the owner, later: wait until it has freed
			// the expired key.
			for e.Stats().Swept == 0 {
				time.Sleep(time.Millisecond)
			}
		case "snapshot":
			e.Snapshot(t0 + 200*ms)
		}
		b := &Batch{Cmds: []Command{
			{Op: OpGet, Key: []byte("short")},
			{Op: OpTTL, Key: []byte("long"), N: [4]int64{TTLMillis}},
		}}
		e.Execute(b, t0+50*ms) // stamped before the sweep or copy
		if r := b.Replies[0]; r.Kind != ReplyNil {
			t.Fatalf("after a %s at +200 ms, GET of a key expired at +100 ms, stamped +50 ms: %+v, want nil", act, r)
		}
		if r := b.Replies[1]; r.Kind != ReplyInt || r.Int != 800 {
			t.Fatalf("after a %s at +200 ms, PTTL stamped +50 ms: %+v, want 800", act, r)
		}
		e.Close()
	}
}

// TestRelativeExpiryCountsFromTheMillisecond: SET PX, PEXPIRE and GETEX PX
// count from the clock's whole millisecond, as Redis does, so PEXPIRETIME
// reads that millisecond plus the duration and PTTL the duration itself,
// however far into the millisecond the command ran.
func TestRelativeExpiryCountsFromTheMillisecond(t *testing.T) {
	const ms = int64(1e6)
	e := New(Config{Shards: 1})
	defer e.Close()
	now := 100_000*ms + 999_999 // the last nanosecond of a millisecond
	e.Execute(&Batch{Cmds: []Command{
		{Op: OpSet, Key: []byte("set"), Value: []byte("v"), Flags: FlagRelative, N: [4]int64{1000 * ms}},
		{Op: OpSet, Key: []byte("expire"), Value: []byte("v")},
		{Op: OpSet, Key: []byte("getex"), Value: []byte("v")},
	}}, now)
	e.Execute(&Batch{Cmds: []Command{
		{Op: OpExpire, Key: []byte("expire"), Flags: FlagRelative, N: [4]int64{1000 * ms}},
		{Op: OpGetEx, Key: []byte("getex"), Args: [][]byte{[]byte("PX"), []byte("1000")}},
	}}, now)
	for _, k := range []string{"set", "expire", "getex"} {
		b := &Batch{Cmds: []Command{
			{Op: OpTTL, Key: []byte(k), N: [4]int64{TTLUnixMillis}},
			{Op: OpTTL, Key: []byte(k), N: [4]int64{TTLMillis}},
		}}
		e.Execute(b, now)
		if r := b.Replies[0]; r.Kind != ReplyInt || r.Int != 101_000 {
			t.Errorf("%s: PEXPIRETIME %+v, want 101000 (the millisecond 100000 + 1000)", k, r)
		}
		if r := b.Replies[1]; r.Kind != ReplyInt || r.Int != 1000 {
			t.Errorf("%s: PTTL %+v, want 1000", k, r)
		}
	}
}
