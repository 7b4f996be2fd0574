package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var policies = []FsyncPolicy{FsyncEverySec, FsyncAlways, FsyncNo}

func TestParseFsyncPolicy(t *testing.T) {
	for _, p := range policies {
		got, err := ParseFsyncPolicy(strings.ToUpper(p.String()))
		if err != nil || got != p {
			t.Errorf("ParseFsyncPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseFsyncPolicy("sometimes"); err == nil {
		t.Error("ParseFsyncPolicy(sometimes) succeeded")
	}
	if s := FsyncPolicy(7).String(); s != "FsyncPolicy(7)" {
		t.Errorf("String() = %q", s)
	}
	var zero LogConfig
	if zero.Fsync != FsyncEverySec {
		t.Error("zero LogConfig is not everysec")
	}
	if _, err := CreateLog(filepath.Join(t.TempDir(), "a"), LogConfig{Fsync: 7}); err == nil {
		t.Error("CreateLog accepted an unknown policy")
	}
}

func TestLogRoundTrip(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sluice.aof")
			recs := payloads(1, 3000, 600)
			l, err := CreateLog(path, LogConfig{Fsync: p})
			if err != nil {
				t.Fatal(err)
			}
			var last uint64
			for i, r := range recs[:2000] {
				seq, err := l.Append(r)
				if err != nil {
					t.Fatal(err)
				}
				if seq != uint64(i+1) {
					t.Fatalf("seq %d, want %d", seq, i+1)
				}
				last = seq
			}
			if err := l.WaitDurable(last); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// The writer's bytes are exactly the documented format.
			want, _ := encodeLog(recs[:2000])
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file is %d bytes, want %d: not the documented encoding", len(got), len(want))
			}

			gotRecs, res := replayAll(t, path)
			sameRecords(t, gotRecs, recs[:2000])
			if res.TornBytes != 0 || res.ValidBytes != int64(len(want)) || res.Records != 2000 {
				t.Fatalf("replay result %+v", res)
			}

			// Reopen and append more: sequence numbers restart per Log.
			l, err = OpenLog(path, LogConfig{Fsync: p})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs[2000:] {
				seq, err := l.Append(r)
				if err != nil || seq != uint64(i+1) {
					t.Fatalf("Append = %d, %v", seq, err)
				}
			}
			st := l.Stats()
			if st.Policy != p {
				t.Errorf("Stats.Policy = %v", st.Policy)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			gotRecs, _ = replayAll(t, path)
			sameRecords(t, gotRecs, recs)
		})
	}
}

func TestCreateLogRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "sluice.aof", []byte("precious"))
	if _, err := CreateLog(path, LogConfig{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateLog over an existing file: %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("existing file was changed")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestOpenLogChecksHeader(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenLog(filepath.Join(dir, "missing"), LogConfig{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenLog(missing) = %v", err)
	}
	path := writeFile(t, dir, "bad.aof", []byte("SLUICEAOX\x01\x00"))
	_, err := OpenLog(path, LogConfig{})
	if ce := asCorrupt(t, err); ce.Offset != 0 {
		t.Fatalf("offset %d", ce.Offset)
	}
}

func TestAppendRejectsBadSizes(t *testing.T) {
	l, err := CreateLog(filepath.Join(t.TempDir(), "a"), LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(nil); !errors.Is(err, ErrRecordSize) {
		t.Errorf("Append(empty) = %v", err)
	}
	if _, err := l.Append(make([]byte, MaxRecordSize+1)); !errors.Is(err, ErrRecordSize) {
		t.Errorf("Append(too big) = %v", err)
	}
	if err := l.WaitDurable(1); err == nil {
		t.Error("WaitDurable of a sequence never handed out succeeded")
	}
	if err := l.WaitDurable(0); err != nil {
		t.Errorf("WaitDurable(0) = %v", err)
	}
}

func TestAppendAfterClose(t *testing.T) {
	l, err := CreateLog(filepath.Join(t.TempDir(), "a"), LogConfig{Fsync: FsyncNo})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := l.Append([]byte("x"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.WaitDurable(seq); err != nil {
		t.Errorf("WaitDurable after Close of a flushed record = %v", err)
	}
	if _, err := l.Append([]byte("y")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
	if err := l.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("Err after Close = %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
	if st := l.Stats(); st.Fsyncs == 0 {
		t.Error("Close did not fsync under FsyncNo")
	}
}

// rec encodes (goroutine, index) so replay can check per-writer order.
func rec(g, i int) []byte {
	b := make([]byte, 8, 40)
	binary.LittleEndian.PutUint32(b, uint32(g))
	binary.LittleEndian.PutUint32(b[4:], uint32(i))
	return append(b, "payload-payload-payload"...)
}

// checkPerWriterOrder checks every (g, i) appears once and each writer's
// records are in order.
func checkPerWriterOrder(t *testing.T, got [][]byte, writers, each int) {
	t.Helper()
	if len(got) != writers*each {
		t.Fatalf("replayed %d records, want %d", len(got), writers*each)
	}
	next := make([]int, writers)
	for _, r := range got {
		g, i := int(binary.LittleEndian.Uint32(r)), int(binary.LittleEndian.Uint32(r[4:]))
		if g >= writers || i != next[g] {
			t.Fatalf("writer %d: got record %d, want %d", g, i, next[g])
		}
		next[g]++
	}
}

func TestConcurrentAppenders(t *testing.T) {
	const writers, each = 16, 2000
	path := filepath.Join(t.TempDir(), "a")
	l, err := CreateLog(path, LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := l.Append(rec(g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := replayAll(t, path)
	checkPerWriterOrder(t, got, writers, each)
}

// TestGroupCommit runs N goroutines that each Append and WaitDurable M
// records under FsyncAlways, and counts fsyncs: each one must cover many
// records.
func TestGroupCommit(t *testing.T) {
	const writers, each = 32, 100
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slowdisk=%v", slow), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a")
			cfg := LogConfig{Fsync: FsyncAlways}
			ff := &faultFile{}
			if slow {
				ff.syncDelay = time.Millisecond
				cfg.openFile = ff.open
			}
			l, err := CreateLog(path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					for i := range each {
						seq, err := l.Append(rec(g, i))
						if err == nil {
							err = l.WaitDurable(seq)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			st := l.Stats()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			records := uint64(writers * each)
			t.Logf("%d records, %d fsyncs (%.1f records per fsync)", records, st.Fsyncs, float64(records)/float64(st.Fsyncs))
			// With a slow disk every writer is parked behind each fsync, so
			// batches are large; a fast disk still must share fsyncs.
			limit := records / 2
			if slow {
				limit = records / 8
			}
			if st.Fsyncs > limit {
				t.Errorf("%d fsyncs for %d records: group commit is not grouping (limit %d)", st.Fsyncs, records, limit)
			}
			got, _ := replayAll(t, path)
			checkPerWriterOrder(t, got, writers, each)
		})
	}
}

func TestEverySecSyncsInBackground(t *testing.T) {
	ff := &faultFile{}
	l, err := CreateLog(filepath.Join(t.TempDir(), "a"), LogConfig{openFile: ff.open, syncEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before := l.Stats().Fsyncs
	seq, _ := l.Append([]byte("hello"))
	if err := l.WaitDurable(seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "background fsync", func() bool {
		st := l.Stats()
		return st.Fsyncs > before && st.FsyncLag == 0
	})
	st := l.Stats()
	if st.Size != int64(logHeaderSize+frameHeaderSize+5) || st.Records != 1 || st.Pending != 0 {
		t.Errorf("stats %+v", st)
	}
	if time.Since(st.LastFsync) > time.Minute {
		t.Errorf("LastFsync %v", st.LastFsync)
	}
}

func TestFsyncLagGrowsWhileUnsynced(t *testing.T) {
	ff := &faultFile{}
	// everysec with a period long enough that no fsync happens in the test.
	l, err := CreateLog(filepath.Join(t.TempDir(), "a"), LogConfig{openFile: ff.open, syncEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := l.Append([]byte("x"))
	if err := l.WaitDurable(seq); err != nil {
		t.Fatal(err)
	}
	eventually(t, "lag to grow", func() bool { return l.Stats().FsyncLag >= 2*time.Millisecond })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if lag := l.Stats().FsyncLag; lag != 0 {
		t.Errorf("lag after Close = %v", lag)
	}
}

// TestWriteFailureRecovers fills the disk in the middle of a write: the log
// refuses records, reports the error, and once space returns it truncates
// the partial write, writes every accepted record once, and accepts again.
func TestWriteFailureRecovers(t *testing.T) {
	for _, p := range policies {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a")
			ff := &faultFile{}
			l, err := CreateLog(path, LogConfig{Fsync: p, openFile: ff.open,
				syncEvery: 2 * time.Millisecond, retryMin: time.Millisecond, retryMax: 4 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			recs := payloads(2, 300, 200)
			var want [][]byte
			// appendAll appends rs; once the failure is known, Append may
			// refuse, and only what it accepted must survive.
			appendAll := func(rs [][]byte) uint64 {
				var seq uint64
				for _, r := range rs {
					s, err := l.Append(r)
					if errors.Is(err, ErrPersistence) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					seq = s
					want = append(want, r)
				}
				return seq
			}
			if err := l.WaitDurable(appendAll(recs[:100])); err != nil {
				t.Fatal(err)
			}

			ff.setWriteErr(syscall.ENOSPC, 7)
			// Accepted before the failure is known: these must survive.
			err = l.WaitDurable(appendAll(recs[100:110]))
			if !errors.Is(err, ErrPersistence) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("WaitDurable during ENOSPC = %v", err)
			}
			if !strings.Contains(err.Error(), "errors writing to the append-only file") {
				t.Errorf("error text %q", err)
			}
			if _, err := l.Append(recs[110]); !errors.Is(err, ErrPersistence) {
				t.Fatalf("Append while failing = %v", err)
			}
			if err := l.Err(); !errors.Is(err, ErrPersistence) {
				t.Fatalf("Err while failing = %v", err)
			}
			st := l.Stats()
			if !st.Failed || st.WriteErrors == 0 || !strings.Contains(st.LastError, "no space left on device") {
				t.Fatalf("stats while failing: %+v", st)
			}

			ff.setWriteErr(nil, 0)
			var seq uint64
			eventually(t, "recovery", func() bool {
				seq, err = l.Append(recs[110])
				if err != nil && !errors.Is(err, ErrPersistence) {
					t.Fatal(err)
				}
				return err == nil
			})
			want = append(want, recs[110])
			if err := l.WaitDurable(seq); err != nil {
				t.Fatal(err)
			}
			if err := l.WaitDurable(appendAll(recs[111:])); err != nil {
				t.Fatal(err)
			}
			if st := l.Stats(); st.Failed || st.LastError == "" {
				t.Errorf("stats after recovery: %+v", st)
			}
			if err := l.Err(); err != nil {
				t.Errorf("Err after recovery = %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, res := replayAll(t, path)
			sameRecords(t, got, want)
			if res.TornBytes != 0 {
				t.Errorf("torn bytes %d after recovery", res.TornBytes)
			}
		})
	}
}

// TestFsyncFailureRewrites makes fsync fail and, as Linux may, lose the
// unsynced pages. Recovery must rewrite them from memory.
func TestFsyncFailureRewrites(t *testing.T) {
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncEverySec} {
		t.Run(p.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a")
			ff := &faultFile{}
			l, err := CreateLog(path, LogConfig{Fsync: p, openFile: ff.open,
				syncEvery: 2 * time.Millisecond, retryMin: time.Millisecond, retryMax: 4 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			recs := payloads(3, 200, 300)
			var want [][]byte
			for _, r := range recs[:50] {
				seq, err := l.Append(r)
				if err == nil {
					err = l.WaitDurable(seq)
				}
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, r)
			}
			eventually(t, "first records synced", func() bool { return l.Stats().FsyncLag == 0 })

			ff.setSyncErr(syscall.EIO, true)
			// Under always the first failed fsync may come before the
			// loop ends: records are accepted until then, and all the
			// accepted ones must survive.
			for _, r := range recs[50:60] {
				if _, err := l.Append(r); err != nil {
					if !errors.Is(err, ErrPersistence) {
						t.Fatal(err)
					}
					break
				}
				want = append(want, r)
			}
			eventually(t, "fsync failure", func() bool { return l.Stats().Failed })
			if _, err := l.Append(recs[60]); !errors.Is(err, ErrPersistence) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Append after failed fsync = %v", err)
			}
			if st := l.Stats(); st.FsyncErrors == 0 || !strings.Contains(st.LastError, "input/output error") {
				t.Fatalf("stats %+v", st)
			}

			ff.setSyncErr(nil, false)
			eventually(t, "recovery", func() bool { return !l.Stats().Failed })
			for _, r := range recs[60:] {
				seq, err := l.Append(r)
				if err == nil {
					err = l.WaitDurable(seq)
				}
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, r)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := replayAll(t, path)
			sameRecords(t, got, want)
		})
	}
}

func TestCloseWhileFailing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a")
	ff := &faultFile{}
	l, err := CreateLog(path, LogConfig{Fsync: FsyncAlways, openFile: ff.open, retryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ff.setWriteErr(syscall.ENOSPC, 0)
	seq, _ := l.Append([]byte("lost"))
	if err := l.WaitDurable(seq); !errors.Is(err, ErrPersistence) {
		t.Fatalf("WaitDurable = %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrPersistence) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close of a failing log = %v", err)
	}
	if err := l.WaitDurable(seq); !errors.Is(err, ErrPersistence) {
		t.Fatalf("WaitDurable after Close = %v", err)
	}
	// The file holds only the header: no partial record was left behind.
	if got, _ := replayAll(t, path); len(got) != 0 {
		t.Fatalf("replayed %d records", len(got))
	}
}

func TestCloseRecoversIfDiskReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a")
	ff := &faultFile{}
	// A long retry interval: only Close's own attempt can succeed.
	l, err := CreateLog(path, LogConfig{Fsync: FsyncNo, openFile: ff.open, retryMin: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ff.setWriteErr(syscall.ENOSPC, 3)
	seq, _ := l.Append([]byte("kept"))
	if err := l.WaitDurable(seq); !errors.Is(err, ErrPersistence) {
		t.Fatalf("WaitDurable = %v", err)
	}
	ff.setWriteErr(nil, 0)
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	got, _ := replayAll(t, path)
	sameRecords(t, got, [][]byte{[]byte("kept")})
}

// TestAppendBlocksWhenBufferFull stalls the disk: Append must stop taking
// records at the buffer limit instead of growing memory, resume when the
// disk does, and give up with ErrClosed if the log is closed meanwhile.
func TestAppendBlocksWhenBufferFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a")
	gate := make(chan struct{})
	ff := &faultFile{gate: gate}
	l, err := CreateLog(path, LogConfig{Fsync: FsyncNo, openFile: ff.open, maxBuffered: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte("r"), 92) // 100 bytes framed
	for range 10 {
		if _, err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(rec)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Append past the buffer limit returned %v instead of blocking", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate) // the disk comes back
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := replayAll(t, path); len(got) != 11 {
		t.Fatalf("replayed %d records, want 11", len(got))
	}
}

// TestLargeRecords crosses many buffer chunks, through a failure and repair.
func TestLargeRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a")
	ff := &faultFile{}
	l, err := CreateLog(path, LogConfig{Fsync: FsyncAlways, openFile: ff.open, retryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	recs := payloads(30, 12, 3*chunkSize)
	var want [][]byte
	for i, r := range recs {
		if i == 6 {
			ff.setWriteErr(syscall.ENOSPC, chunkSize+17)
		}
		seq, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
		if err := l.WaitDurable(seq); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			ff.setWriteErr(nil, 0)
			eventually(t, "recovery", func() bool { return l.WaitDurable(seq) == nil })
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := replayAll(t, path)
	sameRecords(t, got, want)
}

func TestByteQueue(t *testing.T) {
	var q byteQueue
	q.reset(1000)
	var all []byte
	for _, p := range payloads(31, 200, 20000) {
		q.append(p)
		all = append(all, p...)
	}
	if q.end != 1000+int64(len(all)) {
		t.Fatalf("end %d", q.end)
	}
	check := func(from, to int64) {
		t.Helper()
		var got []byte
		for _, p := range q.slices(nil, from, to) {
			got = append(got, p...)
		}
		if !bytes.Equal(got, all[from-1000:to-1000]) {
			t.Fatalf("slices(%d, %d) differ", from, to)
		}
	}
	check(1000, q.end)
	check(1000+chunkSize-3, 1000+3*chunkSize+5)
	q.release(1000 + 2*chunkSize + 1)
	if q.start != 1000+2*chunkSize {
		t.Fatalf("start %d after release", q.start)
	}
	check(q.start, q.end)
	check(q.start+chunkSize, q.start+chunkSize)
	q.release(q.end)
	check(q.start, q.end)
	if len(q.chunks) != 1 || len(q.free) != maxFreeChunks && len(q.free) != int(q.start-1000)/chunkSize {
		t.Fatalf("%d chunks, %d free", len(q.chunks), len(q.free))
	}
}
