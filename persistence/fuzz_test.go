package persistence

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// FuzzReplayLog writes arbitrary bytes as a log file. ReplayLog must not
// panic; when it succeeds, the file it leaves is exactly the header plus the
// records it delivered, and replaying again finds nothing torn.
func FuzzReplayLog(f *testing.F) {
	data, offsets := encodeLog(payloads(20, 5, 40))
	f.Add(data)
	f.Add(data[:logHeaderSize])
	f.Add(data[:offsets[3]+5]) // torn in a header
	f.Add(data[:len(data)-3])  // torn in a payload
	bad := bytes.Clone(data)
	bad[offsets[2]+9] ^= 1 // corrupt middle record
	f.Add(bad)
	f.Add(append(bytes.Clone(data), make([]byte, 64)...)) // zero-padded tail
	f.Add([]byte{})
	f.Add([]byte("SLUICEAOF"))

	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		path := filepath.Join(dir, "fuzz.aof")
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		var recs [][]byte
		res, err := ReplayLog(path, func(p []byte) error {
			recs = append(recs, bytes.Clone(p))
			return nil
		})
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("non-corruption error on a readable file: %v", err)
			}
			if ce.Offset < 0 || ce.Offset >= int64(len(in)) && len(in) > 0 {
				t.Fatalf("offset %d outside a %d-byte file", ce.Offset, len(in))
			}
			return
		}
		want, _ := encodeLog(recs)
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, want) {
			t.Fatalf("after replay the file is not the re-encoded records")
		}
		if res.ValidBytes != int64(len(want)) || res.TornBytes != int64(len(in)-len(want)) || res.Records != uint64(len(recs)) {
			t.Fatalf("result %+v for %d input bytes", res, len(in))
		}
		if !bytes.Equal(in[:len(want)], want) {
			t.Fatalf("accepted records are not a prefix of the input")
		}
		res2, err := ReplayLog(path, nil)
		if err != nil || res2.TornBytes != 0 || res2.Records != res.Records {
			t.Fatalf("second replay: %+v, %v", res2, err)
		}
	})
}

// FuzzScanLog runs the log parser in memory, many times faster than
// FuzzReplayLog (which fsyncs every truncation), and checks its torn/corrupt
// verdict against a brute-force search for a valid record after the bad one.
func FuzzScanLog(f *testing.F) {
	data, offsets := encodeLog(payloads(22, 5, 40))
	f.Add(data)
	f.Add(data[:offsets[3]+5])
	bad := bytes.Clone(data)
	bad[offsets[2]+9] ^= 1
	f.Add(bad)
	f.Add(append(bytes.Clone(data), make([]byte, 64)...))

	f.Fuzz(func(t *testing.T, in []byte) {
		var recs [][]byte
		s, err := scanLog(bytes.NewReader(in), int64(len(in)), func(p []byte) error {
			recs = append(recs, bytes.Clone(p))
			return nil
		})
		if err != nil {
			t.Fatalf("in-memory scan failed: %v", err)
		}
		if s.badOff == 0 {
			if len(recs) != 0 || s.torn {
				t.Fatalf("bad header but %d records, torn %v", len(recs), s.torn)
			}
			return
		}
		want, _ := encodeLog(recs)
		if s.validEnd != int64(len(want)) || !bytes.Equal(in[:len(want)], want) {
			t.Fatalf("valid prefix %d is not the re-encoded records (%d bytes)", s.validEnd, len(want))
		}
		if s.badOff < 0 {
			if s.validEnd != int64(len(in)) {
				t.Fatalf("clean scan stopped at %d of %d", s.validEnd, len(in))
			}
			return
		}
		if s.badOff != s.validEnd {
			t.Fatalf("bad record at %d, valid end %d", s.badOff, s.validEnd)
		}
		found := false
		for i := s.badOff + 1; i+frameHeaderSize <= int64(len(in)) && !found; i++ {
			n := int64(le.Uint32(in[i:]))
			if n > 0 && n <= MaxRecordSize && i+frameHeaderSize+n <= int64(len(in)) {
				found = crc32.Checksum(in[i+frameHeaderSize:i+frameHeaderSize+n], castagnoli) == le.Uint32(in[i+4:])
			}
		}
		if s.torn == found {
			t.Fatalf("torn = %v, but a valid record after offset %d: %v", s.torn, s.badOff, found)
		}
	})
}

// FuzzDecodeSnapshot decodes arbitrary bytes. It must not panic, and
// whatever it accepts re-encodes to exactly the same bytes (the format has
// one encoding per content).
func FuzzDecodeSnapshot(f *testing.F) {
	seed := func(h SnapshotHeader, recs []engine.SnapshotRecord) []byte {
		var buf bytes.Buffer
		e, _ := NewSnapshotEncoder(&buf, h)
		for _, r := range recs {
			e.Add(r)
		}
		e.Close()
		return buf.Bytes()
	}
	full := seed(testHeader, snapRecords(21, 4, 30))
	f.Add(full)
	f.Add(seed(SnapshotHeader{}, nil))
	f.Add(full[:len(full)-16]) // end marker missing
	f.Add(full[:len(full)-20])
	f.Add(full[:30])
	f.Add(append(bytes.Clone(full), 0))

	f.Fuzz(func(t *testing.T, in []byte) {
		var recs []engine.SnapshotRecord
		h, err := DecodeSnapshot(bytes.NewReader(in), func(rec engine.SnapshotRecord) error {
			recs = append(recs, cloneRecord(rec))
			return nil
		})
		// A stream that cannot tell its length must get the same verdict.
		if _, err2 := DecodeSnapshot(struct{ io.Reader }{bytes.NewReader(in)}, nil); (err == nil) != (err2 == nil) {
			t.Fatalf("sized: %v; unsized: %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error does not wrap ErrCorruptSnapshot: %v", err)
			}
			return
		}
		if out := seed(h, recs); !bytes.Equal(out, in) {
			t.Fatalf("accepted input does not round-trip")
		}
	})
}
