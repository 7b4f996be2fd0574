package replication

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// A node's Raft groups share one log file. Every node is a member of
// every group, so with one bbolt file per group a node's disk took each
// group's commits apart: two fdatasyncs per commit per group, and a disk
// whose fdatasync rate grows far less than its writers (docs/benchmarks.md,
// "One group or three"). Here every group's appends and votes go to one
// committer, which writes whatever the groups have queued while the last
// commit was syncing in one transaction: a node's disk pays for its groups
// what it pays for one. There is no timer: a lone write commits at once,
// and writes wait only for the commit in progress.

// errStoreKeyNotFound is what Raft expects of a stable store's missing key
// (it compares the text).
var errStoreKeyNotFound = errors.New("not found")

// sharedLog is the bbolt file of a node's groups and its committer.
type sharedLog struct {
	db     *bbolt.DB
	writes chan *logWrite
	done   chan struct{}
	wg     sync.WaitGroup
	// commits and written count transactions and the writes they held.
	commits, written atomic.Int64
}

// logWrite is one group's write, run in a shared transaction.
type logWrite struct {
	fn  func(tx *bbolt.Tx) error
	err chan error
}

// maxLogWritesPerCommit bounds one transaction; a burst past it commits in
// turns.
const maxLogWritesPerCommit = 256

// timeoutOpen bounds the wait for another process's lock on the file.
const timeoutOpen = time.Second

func openSharedLog(path string, noSync bool) (*sharedLog, error) {
	// NoFreelistSync: bbolt rebuilds the freelist on open instead of
	// writing it on every commit, which keeps each append small.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeoutOpen, NoFreelistSync: true, NoSync: noSync})
	if err != nil {
		return nil, err
	}
	s := &sharedLog{db: db, writes: make(chan *logWrite, maxLogWritesPerCommit), done: make(chan struct{})}
	s.wg.Add(1)
	go s.commit()
	return s, nil
}

// commit runs the writes as they come: the first one waiting, with every
// other already queued, in one transaction.
func (s *sharedLog) commit() {
	defer s.wg.Done()
	batch := make([]*logWrite, 0, maxLogWritesPerCommit)
	for {
		select {
		case w := <-s.writes:
			batch = append(batch[:0], w)
		case <-s.done:
			return
		}
	more:
		for len(batch) < maxLogWritesPerCommit {
			select {
			case w := <-s.writes:
				batch = append(batch, w)
			default:
				break more
			}
		}
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for _, w := range batch {
				if err := w.fn(tx); err != nil {
					return err
				}
			}
			return nil
		})
		s.commits.Add(1)
		s.written.Add(int64(len(batch)))
		if err == nil {
			for _, w := range batch {
				w.err <- nil
			}
			continue
		}
		// One write failed, and with it the transaction: each runs again
		// alone, so that only a failing one reports failure.
		for _, w := range batch {
			w.err <- s.db.Update(w.fn)
		}
	}
}

// write runs fn in a committed, synced transaction shared with the other
// groups' writes.
func (s *sharedLog) write(fn func(tx *bbolt.Tx) error) error {
	w := &logWrite{fn: fn, err: make(chan error, 1)}
	select {
	case s.writes <- w:
	case <-s.done:
		return bbolt.ErrDatabaseNotOpen
	}
	select {
	case err := <-w.err:
		return err
	case <-s.done:
		// Closing: the committer may have taken it; wait for its answer
		// unless it has stopped.
		select {
		case err := <-w.err:
			return err
		default:
			return bbolt.ErrDatabaseNotOpen
		}
	}
}

// close stops the committer and closes the file, once every group's node
// has stopped.
func (s *sharedLog) close() error {
	close(s.done)
	s.wg.Wait()
	return s.db.Close()
}

// group returns group g's log and stable store in the file.
func (s *sharedLog) group(g int) (*groupLog, error) {
	l := &groupLog{s: s, logs: []byte("g" + strconv.Itoa(g) + "-logs"), conf: []byte("g" + strconv.Itoa(g) + "-conf")}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(l.logs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(l.conf)
		return err
	})
	return l, err
}

// groupLog is one group's raft.LogStore and raft.StableStore in the shared
// file: its entries by big-endian index in one bucket, its term and vote in
// another.
type groupLog struct {
	s          *sharedLog
	logs, conf []byte
}

var (
	_ raft.LogStore    = (*groupLog)(nil)
	_ raft.StableStore = (*groupLog)(nil)
)

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// The entries are msgpack, as raft-boltdb writes them (raft's own codec
// for its types).
func encodeLog(l *raft.Log) ([]byte, error) {
	var buf bytes.Buffer
	err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(l)
	return buf.Bytes(), err
}

func (l *groupLog) edge(first bool) (uint64, error) {
	var idx uint64
	err := l.s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(l.logs).Cursor()
		var k []byte
		if first {
			k, _ = c.First()
		} else {
			k, _ = c.Last()
		}
		if k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

func (l *groupLog) FirstIndex() (uint64, error) { return l.edge(true) }
func (l *groupLog) LastIndex() (uint64, error)  { return l.edge(false) }

func (l *groupLog) GetLog(index uint64, out *raft.Log) error {
	return l.s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(l.logs).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return codec.NewDecoderBytes(v, &codec.MsgpackHandle{}).Decode(out)
	})
}

func (l *groupLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l *groupLog) StoreLogs(logs []*raft.Log) error {
	// Encoded before the commit, off the committer's goroutine.
	keys, vals := make([][]byte, len(logs)), make([][]byte, len(logs))
	for i, log := range logs {
		v, err := encodeLog(log)
		if err != nil {
			return err
		}
		keys[i], vals[i] = indexKey(log.Index), v
	}
	return l.s.write(func(tx *bbolt.Tx) error {
		b := tx.Bucket(l.logs)
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (l *groupLog) DeleteRange(lo, hi uint64) error {
	return l.s.write(func(tx *bbolt.Tx) error {
		b := tx.Bucket(l.logs)
		var doomed [][]byte // collected first: a cursor is not moved under deletes
		c := b.Cursor()
		for k, _ := c.Seek(indexKey(lo)); k != nil && binary.BigEndian.Uint64(k) <= hi; k, _ = c.Next() {
			doomed = append(doomed, bytes.Clone(k))
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func (l *groupLog) Set(key, val []byte) error {
	key, val = bytes.Clone(key), bytes.Clone(val)
	return l.s.write(func(tx *bbolt.Tx) error { return tx.Bucket(l.conf).Put(key, val) })
}

func (l *groupLog) Get(key []byte) ([]byte, error) {
	var val []byte
	err := l.s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(l.conf).Get(key)
		if v == nil {
			return errStoreKeyNotFound
		}
		val = bytes.Clone(v)
		return nil
	})
	return val, err
}

func (l *groupLog) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (l *groupLog) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errors.New("replication: stable store value of " + string(key) + " is not a uint64")
	}
	return binary.BigEndian.Uint64(v), nil
}
