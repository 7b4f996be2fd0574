package persistence

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
)

// durableAt opens a Durable in dir over a new engine, on a frozen clock.
func durableAt(t *testing.T, dir string, fsync FsyncPolicy) (*Durable, *engine.Engine, *clock.Clock) {
	t.Helper()
	eng := engine.New(engine.Config{Shards: 4})
	clk := clock.New(nil)
	d, err := OpenDurable(eng, DurableConfig{Dir: dir, Fsync: fsync, Clock: clk, AutoRewritePercent: -1})
	if err != nil {
		eng.Close()
		t.Fatal(err)
	}
	return d, eng, clk
}

func throttle(key string, qty int64) engine.Command {
	return engine.Command{Op: engine.OpThrottle, Key: []byte(key), N: [4]int64{9, 1, 3600e9, qty}}
}

// remaining is what a peek reports for key at now.
func remaining(t *testing.T, x interface{ Execute(*engine.Batch, int64) }, key string, now int64) int64 {
	t.Helper()
	b := &engine.Batch{Cmds: []engine.Command{throttle(key, 0)}}
	x.Execute(b, now)
	if r := b.Replies[0]; r.Kind != engine.ReplyDecision {
		t.Fatalf("peek %s: %+v", key, r)
	}
	return b.Replies[0].Dec.Remaining
}

// A Durable recovers the state and the time it had, from its final
// snapshot after a clean close and from the log alone after a crash (the
// log closed, no snapshot taken), under every fsync policy.
func TestDurableRecoversStateAndTime(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncEverySec, FsyncNo} {
		for _, clean := range []bool{true, false} {
			dir := t.TempDir()
			d, eng, clk := durableAt(t, dir, policy)
			t0 := clk.Now() + 1e9
			if err := clk.Set(t0); err != nil {
				t.Fatal(err)
			}
			b := &engine.Batch{Cmds: []engine.Command{throttle("a", 3), throttle("b", 1), throttle("a", 2)}}
			d.Execute(b, clk.Now())
			for i, r := range b.Replies {
				if r.Kind != engine.ReplyDecision || r.Dec.Limited {
					t.Fatalf("%v: reply %d: %+v", policy, i, r)
				}
			}
			if clean {
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				d.mu.Lock()
				d.cur.Close()
				d.mu.Unlock()
			}
			eng.Close()

			d2, eng2, clk2 := durableAt(t, dir, policy)
			if now := clk2.Now(); now < t0 {
				t.Errorf("%v clean=%v: the clock restarted at %d, behind the %d already used", policy, clean, now, t0)
			}
			load := d2.Load()
			if clean && (load.SnapshotKeys != 2 || load.LogRecords != 0) {
				t.Errorf("%v: a clean restart loaded %+v, want 2 keys from the snapshot and no log", policy, load)
			}
			if !clean && load.LogRecords == 0 {
				t.Errorf("%v: a crash restart replayed no log records: %+v", policy, load)
			}
			if a, b := remaining(t, d2, "a", t0), remaining(t, d2, "b", t0); a != 5 || b != 9 {
				t.Errorf("%v clean=%v: remaining a=%d b=%d after restart, want 5 and 9", policy, clean, a, b)
			}
			if err := d2.Close(); err != nil {
				t.Fatal(err)
			}
			eng2.Close()
		}
	}
}

// What an interrupted snapshot or log creation leaves (temporary files
// never renamed into place) is removed at start-up; nothing else is.
func TestStartupRemovesTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"sluice.snap.tmp-123", "sluice.aof.1.tmp-9", "sluice.aof.2.fix-7", "mine.tmp-1"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, eng, _ := durableAt(t, dir, FsyncEverySec)
	defer eng.Close()
	defer d.Close()
	for name, want := range map[string]bool{"sluice.snap.tmp-123": false, "sluice.aof.1.tmp-9": false, "sluice.aof.2.fix-7": false, "mine.tmp-1": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: present %v after start-up, want %v", name, err == nil, want)
		}
	}
}

// A process that starts from a snapshot numbers its records after what
// the snapshot covers: its writes survive its crash. (They were numbered
// from 1 again, and the replay after the crash skipped them as covered.)
func TestWritesAfterASnapshotRestartSurviveACrash(t *testing.T) {
	dir := t.TempDir()
	d, eng, clk := durableAt(t, dir, FsyncAlways)
	now := clk.Now() + 1e9
	clk.Set(now)
	b := &engine.Batch{Cmds: []engine.Command{throttle("a", 3), throttle("b", 1)}}
	d.Execute(b, now)
	if err := d.Close(); err != nil { // with its final snapshot
		t.Fatal(err)
	}
	eng.Close()

	d2, eng2, _ := durableAt(t, dir, FsyncAlways)
	b = &engine.Batch{Cmds: []engine.Command{throttle("a", 2), throttle("c", 4)}}
	d2.Execute(b, now)
	d2.mu.Lock()
	d2.cur.Close() // a crash: no final snapshot
	d2.mu.Unlock()
	eng2.Close()

	d3, eng3, _ := durableAt(t, dir, FsyncAlways)
	defer eng3.Close()
	defer d3.Close()
	if a, b, c := remaining(t, d3, "a", now), remaining(t, d3, "b", now), remaining(t, d3, "c", now); a != 5 || b != 9 || c != 6 {
		t.Fatalf("remaining a=%d b=%d c=%d after the crash, want 5, 9 and 6", a, b, c)
	}
}

// TestAutoRewriteCountsTheSnapshot: the automatic rewrite measures growth
// against the snapshot plus the log, as Redis's auto-aof-rewrite-percentage
// counts its base file: a log grown to half the snapshot's size does not
// start one at 100%, one grown past it does. Before, the base was the new
// log's size alone, so a large dataset was snapshotted again every
// auto-aof-rewrite-min-size of log.
func TestAutoRewriteCountsTheSnapshot(t *testing.T) {
	eng := engine.New(engine.Config{Shards: 4})
	defer eng.Close()
	clk := clock.New(nil)
	d, err := OpenDurable(eng, DurableConfig{Dir: t.TempDir(), Fsync: FsyncNo, Clock: clk, AutoRewritePercent: 100, AutoRewriteMinSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	set := func(key string, size int) engine.Command {
		return engine.Command{Op: engine.OpSet, Key: []byte(key), Value: bytes.Repeat([]byte("v"), size)}
	}
	fill := &engine.Batch{}
	for i := range 20000 {
		fill.Cmds = append(fill.Cmds, set(fmt.Sprintf("k%d", i), 200))
	}
	d.Execute(fill, clk.Now())
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	snap := d.snapSize.Load()
	saves := d.saves.Load()
	for range 4096 { // one growth check falls in these appends
		d.Execute(&engine.Batch{Cmds: []engine.Command{set("hot", 500)}}, clk.Now())
	}
	if d.saving.Load() || d.saves.Load() != saves {
		t.Fatalf("a log of %d bytes over a %d-byte snapshot started a rewrite at 100%%", d.cur.Size(), snap)
	}
	for range 8192 {
		d.Execute(&engine.Batch{Cmds: []engine.Command{set("hot", 1000)}}, clk.Now())
	}
	eventually(t, "a rewrite once the log outgrew the snapshot", func() bool { return d.saves.Load() > saves })
}
