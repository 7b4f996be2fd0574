package persistence

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// fill creates n GCRA limiters with 16-byte keys and a one-hour period.
func fill(e *engine.Engine, n int) {
	var b engine.Batch
	for i := 0; i < n; {
		b.Reset()
		for k := 0; k < 256 && i < n; k, i = k+1, i+1 {
			c := b.Add()
			key := make([]byte, 16)
			copy(key, "user:id:")
			binary.BigEndian.PutUint64(key[8:], uint64(i))
			c.Op, c.Key, c.N = engine.OpThrottle, key, [4]int64{99, 100, 3600e9, 1}
		}
		e.Execute(&b, time.Now().UnixNano())
	}
}

// BenchmarkRestart measures start-up with 1M live limiters: load the
// snapshot a clean shutdown left, replay nothing, attach the log. The
// target is at most 2 s.
func BenchmarkRestart(b *testing.B) {
	dir := b.TempDir()
	e := engine.New(engine.Config{})
	d, err := OpenDurable(e, DurableConfig{Dir: dir, Fsync: FsyncNo})
	if err != nil {
		b.Fatal(err)
	}
	fill(e, 1_000_000)
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	e.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := engine.New(engine.Config{})
		d, err := OpenDurable(e, DurableConfig{Dir: dir, Fsync: FsyncNo, AutoRewritePercent: -1})
		if err != nil {
			b.Fatal(err)
		}
		if got := d.Load().SnapshotKeys; got != 1_000_000 {
			b.Fatalf("loaded %d keys", got)
		}
		b.StopTimer()
		d.mu.Lock()
		d.cur.Close()
		d.mu.Unlock()
		e.Close()
		b.StartTimer()
	}
}

// BenchmarkSnapshot measures taking a snapshot of 1M limiters.
func BenchmarkSnapshot1M(b *testing.B) {
	e := engine.New(engine.Config{})
	defer e.Close()
	d, err := OpenDurable(e, DurableConfig{Dir: b.TempDir(), Fsync: FsyncNo, AutoRewritePercent: -1})
	if err != nil {
		b.Fatal(err)
	}
	fill(e, 1_000_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Save(); err != nil {
			b.Fatal(err)
		}
	}
}
