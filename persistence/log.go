package persistence

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// LogConfig configures a Log. The zero value is usable.
type LogConfig struct {
	// Fsync is the appendfsync policy. Default FsyncEverySec.
	Fsync FsyncPolicy
	// Logger receives failures and recoveries. Nil discards.
	Logger *slog.Logger
	// FsyncTimes, when set, records how long each fsync of the log took
	// (the writer and the everysec fsyncer observe it after the call).
	// Share one across a Durable's generations. Default none.
	FsyncTimes *FsyncTimes
	// after, when set, holds the log's writes back until it opens: a new
	// generation writes nothing before the one it follows is closed (all
	// of it written and fsynced). Records are taken meanwhile. If the
	// previous generation failed to close, this one never writes: it
	// refuses records (MISCONF) and fails what it holds, so that no newer
	// file ever has records after an older one lost some.
	after *logGate

	// Test hooks; the zero values mean the real thing.
	openFile    func(name string, flag int, perm os.FileMode) (file, error) // default os.OpenFile
	syncEvery   time.Duration                                               // everysec period; default 1s
	retryMin    time.Duration                                               // first retry after a failure; default 100ms
	retryMax    time.Duration                                               // retry backoff cap; default 1s
	maxBuffered int64                                                       // Append blocks past this; default 64 MiB
}

// logGate is a new log generation's wait for the previous one's Close.
type logGate struct {
	done chan struct{} // closed once err is set
	err  error         // the previous generation's Close
}

func newLogGate() *logGate { return &logGate{done: make(chan struct{})} }

// open lets the waiting log write, or, with a non-nil err (the previous
// generation's failed Close), fail for good.
func (g *logGate) open(err error) {
	g.err = err
	close(g.done)
}

// file is what a Log needs from its open file. It exists so tests can inject
// write and fsync failures (ENOSPC, EIO) without a full disk.
type file interface {
	Write(p []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
}

var _ file = (*os.File)(nil)

func openOSFile(name string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // not f: a nil *os.File in an interface is not nil
	}
	return f, nil
}

// LogStats is a point-in-time view of a Log, for INFO persistence.
type LogStats struct {
	Policy FsyncPolicy
	// Size is the file's length as written, header included.
	Size int64
	// Records counts the records written to the OS through this Log since
	// it was opened (records already in the file are not counted).
	Records uint64
	// Pending is bytes appended but not yet written to the OS.
	Pending int64
	// LastFsync is when the last fsync succeeded (opening the log fsyncs).
	LastFsync time.Time
	// FsyncLag is the age of the oldest record not yet fsynced; 0 if none.
	// Always 0 under FsyncNo, where the OS decides.
	FsyncLag time.Duration
	// Fsyncs counts successful fsyncs; with group commit it grows much
	// slower than Records.
	Fsyncs      uint64
	FsyncErrors uint64
	WriteErrors uint64
	// LastError is the text of the most recent write, fsync or truncate
	// failure, kept after recovery for diagnosis.
	LastError string
	// Failed is true while Append refuses records with ErrPersistence.
	Failed bool
}

// Log is an append-only file of records. Safe for concurrent use.
//
// Append only copies the record into an in-memory buffer. A writer goroutine
// writes out whatever has accumulated (one write(2) per 256 KiB chunk) and,
// under FsyncAlways, follows each write with one fsync that covers the whole
// batch (group commit). Under FsyncEverySec a second goroutine fsyncs once a
// second (sooner once 16 MiB are unsynced), so a slow fsync never holds up
// writes.
//
// The buffer keeps every byte until it is durable (fsynced; under FsyncNo,
// written). On a write or fsync failure the log stops accepting records
// (Append returns ErrPersistence) and the writer retries with backoff: it
// truncates the file back to its last durable length, rewrites everything
// after it from the buffer and fsyncs. Rewriting is the only way to be sure:
// after a failed fsync Linux may already have dropped the dirty pages. And
// truncating first ensures a partial write is never followed by a second
// copy of the same records.
//
// If the buffer reaches 64 MiB (the disk cannot keep up, or an fsync hangs),
// Append blocks until the writer catches up rather than letting memory grow
// without bound, much as Redis blocks on a slow write(2).
type Log struct {
	path        string
	f           file
	policy      FsyncPolicy
	logger      *slog.Logger
	fsyncTimes  *FsyncTimes
	syncEvery   time.Duration
	retryMin    time.Duration
	retryMax    time.Duration
	maxBuffered int64
	// after is LogConfig.after, read by the writer alone; stuck: the
	// previous generation failed to close, so this log never writes.
	after *logGate
	stuck bool

	wake       chan struct{} // cap 1: pending became non-empty, or the fsyncer failed
	syncNow    chan struct{} // cap 1: everysec has syncAfter bytes unsynced
	closeCh    chan struct{} // closed by Close
	writerDone chan struct{}
	syncerDone chan struct{} // nil unless FsyncEverySec

	mu   sync.Mutex
	cond sync.Cond // on mu; broadcast when written/synced advance, on failure, when syncing ends, on close

	// q holds the file's bytes from the durable point (syncedSize; under
	// FsyncNo writtenSize) to the last append (q.end).
	q            byteQueue
	taken        int64     // the writer has taken the bytes up to here (writtenSize <= taken <= q.end)
	pendingSince time.Time // when the first record not yet taken by the writer was appended
	takenSince   time.Time // pendingSince of the batch the writer is writing
	appendSeq    uint64    // last sequence number handed out
	marks        []mark    // written, unsynced batches, for FsyncLag

	writtenSeq  uint64
	writtenSize int64
	syncedSeq   uint64
	syncedSize  int64
	syncing     bool // the everysec fsyncer is in Sync; repair must not truncate under it
	waiters     int  // WaitDurable callers waiting: the writer does not coalesce

	err      error // sticky while failed: ErrPersistence wrapping the latest cause
	closing  bool
	closed   bool
	closeErr error

	lastFsync   time.Time
	fsyncs      uint64
	fsyncErrors uint64
	writeErrors uint64
	lastError   string
	lastErrLog  time.Time

	pieces [][]byte // the writer's scratch
}

// mark is where a written, unsynced batch ends and when its first record was
// appended.
type mark struct {
	endSize int64
	since   time.Time
}

// target is a point an fsync makes durable.
type target struct {
	seq  uint64
	size int64
}

const (
	defaultMaxBuffered = 64 << 20
	// syncAfter makes everysec fsync early once this much is unsynced, so
	// under heavy load the buffer (which holds unsynced bytes for repair)
	// never has to wait a whole second to be freed. One fsync per 16 MiB
	// costs the disk little, and only shortens the window of loss.
	syncAfter   = 16 << 20
	errLogEvery = 30 * time.Second
)

// CreateLog creates a new, empty log at path. It fails if path exists.
//
// The header is written to a temporary file, fsynced and hard-linked into
// place, so a crash during creation never leaves a log with a partial header
// (which replay would have to call corrupt).
func CreateLog(path string, cfg LogConfig) (*Log, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, fmt.Errorf("create append-only file: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create append-only file: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	_, err = tmp.Write(appendLogHeader(nil))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("create append-only file: %w", err)
	}
	// Link, unlike rename, fails if path exists: an existing log is never
	// replaced by an empty one.
	if err := os.Link(tmpName, path); err != nil {
		return nil, fmt.Errorf("create append-only file: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("create append-only file: %w", err)
	}
	return openLog(path, cfg)
}

// OpenLog opens an existing log for appending. The caller must have replayed
// it with ReplayLog first: OpenLog checks only the header, and appends after
// whatever the file holds.
func OpenLog(path string, cfg LogConfig) (*Log, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, fmt.Errorf("open append-only file: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open append-only file: %w", err)
	}
	h := make([]byte, logHeaderSize)
	n, err := io.ReadFull(f, h)
	f.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("open append-only file: %w", err)
	}
	if reason := checkLogHeader(h[:n]); reason != "" {
		return nil, &CorruptError{File: path, Offset: 0, Reason: reason}
	}
	return openLog(path, cfg)
}

func checkConfig(cfg LogConfig) error {
	if cfg.Fsync < FsyncEverySec || cfg.Fsync > FsyncNo {
		return fmt.Errorf("unknown fsync policy %v", cfg.Fsync)
	}
	return nil
}

func openLog(path string, cfg LogConfig) (*Log, error) {
	open := cfg.openFile
	if open == nil {
		open = openOSFile
	}
	// O_APPEND: after a failed write is truncated away, the next write must
	// land at the new end, not at the old file offset (which would leave a
	// hole of zeros in the middle of the log).
	f, err := open(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("open append-only file: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		// What replay read may still be only in the page cache (a crash of
		// the process under everysec); fsync it so syncedSize is true.
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open append-only file: %w", err)
	}
	l := &Log{
		path:        path,
		f:           f,
		policy:      cfg.Fsync,
		logger:      cfg.Logger,
		fsyncTimes:  cfg.FsyncTimes,
		syncEvery:   cfg.syncEvery,
		retryMin:    cfg.retryMin,
		retryMax:    cfg.retryMax,
		maxBuffered: cfg.maxBuffered,
		after:       cfg.after,
		wake:        make(chan struct{}, 1),
		syncNow:     make(chan struct{}, 1),
		closeCh:     make(chan struct{}),
		writerDone:  make(chan struct{}),
		writtenSize: fi.Size(),
		syncedSize:  fi.Size(),
		lastFsync:   time.Now(),
	}
	l.q.reset(fi.Size())
	l.taken = fi.Size()
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if l.syncEvery <= 0 {
		l.syncEvery = time.Second
	}
	if l.retryMin <= 0 {
		l.retryMin = 100 * time.Millisecond
	}
	if l.retryMax < l.retryMin {
		l.retryMax = max(time.Second, l.retryMin)
	}
	if l.maxBuffered <= 0 {
		l.maxBuffered = defaultMaxBuffered
	}
	l.cond.L = &l.mu
	if l.policy == FsyncEverySec {
		l.syncerDone = make(chan struct{}) // before the writer starts: it reads the field
		go l.syncLoop()
	}
	go l.writeLoop()
	return l, nil
}

// Append copies payload into the log's buffer and returns its sequence
// number (1, 2, 3, ... per Log). It makes no system call; call WaitDurable to
// wait for the write (and, under FsyncAlways, the fsync). While the log is
// failing it returns ErrPersistence wrapping the cause, and the record is
// not taken. It blocks only if the buffer is full.
func (l *Log) Append(payload []byte) (uint64, error) {
	if err := checkRecordSize(len(payload)); err != nil {
		return 0, err
	}
	var h [frameHeaderSize]byte
	le.PutUint32(h[:], uint32(len(payload)))
	le.PutUint32(h[4:], crc32.Checksum(payload, castagnoli))
	n := int64(len(h) + len(payload))

	l.mu.Lock()
	for {
		if l.err != nil {
			err := l.err
			l.mu.Unlock()
			return 0, err
		}
		if l.closing {
			l.mu.Unlock()
			return 0, ErrClosed
		}
		buffered := l.q.end - l.durableSizeLocked()
		if buffered == 0 || buffered+n <= l.maxBuffered {
			break
		}
		l.cond.Wait()
	}
	wasEmpty := l.q.end == l.taken
	if wasEmpty {
		l.pendingSince = time.Now()
	}
	l.q.append(h[:])
	l.q.append(payload)
	l.appendSeq++
	seq := l.appendSeq
	l.mu.Unlock()
	if wasEmpty {
		// Only the first record of a batch wakes the writer; the rest ride
		// along. The channel has room for one token, so a wake-up sent
		// while the writer is busy is not lost.
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return seq, nil
}

// durableSizeLocked is the file length the buffer no longer needs to hold.
func (l *Log) durableSizeLocked() int64 {
	if l.policy == FsyncNo {
		return l.writtenSize
	}
	return l.syncedSize
}

// WaitDurable blocks until record seq has been written to the OS and, under
// FsyncAlways, fsynced. It returns the sticky ErrPersistence if the log is
// failing and seq is not yet durable; such a record is still buffered and
// becomes durable if the log recovers, so for the client the outcome is
// unknown, not refused.
func (l *Log) WaitDurable(seq uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq > l.appendSeq {
		return fmt.Errorf("wait for record %d: only %d records appended", seq, l.appendSeq)
	}
	l.waiters++
	defer func() { l.waiters-- }()
	if !l.durableLocked(seq) {
		// A writer letting appends pile up stops waiting.
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	for {
		if l.durableLocked(seq) {
			return nil
		}
		if l.err != nil {
			return l.err
		}
		if l.closed {
			if l.closeErr != nil {
				return l.closeErr
			}
			return ErrClosed
		}
		l.cond.Wait()
	}
}

func (l *Log) durableLocked(seq uint64) bool {
	if l.policy == FsyncAlways {
		return seq <= l.syncedSeq
	}
	return seq <= l.writtenSeq
}

// Err returns ErrPersistence wrapping the cause while the log is failing
// (Append would refuse a record), ErrClosed once Close has begun, and nil
// otherwise. The engine checks it to refuse writes up front, as Redis's
// MISCONF does.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.closing {
		return ErrClosed
	}
	return nil
}

// Size returns the file's length as written, header included.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writtenSize
}

// Stats returns a snapshot of the log's counters.
func (l *Log) Stats() LogStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LogStats{
		Policy:      l.policy,
		Size:        l.writtenSize,
		Records:     l.writtenSeq,
		Pending:     l.q.end - l.writtenSize,
		LastFsync:   l.lastFsync,
		Fsyncs:      l.fsyncs,
		FsyncErrors: l.fsyncErrors,
		WriteErrors: l.writeErrors,
		LastError:   l.lastError,
		Failed:      l.err != nil,
	}
	if l.policy != FsyncNo {
		var oldest time.Time
		switch {
		case len(l.marks) > 0:
			oldest = l.marks[0].since
		case !l.takenSince.IsZero():
			oldest = l.takenSince
		default:
			oldest = l.pendingSince
		}
		if !oldest.IsZero() {
			s.FsyncLag = time.Since(oldest)
		}
	}
	return s
}

// Close writes and fsyncs every record appended, stops the goroutines and
// closes the file. If the log is failing, Close makes one more attempt and
// returns ErrPersistence if that fails too.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closing = true
	close(l.closeCh)
	l.cond.Broadcast() // an Append blocked on a full buffer returns ErrClosed
	l.mu.Unlock()

	<-l.writerDone
	if l.syncerDone != nil {
		<-l.syncerDone
	}
	l.mu.Lock()
	err := l.closeErr
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close append-only file: %w", cerr)
	}
	return err
}

// writeLoop is the only goroutine that writes or truncates the file.
// Under everysec and no, the writer lets appends pile up for up to
// coalesceDelay (or coalesceBytes) before a write while nobody waits for
// it: a busy server then makes a few hundred large writes a second instead
// of one small write per append. Once a reply waits for a write
// (WaitDurable), and always, it writes at once: everything appended by
// then goes in that write, and what comes meanwhile in the next.
const (
	coalesceDelay = time.Millisecond
	coalesceBytes = 256 << 10
)

func (l *Log) writeLoop() {
	defer close(l.writerDone)
	backoff := l.retryMin
	coalesce := time.NewTimer(time.Hour)
	coalesce.Stop()
	defer coalesce.Stop()
	waited := false
	if g := l.after; g != nil {
		select {
		case <-g.done:
		case <-l.closeCh:
			<-g.done
		}
		if g.err != nil {
			l.mu.Lock()
			l.stuck = true
			l.lastError = g.err.Error()
			l.err = fmt.Errorf("%w: the previous log generation could not be closed, so its last records are lost; this one writes nothing after them (restart the server): %w", ErrPersistence, g.err)
			l.cond.Broadcast()
			l.mu.Unlock()
		}
	}
	for {
		l.mu.Lock()
		switch {
		case l.err != nil && l.stuck:
			l.mu.Unlock()
			<-l.closeCh
			l.mu.Lock()
			l.closeErr = l.err
			l.mu.Unlock()
			return

		case l.err != nil:
			closing := l.closing
			l.mu.Unlock()
			if !closing {
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-l.closeCh:
					t.Stop()
				}
			}
			if l.repair() {
				backoff = l.retryMin
				continue
			}
			backoff = min(2*backoff, l.retryMax)
			if closing {
				l.mu.Lock()
				l.closeErr = l.err
				l.mu.Unlock()
				return
			}

		case l.q.end > l.writtenSize && l.policy != FsyncAlways && !l.closing && !waited && l.waiters == 0 &&
			l.q.end-l.writtenSize < coalesceBytes:
			l.mu.Unlock()
			coalesce.Reset(coalesceDelay)
			select {
			case <-coalesce.C:
			case <-l.wake: // a reply waits for the write
				coalesce.Stop()
			case <-l.closeCh:
				coalesce.Stop()
			}
			waited = true

		case l.q.end > l.writtenSize:
			waited = false
			l.write() // unlocks

		case l.closing:
			l.mu.Unlock()
			if l.syncerDone != nil {
				<-l.syncerDone // it sees closeCh; after this no fsync races ours
			}
			l.mu.Lock()
			if l.err != nil || l.q.end > l.writtenSize {
				l.mu.Unlock()
				continue
			}
			if l.writtenSize == l.syncedSize {
				l.mu.Unlock()
				return
			}
			t := target{l.writtenSeq, l.writtenSize}
			l.mu.Unlock()
			l.fsync(t)

		default:
			l.mu.Unlock()
			select {
			case <-l.wake:
			case <-l.closeCh:
			}
		}
	}
}

// write is called with mu held and returns with it released. It writes
// everything appended so far and, under FsyncAlways, fsyncs it.
func (l *Log) write() {
	from, to, seq, since := l.writtenSize, l.q.end, l.appendSeq, l.pendingSince
	l.taken, l.pendingSince, l.takenSince = to, time.Time{}, since
	l.pieces = l.q.slices(l.pieces[:0], from, to)
	l.mu.Unlock()

	var err error
	for _, p := range l.pieces {
		var n int
		if n, err = l.f.Write(p); err == nil && n != len(p) {
			err = io.ErrShortWrite
		}
		if err != nil {
			break
		}
	}
	clear(l.pieces) // do not pin released chunks

	l.mu.Lock()
	if err != nil {
		l.writeErrors++
		// The batch is pending again, and it is older than anything
		// appended meanwhile.
		l.taken, l.pendingSince, l.takenSince = from, since, time.Time{}
		l.failLocked("write", err)
		l.mu.Unlock()
		return
	}
	l.writtenSeq, l.writtenSize = seq, to
	l.takenSince = time.Time{}
	if l.policy == FsyncNo {
		l.q.release(to)
	} else {
		l.marks = append(l.marks, mark{endSize: to, since: since})
	}
	if l.policy == FsyncEverySec && to-l.syncedSize >= syncAfter {
		select {
		case l.syncNow <- struct{}{}:
		default:
		}
	}
	l.cond.Broadcast()
	if l.policy != FsyncAlways {
		l.mu.Unlock()
		return
	}
	// Group commit: everything appended while this fsync runs becomes the
	// next batch and shares the next fsync.
	l.mu.Unlock()
	l.fsync(target{seq, to})
}

func (l *Log) fsync(t target) {
	err := timedSync(l.f, l.fsyncTimes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.fsyncErrors++
		l.failLocked("fsync", err)
		return
	}
	l.markSyncedLocked(t)
}

// syncLoop is FsyncEverySec's background fsync: once a second, and sooner
// when syncAfter bytes are waiting.
func (l *Log) syncLoop() {
	defer close(l.syncerDone)
	tick := time.NewTicker(l.syncEvery)
	defer tick.Stop()
	for {
		select {
		case <-l.closeCh:
			return
		case <-tick.C:
		case <-l.syncNow:
		}
		l.mu.Lock()
		if l.err != nil || l.writtenSize == l.syncedSize {
			l.mu.Unlock()
			continue
		}
		t := target{l.writtenSeq, l.writtenSize}
		l.syncing = true
		l.mu.Unlock()

		err := timedSync(l.f, l.fsyncTimes)

		l.mu.Lock()
		l.syncing = false
		if err != nil {
			l.fsyncErrors++
			l.failLocked("fsync", err)
		} else {
			l.markSyncedLocked(t)
		}
		l.cond.Broadcast()
		l.mu.Unlock()
	}
}

func (l *Log) markSyncedLocked(t target) {
	if t.size > l.syncedSize {
		l.syncedSize = t.size
		l.syncedSeq = t.seq
	}
	i := 0
	for i < len(l.marks) && l.marks[i].endSize <= l.syncedSize {
		i++
	}
	l.marks = append(l.marks[:0], l.marks[i:]...)
	l.q.release(l.durableSizeLocked())
	l.lastFsync = time.Now()
	l.fsyncs++
	l.cond.Broadcast()
}

// failLocked records a failure and puts the log into the failing state.
func (l *Log) failLocked(op string, err error) {
	l.lastError = err.Error()
	first := l.err == nil
	l.err = fmt.Errorf("%w: %w", ErrPersistence, err)
	now := time.Now()
	switch {
	case first:
		l.logger.Error("append-only file failed; refusing writes until a retry succeeds",
			"file", l.path, "op", op, "err", err)
		l.lastErrLog = now
	case now.Sub(l.lastErrLog) >= errLogEvery:
		// Retries run every second; say so only now and then, as Redis does.
		l.logger.Error("append-only file still failing", "file", l.path, "op", op, "err", err)
		l.lastErrLog = now
	}
	l.cond.Broadcast()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// repair truncates the file to the last length known to be durable,
// rewrites every byte after it from the buffer and fsyncs. Append refuses
// records while the log is failing and the fsyncer stands still, so the
// buffer cannot change under it.
func (l *Log) repair() bool {
	l.mu.Lock()
	for l.syncing {
		l.cond.Wait()
	}
	base, end, seq := l.durableSizeLocked(), l.q.end, l.appendSeq
	l.pieces = l.q.slices(l.pieces[:0], base, end)
	l.mu.Unlock()

	op, err := "truncate", l.f.Truncate(base)
	for _, p := range l.pieces {
		if err != nil {
			break
		}
		op = "write"
		var n int
		if n, err = l.f.Write(p); err == nil && n != len(p) {
			err = io.ErrShortWrite
		}
	}
	clear(l.pieces)
	if err == nil {
		op, err = "fsync", timedSync(l.f, l.fsyncTimes)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if op == "fsync" {
			l.fsyncErrors++
		} else {
			l.writeErrors++
		}
		l.failLocked(op, err)
		return false
	}
	l.writtenSeq, l.syncedSeq = seq, seq
	l.writtenSize, l.syncedSize, l.taken = end, end, end
	l.marks = l.marks[:0]
	l.pendingSince = time.Time{}
	l.q.release(end)
	l.lastFsync = time.Now()
	l.fsyncs++
	l.err = nil
	l.logger.Info("append-only file recovered; accepting writes again", "file", l.path, "size", end)
	l.cond.Broadcast()
	return true
}

// syncDir fsyncs a directory so a create, link or rename in it survives a
// crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
