package shard

import (
	"sync"
	"testing"
	"time"
)

// countTask adds one to a counter that only tasks touch: with -race, any
// two tasks running at once on the shard are a reported race, and a lost
// increment a failed count.
type countTask struct {
	n    *int
	done *sync.WaitGroup
}

func (c countTask) Run(*Table) { *c.n++ }
func (c countTask) Finished()  { c.done.Done() }

// holdTask keeps the shard until released, as a multi-shard hold does.
type holdTask struct{ held, release chan struct{} }

func (h holdTask) Run(*Table) {
	close(h.held)
	<-h.release
}

// TestTryRunIsExclusive: senders running their tasks themselves when the
// shard is idle and submitting otherwise, against the owner's own queue,
// never run two tasks at once and lose none; while a task holds the shard
// TryRun declines; after Close it declines.
func TestTryRunIsExclusive(t *testing.T) {
	s := New(0)
	var n int
	var done sync.WaitGroup
	const senders, each = 8, 2000
	inline := make([]int, senders)
	done.Add(senders * each)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				task := countTask{&n, &done}
				if i%3 == 0 {
					s.Submit(task)
				} else if s.TryRun(task) {
					inline[g]++
				} else {
					s.Submit(task)
				}
			}
		}()
	}
	wg.Wait()
	done.Wait()
	var ran int
	s.Submit(taskFunc(func() { ran = n }))
	hold := holdTask{make(chan struct{}), make(chan struct{})}
	s.Submit(hold)
	<-hold.held
	if s.TryRun(taskFunc(func() { t.Error("ran while the shard was held") })) {
		t.Fatal("TryRun ran while a task held the shard")
	}
	close(hold.release)
	var total int
	for _, k := range inline {
		total += k
	}
	if ran != senders*each {
		t.Fatalf("%d increments, want %d", ran, senders*each)
	}
	if total == 0 {
		t.Fatal("no task ran inline: the test proves nothing")
	}
	t.Logf("%d of %d tasks ran on their senders", total, senders*each)
	s.Close()
	if s.TryRun(taskFunc(func() { t.Error("ran after Close") })) {
		t.Fatal("TryRun ran after Close")
	}
}

type taskFunc func()

func (f taskFunc) Run(*Table) { f() }

// TestTryRunAfterAPanic: a task that panics on the caller's goroutine (a
// connection recovers and goes on) leaves the shard unlocked: the owner and
// later callers still run tasks.
func TestTryRunAfterAPanic(t *testing.T) {
	s := New(0) // closed at the end only: Close would wait for a stuck owner
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the task's panic did not reach the caller")
			}
		}()
		s.TryRun(taskFunc(func() { panic("a bug") }))
	}()
	done := make(chan struct{})
	s.Submit(taskFunc(func() { close(done) }))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner did not run a task after the panic: the shard stayed locked")
	}
	// The owner lets go of the table just after the task that closed done.
	deadline := time.Now().Add(5 * time.Second)
	for !s.TryRun(taskFunc(func() {})) {
		if time.Now().After(deadline) {
			t.Fatal("TryRun refused on an idle shard after the panic")
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
}
