package persistence

import (
	"fmt"
	"strconv"
	"strings"
)

// FsyncPolicy is Redis's appendfsync: when the Log asks the OS to put written
// records on stable storage.
type FsyncPolicy int

const (
	// FsyncEverySec fsyncs in the background once a second when something
	// was written, so a crash of the machine loses at most about a second of
	// records. A crash of the process alone loses nothing already written.
	// It is the default, as in Redis.
	FsyncEverySec FsyncPolicy = iota
	// FsyncAlways makes WaitDurable return only after an fsync that covers
	// the record. One fsync covers every record appended while the previous
	// one ran (group commit).
	FsyncAlways
	// FsyncNo leaves flushing to the OS (typically within 30 s on Linux).
	// Close still fsyncs.
	FsyncNo
)

// ParseFsyncPolicy parses an appendfsync value: "always", "everysec" or "no"
// (case-insensitive, as Redis's config is).
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch strings.ToLower(s) {
	case "everysec":
		return FsyncEverySec, nil
	case "always":
		return FsyncAlways, nil
	case "no":
		return FsyncNo, nil
	}
	return 0, fmt.Errorf("invalid appendfsync %q: want always, everysec or no", s)
}

// String returns the appendfsync spelling of p.
func (p FsyncPolicy) String() string {
	switch p {
	case FsyncEverySec:
		return "everysec"
	case FsyncAlways:
		return "always"
	case FsyncNo:
		return "no"
	}
	return "FsyncPolicy(" + strconv.Itoa(int(p)) + ")"
}
