package server_test

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// startAccelShards starts a server with acceleration on or off.
func startAccelShards(t *testing.T, on bool, shards int) (*sluicetest.Server, *sluicetest.RawConn) {
	scripts := server.NewScripts(nil)
	scripts.SetAcceleration(on)
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{Scripts: scripts}, Engine: engine.Config{Scripts: scripts, Shards: shards}})
	return ts, sluicetest.DialRaw(t, "tcp", ts.Addr)
}

// pipeline sends cmds at once and reads every reply.
func pipeline(t *testing.T, rc *sluicetest.RawConn, cmds [][]string) []string {
	t.Helper()
	var buf bytes.Buffer
	for _, c := range cmds {
		buf.Write(sluicetest.EncodeCommand(c...))
	}
	conn := rc.Conn()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	errc := make(chan error, 1)
	go func() { _, err := conn.Write(buf.Bytes()); errc <- err }()
	r := bufio.NewReaderSize(conn, 1<<16)
	out := make([]string, len(cmds))
	for i := range cmds {
		b, err := sluicetest.ReadReply(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		out[i] = string(b)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNativeScriptsPipelinedMatchInterpreter: pipelines of known scripts
// (several per shard, in MULTI/EXEC too, with big values read and written
// between them, so that the batch's reply memory grows mid-pipeline)
// answer as the interpreter does, with one shard and with four.
func TestNativeScriptsPipelinedMatchInterpreter(t *testing.T) {
	for _, shards := range []int{1, 4} {
		t.Run(strconv.Itoa(shards), func(t *testing.T) {
			native, nc := startAccelShards(t, true, shards)
			interp, ic := startAccelShards(t, false, shards)
			start := sluicetest.FreezeClock(t, native.Client)
			sluicetest.SetClock(t, interp.Client, start)
			shas := make([]string, len(accelScripts))
			for i, s := range accelScripts {
				body := difftest.AccelBody(t, s)
				shas[i] = shaOf(body)
				nc.Do(t, "SCRIPT", "LOAD", body)
				ic.Do(t, "SCRIPT", "LOAD", body)
			}
			r := rand.New(rand.NewPCG(3, 9))
			big := strings.Repeat("v", 5000)
			for round := range 20 {
				var cmds [][]string
				for len(cmds) < 2000 {
					switch k := r.IntN(20); {
					case k == 0:
						cmds = append(cmds, []string{"SET", "big" + strconv.Itoa(r.IntN(3)), big})
					case k == 1:
						cmds = append(cmds, []string{"GET", "big" + strconv.Itoa(r.IntN(3))})
					case k == 2:
						cmds = append(cmds, []string{"MULTI"})
						for range 1 + r.IntN(4) {
							si := r.IntN(len(accelScripts))
							s := accelScripts[si]
							cmds = append(cmds, append([]string{"EVALSHA", shas[si], "1", accelKey(r, s.KeyPrefix())}, s.Args(r, true, start)...))
							cmds = append(cmds, []string{"GET", "big0"})
						}
						cmds = append(cmds, []string{"EXEC"})
					default:
						si := r.IntN(len(accelScripts))
						s := accelScripts[si]
						cmds = append(cmds, append([]string{"EVALSHA", shas[si], "1", accelKey(r, s.KeyPrefix())}, s.Args(r, true, start)...))
					}
				}
				got, want := pipeline(t, nc, cmds), pipeline(t, ic, cmds)
				for i := range cmds {
					if got[i] != want[i] {
						t.Fatalf("round %d cmd %d %.100q: native %q, interpreter %q", round, i, cmds[i], got[i], want[i])
					}
				}
			}
			n := nc.Do(t, "INFO", "scripting")
			if strings.Contains(n, "script_runs_native:0\r") {
				t.Fatal("nothing ran natively")
			}
			t.Logf("%s", strings.ReplaceAll(n, "\r\n", " "))
		})
	}
}

// captureJournal keeps the records the engine appends.
type captureJournal struct {
	mu   sync.Mutex
	recs [][]byte
}

func (j *captureJournal) Append(rec []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recs = append(j.recs, bytes.Clone(rec))
	return uint64(len(j.recs)), nil
}

func (j *captureJournal) Err() error { return nil }

// TestNativeScriptEffectsReplay: a native run's effects, replayed from the
// journal into an engine that runs no script natively, rebuild the state.
func TestNativeScriptEffectsReplay(t *testing.T) {
	native, nc := startAccelShards(t, true, 4)
	j := &captureJournal{}
	native.Engine.SetJournal(j)
	start := sluicetest.FreezeClock(t, native.Client)
	shas := make([]string, len(accelScripts))
	for i, s := range accelScripts {
		body := difftest.AccelBody(t, s)
		shas[i] = shaOf(body)
		nc.Do(t, "SCRIPT", "LOAD", body)
	}
	r := rand.New(rand.NewPCG(4, 4))
	for range 10 {
		var cmds [][]string
		for len(cmds) < 1000 {
			si := r.IntN(len(accelScripts))
			s := accelScripts[si]
			if r.IntN(10) == 0 {
				cmds = append(cmds, []string{"MULTI"})
				cmds = append(cmds, append([]string{"EVALSHA", shas[si], "1", accelKey(r, s.KeyPrefix())}, s.Args(r, true, start)...))
				cmds = append(cmds, []string{"EXEC"})
				continue
			}
			cmds = append(cmds, append([]string{"EVALSHA", shas[si], "1", accelKey(r, s.KeyPrefix())}, s.Args(r, true, start)...))
		}
		pipeline(t, nc, cmds)
	}
	fresh, fc := startAccelShards(t, false, 4)
	sluicetest.SetClock(t, fresh.Client, start)
	j.mu.Lock()
	recs := j.recs
	j.mu.Unlock()
	for _, rec := range recs {
		if _, err := fresh.Engine.Replay(rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	ns, fs := accelState(t, nc), accelState(t, fc)
	for i := range ns {
		if ns[i] != fs[i] {
			t.Errorf("native %q, replayed %q", ns[i], fs[i])
		}
	}
	t.Logf("%d records", len(recs))
}
