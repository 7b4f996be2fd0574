package persistence

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
)

// The disk fills in the middle of a run of decisions, under every fsync
// policy, a few times over: each decision is answered only with what is
// true.
//
//   - An allowed decision is in the log the moment it is answered: a copy
//     of the directory taken then (what a crash of the process would leave)
//     replays every one of them.
//   - A decision refused up front (MISCONF: the log was known to be
//     failing) charged nothing.
//   - A decision that was charged but whose record could not be written
//     is answered NOTDURABLE: neither allowed nor refused.
//
// So after the run, what memory holds is exactly the allowed plus the
// NOTDURABLE decisions, and the crash copy holds at least the allowed.
func TestDiskFullAnswersOnlyWhatIsTrue(t *testing.T) {
	for _, policy := range policies {
		for run := range 3 {
			t.Run(fmt.Sprintf("%v/%d", policy, run), func(t *testing.T) { diskFullRun(t, policy, uint64(run)) })
		}
	}
}

func diskFullRun(t *testing.T, policy FsyncPolicy, seed uint64) {
	dir := t.TempDir()
	// Each log file the Durable opens gets its own faultFile; the fault
	// goes to the last one opened, the one being written.
	var ff *faultFile
	open := func(name string, flag int, perm os.FileMode) (file, error) {
		ff = &faultFile{}
		return ff.open(name, flag, perm)
	}
	eng := engine.New(engine.Config{Shards: 4})
	defer eng.Close()
	clk := clock.New(nil)
	d, err := OpenDurable(eng, DurableConfig{Dir: dir, Fsync: policy, Clock: clk, AutoRewritePercent: -1, openFile: open})
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	// Room for a million decisions a key: every one is allowed unless the
	// disk says otherwise.
	decide := func(key string, qty int64) engine.Command {
		return engine.Command{Op: engine.OpThrottle, Key: []byte(key), N: [4]int64{999_999, 1_000_000, 3600e9, qty}}
	}
	// charged is what a peek (cost 0, the same limit) says key has used.
	charged := func(x interface{ Execute(*engine.Batch, int64) }, key string) int64 {
		b := &engine.Batch{Cmds: []engine.Command{decide(key, 0)}}
		x.Execute(b, now)
		if rep := b.Replies[0]; rep.Kind != engine.ReplyDecision {
			t.Fatalf("peek %s: %+v", key, rep)
		}
		return 1_000_000 - b.Replies[0].Dec.Remaining
	}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	acked, notDurable, misconf := map[string]int64{}, map[string]int64{}, map[string]int64{}
	r := rand.New(rand.NewPCG(seed, 9))
	full := 40 + r.IntN(40)
	for batch := range 200 {
		if batch == full {
			ff.setWriteErr(syscall.ENOSPC, r.IntN(40))
		}
		b := &engine.Batch{}
		for range 1 + r.IntN(12) {
			*b.Add() = decide(keys[r.IntN(len(keys))], 1)
		}
		d.Execute(b, now)
		for i, rep := range b.Replies {
			key := string(b.Cmds[i].Key)
			switch {
			case rep.Kind == engine.ReplyDecision && !rep.Dec.Limited:
				acked[key]++
			case rep.Kind == engine.ReplyError && errors.Is(rep.Err, engine.ErrNotDurable):
				notDurable[key]++
			case rep.Kind == engine.ReplyError && errors.Is(rep.Err, engine.ErrMisconf):
				misconf[key]++
			default:
				t.Fatalf("batch %d reply %d: %+v", batch, i, rep)
			}
		}
	}
	// What a crash of the process now would leave on disk.
	crash := t.TempDir()
	copyDir(t, dir, crash)

	// Space comes back; the log recovers and the state can be read.
	ff.setWriteErr(nil, 0)
	eventually(t, "the log recovers", func() bool { return d.Err() == nil })
	var nAcked, nUnknown, nRefused int64
	for _, k := range keys {
		if c := charged(d, k); c != acked[k]+notDurable[k] {
			t.Errorf("%s: %d charged in memory; %d answered allowed, %d NOTDURABLE, %d MISCONF",
				k, c, acked[k], notDurable[k], misconf[k])
		}
		nAcked, nUnknown, nRefused = nAcked+acked[k], nUnknown+notDurable[k], nRefused+misconf[k]
	}
	if err := d.Close(); err != nil && !errors.Is(err, ErrPersistence) {
		t.Fatal(err)
	}

	eng2 := engine.New(engine.Config{Shards: 4})
	defer eng2.Close()
	d2, err := OpenDurable(eng2, DurableConfig{Dir: crash, Fsync: policy, Clock: clock.New(nil), AutoRewritePercent: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	for _, k := range keys {
		if kept := charged(d2, k); kept < acked[k] {
			t.Errorf("%s: the crash copy keeps %d decisions; %d were answered allowed", k, kept, acked[k])
		}
	}
	if nUnknown+nRefused == 0 {
		t.Fatalf("the full disk changed no answer (%d allowed)", nAcked)
	}
	t.Logf("%d allowed (all in the crash copy), %d NOTDURABLE, %d MISCONF (none charged)", nAcked, nUnknown, nRefused)
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A record of the generation a rotation is closing is not durable until
// that log's last write (and fsync) is done: WaitDurable waits for it
// rather than answering at once because a newer generation exists. A
// stalled disk holds the old log's write while CONFIG SET appendfsync
// rotates.
func TestWaitDurableAcrossARotation(t *testing.T) {
	gate := make(chan struct{})
	var files []*faultFile
	var mu sync.Mutex
	open := func(name string, flag int, perm os.FileMode) (file, error) {
		mu.Lock()
		defer mu.Unlock()
		ff := &faultFile{}
		if len(files) == 0 {
			ff.gate = gate // the first generation's writes stall
		}
		files = append(files, ff)
		return ff.open(name, flag, perm)
	}
	eng := engine.New(engine.Config{Shards: 1})
	defer eng.Close()
	d, err := OpenDurable(eng, DurableConfig{Dir: t.TempDir(), Fsync: FsyncAlways, Clock: clock.New(nil), AutoRewritePercent: -1, openFile: open})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
		d.Close()
	}()
	seq, err := d.Append([]byte("a record"))
	if err != nil {
		t.Fatal(err)
	}
	rotated := make(chan error, 1)
	go func() { rotated <- d.SetFsync(FsyncNo) }()
	waitUntil(t, func() bool { return d.generation() == 2 })
	waited := make(chan error, 1)
	go func() { waited <- d.WaitDurable(seq) }()
	select {
	case err := <-waited:
		t.Fatalf("WaitDurable answered %v while the record's write was stalled", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-waited; err != nil {
		t.Fatalf("WaitDurable once the old log closed: %v", err)
	}
	if err := <-rotated; err != nil {
		t.Fatalf("SetFsync: %v", err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
