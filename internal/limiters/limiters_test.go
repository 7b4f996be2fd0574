// Package limiters runs unmodified rate-limiter libraries, as users install
// them (Go modules, npm packages, Debian's python3-limits), against a real
// redis-server and against Sluice, and requires the same observable
// outcomes from both: the allowed/refused sequence, remaining counts,
// retry-after and reset where the clock allows, and the stored values and
// TTLs read back with the same commands.
//
// Every scenario is a transcript: a list of steps, each a JSON object with
// a "step" name and the outcomes of that step. Go scenarios build theirs in
// the test; Node.js and Python scenarios are programs (internal/clients/
// node/limiters, internal/clients/python) that take the server's address
// and print theirs. The Redis transcript is checked against what the
// library is known to do (so that a scenario that breaks on both servers
// alike cannot pass), then Sluice's is compared with it field by field.
//
// Time: the libraries read the client's clock or the server's TIME, so
// the scenarios are made deterministic by their sizes: bursts run well
// inside a window (windows of a minute, emission intervals of seconds or
// exact binary fractions of a second), and a value that measures time is
// compared with a tolerance named by its field: "_ms" (milliseconds,
// within 1000 ms of each other) and "_s" (seconds, within 1 s), except
// that the integers -1 (no expiry) and -2 (no key) must be equal. No
// transcript holds an absolute time: the scenarios emit times relative to
// the clock they came from, since the two runs happen seconds apart.
//
// Each test also has a subtest "replay": the commands Redis executed for
// the scenario (MONITOR, scripts' own commands included), less scripting
// and connection commands, sent to a fresh Redis and a fresh Sluice side
// by side, replies compared byte for byte (replay_test.go). It tells a
// failure of scripting from one of the commands around it.
//
// Go scenarios also record, as their last step ("wire"), each command the
// library sent and its outcome (an error's text, a script reply's shape).
//
// Environment: LIMITERS_SECOND=redis runs a second redis-server in
// Sluice's place (a check of the scenarios: Redis must agree with
// itself); LIMITERS_DUMP=DIR writes both transcripts of each test to DIR.
package limiters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

func TestMain(m *testing.M) { sluicetest.Main(m) }

// endpoint is one server a scenario runs against.
type endpoint struct {
	name    string // "redis" or "sluice"
	network string // "unix" or "tcp"
	addr    string // a socket path or host:port
}

// endpoints starts a real redis-server (the oracle, first) and an
// in-process Sluice, both fresh, both stopped when the test ends.
//
// With LIMITERS_SECOND=redis in the environment, the second is another
// redis-server instead of Sluice: a check of the scenarios and the
// comparison themselves (run them so many times; Redis must always agree
// with itself).
func endpoints(t *testing.T) []endpoint {
	t.Helper()
	r := sluicetest.StartRedis(t)
	if os.Getenv("LIMITERS_SECOND") == "redis" {
		r2 := sluicetest.StartRedis(t)
		return []endpoint{{"redis", r.Network, r.Addr}, {"second redis", r2.Network, r2.Addr}}
	}
	s := sluicetest.Start(t, sluicetest.Options{})
	return []endpoint{{"redis", r.Network, r.Addr}, {"sluice", "tcp", s.Addr}}
}

// step is one step of a transcript.
type step map[string]any

// transcript collects a Go scenario's steps.
type transcript struct{ steps []step }

// add records a step: its name, then field, value pairs.
func (tr *transcript) add(name string, kv ...any) {
	s := step{"step": name}
	for i := 0; i+1 < len(kv); i += 2 {
		s[kv[i].(string)] = kv[i+1]
	}
	tr.steps = append(tr.steps, s)
}

// errText is an error as a transcript holds it: its text, or nil.
func errText(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

// normalize passes a transcript through JSON (numbers kept exact), so
// that Go and program transcripts compare alike.
func normalize(t *testing.T, v any) []any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, b)
}

func decode(t *testing.T, b []byte) []any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out []any
	if err := d.Decode(&out); err != nil {
		t.Fatalf("not a JSON transcript (%v):\n%s", err, b)
	}
	return out
}

// compareTranscripts requires got (Sluice) to match want (Redis) step by
// step, with the tolerances of the package comment, and reports every
// difference.
//
// With LIMITERS_DUMP=DIR, both transcripts are also written to DIR (as
// TEST.redis.json and TEST.sluice.json), to read whole.
func compareTranscripts(t *testing.T, want, got []any) {
	t.Helper()
	if dir := os.Getenv("LIMITERS_DUMP"); dir != "" {
		base := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
		for suffix, tr := range map[string][]any{".redis.json": want, ".sluice.json": got} {
			b, _ := json.MarshalIndent(tr, "", "  ")
			if err := os.WriteFile(base+suffix, b, 0o644); err != nil {
				t.Log(err)
			}
		}
	}
	var diffs []string
	n := max(len(want), len(got))
	for i := range n {
		var w, g any
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		name := fmt.Sprintf("#%d", i)
		if m, ok := w.(map[string]any); ok {
			name = fmt.Sprintf("#%d %v", i, m["step"])
		}
		diffs = diffValues(diffs, name, "", w, g)
	}
	if len(diffs) == 0 {
		return
	}
	const most = 30
	if len(diffs) > most {
		diffs = append(diffs[:most], fmt.Sprintf("... and %d more", len(diffs)-most))
	}
	t.Errorf("Sluice differs from Redis in %d places:\n  %s", len(diffs), strings.Join(diffs, "\n  "))
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	t.Logf("Redis transcript:  %s", wb)
	t.Logf("Sluice transcript: %s", gb)
}

// diffValues appends where w and g differ. at is the path shown; name is
// the field whose tolerance applies (an array's elements take their
// field's).
func diffValues(diffs []string, at, name string, w, g any) []string {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			return append(diffs, fmt.Sprintf("%s: Redis %s, Sluice %s", at, show(w), show(g)))
		}
		keys := make([]string, 0, len(wv)+len(gv))
		for k := range wv {
			keys = append(keys, k)
		}
		for k := range gv {
			if _, ok := wv[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			diffs = diffValues(diffs, at+"."+k, k, wv[k], gv[k])
		}
		return diffs
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return append(diffs, fmt.Sprintf("%s: Redis %s, Sluice %s", at, show(w), show(g)))
		}
		for i := range wv {
			diffs = diffValues(diffs, fmt.Sprintf("%s[%d]", at, i), name, wv[i], gv[i])
		}
		return diffs
	}
	if tol, ok := tolerance(name); ok {
		if within(w, g, tol) {
			return diffs
		}
		return append(diffs, fmt.Sprintf("%s: Redis %s, Sluice %s (tolerance %v)", at, show(w), show(g), tol))
	}
	if fmt.Sprint(w) != fmt.Sprint(g) || fmt.Sprintf("%T", w) != fmt.Sprintf("%T", g) {
		return append(diffs, fmt.Sprintf("%s: Redis %s, Sluice %s", at, show(w), show(g)))
	}
	return diffs
}

// tolerance is how far apart two measurements of time named key may be.
func tolerance(key string) (float64, bool) {
	switch {
	case strings.HasSuffix(key, "_ms"):
		return 1000, true
	case strings.HasSuffix(key, "_s"):
		return 1, true
	}
	return 0, false
}

// within: both numbers, equal if either is exactly -1 or -2 (answers
// of TTL and PTTL, not durations), else at most tol apart. Anything else
// must be equal.
func within(w, g any, tol float64) bool {
	wn, ok1 := w.(json.Number)
	gn, ok2 := g.(json.Number)
	if !ok1 || !ok2 {
		return fmt.Sprint(w) == fmt.Sprint(g) && fmt.Sprintf("%T", w) == fmt.Sprintf("%T", g)
	}
	a, err1 := wn.Float64()
	b, err2 := gn.Float64()
	if err1 != nil || err2 != nil {
		return false
	}
	answer := func(n json.Number) bool { return n == "-1" || n == "-2" }
	if answer(wn) || answer(gn) {
		return wn == gn
	}
	return math.Abs(a-b) <= tol
}

func show(v any) string {
	if v == nil {
		return "(absent or null)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// field returns the named step's field in a transcript.
func field(t *testing.T, tr []any, name, key string) any {
	t.Helper()
	for _, s := range tr {
		if m, ok := s.(map[string]any); ok && m["step"] == name {
			v, ok := m[key]
			if !ok {
				t.Fatalf("step %q has no field %q: %s", name, key, show(m))
			}
			return v
		}
	}
	t.Fatalf("no step %q in the transcript", name)
	return nil
}

// splitCheck splits "step/field" at its last slash (steps may hold
// slashes, fields do not).
func splitCheck(c string) (name, key string, ok bool) {
	i := strings.LastIndex(c, "/")
	if i < 0 {
		return "", "", false
	}
	return c[:i], c[i+1:], true
}

// expect checks the Redis transcript: each of its fields named by
// "step/field" must be want (compared as JSON text). It keeps a scenario
// honest: against Redis it must do what the library documents.
func expect(t *testing.T, tr []any, checks map[string]any) {
	t.Helper()
	keys := make([]string, 0, len(checks))
	for k := range checks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, key, ok := splitCheck(k)
		if !ok {
			t.Fatalf("bad check %q", k)
		}
		got := show(field(t, tr, name, key))
		if want := show(checks[k]); got != want {
			t.Errorf("against Redis, %s is %s, want %s", k, got, want)
		}
	}
}

// expectRange checks, in the Redis transcript, that a measured time lies
// in [lo, hi].
func expectRange(t *testing.T, tr []any, check string, lo, hi float64) {
	t.Helper()
	name, key, _ := splitCheck(check)
	v := field(t, tr, name, key)
	n, ok := v.(json.Number)
	f, err := n.Float64()
	if !ok || err != nil || f < lo || f > hi {
		t.Errorf("against Redis, %s is %s, want within [%v, %v]", check, show(v), lo, hi)
	}
}

// noErrors requires that no step of the Redis transcript failed, except
// those named (whose errors are part of the scenario).
func noErrors(t *testing.T, tr []any, except ...string) {
	t.Helper()
	for _, s := range tr {
		m, _ := s.(map[string]any)
		if m["err"] == nil {
			continue
		}
		allowed := false
		for _, e := range except {
			allowed = allowed || m["step"] == e
		}
		if !allowed {
			t.Errorf("against Redis, step %v failed: %v", m["step"], m["err"])
		}
	}
}

// Programs.

// nodeLimiters finds node with the limiter packages installed (npm ci in
// internal/clients/node); it skips without them, except under CI.
func nodeLimiters(t *testing.T, packages ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		for _, p := range packages {
			if _, err = os.Stat(filepath.Join("../clients/node/node_modules", p, "package.json")); err != nil {
				break
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and %v are required under CI (npm ci in internal/clients/node): %v", packages, err)
		}
		t.Skipf("node or %v missing (npm ci in internal/clients/node): %v", packages, err)
	}
	return node
}

// pythonLimits finds a python3 with Debian's python3-limits and
// python3-redis; it skips without them, except under CI.
func pythonLimits(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(py); err == nil && exec.Command(path, "-c", "import limits, redis").Run() == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("python3 with limits and redis is required under CI (apt-get install python3-limits python3-redis)")
	}
	t.Skip("no python3 with the limits and redis modules (apt-get install python3-limits)")
	return ""
}

// runProgram runs a scenario program and returns its transcript. The
// program prints a JSON transcript on stdout and exits 0, recording a
// library's failures as steps; anything else fails the test.
func runProgram(t *testing.T, e endpoint, bin string, args ...string) []any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: %s took %v", e.name, filepath.Base(args[0]), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s against %s: %v\nstdout: %s\nstderr: %s", args[0], e.name, err, stdout.Bytes(), stderr.Bytes())
	}
	return decode(t, stdout.Bytes())
}
