package persistence

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/engine"
)

// Snapshot stream layout (all integers little-endian):
//
//	header:  "SLUICESNP" | version u16 | LastNow i64 | LogSeq u64 | CreatedAt i64 |
//	         metaLen u32 | meta | CRC32C(every header byte before it) u32
//	record:  length u32 | CRC32C(body) u32 | body
//	body:    kind u8 | expireAt i64 | keyLen u32 | key | payload
//	end:     0xFFFFFFFF u32 | CRC32C(count) u32 | count u64
//
// then end of stream. The end marker's count catches a stream cut at a record
// boundary, which the per-record CRCs alone cannot.
const (
	snapMagic       = "SLUICESNP"
	snapVersion     = 1
	snapFixedHeader = len(snapMagic) + 2 + 8 + 8 + 8 + 4
	snapRecordFixed = 1 + 8 + 4
	snapEndMarker   = 0xFFFFFFFF
)

// SnapshotHeader describes a snapshot.
type SnapshotHeader struct {
	// LastNow is the engine's last "now" (unix ns). A restore must not let
	// time run backwards past it.
	LastNow int64
	// LogSeq is the log position the snapshot covers; opaque here.
	LogSeq uint64
	// CreatedAt is when the snapshot was taken (unix ns), set by the caller.
	CreatedAt int64
	// Meta is opaque to this package; at most MaxMetaSize bytes.
	Meta []byte
}

// SnapshotEncoder writes a snapshot stream. It is not safe for concurrent
// use. Its first write error is sticky.
type SnapshotEncoder struct {
	w      *bufio.Writer
	count  uint64
	err    error
	closed bool
	// fixed is a record's frame and fixed body fields. It lives here, not
	// on Add's stack, because bufio may pass it to the underlying writer,
	// which would make a local escape: one allocation per record.
	fixed [frameHeaderSize + snapRecordFixed]byte
}

var errEncoderClosed = errors.New("snapshot encoder is closed")

// NewSnapshotEncoder writes h to w and returns an encoder for the records.
func NewSnapshotEncoder(w io.Writer, h SnapshotHeader) (*SnapshotEncoder, error) {
	if len(h.Meta) > MaxMetaSize {
		return nil, fmt.Errorf("snapshot meta is %d bytes, over the %d-byte limit", len(h.Meta), MaxMetaSize)
	}
	e := &SnapshotEncoder{w: bufio.NewWriterSize(w, 256<<10)}
	b := make([]byte, 0, snapFixedHeader+len(h.Meta)+4)
	b = append(b, snapMagic...)
	b = le.AppendUint16(b, snapVersion)
	b = le.AppendUint64(b, uint64(h.LastNow))
	b = le.AppendUint64(b, h.LogSeq)
	b = le.AppendUint64(b, uint64(h.CreatedAt))
	b = le.AppendUint32(b, uint32(len(h.Meta)))
	b = append(b, h.Meta...)
	b = le.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if _, err := e.w.Write(b); err != nil {
		return nil, err
	}
	return e, nil
}

// Add writes one record. A record over MaxRecordSize is refused without
// damaging the stream.
func (e *SnapshotEncoder) Add(r engine.SnapshotRecord) error {
	if e.closed {
		return errEncoderClosed
	}
	if e.err != nil {
		return e.err
	}
	n := snapRecordFixed + len(r.Key) + len(r.Payload)
	if n > MaxRecordSize {
		return fmt.Errorf("snapshot record for key %.32q: %w: %d bytes (limit %d)", r.Key, ErrRecordSize, n, MaxRecordSize)
	}
	fixed := e.fixed[:]
	le.PutUint32(fixed[0:], uint32(n))
	fixed[8] = r.Kind
	le.PutUint64(fixed[9:], uint64(r.ExpireAt))
	le.PutUint32(fixed[17:], uint32(len(r.Key)))
	// Checksum the pieces in place rather than copying key and payload
	// into one body buffer.
	sum := crc32.Update(0, castagnoli, fixed[frameHeaderSize:])
	sum = crc32.Update(sum, castagnoli, r.Key)
	sum = crc32.Update(sum, castagnoli, r.Payload)
	le.PutUint32(fixed[4:], sum)
	if _, err := e.w.Write(fixed); err != nil {
		e.err = err
		return err
	}
	if _, err := e.w.Write(r.Key); err != nil {
		e.err = err
		return err
	}
	if _, err := e.w.Write(r.Payload); err != nil {
		e.err = err
		return err
	}
	e.count++
	return nil
}

// Records returns the number of records added so far.
func (e *SnapshotEncoder) Records() uint64 { return e.count }

// Close writes the end marker and flushes. It does not close the underlying
// writer.
func (e *SnapshotEncoder) Close() error {
	if e.closed {
		return errEncoderClosed
	}
	e.closed = true
	if e.err != nil {
		return e.err
	}
	var end [16]byte
	le.PutUint32(end[0:], snapEndMarker)
	le.PutUint64(end[8:], e.count)
	le.PutUint32(end[4:], crc32.Checksum(end[8:], castagnoli))
	if _, err := e.w.Write(end[:]); err != nil {
		e.err = err
		return err
	}
	if err := e.w.Flush(); err != nil {
		e.err = err
		return err
	}
	return nil
}

// snapReader reads a snapshot stream and knows where it is, for errors.
type snapReader struct {
	r    io.Reader
	off  int64 // bytes consumed
	left int64 // bytes remaining in the stream when known, else -1
}

func (d *snapReader) corrupt(off int64, format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrCorruptSnapshot, off, fmt.Sprintf(format, args...))
}

// full fills p, turning a short stream into a corruption error.
func (d *snapReader) full(p []byte, what string) error {
	at := d.off
	n, err := io.ReadFull(d.r, p)
	d.off += int64(n)
	if d.left >= 0 {
		d.left -= int64(n)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return d.corrupt(at, "truncated in %s", what)
	default:
		return fmt.Errorf("read snapshot: %w", err)
	}
}

// body reads n bytes into buf. When the stream's length is unknown it grows
// buf only as data actually arrives, so a corrupt length on a short stream
// costs at most about twice the bytes really present.
func (d *snapReader) body(buf []byte, n int, what string) ([]byte, error) {
	if n <= cap(buf) {
		buf = buf[:n]
		return buf, d.full(buf, what)
	}
	buf = buf[:0]
	for len(buf) < n {
		step := min(n-len(buf), max(len(buf), 64<<10))
		buf = append(buf, make([]byte, step)...)
		if err := d.full(buf[len(buf)-step:], what); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// streamLen returns the bytes left in r if r can tell, else -1.
func streamLen(r io.Reader) int64 {
	switch r := r.(type) {
	case interface{ Len() int }: // bytes.Reader, bytes.Buffer, strings.Reader
		return int64(r.Len())
	case *os.File:
		fi, err := r.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		pos, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1
		}
		return fi.Size() - pos
	}
	return -1
}

func (d *snapReader) header() (SnapshotHeader, error) {
	var h SnapshotHeader
	var fixed [snapFixedHeader]byte
	if err := d.full(fixed[:], "header"); err != nil {
		return h, err
	}
	if string(fixed[:len(snapMagic)]) != snapMagic {
		return h, d.corrupt(0, "bad magic %q (not a Sluice snapshot)", fixed[:len(snapMagic)])
	}
	p := fixed[len(snapMagic):]
	if v := le.Uint16(p); v != snapVersion {
		return h, d.corrupt(int64(len(snapMagic)), "unsupported version %d (this build reads %d)", v, snapVersion)
	}
	h.LastNow = int64(le.Uint64(p[2:]))
	h.LogSeq = le.Uint64(p[10:])
	h.CreatedAt = int64(le.Uint64(p[18:]))
	metaLen := le.Uint32(p[26:])
	if metaLen > MaxMetaSize || (d.left >= 0 && int64(metaLen) > d.left) {
		return h, d.corrupt(int64(snapFixedHeader-4), "meta length %d out of range", metaLen)
	}
	if metaLen > 0 {
		h.Meta = make([]byte, metaLen)
		if err := d.full(h.Meta, "header meta"); err != nil {
			return h, err
		}
	}
	at := d.off
	var sum [4]byte
	if err := d.full(sum[:], "header checksum"); err != nil {
		return h, err
	}
	want := crc32.Update(crc32.Checksum(fixed[:], castagnoli), castagnoli, h.Meta)
	if le.Uint32(sum[:]) != want {
		return h, d.corrupt(at, "header checksum mismatch")
	}
	return h, nil
}

// ReadSnapshotHeader reads and checks only a snapshot's header. It reads
// exactly the header's bytes from r.
func ReadSnapshotHeader(r io.Reader) (SnapshotHeader, error) {
	d := &snapReader{r: r, left: streamLen(r)}
	return d.header()
}

// DecodeSnapshot reads a whole snapshot stream, calling fn for each record in
// order (fn may be nil, to validate), and returns its header. The record's
// slices are valid only during fn. Truncation anywhere (including at a record boundary), a bad checksum or
// length, and data after the end marker are errors wrapping
// ErrCorruptSnapshot; fn's error is returned as is.
func DecodeSnapshot(r io.Reader, fn func(engine.SnapshotRecord) error) (SnapshotHeader, error) {
	d := &snapReader{r: bufio.NewReaderSize(r, 256<<10), left: streamLen(r)}
	h, err := d.header()
	if err != nil {
		return h, err
	}
	var fh [frameHeaderSize]byte
	var buf []byte
	var count uint64
	for {
		at := d.off
		if err := d.full(fh[:], "record header (no end marker)"); err != nil {
			return h, err
		}
		n, sum := le.Uint32(fh[:4]), le.Uint32(fh[4:])
		if n == snapEndMarker {
			var c [8]byte
			if err := d.full(c[:], "end marker"); err != nil {
				return h, err
			}
			if crc32.Checksum(c[:], castagnoli) != sum {
				return h, d.corrupt(at, "end marker checksum mismatch")
			}
			if got := le.Uint64(c[:]); got != count {
				return h, d.corrupt(at, "end marker counts %d records, stream holds %d", got, count)
			}
			var one [1]byte
			switch _, err := io.ReadFull(d.r, one[:]); {
			case err == nil:
				return h, d.corrupt(d.off, "data after the end marker")
			case !errors.Is(err, io.EOF):
				return h, fmt.Errorf("read snapshot: %w", err)
			}
			return h, nil
		}
		if n < snapRecordFixed || n > MaxRecordSize || (d.left >= 0 && int64(n) > d.left) {
			return h, d.corrupt(at, "record length %d out of range", n)
		}
		buf, err = d.body(buf, int(n), "record")
		if err != nil {
			return h, err
		}
		if crc32.Checksum(buf, castagnoli) != sum {
			return h, d.corrupt(at, "record checksum mismatch")
		}
		keyLen := le.Uint32(buf[9:])
		if int64(keyLen) > int64(n)-snapRecordFixed {
			return h, d.corrupt(at, "key length %d exceeds the record", keyLen)
		}
		key := buf[snapRecordFixed : snapRecordFixed+int(keyLen)]
		rec := engine.SnapshotRecord{
			Kind:     buf[0],
			ExpireAt: int64(le.Uint64(buf[1:])),
			Key:      key,
			Payload:  buf[snapRecordFixed+int(keyLen):],
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return h, err
			}
		}
		count++
	}
}

// WriteSnapshotFile writes a snapshot to path atomically: fill adds the
// records to a temporary file in the same directory, which is fsynced and
// renamed over path, and the directory is fsynced. A crash or a failure
// leaves the previous file at path untouched. It returns the bytes written.
func WriteSnapshotFile(path string, h SnapshotHeader, fill func(e *SnapshotEncoder) error) (int64, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	cw := &countingWriter{w: f}
	e, err := NewSnapshotEncoder(cw, h)
	if err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	if err := fill(e); err != nil {
		return 0, err
	}
	if err := e.Close(); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return cw.n, fmt.Errorf("write snapshot: %w", err)
	}
	return cw.n, nil
}

// ReadSnapshotFile decodes the snapshot file at path; see DecodeSnapshot.
func ReadSnapshotFile(path string, fn func(engine.SnapshotRecord) error) (SnapshotHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return SnapshotHeader{}, fmt.Errorf("read snapshot: %w", err)
	}
	defer f.Close()
	h, err := DecodeSnapshot(f, fn)
	if errors.Is(err, ErrCorruptSnapshot) {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return h, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// The one writer and the one loader of engine state, shared by standalone
// snapshots (Durable) and the Raft FSM's.

// EncodeShards adds every live record of the shard copies to enc. pause, if
// not nil, is called every 1024 records: background encoding calls it to
// yield the core to the connections.
func EncodeShards(enc *SnapshotEncoder, shards []engine.ShardSnapshot, pause func()) error {
	n := 0
	for i := range shards {
		err := shards[i].Each(func(r engine.SnapshotRecord) error {
			if n++; pause != nil && n%1024 == 0 {
				pause()
			}
			return enc.Add(r)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteSnapshot writes a whole snapshot stream of the shard copies to w.
func WriteSnapshot(w io.Writer, h SnapshotHeader, shards []engine.ShardSnapshot, pause func()) error {
	enc, err := NewSnapshotEncoder(w, h)
	if err != nil {
		return err
	}
	if err := EncodeShards(enc, shards, pause); err != nil {
		return err
	}
	return enc.Close()
}

// restoreChunk is how many records LoadSnapshot hands the engine at once.
const restoreChunk = 4096

// LoadSnapshot decodes a snapshot stream from r into eng, in chunks, and
// returns its header and how many records it restored. The engine should
// be empty (Restore inserts; it does not clear). A damaged stream is
// refused with ErrCorruptSnapshot, after the records before the damage
// were restored.
func LoadSnapshot(r io.Reader, eng *engine.Engine) (SnapshotHeader, int, error) {
	return loadSnapshot(r, eng, nil)
}

// loadSnapshot is LoadSnapshot calling each, if set, for every record
// decoded.
func loadSnapshot(r io.Reader, eng *engine.Engine, each func()) (SnapshotHeader, int, error) {
	var (
		recs  []engine.SnapshotRecord
		slab  []byte
		total int
	)
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		if err := eng.Restore(recs); err != nil {
			return err
		}
		total += len(recs)
		// Restore copied the records into the tables: the slab is free.
		recs, slab = recs[:0], slab[:0]
		return nil
	}
	h, err := DecodeSnapshot(r, func(rec engine.SnapshotRecord) error {
		if each != nil {
			each()
		}
		// The decoder reuses its buffers: copy out into a slab that lives
		// until the chunk is restored.
		need := len(rec.Key) + len(rec.Payload)
		if cap(slab)-len(slab) < need {
			// Earlier records of the chunk keep pointing into the old slab.
			slab = make([]byte, 0, max(1<<20, need))
		}
		start := len(slab)
		slab = append(slab, rec.Key...)
		slab = append(slab, rec.Payload...)
		k := start + len(rec.Key)
		recs = append(recs, engine.SnapshotRecord{Kind: rec.Kind, ExpireAt: rec.ExpireAt,
			Key: slab[start:k:k], Payload: slab[k:len(slab):len(slab)]})
		if len(recs) == restoreChunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return h, total, err
}
