package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func snapRecords(seed uint64, n, maxPayload int) []engine.SnapshotRecord {
	ps := payloads(seed, 2*n, maxPayload)
	out := make([]engine.SnapshotRecord, n)
	for i := range out {
		key := ps[2*i]
		if len(key) > 40 {
			key = key[:40]
		}
		out[i] = engine.SnapshotRecord{Kind: uint8(i % 7), ExpireAt: int64(i) * 1_000_003 * (1 - 2*int64(i%2)), Key: key, Payload: ps[2*i+1]}
	}
	if n > 0 {
		out[0].Payload = nil // a key with an empty payload
	}
	return out
}

func encodeSnapshot(t testing.TB, h SnapshotHeader, recs []engine.SnapshotRecord) []byte {
	t.Helper()
	var buf bytes.Buffer
	e, err := NewSnapshotEncoder(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if e.Records() != uint64(len(recs)) {
		t.Fatalf("Records() = %d", e.Records())
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func cloneRecord(r engine.SnapshotRecord) engine.SnapshotRecord {
	r.Key, r.Payload = bytes.Clone(r.Key), bytes.Clone(r.Payload)
	return r
}

func decodeAll(r io.Reader) (SnapshotHeader, []engine.SnapshotRecord, error) {
	var got []engine.SnapshotRecord
	h, err := DecodeSnapshot(r, func(rec engine.SnapshotRecord) error {
		got = append(got, cloneRecord(rec))
		return nil
	})
	return h, got, err
}

func sameSnapshot(t *testing.T, gotH, wantH SnapshotHeader, got, want []engine.SnapshotRecord) {
	t.Helper()
	if gotH.LastNow != wantH.LastNow || gotH.LogSeq != wantH.LogSeq || gotH.CreatedAt != wantH.CreatedAt || !bytes.Equal(gotH.Meta, wantH.Meta) {
		t.Fatalf("header %+v, want %+v", gotH, wantH)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.ExpireAt != w.ExpireAt || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
}

var testHeader = SnapshotHeader{LastNow: 1_700_000_000_123_456_789, LogSeq: 42, CreatedAt: 1_700_000_001_000_000_000, Meta: []byte(`{"shards":16}`)}

func TestSnapshotRoundTrip(t *testing.T) {
	big := snapRecords(11, 3, 10)
	big[1].Payload = bytes.Repeat([]byte("0123456789abcdef"), 512<<10) // 8 MiB
	big[2].Key = bytes.Repeat([]byte("k"), 1<<20)
	cases := []struct {
		name string
		h    SnapshotHeader
		recs []engine.SnapshotRecord
	}{
		{"empty", SnapshotHeader{}, nil},
		{"header only", testHeader, nil},
		{"many", testHeader, snapRecords(12, 10000, 100)},
		{"large", SnapshotHeader{LastNow: -1, Meta: make([]byte, MaxMetaSize)}, big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := encodeSnapshot(t, c.h, c.recs)
			// bytes.Reader reveals its length; a plain io.Reader does not.
			for _, r := range []io.Reader{bytes.NewReader(data), struct{ io.Reader }{bytes.NewReader(data)}} {
				h, got, err := decodeAll(r)
				if err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, h, c.h, got, c.recs)
			}
			h, err := ReadSnapshotHeader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			sameSnapshot(t, h, c.h, nil, nil)
		})
	}
}

func TestSnapshotEncoderLimits(t *testing.T) {
	if _, err := NewSnapshotEncoder(io.Discard, SnapshotHeader{Meta: make([]byte, MaxMetaSize+1)}); err == nil {
		t.Error("oversized meta accepted")
	}
	var buf bytes.Buffer
	e, _ := NewSnapshotEncoder(&buf, testHeader)
	if err := e.Add(engine.SnapshotRecord{Key: []byte("k"), Payload: make([]byte, MaxRecordSize)}); !errors.Is(err, ErrRecordSize) {
		t.Errorf("oversized record: %v", err)
	}
	// The refused record left the stream intact.
	if err := e.Add(engine.SnapshotRecord{Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Add(engine.SnapshotRecord{}); err == nil {
		t.Error("Add after Close succeeded")
	}
	_, got, err := decodeAll(&buf)
	if err != nil || len(got) != 1 {
		t.Fatalf("%d records, %v", len(got), err)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk on fire")
	}
	return len(p), nil
}

func TestSnapshotEncoderWriteErrorIsSticky(t *testing.T) {
	e, err := NewSnapshotEncoder(&failWriter{n: 1 << 20}, testHeader)
	if err != nil {
		t.Fatal(err)
	}
	var first error
	for i := 0; first == nil && i < 1000; i++ {
		first = e.Add(engine.SnapshotRecord{Key: []byte("k"), Payload: make([]byte, 4096)})
	}
	if first == nil {
		t.Fatal("no error")
	}
	if err := e.Add(engine.SnapshotRecord{Key: []byte("k")}); err == nil {
		t.Error("Add after a write error succeeded")
	}
	if err := e.Close(); err == nil {
		t.Error("Close after a write error succeeded")
	}
}

// TestSnapshotTruncated cuts the stream at every offset of its header and
// of its last records and end marker: each must fail, never succeed short.
func TestSnapshotTruncated(t *testing.T) {
	recs := snapRecords(13, 50, 60)
	data := encodeSnapshot(t, testHeader, recs)
	tailStart := len(data) - 300
	for cut := range len(data) {
		if cut > 80 && cut < tailStart {
			continue
		}
		for _, r := range []io.Reader{bytes.NewReader(data[:cut]), struct{ io.Reader }{bytes.NewReader(data[:cut])}} {
			_, _, err := decodeAll(r)
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("cut at %d of %d: %v", cut, len(data), err)
			}
		}
	}
	// Trailing data is corruption too.
	if _, _, err := decodeAll(bytes.NewReader(append(bytes.Clone(data), 0))); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// TestSnapshotFlippedByte flips every byte in turn.
func TestSnapshotFlippedByte(t *testing.T) {
	recs := snapRecords(14, 20, 30)
	data := encodeSnapshot(t, testHeader, recs)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x20
		if _, _, err := decodeAll(bytes.NewReader(bad)); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("flip at %d of %d: %v", i, len(data), err)
		}
	}
}

// TestSnapshotHugeLengthNoHugeAllocation: a corrupt length on an unsized
// stream must fail without allocating what it claims.
func TestSnapshotHugeLengthNoHugeAllocation(t *testing.T) {
	data := encodeSnapshot(t, SnapshotHeader{}, snapRecords(15, 1, 10))
	hdrLen := snapFixedHeader + 4
	bad := bytes.Clone(data[:hdrLen+frameHeaderSize])
	le.PutUint32(bad[hdrLen:], MaxRecordSize) // claims 64 MiB, holds nothing
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, _, err := decodeAll(struct{ io.Reader }{bytes.NewReader(bad)}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Fatalf("decoding a lying 64 MiB length allocated %d bytes", grew)
	}
}

func TestSnapshotCallbackError(t *testing.T) {
	data := encodeSnapshot(t, testHeader, snapRecords(16, 10, 10))
	stop := errors.New("stop")
	n := 0
	_, err := DecodeSnapshot(bytes.NewReader(data), func(engine.SnapshotRecord) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatal(err)
	}
}

func TestSnapshotFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dump.snap")
	recs := snapRecords(17, 1000, 50)
	n, err := WriteSnapshotFile(path, testHeader, func(e *SnapshotEncoder) error {
		for _, r := range recs {
			if err := e.Add(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != fileSize(t, path) {
		t.Fatalf("reported %d bytes, file has %d", n, fileSize(t, path))
	}
	var got []engine.SnapshotRecord
	h, err := ReadSnapshotFile(path, func(r engine.SnapshotRecord) error {
		got = append(got, cloneRecord(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, h, testHeader, got, recs)

	// A failing fill leaves the previous snapshot in place and no debris.
	before, _ := os.ReadFile(path)
	boom := errors.New("boom")
	if _, err := WriteSnapshotFile(path, SnapshotHeader{}, func(e *SnapshotEncoder) error {
		e.Add(recs[0])
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("WriteSnapshotFile = %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("failed write replaced the snapshot")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("directory holds %v", entries)
	}

	// A truncated file names itself in the error.
	if err := os.Truncate(path, n-1); err != nil {
		t.Fatal(err)
	}
	_, err = ReadSnapshotFile(path, func(engine.SnapshotRecord) error { return nil })
	if !errors.Is(err, ErrCorruptSnapshot) || !bytes.Contains([]byte(err.Error()), []byte(path)) {
		t.Fatalf("truncated file: %v", err)
	}
	if _, err := ReadSnapshotFile(filepath.Join(dir, "nope"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func ExampleDecodeSnapshot() {
	var buf bytes.Buffer
	e, _ := NewSnapshotEncoder(&buf, SnapshotHeader{LastNow: 1_700_000_000_000_000_000, LogSeq: 7})
	e.Add(engine.SnapshotRecord{Kind: 1, Key: []byte("user:42"), Payload: []byte("state")})
	e.Close()

	h, err := DecodeSnapshot(&buf, func(r engine.SnapshotRecord) error {
		fmt.Printf("%s kind=%d %s\n", r.Key, r.Kind, r.Payload)
		return nil
	})
	fmt.Println("log seq", h.LogSeq, err)
	// Output:
	// user:42 kind=1 state
	// log seq 7 <nil>
}
