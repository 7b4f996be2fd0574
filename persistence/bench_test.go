package persistence

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// benchPayload is about the size of one small batch of engine commands.
var benchPayload = bytes.Repeat([]byte("x"), 100)

func benchLog(b *testing.B, p FsyncPolicy) *Log {
	b.Helper()
	l, err := CreateLog(filepath.Join(b.TempDir(), "bench.aof"), LogConfig{Fsync: p})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	})
	return l
}

// discardFile is a disk that is never the bottleneck, to measure the
// Log's own cost.
type discardFile struct{ *os.File }

func (discardFile) Write(p []byte) (int, error) { return len(p), nil }
func (discardFile) Sync() error                 { return nil }

func openDiscard(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return discardFile{f}, nil
}

// BenchmarkAppend measures Append under everysec: a copy into the buffer,
// no system call. A tight loop of Appends outruns any disk, so single and
// parallel report the sustained rate the writer reaches on this machine's
// disk (Append blocks once 64 MiB are buffered); nodisk reports Append's
// own cost with a writer that never waits for a disk.
func BenchmarkAppend(b *testing.B) {
	b.Run("nodisk", func(b *testing.B) {
		l, err := CreateLog(filepath.Join(b.TempDir(), "bench.aof"), LogConfig{openFile: openDiscard})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPayload)))
		for b.Loop() {
			if _, err := l.Append(benchPayload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("single", func(b *testing.B) {
		l := benchLog(b, FsyncEverySec)
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPayload)))
		for b.Loop() {
			if _, err := l.Append(benchPayload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := benchLog(b, FsyncEverySec)
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPayload)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Append(benchPayload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAppendWaitDurableAlways has every goroutine wait for its own
// record's fsync, as a connection does under appendfsync always. fsyncs/op
// well under 1 is group commit at work.
func BenchmarkAppendWaitDurableAlways(b *testing.B) {
	for _, par := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%dxGOMAXPROCS", par), func(b *testing.B) {
			l := benchLog(b, FsyncAlways)
			before := l.Stats().Fsyncs
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					seq, err := l.Append(benchPayload)
					if err == nil {
						err = l.WaitDurable(seq)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(l.Stats().Fsyncs-before)/float64(b.N), "fsyncs/op")
		})
	}
}

func BenchmarkReplayLog(b *testing.B) {
	recs := make([][]byte, 100_000)
	for i := range recs {
		recs[i] = benchPayload
	}
	data, _ := encodeLog(recs)
	path := writeFile(b, b.TempDir(), "bench.aof", data)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ReplayLog(path, func([]byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSnapshot(b *testing.B) {
	rec := engine.SnapshotRecord{Kind: 1, ExpireAt: 1_700_000_000_000_000_000, Key: []byte("ratelimit:user:123456"), Payload: make([]byte, 24)}
	const n = 100_000
	var buf bytes.Buffer
	e, _ := NewSnapshotEncoder(&buf, testHeader)
	for range n {
		e.Add(rec)
	}
	e.Close()
	data := buf.Bytes()

	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			e, _ := NewSnapshotEncoder(io.Discard, testHeader)
			for range n {
				e.Add(rec)
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := DecodeSnapshot(bytes.NewReader(data), func(engine.SnapshotRecord) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
