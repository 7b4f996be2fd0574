// Package persistence owns Sluice's on-disk formats and standalone
// durability: the append-only log (framed, CRC32C-checked records written by a
// background goroutine under an appendfsync policy, with group commit), its
// replay and repair, and the snapshot codec that cluster mode reuses for Raft
// snapshots.
//
// A Log is safe for concurrent use: any number of goroutines may Append and
// WaitDurable at once, and one writer goroutine (plus, for everysec, one
// fsync goroutine) owned by the Log does all file I/O; Close waits for both.
// A SnapshotEncoder is not safe for concurrent use. The package-level
// functions hold no shared state. See DESIGN.md for the formats and the
// failure handling.
package persistence
