package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// MaxRecordSize bounds one log record's payload and one snapshot record's
// body. Readers reject larger lengths before allocating, so a corrupt length
// field can never make them allocate gigabytes.
const MaxRecordSize = 64 << 20

// MaxMetaSize bounds SnapshotHeader.Meta.
const MaxMetaSize = 1 << 20

const (
	logMagic   = "SLUICEAOF"
	logVersion = 1
	// logHeaderSize is magic, version and 16 reserved bytes. Version 1
	// requires the reserved bytes to be zero; a format that gives them a
	// meaning bumps the version, so old builds refuse it instead of
	// misreading it.
	logHeaderSize = len(logMagic) + 2 + 16

	// frameHeaderSize is a record's uint32 length and uint32 CRC32C.
	frameHeaderSize = 8
)

// castagnoli is CRC32C, which modern CPUs compute in hardware. It is
// read-only after package initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// Sentinel errors. The server maps errors.Is(err, ErrPersistence) to a
// Redis-style "-MISCONF Errors writing to the AOF file: <cause>" reply.
var (
	// ErrPersistence is returned (wrapping the cause) by Append and
	// WaitDurable while the log cannot write or fsync.
	ErrPersistence = errors.New("errors writing to the append-only file")
	// ErrClosed is returned by a Log after Close.
	ErrClosed = errors.New("append-only file is closed")
	// ErrRecordSize rejects an empty record or one over MaxRecordSize.
	ErrRecordSize = errors.New("record size out of range")
	// ErrCorruptSnapshot wraps every snapshot decoding failure:
	// truncation, bad checksums, bad lengths, unknown versions.
	ErrCorruptSnapshot = errors.New("corrupt snapshot")
)

// CorruptError reports a log that is damaged somewhere other than its final
// record, so replay cannot continue without losing acknowledged records. The
// operator decides: CheckLog with fix keeps every intact record.
type CorruptError struct {
	File   string
	Offset int64 // the first bad record; 0 for a bad header
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt append-only file %s at offset %d: %s; "+
		"copy the file, then run `sluice-server --check-log %s --fix`: it keeps every intact record "+
		"and reports the damaged stretches it skips", e.File, e.Offset, e.Reason, e.File)
}

func appendLogHeader(b []byte) []byte {
	b = append(b, logMagic...)
	b = le.AppendUint16(b, logVersion)
	return append(b, make([]byte, 16)...)
}

// checkLogHeader returns why h is not a valid log header, or "".
func checkLogHeader(h []byte) string {
	if len(h) < logHeaderSize {
		return fmt.Sprintf("short header: %d of %d bytes", len(h), logHeaderSize)
	}
	if string(h[:len(logMagic)]) != logMagic {
		return fmt.Sprintf("bad magic %q (not a Sluice append-only file)", h[:len(logMagic)])
	}
	if v := le.Uint16(h[len(logMagic):]); v != logVersion {
		return fmt.Sprintf("unsupported format version %d (this build reads %d)", v, logVersion)
	}
	for _, c := range h[len(logMagic)+2 : logHeaderSize] {
		if c != 0 {
			return "reserved header bytes are not zero"
		}
	}
	return ""
}

// appendFrame appends one log record: length, CRC32C(payload), payload.
func appendFrame(b, payload []byte) []byte {
	b = le.AppendUint32(b, uint32(len(payload)))
	b = le.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

func checkRecordSize(n int) error {
	if n == 0 || n > MaxRecordSize {
		return fmt.Errorf("%w: %d bytes (want 1..%d)", ErrRecordSize, n, MaxRecordSize)
	}
	return nil
}
