package persistence

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Salvage: every record is framed (length, CRC32C), so damage in the
// middle of a log need not cost the records after it. --fix rewrites the
// log with every intact record, skipping each damaged stretch up to the
// next place where an intact record starts, and reports every stretch it
// skipped; only a damaged end (no intact record after it) is cut off.
//
// A place is taken for the next record only when the frame found there is
// intact and is itself followed by an intact frame or by the end of the
// file: bytes inside a damaged record's payload that happen to look like
// one frame (a stored value may hold anything) are not enough.

// SkippedRange is a stretch of a log that --fix dropped.
type SkippedRange struct {
	Offset int64
	Bytes  int64
	Reason string // what was wrong where it starts
}

// frameAt reads the frame at off: its total size (header included) when
// it is intact, or 0 and why not.
func frameAt(f io.ReaderAt, off, size int64, buf *[]byte) (int64, string, error) {
	left := size - off
	if left < frameHeaderSize {
		return 0, fmt.Sprintf("short record header: %d of %d bytes", left, frameHeaderSize), nil
	}
	var fh [frameHeaderSize]byte
	if _, err := f.ReadAt(fh[:], off); err != nil && err != io.EOF {
		return 0, "", err
	}
	n, sum := le.Uint32(fh[:4]), le.Uint32(fh[4:])
	switch {
	case n == 0:
		return 0, "zero record length", nil
	case n > MaxRecordSize:
		return 0, fmt.Sprintf("record length %d exceeds the %d-byte limit", n, MaxRecordSize), nil
	case int64(n) > left-frameHeaderSize:
		return 0, fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", n, left-frameHeaderSize), nil
	}
	if cap(*buf) < int(n) {
		*buf = make([]byte, n)
	}
	p := (*buf)[:n]
	if _, err := f.ReadAt(p, off+frameHeaderSize); err != nil && err != io.EOF {
		return 0, "", err
	}
	if crc32.Checksum(p, castagnoli) != sum {
		return 0, "checksum mismatch", nil
	}
	return frameHeaderSize + int64(n), "", nil
}

// nextIntact finds the first offset after bad where an intact frame
// starts that is followed by another intact frame or the end of the file;
// -1 if there is none, or if the budget of payload bytes checksummed runs
// out first (exhausted is then true).
func nextIntact(f io.ReaderAt, bad, size int64, budget *int64) (pos int64, exhausted bool, err error) {
	var buf []byte
	var hdr [frameHeaderSize]byte
	for off := bad + 1; off+frameHeaderSize <= size; off++ {
		if _, err := f.ReadAt(hdr[:], off); err != nil && err != io.EOF {
			return -1, false, err
		}
		n := int64(le.Uint32(hdr[:4]))
		if n == 0 || n > MaxRecordSize || off+frameHeaderSize+n > size {
			continue
		}
		if *budget -= n; *budget < 0 {
			return -1, true, nil
		}
		first, _, err := frameAt(f, off, size, &buf)
		if err != nil {
			return -1, false, err
		}
		if first == 0 {
			continue
		}
		next := off + first
		if next == size {
			return off, false, nil
		}
		second, _, err := frameAt(f, next, size, &buf)
		if err != nil {
			return -1, false, err
		}
		if second > 0 {
			return off, false, nil
		}
	}
	return -1, false, nil
}

// salvage rewrites the log at path with a fresh header and every intact
// record, in order, into a temporary file renamed over it (fsynced, and
// the directory too). It returns the records kept and what it skipped.
func salvage(path string) (kept uint64, skipped []SkippedRange, err error) {
	src, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return 0, nil, err
	}
	size := fi.Size()
	dir := filepath.Dir(path)
	dst, err := os.CreateTemp(dir, filepath.Base(path)+".fix-*")
	if err != nil {
		return 0, nil, err
	}
	defer func() {
		if err != nil {
			dst.Close()
			os.Remove(dst.Name())
		}
	}()
	if _, err = dst.Write(appendLogHeader(nil)); err != nil {
		return 0, nil, err
	}
	budget := int64(resyncBudget)
	var buf []byte
	off := int64(logHeaderSize)
	hdr := make([]byte, min(size, int64(logHeaderSize)))
	if _, err = src.ReadAt(hdr, 0); err != nil && err != io.EOF {
		return 0, nil, err
	}
	if reason := checkLogHeader(hdr); reason != "" {
		// A fresh header replaces it; the records after it are kept if
		// they are intact.
		skipped = append(skipped, SkippedRange{Offset: 0, Bytes: int64(len(hdr)), Reason: "header: " + reason})
	}
	for off < size {
		n, reason, ferr := frameAt(src, off, size, &buf)
		if ferr != nil {
			return 0, nil, ferr
		}
		if n > 0 {
			if _, err = dst.Write(appendFrame(nil, buf[:n-frameHeaderSize])); err != nil {
				return 0, nil, err
			}
			kept++
			off += n
			continue
		}
		next, exhausted, ferr := nextIntact(src, off, size, &budget)
		if ferr != nil {
			return 0, nil, ferr
		}
		if next < 0 {
			if exhausted {
				reason += fmt.Sprintf(" (no intact record found in the %d bytes checked after it)", resyncBudget)
			}
			skipped = append(skipped, SkippedRange{Offset: off, Bytes: size - off, Reason: reason + "; nothing intact after it"})
			break
		}
		skipped = append(skipped, SkippedRange{Offset: off, Bytes: next - off, Reason: reason})
		off = next
	}
	if kept == 0 && len(skipped) > 0 && skipped[0].Offset == 0 {
		// A bad header and not one intact record: perhaps not a Sluice
		// log at all. It is left as it is.
		err = fmt.Errorf("%s has a damaged header and no intact record: not rewritten", path)
		return 0, nil, err
	}
	if err = dst.Sync(); err != nil {
		return 0, nil, err
	}
	if err = dst.Close(); err != nil {
		return 0, nil, err
	}
	if err = os.Rename(dst.Name(), path); err != nil {
		return 0, nil, err
	}
	return kept, skipped, syncDir(dir)
}
