package persistence

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
)

// ReplayResult describes a successful replay.
type ReplayResult struct {
	// Records is the number of records passed to fn.
	Records uint64
	// ValidBytes is the length of the log that holds them, header
	// included: the file's size after any torn tail was cut off.
	ValidBytes int64
	// TornBytes were cut off the end of the file: an interrupted final
	// write. Zero for a clean log.
	TornBytes int64
	// TornReason says what was wrong with the torn record, for the log
	// line that reports it.
	TornReason string
}

// ReplayLog reads every record of the log at path in order and calls fn with
// each payload; the slice is valid only during the call. fn may be nil.
//
// A bad final record with no valid record anywhere after it is the remains of
// a write that a crash interrupted: it is cut off (the file is truncated to
// the last good record and fsynced) and reported in TornBytes. Anything else
// that is bad stops replay with a *CorruptError naming the file and offset,
// and the file is left as it is: those records were acknowledged, so only an
// operator may give them up (CheckLog with fix). An error from fn stops
// replay and is returned as is.
func ReplayLog(path string, fn func(payload []byte) error) (ReplayResult, error) {
	return replayLog(path, fn, true)
}

// replayLog is ReplayLog; without tornOK a bad final record is corruption
// too. Only the newest file with records can end in a torn write: a log
// generation writes nothing until the one before it is closed whole.
func replayLog(path string, fn func(payload []byte) error, tornOK bool) (ReplayResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("replay append-only file: %w", err)
	}
	defer f.Close()
	s, err := scanFile(f, fn)
	res := ReplayResult{Records: s.records, ValidBytes: s.validEnd}
	if err != nil {
		return res, err
	}
	if s.badOff < 0 {
		return res, nil
	}
	if !s.torn {
		return res, &CorruptError{File: path, Offset: s.badOff, Reason: s.reason}
	}
	if !tornOK {
		return res, &CorruptError{File: path, Offset: s.badOff, Reason: s.reason +
			", at the end of a log generation followed by a newer one with records: an older generation is closed whole before the next writes, so this is damage, not a torn write"}
	}
	if err := truncateFile(path, s.validEnd); err != nil {
		return res, fmt.Errorf("cut torn tail off append-only file: %w", err)
	}
	res.TornBytes = s.size - s.validEnd
	res.TornReason = s.reason
	return res, nil
}

// CheckReport is CheckLog's finding.
type CheckReport struct {
	File string
	// Size is the file's length before any fix.
	Size int64
	// Records is the number of good records before the first bad one.
	Records uint64
	// ValidBytes is the length up to the end of the last good record,
	// header included (0 if the header is bad).
	ValidBytes int64
	// BadOffset is where the first bad record starts; -1 if none.
	BadOffset int64
	// Reason says what is wrong at BadOffset.
	Reason string
	// Torn is true if the damage looks like an interrupted final write,
	// which ReplayLog cuts off by itself.
	Torn bool
	// Truncated is true if fix truncated the file at BadOffset (a torn
	// end).
	Truncated bool
	// Salvaged is true if fix rewrote the file keeping every intact
	// record: Kept of them, all but the Skipped stretches.
	Salvaged bool
	Kept     uint64
	Skipped  []SkippedRange
}

// OK reports whether the log is entirely valid.
func (r CheckReport) OK() bool { return r.BadOffset < 0 }

// String renders the report for an operator.
func (r CheckReport) String() string {
	var b strings.Builder
	if r.OK() {
		fmt.Fprintf(&b, "%s: OK: %d records, %d bytes\n", r.File, r.Records, r.Size)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %d good records in the first %d of %d bytes\n", r.File, r.Records, r.ValidBytes, r.Size)
	fmt.Fprintf(&b, "first bad record at offset %d: %s\n", r.BadOffset, r.Reason)
	lost := r.Size - r.ValidBytes
	switch {
	case r.BadOffset == 0:
		fmt.Fprintf(&b, "the header is damaged; --fix writes a new header and keeps every intact record after it\n")
	case r.Torn:
		fmt.Fprintf(&b, "the end is damaged (%d bytes): in the newest log generation with records this is a torn final write, which the server cuts off by itself at start-up; "+
			"in an older one it is damage the server refuses, and --fix cuts it off (keep a copy of the file first)\n", lost)
	default:
		fmt.Fprintf(&b, "this is corruption before the end of the file; --fix keeps every intact record, skipping only the damaged stretches (keep a copy of the file first)\n")
	}
	if r.Truncated {
		fmt.Fprintf(&b, "truncated to %d bytes (%d bytes removed)\n", r.ValidBytes, lost)
	}
	if r.Salvaged {
		fmt.Fprintf(&b, "rewritten with %d intact records (%d before the first damage, %d after it); skipped:\n", r.Kept, r.Records, r.Kept-r.Records)
		for _, sk := range r.Skipped {
			fmt.Fprintf(&b, "  %d bytes at offset %d: %s\n", sk.Bytes, sk.Offset, sk.Reason)
		}
	}
	return b.String()
}

// CheckLog validates the log at path, like redis-check-aof: it counts the
// good records and finds the first bad one. With fix it cuts off a torn end,
// and otherwise rewrites the file with every intact record (a damaged header
// replaced by a fresh one), reporting each stretch it skipped. The returned error is for I/O failures and refused
// fixes; a damaged log is described by the report.
func CheckLog(path string, fix bool) (CheckReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return CheckReport{File: path, BadOffset: -1}, fmt.Errorf("check append-only file: %w", err)
	}
	s, err := scanFile(f, nil)
	f.Close()
	r := CheckReport{
		File:       path,
		Size:       s.size,
		Records:    s.records,
		ValidBytes: s.validEnd,
		BadOffset:  s.badOff,
		Reason:     s.reason,
		Torn:       s.torn,
	}
	if err != nil {
		return r, fmt.Errorf("check append-only file: %w", err)
	}
	if !fix || r.OK() {
		return r, nil
	}
	if r.Torn && r.BadOffset > 0 {
		if err := truncateFile(path, r.ValidBytes); err != nil {
			return r, fmt.Errorf("repair append-only file: %w", err)
		}
		r.Truncated = true
		return r, nil
	}
	kept, skipped, err := salvage(path)
	if err != nil {
		return r, fmt.Errorf("repair append-only file: %w", err)
	}
	r.Salvaged, r.Kept, r.Skipped = true, kept, skipped
	return r, nil
}

func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

type scanResult struct {
	size     int64
	records  uint64
	validEnd int64 // end of the last good record; 0 if the header is bad
	badOff   int64 // start of the first bad record; -1 if none
	reason   string
	torn     bool
}

// scanFile scans the log file f; see scanLog.
func scanFile(f *os.File, fn func([]byte) error) (scanResult, error) {
	fi, err := f.Stat()
	if err != nil {
		return scanResult{badOff: -1}, err
	}
	return scanLog(f, fi.Size(), fn)
}

// scanLog reads the size bytes of a log from the start, passing each good
// record to fn (if not nil), and stops at the first bad one. It returns an
// error only for I/O failures and fn's errors; damage is described in the
// result.
func scanLog(f io.ReaderAt, size int64, fn func([]byte) error) (scanResult, error) {
	s := scanResult{badOff: -1, size: size}
	// Reading exactly the size seen at the start, so a length is always
	// checked against what remains before anything is allocated for it.
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, s.size), 1<<20)

	hdr := make([]byte, min(s.size, int64(logHeaderSize)))
	if _, err := io.ReadFull(br, hdr); err != nil {
		return s, err
	}
	if reason := checkLogHeader(hdr); reason != "" {
		s.badOff, s.reason = 0, reason
		return s, nil
	}
	off := int64(logHeaderSize)
	s.validEnd = off
	var fh [frameHeaderSize]byte
	var buf []byte
	for off < s.size {
		left := s.size - off
		if left < frameHeaderSize {
			s.badOff, s.reason = off, fmt.Sprintf("short record header: %d of %d bytes", left, frameHeaderSize)
			break
		}
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			return s, err
		}
		n, sum := le.Uint32(fh[:4]), le.Uint32(fh[4:])
		switch {
		case n == 0:
			s.reason = "zero record length"
		case n > MaxRecordSize:
			s.reason = fmt.Sprintf("record length %d exceeds the %d-byte limit", n, MaxRecordSize)
		case int64(n) > left-frameHeaderSize:
			s.reason = fmt.Sprintf("record length %d runs past the end of the file (%d bytes left)", n, left-frameHeaderSize)
		}
		if s.reason != "" {
			s.badOff = off
			break
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return s, err
		}
		if crc32.Checksum(buf, castagnoli) != sum {
			s.badOff, s.reason = off, "checksum mismatch"
			break
		}
		if fn != nil {
			if err := fn(buf); err != nil {
				return s, err
			}
		}
		s.records++
		off += frameHeaderSize + int64(n)
		s.validEnd = off
	}
	if s.badOff > 0 {
		found, err := validRecordAfter(f, s.badOff, s.size)
		if err != nil {
			return s, err
		}
		s.torn = !found
	}
	return s, nil
}

// resyncBudget bounds the payload bytes validRecordAfter checksums. Real
// tails are one partial record plus zeros, which cost almost nothing; the
// budget only stops a crafted tail from making start-up quadratic.
const resyncBudget = 1 << 30

// validRecordAfter reports whether a valid record starts at any offset after
// bad. If none does, the bad record is a torn final write: a crash cut the
// last write short, or the file system extended the file with zeros or junk
// that was never written. If one does, the damage is in the middle of the log
// and cutting it off would silently lose acknowledged records. When in
// doubt (the budget runs out) it says a record was found: refusing to start
// is recoverable, silent loss is not.
func validRecordAfter(f io.ReaderAt, bad, size int64) (bool, error) {
	const window = 1 << 20
	chunk := make([]byte, min(window+frameHeaderSize-1, size-bad))
	var tmp []byte
	budget := int64(resyncBudget)
	for base := bad + 1; base+frameHeaderSize <= size; base += window {
		c := chunk[:min(int64(len(chunk)), size-base)]
		if _, err := f.ReadAt(c, base); err != nil && err != io.EOF {
			return false, err
		}
		for i := 0; i < window && i+frameHeaderSize <= len(c); i++ {
			n := int64(le.Uint32(c[i:]))
			start := base + int64(i) + frameHeaderSize
			if n == 0 || n > MaxRecordSize || start+n > size {
				continue
			}
			if budget -= n; budget < 0 {
				return true, nil
			}
			var p []byte
			if end := i + frameHeaderSize + int(n); end <= len(c) {
				p = c[i+frameHeaderSize : end]
			} else {
				if cap(tmp) < int(n) {
					tmp = make([]byte, n)
				}
				p = tmp[:n]
				if _, err := f.ReadAt(p, start); err != nil && err != io.EOF {
					return false, err
				}
			}
			if crc32.Checksum(p, castagnoli) == le.Uint32(c[i+4:]) {
				return true, nil
			}
		}
	}
	return false, nil
}
