package persistence

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
)

// filesByPath opens each file through its own faultFile, so a test can
// stall or fail one log generation and not the next.
type filesByPath struct {
	mu    sync.Mutex
	files map[string]*faultFile
}

func (fp *filesByPath) open(name string, flag int, perm os.FileMode) (file, error) {
	ff := &faultFile{}
	f, err := ff.open(name, flag, perm)
	if err == nil {
		fp.mu.Lock()
		fp.files[name] = ff
		fp.mu.Unlock()
	}
	return f, err
}

func (fp *filesByPath) of(name string) *faultFile {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.files[name]
}

// rotationUnderStalledLog opens a Durable whose current log's writes
// stall, appends a record to it, and starts a switch to a new generation
// (CONFIG SET appendfsync) that waits on the stalled log's close. It
// returns once the new generation takes appends.
func rotationUnderStalledLog(t *testing.T) (d *Durable, old *faultFile, release chan struct{}, oldSeq uint64, rotated chan error) {
	t.Helper()
	dir := t.TempDir()
	fp := &filesByPath{files: map[string]*faultFile{}}
	eng := engine.New(engine.Config{Shards: 1})
	t.Cleanup(eng.Close)
	d, err := OpenDurable(eng, DurableConfig{Dir: dir, Fsync: FsyncAlways, Clock: clock.New(nil), AutoRewritePercent: -1, openFile: fp.open})
	if err != nil {
		t.Fatal(err)
	}
	old = fp.of(logPath(dir, d.gen))
	release = make(chan struct{})
	old.mu.Lock()
	old.gate = release
	old.mu.Unlock()
	if oldSeq, err = d.Append([]byte("in the old generation")); err != nil {
		t.Fatal(err)
	}
	rotated = make(chan error, 1)
	go func() { rotated <- d.SetFsync(FsyncEverySec) }()
	eventually(t, "the switch to a new generation", func() bool { return d.AppendFsync() == "everysec" })
	return d, old, release, oldSeq, rotated
}

// TestNewGenerationWaitsForTheOldOne: a batch whose records straddle a
// switch of log generation is durable only when all of them are. Before,
// a record in the new log was reported durable while the old log, still
// closing, had not written the batch's record in it, and a crash then kept
// the newer record without the older one.
func TestNewGenerationWaitsForTheOldOne(t *testing.T) {
	d, _, release, oldSeq, rotated := rotationUnderStalledLog(t)
	newSeq, err := d.Append([]byte("in the new generation"))
	if err != nil {
		t.Fatal(err)
	}
	durable := make(chan error, 1)
	go func() { durable <- d.WaitDurable(newSeq) }()
	select {
	case err := <-durable:
		t.Fatalf("the new generation's record was durable (%v) while the old one's had not been written", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	if err := d.WaitDurable(oldSeq); err != nil {
		t.Fatal(err)
	}
	if err := <-rotated; err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.cur.Close()
	d.mu.Unlock()
}

// TestFailedCloseStopsTheNewGeneration: when the old generation cannot be
// closed (its last records are lost), the new one writes nothing after
// them: writes are refused (MISCONF) and what it holds is not durable.
// Before, the failure was only logged and the new log went on, so a
// restart replayed later records without the lost ones.
func TestFailedCloseStopsTheNewGeneration(t *testing.T) {
	d, old, release, oldSeq, rotated := rotationUnderStalledLog(t)
	newSeq, err := d.Append([]byte("in the new generation"))
	if err != nil {
		t.Fatal(err)
	}
	old.setWriteErr(syscall.EIO, 0)
	old.setSyncErr(syscall.EIO, false)
	close(release)
	if err := <-rotated; err != nil {
		t.Fatal(err)
	}
	if err := d.WaitDurable(oldSeq); !errors.Is(err, ErrPersistence) {
		t.Fatalf("the old generation's lost record: %v, want ErrPersistence", err)
	}
	if err := d.WaitDurable(newSeq); !errors.Is(err, ErrPersistence) {
		t.Fatalf("the new generation's record after the lost one: %v, want ErrPersistence", err)
	}
	if err := d.Err(); !errors.Is(err, ErrPersistence) {
		t.Fatalf("Err after a failed close: %v, want ErrPersistence (writes refused)", err)
	}
	if _, err := d.Append([]byte("later")); err == nil {
		t.Fatal("the new generation took a record after the old one lost some")
	}
	d.mu.RLock()
	path := d.cur.path
	d.mu.RUnlock()
	if n := fileSize(t, path); n != int64(logHeaderSize) {
		t.Fatalf("the new generation wrote %d bytes after its header", n-int64(logHeaderSize))
	}
	// While a log fails, no new generation starts (its close would drop
	// what the failing one holds).
	if err := d.SetFsync(FsyncAlways); err == nil {
		t.Fatal("a switch of generation while the log fails was allowed")
	}
	d.mu.Lock()
	d.cur.Close()
	d.mu.Unlock()
}

// TestDamagedEndOfAnOlderGenerationIsCorruption: only the newest log
// generation with records can end in a torn write (a generation writes
// nothing before the one it follows is closed whole). A bad end of an
// older one, with records after it in a newer one, is damage to
// acknowledged records: start-up refuses it and names the file, where it
// used to cut the records off as a torn write and replay the newer ones.
// With no records after it, it is cut off as torn.
func TestDamagedEndOfAnOlderGenerationIsCorruption(t *testing.T) {
	for _, newerHasRecords := range []bool{true, false} {
		dir := t.TempDir()
		d, eng, clk := durableAt(t, dir, FsyncAlways)
		d.Execute(&engine.Batch{Cmds: []engine.Command{throttle("a", 1), throttle("a", 1)}}, clk.Now())
		oldPath := logPath(dir, d.gen)
		if err := d.SetFsync(FsyncEverySec); err != nil {
			t.Fatal(err)
		}
		if newerHasRecords {
			d.Execute(&engine.Batch{Cmds: []engine.Command{throttle("b", 1)}}, clk.Now())
		}
		d.mu.Lock()
		d.cur.Close() // a crash: no final snapshot
		d.mu.Unlock()
		eng.Close()
		if err := os.Truncate(oldPath, fileSize(t, oldPath)-3); err != nil {
			t.Fatal(err)
		}

		eng2 := engine.New(engine.Config{Shards: 4})
		d2, err := OpenDurable(eng2, DurableConfig{Dir: dir, Fsync: FsyncAlways, Clock: clock.New(nil), AutoRewritePercent: -1})
		if newerHasRecords {
			if c := asCorrupt(t, err); c.File != oldPath {
				t.Fatalf("the refusal names %s, want %s", c.File, oldPath)
			}
			// What the refusal tells the operator to do: --check-log --fix
			// on the named file, after which the server starts, with the
			// newer generation's records.
			if _, err := CheckLog(oldPath, true); err != nil {
				t.Fatal(err)
			}
			d2, err = OpenDurable(eng2, DurableConfig{Dir: dir, Fsync: FsyncAlways, Clock: clock.New(nil), AutoRewritePercent: -1})
			if err != nil {
				t.Fatalf("after --fix: %v", err)
			}
			if got := remaining(t, d2, "b", clk.Now()); got != 9 {
				t.Fatalf("after --fix, b has %d remaining, want 9 (its record in the newer generation kept)", got)
			}
			d2.Close()
		} else {
			if err != nil {
				t.Fatalf("a torn end of the newest generation with records: %v", err)
			}
			if got := d2.Load().TornBytes; got == 0 {
				t.Fatal("the torn end was not reported")
			}
			d2.Close()
		}
		eng2.Close()
	}
}

// TestCloseDuringASwitchOfGeneration: SHUTDOWN NOSAVE while CONFIG SET
// appendfsync is switching generations (the old log still closing)
// finishes, with both records written. The new log's close waits for the
// old one's; the switch must not wait, meanwhile, for what the closing
// holds.
func TestCloseDuringASwitchOfGeneration(t *testing.T) {
	d, _, release, oldSeq, rotated := rotationUnderStalledLog(t)
	newSeq, err := d.Append([]byte("in the new generation"))
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- d.CloseWithoutSnapshot() }()
	time.Sleep(50 * time.Millisecond) // let Close take the log
	close(release)
	for what, ch := range map[string]chan error{"the switch": rotated, "the close": closed} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not finish: a deadlock", what)
		}
	}
	for _, seq := range []uint64{oldSeq, newSeq} {
		if err := d.WaitDurable(seq); err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("record %x: %v", seq, err)
		}
	}
}
