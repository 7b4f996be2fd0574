// Package shard owns Sluice's key space storage. A Shard is one goroutine
// that owns one Table; every read and write of that table runs as a Task,
// one at a time: sent to that goroutine, or, when the shard is idle, run
// by the sender itself (TryRun), which saves two goroutine switches per
// request; a mutex taken per task makes the two exclusive, so the table
// itself needs no locks. Keys are
// striped over shards by their xxhash (Hash), and the table keeps keys and
// state in pointer-free pages so the garbage collector has nothing to scan.
package shard

import (
	"sync"
	"sync/atomic"
)

// Task is work that runs on a shard's owner goroutine with exclusive access
// to its table. Run must not keep t after it returns.
type Task interface {
	Run(t *Table)
}

// Finisher is a Task told when the shard's published figures (Keys,
// MemoryUsage) include its work, so that whoever waits for it sees them
// current: a DBSIZE right after a write counts the write.
type Finisher interface {
	Finished()
}

// Shard is one owner goroutine and its table.
type Shard struct {
	id    int
	inbox chan Task
	table *Table
	done  sync.WaitGroup
	// running is held by whoever runs a task on the table: the owner, for
	// each task it receives, or a sender in TryRun. closed is set under it
	// once the owner has stopped.
	running sync.Mutex
	closed  bool

	// memory mirrors table.MemoryUsage() for readers on other goroutines
	// (INFO, maxmemory checks); only the owner stores it.
	memory atomic.Int64
	keys   atomic.Int64
}

// New starts a shard's owner goroutine.
func New(id int) *Shard {
	s := &Shard{id: id, inbox: make(chan Task, 256), table: NewTable()}
	s.publish()
	s.done.Add(1)
	go s.loop()
	return s
}

// ID is the shard's index.
func (s *Shard) ID() int { return s.id }

// Submit queues a task for the owner. It blocks while the inbox is full.
func (s *Shard) Submit(t Task) { s.inbox <- t }

// TryRun runs t on the calling goroutine if nothing else is running on
// the shard, and reports whether it did; if not, the caller submits it.
// A task that holds the shard while it waits for something (a multi-shard
// hold) keeps TryRun out all that time, as it keeps the inbox waiting.
func (s *Shard) TryRun(t Task) bool {
	if !s.running.TryLock() {
		return false
	}
	if s.closed {
		s.running.Unlock()
		return false
	}
	func() {
		// Unlocked even when t panics: the caller's goroutine (a
		// connection) may recover and go on, and a shard left locked would
		// hang its owner and every command after it for good.
		defer s.running.Unlock()
		t.Run(s.table)
		s.publish()
	}()
	if f, ok := t.(Finisher); ok {
		f.Finished()
	}
	return true
}

// Close stops the owner after it has run every task already submitted, and
// waits for it. No task may be submitted after Close.
func (s *Shard) Close() {
	close(s.inbox)
	s.done.Wait()
}

// MemoryUsage is the table's memory as of the last task that ran.
func (s *Shard) MemoryUsage() int64 { return s.memory.Load() }

// Keys is the table's record count (including expired, unswept ones) as of
// the last task that ran.
func (s *Shard) Keys() int64 { return s.keys.Load() }

func (s *Shard) loop() {
	defer s.done.Done()
	for task := range s.inbox {
		s.running.Lock()
		task.Run(s.table)
		s.publish()
		s.running.Unlock()
		if f, ok := task.(Finisher); ok {
			f.Finished()
		}
	}
	s.running.Lock()
	s.closed = true
	s.running.Unlock()
}

func (s *Shard) publish() {
	s.memory.Store(int64(s.table.MemoryUsage()))
	s.keys.Store(int64(s.table.count))
}
