package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/clock"
)

// Durable is standalone durability wrapped around an engine from outside,
// the way replication.Node wraps one for cluster mode: the engine's journal
// goes to an append-only log in Dir, snapshots compact it, and start-up
// recovers from both. Files:
//
//	sluice.snap      the last snapshot; its meta names the first log
//	                 generation to replay and, per shard, the last journal
//	                 seq it already includes
//	sluice.aof.<N>   log generations; a snapshot starts a new one
//
// Start-up loads the snapshot, replays every log from that generation on
// (skipping records the snapshot includes), and appends to the newest.
const (
	snapshotFile = "sluice.snap"
	logPrefix    = "sluice.aof."
	genShift     = 40 // a journal seq handed to the engine is gen<<40 | log seq
)

// DurableConfig configures standalone persistence. The zero value (with a
// Dir) is usable.
type DurableConfig struct {
	// Dir holds the log and snapshot. Default: the working directory.
	Dir string
	// Fsync is appendfsync. Default everysec.
	Fsync FsyncPolicy
	// Clock is the server's clock. Recovery carries the time the previous
	// process had used into it, so no later decision runs at an earlier
	// time; snapshots record its reading. Default: a new system clock.
	Clock *clock.Clock
	// AutoRewritePercent: snapshot (and start a new log) when the
	// persisted size (snapshot plus log) has grown this many percent over
	// what it was after the last snapshot, as Redis's
	// auto-aof-rewrite-percentage measures its base file plus increments.
	// Default 100; negative disables.
	AutoRewritePercent int
	// AutoRewriteMinSize: never rewrite while the persisted size (snapshot
	// plus log) is smaller than this. Default 64 MiB.
	AutoRewriteMinSize int64
	// Logger; nil discards.
	Logger *slog.Logger
	// KeyLoadDelay is a test aid, Redis's hidden key-load-delay: start-up
	// loads no faster than one snapshot record or log record per this
	// long, so a test can watch a server that is still loading. Default 0.
	KeyLoadDelay time.Duration

	openFile func(name string, flag int, perm os.FileMode) (file, error) // tests: LogConfig's
}

// LoadReport says what start-up recovered.
type LoadReport struct {
	SnapshotKeys  int
	LogRecords    uint64
	SkippedByCopy int // records the snapshot already included
	TornBytes     int64
	Duration      time.Duration
}

// Durable is the standalone persistence of an Engine: it executes pipelines
// on the engine and answers once they are as durable as the fsync policy
// promises, it is the engine's Journal, and it takes snapshots. Safe for
// concurrent use.
type Durable struct {
	e     *engine.Engine
	cfg   DurableConfig
	clock *clock.Clock
	log   *slog.Logger

	mu  sync.RWMutex // guards cur, gen, prev and prevGen against rotation
	cur *Log
	gen uint64
	// prev is the generation a rotation is closing, until its Close (its
	// last write and fsync) returns: its records are not durable yet.
	prev    *Log
	prevGen uint64
	// lostErr is why the close of generation lostGen failed: what it had
	// not written is lost, and its records are never reported durable.
	lostErr error
	lostGen uint64

	saveMu  sync.Mutex
	saving  atomic.Bool
	appends atomic.Uint64
	// baseSize is the persisted size (snapshot plus log) right after the
	// last snapshot or start-up, snapSize the snapshot file's size: the
	// automatic rewrite measures growth against the first, as Redis's
	// aof_base_size counts its base file.
	baseSize atomic.Int64
	snapSize atomic.Int64
	bg       sync.WaitGroup
	closed   atomic.Bool

	lastSave      atomic.Int64 // unix seconds
	lastSaveNanos atomic.Int64 // duration
	lastSaveErr   atomic.Pointer[string]
	saves         atomic.Int64
	load          LoadReport
	fsyncTimes    FsyncTimes // every generation's log observes it
}

var _ engine.Journal = (*Durable)(nil)

func logPath(dir string, gen uint64) string {
	return filepath.Join(dir, logPrefix+strconv.FormatUint(gen, 10))
}

// OpenDurable recovers the engine's state from Dir and attaches the log as
// its journal. Corruption anywhere but a torn final record stops it with an
// error naming the file and offset. The engine must not be used directly
// while the Durable is open.
func OpenDurable(e *engine.Engine, cfg DurableConfig) (*Durable, error) {
	if cfg.Dir == "" {
		cfg.Dir = "."
	}
	if cfg.AutoRewritePercent == 0 {
		cfg.AutoRewritePercent = 100
	}
	if cfg.AutoRewriteMinSize <= 0 {
		cfg.AutoRewriteMinSize = 64 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New(nil)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	d := &Durable{e: e, cfg: cfg, clock: cfg.Clock, log: log}
	if err := removeTemps(cfg.Dir, log); err != nil {
		return nil, err
	}
	start := time.Now()
	pace := loadPacer{per: cfg.KeyLoadDelay, start: start}
	firstGen, pos, err := d.loadSnapshot(&pace)
	if err != nil {
		return nil, err
	}
	gens, err := d.logGenerations()
	if err != nil {
		return nil, err
	}
	for _, p := range pos {
		e.ObserveJournalSeq(p)
	}
	// The newest generation with records is the only one a crash can
	// have left torn (see rotateLocked).
	newestWithRecords := firstGen
	for _, g := range gens {
		if fi, err := os.Stat(logPath(cfg.Dir, g)); err == nil && fi.Size() > int64(logHeaderSize) && g > newestWithRecords {
			newestWithRecords = g
		}
	}
	for _, g := range gens {
		if g < firstGen {
			continue
		}
		path := logPath(cfg.Dir, g)
		res, err := replayLog(path, func(rec []byte) error {
			pace.record()
			now, err := e.Replay(rec, func(s int, seq uint64) bool {
				if pos.Covers(s, seq) {
					d.load.SkippedByCopy++
					return true
				}
				return false
			})
			d.clock.Observe(now)
			return err
		}, g >= newestWithRecords)
		if err != nil {
			return nil, fmt.Errorf("replaying %s: %w", path, err)
		}
		d.load.LogRecords += res.Records
		if res.TornBytes > 0 {
			d.load.TornBytes += res.TornBytes
			log.Warn("cut off a torn record at the end of the append-only file", "file", path, "bytes_dropped", res.TornBytes, "reason", res.TornReason)
		}
	}
	// Logs older than the snapshot are leftovers of a compaction that
	// stopped before deleting them.
	for _, g := range gens {
		if g < firstGen {
			os.Remove(logPath(cfg.Dir, g))
		}
	}
	d.gen = firstGen
	if n := len(gens); n > 0 && gens[n-1] >= firstGen {
		d.gen = gens[n-1]
		d.cur, err = OpenLog(logPath(cfg.Dir, d.gen), LogConfig{Fsync: cfg.Fsync, Logger: log, FsyncTimes: &d.fsyncTimes, openFile: cfg.openFile})
	} else {
		d.cur, err = CreateLog(logPath(cfg.Dir, d.gen), LogConfig{Fsync: cfg.Fsync, Logger: log, FsyncTimes: &d.fsyncTimes, openFile: cfg.openFile})
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(cfg.Dir, snapshotFile)); err == nil {
		d.snapSize.Store(fi.Size())
	}
	d.baseSize.Store(d.snapSize.Load() + d.cur.Size())
	d.load.Duration = time.Since(start)
	e.SetJournal(d)
	return d, nil
}

// Execute runs a pipeline on the engine at now and returns once the
// pipeline's records are written, as Redis writes its append-only file
// before it replies: fsynced under appendfsync always, handed to the
// kernel (write(2)) under everysec and no, so that a crash of the process
// alone loses no answered change. A write whose record could not be made
// so is answered ErrNotDurable, never as done nor as refused.
func (d *Durable) Execute(b *engine.Batch, now int64) {
	d.e.Execute(b, now)
	if b.JournalFailed() {
		b.FailWrites(engine.ErrNotDurable)
		return
	}
	if seq := b.JournalSeq(); seq > 0 {
		if err := d.WaitDurable(seq); err != nil {
			b.FailWrites(engine.ErrNotDurable)
		}
	}
}

// Sweep frees expired records (see engine.Engine.Sweep).
func (d *Durable) Sweep(now int64) { d.e.Sweep(now) }

// Stats returns the engine's counters.
func (d *Durable) Stats() engine.Stats { return d.e.Stats() }

// ResetStats zeroes the engine's counters.
func (d *Durable) ResetStats() { d.e.ResetStats() }

// Shards is the engine's shard count.
func (d *Durable) Shards() int { return d.e.Shards() }

// MaxMemory is the engine's memory limit, 0 for none.
func (d *Durable) MaxMemory() int64 { return d.e.MaxMemory() }

// SetMaxMemory changes the engine's memory limit.
func (d *Durable) SetMaxMemory(n int64) { d.e.SetMaxMemory(n) }

// Load reports what start-up recovered.
func (d *Durable) Load() LoadReport { return d.load }

func (d *Durable) logGenerations() ([]uint64, error) {
	entries, err := os.ReadDir(d.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, en := range entries {
		name := en.Name()
		if !strings.HasPrefix(name, logPrefix) {
			continue
		}
		g, err := strconv.ParseUint(strings.TrimPrefix(name, logPrefix), 10, 64)
		if err != nil || g == 0 {
			continue
		}
		gens = append(gens, g)
	}
	slices.Sort(gens)
	return gens, nil
}

// snapshot meta: first log generation u64 | shard count uvarint | seq per
// shard uvarint | key count uvarint.
func encodeMeta(firstGen uint64, pos engine.Positions, keys int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, firstGen)
	b = binary.AppendUvarint(b, uint64(len(pos)))
	for _, p := range pos {
		b = binary.AppendUvarint(b, p)
	}
	return binary.AppendUvarint(b, uint64(keys))
}

var errBadMeta = errors.New("malformed snapshot meta")

func decodeMeta(b []byte) (uint64, engine.Positions, int, error) {
	if len(b) < 8 {
		return 0, nil, 0, errBadMeta
	}
	firstGen := binary.LittleEndian.Uint64(b)
	b = b[8:]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	n, ok := next()
	if !ok || n > uint64(len(b)) {
		return 0, nil, 0, errBadMeta
	}
	pos := make(engine.Positions, n)
	for i := range pos {
		if pos[i], ok = next(); !ok {
			return 0, nil, 0, errBadMeta
		}
	}
	keys, ok := next()
	if !ok || keys > 1<<40 {
		return 0, nil, 0, errBadMeta
	}
	return firstGen, pos, int(keys), nil
}

// loadSnapshot restores the snapshot, if any.
func (d *Durable) loadSnapshot(pace *loadPacer) (uint64, engine.Positions, error) {
	path := filepath.Join(d.cfg.Dir, snapshotFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 1, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	hdr, err := ReadSnapshotHeader(f)
	if err != nil {
		return 0, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	firstGen, pos, keys, err := decodeMeta(hdr.Meta)
	if err != nil {
		return 0, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	d.e.Reserve(keys)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, nil, err
	}
	hdr, n, err := loadSnapshot(f, d.e, pace.record)
	d.load.SnapshotKeys = n
	if err != nil {
		return 0, nil, fmt.Errorf("loading %s: %w", path, err)
	}
	d.clock.Observe(hdr.LastNow)
	return firstGen, pos, nil
}

// loadPacer holds start-up to at most one record per KeyLoadDelay (a test
// aid). It sleeps only once a millisecond or more ahead, so a delay of a
// few microseconds per record paces the load as asked instead of costing a
// timer's granularity per record.
type loadPacer struct {
	per   time.Duration
	start time.Time
	n     int64
}

func (p *loadPacer) record() {
	if p.per <= 0 {
		return
	}
	p.n++
	if ahead := time.Duration(p.n)*p.per - time.Since(p.start); ahead >= time.Millisecond {
		time.Sleep(ahead)
	}
}

// FsyncHistogram is sluice_fsync_duration_seconds: every fsync of the
// append-only file since start, bucketed (see FsyncTimes.Buckets).
func (d *Durable) FsyncHistogram() (bounds []float64, cumulative []uint64, count uint64, sumSeconds float64) {
	return d.fsyncTimes.Buckets()
}

// Append is the Journal's: it appends to the current log generation.
func (d *Durable) Append(rec []byte) (uint64, error) {
	d.mu.RLock()
	seq, err := d.cur.Append(rec)
	gen := d.gen
	d.mu.RUnlock()
	if err != nil {
		return 0, err
	}
	if d.appends.Add(1)%4096 == 0 {
		d.maybeRewrite()
	}
	return gen<<genShift | seq, nil
}

// WaitDurable is the Journal's. A seq of the generation a rotation is
// closing waits for that log (its Close writes and fsyncs what it holds);
// one from an older generation is durable: its log was closed. A seq of
// the new generation is durable only after every one of the old: the new
// log writes nothing before the old one is closed (rotateLocked), so a
// batch whose records straddle the switch waits for all of them.
func (d *Durable) WaitDurable(seq uint64) error {
	d.mu.RLock()
	cur, gen, prev, prevGen, lostErr, lostGen := d.cur, d.gen, d.prev, d.prevGen, d.lostErr, d.lostGen
	d.mu.RUnlock()
	switch g := seq >> genShift; {
	case lostErr != nil && g == lostGen:
		return lostErr
	case g == gen:
		return cur.WaitDurable(seq & (1<<genShift - 1))
	case prev != nil && g == prevGen:
		return prev.WaitDurable(seq & (1<<genShift - 1))
	}
	return nil
}

// Err is the Journal's: non-nil while the log cannot persist.
func (d *Durable) Err() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cur.Err()
}

func (d *Durable) maybeRewrite() {
	if d.cfg.AutoRewritePercent < 0 || d.saving.Load() || d.closed.Load() {
		return
	}
	d.mu.RLock()
	size := d.snapSize.Load() + d.cur.Size()
	d.mu.RUnlock()
	base := d.baseSize.Load()
	if size < d.cfg.AutoRewriteMinSize || size < base+base*int64(d.cfg.AutoRewritePercent)/100 {
		return
	}
	d.BackgroundSave()
}

// pauseBriefly lets the scheduler poll the network and run the
// connections between chunks of a standalone snapshot's encoding.
func pauseBriefly() { time.Sleep(200 * time.Microsecond) }

// ErrSaveInProgress: a snapshot is already being taken.
var ErrSaveInProgress = errors.New("Background save already in progress")

// BackgroundSave starts a snapshot in the background (BGSAVE).
func (d *Durable) BackgroundSave() error {
	if !d.saving.CompareAndSwap(false, true) {
		return ErrSaveInProgress
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		defer d.saving.Store(false)
		if err := d.save(); err != nil {
			d.log.Error("background snapshot failed", "err", err)
		}
	}()
	return nil
}

// Save takes a snapshot now (SAVE) and compacts the log.
func (d *Durable) Save() error {
	if !d.saving.CompareAndSwap(false, true) {
		return ErrSaveInProgress
	}
	defer d.saving.Store(false)
	return d.save()
}

// save rotates the log, copies every shard (one at a time, each at its own
// journal position), writes the snapshot atomically, then deletes the logs
// it supersedes. Records a shard journals after its copy carry a larger
// seq and live in the new log, so replay after this snapshot misses
// nothing and applies nothing twice.
func (d *Durable) save() (err error) {
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	start := time.Now()
	defer func() {
		d.lastSaveNanos.Store(int64(time.Since(start)))
		if err != nil {
			msg := err.Error()
			d.lastSaveErr.Store(&msg)
			return
		}
		d.lastSaveErr.Store(nil)
		d.lastSave.Store(time.Now().Unix())
		d.saves.Add(1)
	}()
	next, newGen, err := d.rotateLocked()
	if err != nil {
		return err
	}
	rotated := time.Now()
	// The copies leave out what has expired at the time they record.
	lastNow := d.clock.Now()
	shards := d.e.Snapshot(lastNow)
	copied := time.Now()
	pos := make(engine.Positions, len(shards))
	keys := 0
	for _, s := range shards {
		pos[s.Shard] = s.Seq
		keys += s.Count
	}
	hdr := SnapshotHeader{LastNow: lastNow, CreatedAt: time.Now().UnixNano(), Meta: encodeMeta(newGen, pos, keys)}
	snapSize, err := WriteSnapshotFile(filepath.Join(d.cfg.Dir, snapshotFile), hdr, func(enc *SnapshotEncoder) error {
		// The encoder is background work: it must not starve the
		// connections on a busy core.
		return EncodeShards(enc, shards, pauseBriefly)
	})
	if err != nil {
		return err
	}
	d.log.Info("snapshot taken", "keys", keys, "generation", newGen,
		"rotate_ms", rotated.Sub(start).Milliseconds(), "copy_ms", copied.Sub(rotated).Milliseconds(),
		"write_ms", time.Since(copied).Milliseconds())
	d.snapSize.Store(snapSize)
	d.baseSize.Store(snapSize + next.Size())
	gens, _ := d.logGenerations()
	for _, g := range gens {
		if g < newGen {
			os.Remove(logPath(d.cfg.Dir, g))
		}
	}
	return nil
}

// rotateLocked starts the next log generation, under the current
// appendfsync, and closes the previous one (which fsyncs it). saveMu held.
// It refuses while the current log is failing: its unwritten records would
// be dropped by the close while the new one wrote on. The new generation
// writes nothing until the old one is closed, so on disk an older file is
// always whole before a newer one has records: replay's torn-tail rule
// holds for the newest file alone, and a batch's records in the new file
// are durable only once those it put in the old one are.
func (d *Durable) rotateLocked() (*Log, uint64, error) {
	d.mu.RLock()
	err := d.cur.Err()
	d.mu.RUnlock()
	if err != nil {
		return nil, 0, fmt.Errorf("cannot start a new log generation while the current one fails: %w", err)
	}
	newGen := d.gen + 1
	gate := newLogGate()
	next, err := CreateLog(logPath(d.cfg.Dir, newGen), LogConfig{Fsync: d.cfg.Fsync, Logger: d.log, FsyncTimes: &d.fsyncTimes, openFile: d.cfg.openFile, after: gate})
	if err != nil {
		return nil, 0, err
	}
	d.mu.Lock()
	old, oldGen := d.cur, d.gen
	d.prev, d.prevGen = old, oldGen
	d.cur, d.gen = next, newGen
	d.mu.Unlock()
	err = old.Close()
	// The gate opens before mu is taken: Close holds mu while it closes
	// the new log, which waits for the gate.
	gate.open(err)
	d.mu.Lock()
	d.prev = nil
	if err != nil {
		d.lostErr, d.lostGen = err, oldGen
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Error("closing the previous log generation failed: its last records are lost, and writes are refused until a restart", "err", err)
	}
	return next, newGen, nil
}

// SetFsync changes appendfsync at run time (CONFIG SET appendfsync). A
// log's policy is fixed for its life (the writer, the fsyncer and what the
// buffer keeps all follow it), so the change starts a new log generation
// under the new policy; records already appended are closed under the old
// one. Recovery replays the generations in order, as after a snapshot that
// failed after its rotation; the next snapshot compacts them.
func (d *Durable) SetFsync(p FsyncPolicy) error {
	if p < FsyncEverySec || p > FsyncNo {
		return fmt.Errorf("unknown fsync policy %v", p)
	}
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	if p == d.cfg.Fsync {
		return nil
	}
	prev := d.cfg.Fsync
	d.cfg.Fsync = p
	if _, _, err := d.rotateLocked(); err != nil {
		d.cfg.Fsync = prev
		return err
	}
	d.log.Info("appendfsync changed", "appendfsync", p.String(), "was", prev.String(), "generation", d.gen)
	return nil
}

// AppendFsync is the appendfsync in force (CONFIG GET appendfsync).
func (d *Durable) AppendFsync() string {
	d.mu.RLock()
	cur := d.cur
	d.mu.RUnlock()
	return cur.Stats().Policy.String()
}

// SetAppendFsync is SetFsync by name, worded as Redis's CONFIG SET
// refuses a bad one.
func (d *Durable) SetAppendFsync(name string) error {
	p, err := ParseFsyncPolicy(name)
	if err != nil {
		return errors.New("argument(s) must be one of the following: everysec, always, no")
	}
	return d.SetFsync(p)
}

// Close takes a final snapshot (a clean shutdown then restarts from it
// without a replay) and closes the log. Call after the engine has stopped
// taking commands.
func (d *Durable) Close() error { return d.close(true) }

// CloseWithoutSnapshot is Close less the final snapshot (SHUTDOWN NOSAVE):
// the log, closed and fsynced, keeps everything; start-up replays more of
// it.
func (d *Durable) CloseWithoutSnapshot() error { return d.close(false) }

func (d *Durable) close(snapshot bool) error {
	if d.closed.Swap(true) {
		return nil
	}
	d.bg.Wait()
	var saveErr error
	if snapshot {
		saveErr = d.Save()
	}
	d.mu.Lock()
	err := d.cur.Close()
	d.mu.Unlock()
	return errors.Join(saveErr, err)
}

// InfoLines is the INFO persistence section.
func (d *Durable) InfoLines() []string {
	d.mu.RLock()
	st := d.cur.Stats()
	d.mu.RUnlock()
	status := "ok"
	if st.Failed {
		status = "err"
	}
	bgStatus := "ok"
	if msg := d.lastSaveErr.Load(); msg != nil {
		bgStatus = "err"
	}
	saving := 0
	if d.saving.Load() {
		saving = 1
	}
	return []string{
		"aof_enabled:1",
		"aof_fsync_policy:" + st.Policy.String(),
		"aof_current_size:" + strconv.FormatInt(d.snapSize.Load()+st.Size, 10),
		"aof_base_size:" + strconv.FormatInt(d.baseSize.Load(), 10),
		"aof_last_write_status:" + status,
		"aof_last_error:" + strings.ReplaceAll(st.LastError, "\n", " "),
		"aof_write_errors:" + strconv.FormatUint(st.WriteErrors, 10),
		"aof_fsync_errors:" + strconv.FormatUint(st.FsyncErrors, 10),
		"aof_fsync_lag_ms:" + strconv.FormatInt(st.FsyncLag.Milliseconds(), 10),
		"aof_fsyncs:" + strconv.FormatUint(st.Fsyncs, 10),
		"aof_generation:" + strconv.FormatUint(d.generation(), 10),
		"rdb_bgsave_in_progress:" + strconv.Itoa(saving),
		"rdb_last_save_time:" + strconv.FormatInt(d.lastSave.Load(), 10),
		"rdb_last_bgsave_status:" + bgStatus,
		"rdb_last_save_duration_ms:" + strconv.FormatInt(time.Duration(d.lastSaveNanos.Load()).Milliseconds(), 10),
		"rdb_saves:" + strconv.FormatInt(d.saves.Load(), 10),
		"loading_snapshot_keys:" + strconv.Itoa(d.load.SnapshotKeys),
		"loading_log_records:" + strconv.FormatUint(d.load.LogRecords, 10),
		"loading_torn_bytes:" + strconv.FormatInt(d.load.TornBytes, 10),
		"loading_time_ms:" + strconv.FormatInt(d.load.Duration.Milliseconds(), 10),
	}
}

func (d *Durable) generation() uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.gen
}

// LastSave is the unix time of the last successful snapshot (LASTSAVE).
func (d *Durable) LastSave() int64 { return d.lastSave.Load() }

// removeTemps deletes what an interrupted snapshot, log creation or repair
// left in dir (their temporary files, never renamed into place), and logs
// each.
func removeTemps(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, en := range entries {
		name := en.Name()
		ours := strings.HasPrefix(name, snapshotFile+".") || strings.HasPrefix(name, logPrefix)
		if !ours || en.IsDir() || !(strings.Contains(name, ".tmp-") || strings.Contains(name, ".fix-")) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("remove the temporary file %s: %w", name, err)
		}
		log.Warn("removed a temporary file an interrupted snapshot or rewrite left", "file", name)
	}
	return nil
}
