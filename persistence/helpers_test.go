package persistence

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// faultFile wraps a real file and injects the failures a full or dying disk
// produces.
type faultFile struct {
	path string

	mu        sync.Mutex
	f         *os.File
	writeErr  error // Write writes `partial` bytes, then fails with writeErr
	partial   int
	syncErr   error
	dropPages bool          // on a failed fsync, zero what was not yet synced, as Linux may
	syncDelay time.Duration // a slow disk, to make group commit visible
	gate      chan struct{} // if set, Write waits until it is closed: a stalled disk
	synced    int64
	syncs     int
}

func (ff *faultFile) open(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	ff.mu.Lock()
	ff.path, ff.f, ff.synced = name, f, fi.Size()
	ff.mu.Unlock()
	return ff, nil
}

func (ff *faultFile) setWriteErr(err error, partial int) {
	ff.mu.Lock()
	ff.writeErr, ff.partial = err, partial
	ff.mu.Unlock()
}

func (ff *faultFile) setSyncErr(err error, dropPages bool) {
	ff.mu.Lock()
	ff.syncErr, ff.dropPages = err, dropPages
	ff.mu.Unlock()
}

func (ff *faultFile) Write(p []byte) (int, error) {
	ff.mu.Lock()
	gate := ff.gate
	ff.mu.Unlock()
	if gate != nil {
		<-gate
	}
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if ff.writeErr != nil {
		n, _ := ff.f.Write(p[:min(ff.partial, len(p))])
		return n, ff.writeErr
	}
	return ff.f.Write(p)
}

func (ff *faultFile) Sync() error {
	ff.mu.Lock()
	delay := ff.syncDelay
	ff.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	ff.mu.Lock()
	defer ff.mu.Unlock()
	fi, err := ff.f.Stat()
	if err != nil {
		return err
	}
	if ff.syncErr != nil {
		if ff.dropPages && fi.Size() > ff.synced {
			// The file keeps its length but the unsynced bytes are gone.
			w, err := os.OpenFile(ff.path, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = w.WriteAt(make([]byte, fi.Size()-ff.synced), ff.synced)
			w.Close()
			if err != nil {
				return err
			}
		}
		return ff.syncErr
	}
	if err := ff.f.Sync(); err != nil {
		return err
	}
	ff.synced = fi.Size()
	ff.syncs++
	return nil
}

func (ff *faultFile) Truncate(size int64) error {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if err := ff.f.Truncate(size); err != nil {
		return err
	}
	ff.synced = min(ff.synced, size)
	return nil
}

func (ff *faultFile) Stat() (os.FileInfo, error) { return ff.f.Stat() }
func (ff *faultFile) Close() error               { return ff.f.Close() }

// payloads returns n deterministic records of 1..maxLen bytes.
func payloads(seed uint64, n, maxLen int) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([][]byte, n)
	for i := range out {
		p := make([]byte, 1+r.IntN(maxLen))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		out[i] = p
	}
	return out
}

// encodeLog builds a log file's bytes directly, independent of Log.
func encodeLog(recs [][]byte) (data []byte, offsets []int64) {
	data = appendLogHeader(nil)
	for _, p := range recs {
		offsets = append(offsets, int64(len(data)))
		data = appendFrame(data, p)
	}
	return data, offsets
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replayAll replays path and returns copies of its records.
func replayAll(t testing.TB, path string) ([][]byte, ReplayResult) {
	t.Helper()
	var got [][]byte
	res, err := ReplayLog(path, func(p []byte) error {
		got = append(got, bytes.Clone(p))
		return nil
	})
	if err != nil {
		t.Fatalf("ReplayLog: %v", err)
	}
	return got, res
}

func sameRecords(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d differs: got %d bytes %.16x, want %d bytes %.16x", i, len(got[i]), got[i], len(want[i]), want[i])
		}
	}
}

// eventually polls cond until it holds, for state a background goroutine
// reaches on its own (a retry after a fault is cleared).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func asCorrupt(t testing.TB, err error) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v, want *CorruptError", err)
	}
	return ce
}
