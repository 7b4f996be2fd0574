package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

func TestMain(m *testing.M) { sluicetest.Main(m) }

func client(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 32,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
}

func killHard(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// infoField reads one field of LIMIT.INFO.
func infoField(t *testing.T, rdb *redis.Client, key, field string) int64 {
	t.Helper()
	v, err := rdb.Do(context.Background(), "LIMIT.INFO", key).Result()
	if err == redis.Nil {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	fields := v.([]any)
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == field {
			return fields[i+1].(int64)
		}
	}
	t.Fatalf("LIMIT.INFO %s has no %s: %v", key, field, fields)
	return 0
}

// TestCrashLosesNoAcknowledgedDecision: under every appendfsync policy,
// load the server, kill -9 it at a random moment, restart it from the same
// dir, and check that every acknowledged decision is still counted: a
// decision is answered only after its record is written (and, under
// always, fsynced), so a crash of the process alone loses none; only a
// crash of the machine can lose what everysec and no had not fsynced.
func TestCrashLosesNoAcknowledgedDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary twice")
	}
	for _, policy := range []string{"always", "everysec", "no"} {
		t.Run(policy, func(t *testing.T) { crashTest(t, policy, false) })
	}
	// The log switches generations all the while (BGSAVE, CONFIG SET
	// appendfsync): a batch straddling a switch is answered only once all
	// of it is written, so the kill lands between switches or inside one
	// and loses nothing acknowledged either way.
	t.Run("switching-generations", func(t *testing.T) { crashTest(t, "always", true) })
}

// crashTest loads the server, kills it, restarts it and compares what was
// acknowledged with what survived: nothing acknowledged may be lost.
func crashTest(t *testing.T, policy string, switching bool) {
	dir := t.TempDir()
	addr, cmd := startBinary(t, "--dir", dir, "--appendfsync", policy)
	started := time.Now()
	rdb := client(addr)
	const keys = 20
	var acked, sent [keys]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var switches atomic.Int64
	if switching {
		wg.Add(1)
		go func() {
			defer wg.Done()
			policies := []string{"everysec", "always", "no", "always"}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if i%2 == 0 {
					err = rdb.Do(context.Background(), "BGSAVE").Err()
				} else {
					err = rdb.ConfigSet(context.Background(), "appendfsync", policies[(i/2)%len(policies)]).Err()
				}
				if err == nil {
					switches.Add(1)
				} else if !strings.Contains(err.Error(), "in progress") {
					return // the server died
				}
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			}
		}()
	}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (w + i) % keys
				sent[k].Add(1)
				v, err := rdb.Do(context.Background(), "FW.CHECK", "crash:"+strconv.Itoa(k), "1000000000", "3600").Result()
				if err != nil {
					return // the server died
				}
				if v.([]any)[0] == int64(0) {
					acked[k].Add(1)
				}
			}
		}(w)
	}
	time.Sleep(time.Duration(1500+rand.IntN(1000)) * time.Millisecond)
	killHard(t, cmd)
	elapsed := time.Since(started)
	close(stop)
	wg.Wait()
	rdb.Close()

	addr, cmd = startBinary(t, "--dir", dir, "--appendfsync", policy)
	defer killHard(t, cmd)
	rdb = client(addr)
	defer rdb.Close()
	var total, lost int64
	for k := 0; k < keys; k++ {
		count := infoField(t, rdb, "crash:"+strconv.Itoa(k), "count")
		if count > sent[k].Load() {
			t.Errorf("key %d: %d counted after restart but only %d sent", k, count, sent[k].Load())
		}
		if count < acked[k].Load() {
			t.Errorf("key %d: %d counted after restart; %d were acknowledged", k, count, acked[k].Load())
		}
		total += acked[k].Load()
		lost += max(acked[k].Load()-count, 0)
	}
	if total < 100 {
		t.Fatalf("only %d decisions were acknowledged before the kill; the test proves little", total)
	}
	if switching && switches.Load() < 10 {
		t.Fatalf("only %d switches of generation before the kill; the test proves little", switches.Load())
	}
	rate := float64(total) / elapsed.Seconds()
	t.Logf("appendfsync %s: %d acknowledged decisions in %v (%.0f/s), %d lost in kill -9, %d switches of log generation",
		policy, total, elapsed.Round(time.Millisecond), rate, lost, switches.Load())
}

// TestRestartKeepsStateAndResetTimes: a snapshot taken mid-way plus the
// log tail rebuild exactly the state the server had (LIMIT.INFO of every
// key, including the stored absolute reset times), whether the server was
// killed or stopped cleanly.
func TestRestartKeepsStateAndResetTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary several times")
	}
	for _, stop := range []string{"kill", "sigterm"} {
		t.Run(stop, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			addr, cmd := startBinary(t, "--dir", dir, "--enable-debug-command", "yes")
			rdb := client(addr)
			base := rdb.Do(ctx, "DEBUG", "CLOCK", "GET").Val().(int64) + 1000
			rdb.Do(ctx, "DEBUG", "CLOCK", "SET", base)
			rng := rand.New(rand.NewPCG(5, 6))
			keys := []string{}
			for i := 0; i < 400; i++ {
				k := fmt.Sprintf("r:%d", rng.IntN(60))
				var err error
				switch i % 4 {
				case 0:
					err = rdb.Do(ctx, "CL.THROTTLE", "g"+k, 9, 10, 60, 1+rng.IntN(3)).Err()
					k = "g" + k
				case 1:
					err = rdb.Do(ctx, "SW.CHECK", "w"+k, 50, 30, 1+rng.IntN(3)).Err()
					k = "w" + k
				case 2:
					err = rdb.Do(ctx, "SL.CHECK", "l"+k, 20, 30, 1).Err()
					k = "l" + k
				case 3:
					err = rdb.Do(ctx, "LIMIT.ALL", 2, "FW.CHECK", "f"+k, 30, 60, 1, "CL.THROTTLE", "a"+k, 9, 10, 60, 1).Err()
					keys = append(keys, "a"+k)
					k = "f" + k
				}
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k)
				if i == 200 {
					if err := rdb.Do(ctx, "BGSAVE").Err(); err != nil {
						t.Fatal(err)
					}
				}
				if i%50 == 0 {
					rdb.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", 250)
				}
			}
			rdb.Do(ctx, "SET", "plain", "v", "PX", 100000)
			// Let the background save finish before comparing.
			for rdb.Do(ctx, "INFO", "persistence").Val() != nil && strings.Contains(rdb.Do(ctx, "INFO", "persistence").Val().(string), "rdb_bgsave_in_progress:1") {
				time.Sleep(10 * time.Millisecond)
			}
			now := rdb.Do(ctx, "DEBUG", "CLOCK", "GET").Val().(int64)
			before := map[string]any{}
			for _, k := range keys {
				before[k] = rdb.Do(ctx, "LIMIT.INFO", k).Val()
			}
			beforePTTL := rdb.Do(ctx, "PTTL", "plain").Val()
			if stop == "kill" {
				killHard(t, cmd)
			} else {
				cmd.Process.Signal(syscall.SIGTERM)
				if err := cmd.Wait(); err != nil {
					t.Fatalf("exit after SIGTERM: %v", err)
				}
			}
			rdb.Close()

			addr, cmd = startBinary(t, "--dir", dir, "--enable-debug-command", "yes")
			defer killHard(t, cmd)
			rdb = client(addr)
			defer rdb.Close()
			if err := rdb.Do(ctx, "DEBUG", "CLOCK", "SET", now).Err(); err != nil {
				t.Fatalf("the restarted clock is behind the last time used: %v", err)
			}
			for _, k := range keys {
				if after := rdb.Do(ctx, "LIMIT.INFO", k).Val(); !reflect.DeepEqual(after, before[k]) {
					t.Fatalf("%s after restart:\n %v\nbefore:\n %v", k, after, before[k])
				}
			}
			if after := rdb.Do(ctx, "PTTL", "plain").Val(); after != beforePTTL {
				t.Fatalf("PTTL plain: %v after restart, %v before", after, beforePTTL)
			}
		})
	}
}

// TestCheckLogFixKeepsTheRecordsAfterDamage: a byte flipped in the middle
// of the log stops start-up; --check-log --fix then keeps every intact
// record, so the restarted server counts every decision but the damaged
// record's (before: it truncated there, and every decision after it was
// lost).
func TestCheckLogFixKeepsTheRecordsAfterDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary twice")
	}
	dir := t.TempDir()
	addr, cmd := startBinary(t, "--dir", dir, "--appendfsync", "always")
	rdb := client(addr)
	const n = 400
	for i := range n {
		// One record per decision: each is its own round trip.
		if err := rdb.Do(context.Background(), "FW.CHECK", "fix:"+strconv.Itoa(i%4), "1000000", "3600").Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Close()
	killHard(t, cmd)

	logs, _ := filepath.Glob(filepath.Join(dir, "sluice.aof.*"))
	if len(logs) != 1 {
		t.Fatalf("logs %v", logs)
	}
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(logs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sluicetest.Binary(t), "--dir", dir, "--port", "auto").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--check-log "+logs[0]+" --fix") {
		t.Fatalf("start-up with a damaged log: %v\n%s", err, out)
	}
	out, err = exec.Command(sluicetest.Binary(t), "--check-log", logs[0], "--fix").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "skipped:") {
		t.Fatalf("--check-log --fix: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	addr, cmd = startBinary(t, "--dir", dir, "--appendfsync", "always")
	defer killHard(t, cmd)
	rdb = client(addr)
	defer rdb.Close()
	var total int64
	for k := range 4 {
		total += infoField(t, rdb, "fix:"+strconv.Itoa(k), "count")
	}
	if total != n-1 {
		t.Fatalf("%d decisions counted after the fix; %d were made and one record was damaged", total, n)
	}
}

// TestShutdownCommand: SHUTDOWN stops the process as SIGTERM does (exit
// 0, state kept); NOSAVE skips the final snapshot, the log keeps
// everything; ABORT with no shutdown under way is an error.
func TestShutdownCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary three times")
	}
	dir := t.TempDir()
	for i, how := range [][]string{{"SHUTDOWN"}, {"SHUTDOWN", "NOSAVE"}} {
		addr, cmd := startBinary(t, "--dir", dir)
		c := sluicetest.DialRaw(t, "tcp", addr)
		if got := c.Do(t, "SHUTDOWN", "ABORT"); got != "-ERR No shutdown in progress.\r\n" {
			t.Fatalf("SHUTDOWN ABORT: %q", got)
		}
		if got := c.Do(t, "SET", "k"+strconv.Itoa(i), "v"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		c.Conn().Write([]byte(fmt.Sprintf("*%d\r\n", len(how))))
		for _, a := range how {
			fmt.Fprintf(c.Conn(), "$%d\r\n%s\r\n", len(a), a)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%v: the process exited with %v", how, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%v: the process still runs 20 s later", how)
		}
	}
	addr, cmd := startBinary(t, "--dir", dir)
	defer killHard(t, cmd)
	c := sluicetest.DialRaw(t, "tcp", addr)
	for _, k := range []string{"k0", "k1"} {
		if got := c.Do(t, "GET", k); got != "$1\r\nv\r\n" {
			t.Fatalf("GET %s after the shutdowns: %q", k, got)
		}
	}
}

// TestRestartCountsNoReplayedScriptCommand: the commands a script called
// are counted when it runs, not again when a restart replays the log, as
// Redis counts nothing while loading; the state survives.
func TestRestartCountsNoReplayedScriptCommand(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	addr, cmd := startBinary(t, "--dir", dir, "--appendfsync", "always")
	rdb := client(addr)
	for range 3 {
		if err := rdb.Eval(ctx, "return redis.call('incr', KEYS[1])", []string{"counted"}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if stats := rdb.Info(ctx, "commandstats").Val(); !strings.Contains(stats, "cmdstat_incr:calls=3,") {
		t.Fatalf("before the restart: %q", stats)
	}
	rdb.Close()
	killHard(t, cmd)

	addr, _ = startBinary(t, "--dir", dir, "--appendfsync", "always")
	rdb = client(addr)
	defer rdb.Close()
	if v := rdb.Get(ctx, "counted").Val(); v != "3" {
		t.Fatalf("after the restart, counted is %q, want 3", v)
	}
	if stats := rdb.Info(ctx, "commandstats").Val(); strings.Contains(stats, "cmdstat_incr") || strings.Contains(stats, "cmdstat_eval") {
		t.Fatalf("the replay was counted: %q", stats)
	}
}

// TestLargeWritesStayUnderTheLogRecordLimit: one log record holds at most
// 64 MiB. A command that would journal more than 16 MiB (an MSET of 70
// values of 1 MB, a transaction of them) is refused before it runs; a
// script's write that would take its writes past it fails as redis.call,
// keeping the script's earlier writes; and a pipeline of such values on
// one shard is journaled in several records. Whatever was answered as
// done survives a kill -9. Before, the MSET ran, its record was refused
// (NOTDURABLE, with INFO still saying ok) and a restart lost it.
func TestLargeWritesStayUnderTheLogRecordLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a few hundred MB")
	}
	ctx := context.Background()
	dir := t.TempDir()
	args := []string{"--dir", dir, "--shards", "1"}
	addr, cmd := startBinary(t, args...)
	rdb := client(addr)
	value := strings.Repeat("v", 1_000_000)
	const tooLarge = "too large for the append-only file"

	var mset []any
	for i := range 70 {
		mset = append(mset, fmt.Sprintf("m%d", i), value)
	}
	if err := rdb.MSet(ctx, mset...).Err(); err == nil || !strings.Contains(err.Error(), tooLarge) {
		t.Fatalf("MSET of 70 MB: %v, want the too large error", err)
	}
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 20 {
			p.Set(ctx, fmt.Sprintf("x%d", i), value, 0)
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), tooLarge) {
		t.Fatalf("EXEC of 20 MB: %v, want the too large error", err)
	}
	script := `for i = 1, tonumber(ARGV[1]) do redis.call('SET', 's' .. i, ARGV[2]) end return 1`
	if err := rdb.Eval(ctx, script, nil, 40, value).Err(); err == nil || !strings.Contains(err.Error(), tooLarge) {
		t.Fatalf("a script writing 40 MB: %v, want the too large error", err)
	}
	written := 0
	for rdb.Exists(ctx, fmt.Sprintf("s%d", written+1)).Val() == 1 {
		written++
	}
	if written < 10 || written > 16 {
		t.Fatalf("the script kept %d of its writes before the error, want those up to 16 MiB", written)
	}
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 80 {
			p.Set(ctx, fmt.Sprintf("p%d", i), value, 0)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a pipeline of 80 SETs of 1 MB: %v (%v)", err, cmds[0].Err())
	}
	if info := rdb.Info(ctx, "persistence").Val(); !strings.Contains(info, "aof_last_write_status:ok") {
		t.Fatalf("INFO persistence: %s", info)
	}
	rdb.Close()
	killHard(t, cmd)

	addr, _ = startBinary(t, args...)
	rdb = client(addr)
	defer rdb.Close()
	for i := range 80 {
		if n := rdb.StrLen(ctx, fmt.Sprintf("p%d", i)).Val(); n != int64(len(value)) {
			t.Fatalf("after the restart, p%d holds %d bytes, want %d", i, n, len(value))
		}
	}
	for i := 1; i <= written+1; i++ {
		want := int64(1)
		if i > written {
			want = 0
		}
		if n := rdb.Exists(ctx, fmt.Sprintf("s%d", i)).Val(); n != want {
			t.Fatalf("after the restart, the script's key s%d exists %d, want %d", i, n, want)
		}
	}
	if n := rdb.Exists(ctx, "m0", "m69", "x0", "x19").Val(); n != 0 {
		t.Fatalf("after the restart, %d keys of the refused MSET and EXEC exist", n)
	}
}
