package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// fakeSluiceEnv makes the test binary act as a stand-in sluice-server (see
// TestMain), so the Sluice starter and modes are exercised before the real
// server exists. Its value selects a behaviour: "ok", or "silent" (never
// prints the ready line).
const fakeSluiceEnv = "SLUICE_BENCH_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeSluiceEnv); mode != "" {
		os.Exit(fakeSluice(mode, os.Args[1:]))
	}
	sluicetest.Main(m)
}

// fakeSluice listens where --bind/--port say, logs the ready line as the
// real server does, answers PING and the decision commands (allowing
// every odd key suffix), and exits 0 on SIGTERM.
func fakeSluice(mode string, args []string) int {
	bind, port := "127.0.0.1", "6379"
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--bind":
			bind = args[i+1]
		case "--port":
			port = args[i+1]
			if port == "auto" {
				port = "0"
			}
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, port))
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	srv := redcon.NewServer("", func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "PING":
			conn.WriteString("PONG")
		case "CL.THROTTLE", "SW.CHECK", "FW.CHECK":
			key := cmd.Args[1]
			limited := int64(0)
			if key[len(key)-1]%2 == 0 {
				limited = 1
			}
			conn.WriteArray(5)
			conn.WriteInt64(limited)
			conn.WriteInt(100)
			conn.WriteInt(0)
			conn.WriteInt(-1)
			conn.WriteInt(0)
		default:
			conn.WriteError(fmt.Sprintf("ERR unknown command '%s'", cmd.Args[0]))
		}
	}, nil, nil)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		srv.Close()
	}()
	if mode != "silent" {
		cwd, _ := os.Getwd()
		log.Info("Ready to accept connections", "addr", ln.Addr().String(), "shards", 2, "cwd", cwd, "args", strings.Join(args, " "))
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Info("serve ended", "err", err)
	}
	return 0
}

func startFakeSluice(t *testing.T, mode string, timeout time.Duration) (*Server, error) {
	t.Helper()
	t.Setenv(fakeSluiceEnv, mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return StartSluice(context.Background(), SluiceOptions{Path: exe, ReadyTimeout: timeout})
}

func TestSluiceStarterAndModes(t *testing.T) {
	s, err := startFakeSluice(t, "ok", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") || strings.HasSuffix(s.Addr, ":0") {
		t.Fatalf("addr %q", s.Addr)
	}
	// Persistence off, and a working directory of its own.
	out := s.Output()
	wd, _ := os.Getwd()
	if !strings.Contains(out, "--appendonly no") || !strings.Contains(out, "sluice-bench-sluice-") || strings.Contains(out, "cwd="+wd+" ") {
		t.Fatalf("server started without --appendonly no in a temp dir:\n%s", out)
	}
	target := Target{Kind: KindSluice, Addr: s.Addr}
	for _, mode := range []string{"cl.throttle", "sw.check", "fw.check"} {
		res, err := Run(context.Background(), Config{Target: target, Mode: mode, Requests: 1000, Conns: 3, Pipeline: 7, Keys: 10})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.Requests != 1000 || res.Errors != 0 || res.Allowed == 0 || res.Limited == 0 {
			t.Fatalf("%s: %+v", mode, res)
		}
	}
	res, err := Run(context.Background(), Config{Target: target, Mode: "sl.check", Requests: 20, Conns: 1})
	if err != nil || res.Errors != 20 {
		t.Fatalf("unknown command on the server: err %v, %d errors", err, res.Errors)
	}
}

func TestSluiceStarterTimesOut(t *testing.T) {
	start := time.Now()
	s, err := startFakeSluice(t, "silent", 500*time.Millisecond)
	if err == nil {
		s.Close()
		t.Fatal("started without a ready line")
	}
	if !strings.Contains(err.Error(), "not ready within") || time.Since(start) > 5*time.Second {
		t.Fatalf("err after %v: %v", time.Since(start), err)
	}
}

func TestSluiceStarterReportsEarlyExit(t *testing.T) {
	_, err := StartSluice(context.Background(), SluiceOptions{Path: "false"})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseReadyLine(t *testing.T) {
	for _, tc := range []struct {
		line, addr string
		ok         bool
	}{
		{`time=2026-01-01T00:00:00Z level=INFO msg="Ready to accept connections" addr=127.0.0.1:40123`, "127.0.0.1:40123", true},
		{`level=INFO msg="Ready to accept connections" shards=2 addr="127.0.0.1:7000" pid=1`, "127.0.0.1:7000", true},
		{`level=INFO msg="Ready to accept connections" raddr=1 addr=[::1]:7000`, "[::1]:7000", true},
		{`level=INFO msg="listening" addr=127.0.0.1:1`, "", false},
		{`level=INFO msg="Ready to accept connections"`, "", false},
	} {
		addr, ok := parseReadyLine(tc.line)
		if addr != tc.addr || ok != tc.ok {
			t.Errorf("%s: got %q %v, want %q %v", tc.line, addr, ok, tc.addr, tc.ok)
		}
	}
}

func TestCheckAddrLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		dial string // "" means refused
	}{
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"127.8.9.10:1", "127.8.9.10:1"},
		{"[::1]:6379", "[::1]:6379"},
		{"[::ffff:127.0.0.1]:6379", "127.0.0.1:6379"},
		{"localhost:6379", "127.0.0.1:6379"},
		{"10.0.0.1:6379", ""},
		{"192.168.1.1:6379", ""},
		{"8.8.8.8:53", ""},
		{"[2001:db8::1]:6379", ""},
		{"[fe80::1%lo]:6379", ""},
		{"0.0.0.0:6379", ""},
		{"example.com:6379", ""},
		{"redis.internal:6379", ""},
		{"127.0.0.1", ""}, // no port
	} {
		got, err := CheckAddr(tc.addr, false)
		if tc.dial == "" {
			if err == nil {
				t.Errorf("%s: accepted as %s", tc.addr, got)
			}
			continue
		}
		if err != nil || got != tc.dial {
			t.Errorf("%s: got %q, %v; want %q", tc.addr, got, err, tc.dial)
		}
	}
	if _, err := CheckAddr("10.0.0.1:6379", false); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("refusal is not ErrNotLoopback: %v", err)
	}
	if got, err := CheckAddr("10.0.0.1:6379", true); err != nil || got != "10.0.0.1:6379" {
		t.Errorf("--allow-remote: %q, %v", got, err)
	}
	// Run refuses before sending anything.
	_, err := Run(context.Background(), Config{Target: Target{Addr: "192.0.2.1:6379"}, Mode: "ping", Requests: 1})
	if !errors.Is(err, ErrNotLoopback) {
		t.Errorf("Run against a remote address: %v", err)
	}
}

func TestPlanPairsFamilies(t *testing.T) {
	sl := Target{Kind: KindSluice, Addr: "127.0.0.1:1"}
	rd := Target{Kind: KindRedis, Addr: "127.0.0.1:2"}
	any := Target{Kind: KindAny, Addr: "127.0.0.1:3"}
	jobs, notes, err := Plan([]string{"lua-gcra", "cl.throttle", "incr", "sl.check", "sliding-window"}, []Target{sl, rd})
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{sl, "cl.throttle"}, {rd, "lua-gcra"},
		{sl, "incr"}, {rd, "incr"},
		{sl, "sl.check"},
		{sl, "sw.check"}, {rd, "lua-sw"},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("jobs %v\nwant %v", jobs, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "sl.check") {
		t.Fatalf("notes %v", notes)
	}
	jobs, _, err = Plan([]string{"cl.throttle", "lua-gcra"}, []Target{any})
	if err != nil || len(jobs) != 2 || jobs[0].Mode != "cl.throttle" || jobs[1].Mode != "lua-gcra" {
		t.Fatalf("as-named target: %v %v", jobs, err)
	}
	if _, _, err := Plan([]string{"nope"}, []Target{any}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

func TestReports(t *testing.T) {
	results := []Result{
		{Target: "sluice", Kind: "sluice", Mode: "cl.throttle", Family: "gcra", Conns: 50, Pipeline: 16,
			Requests: 1000, Allowed: 900, Limited: 100, Throughput: 200000,
			ServerCPU: 1100 * time.Microsecond, ServerCPUPerOp: 1.1, ServerCPUUtil: 0.97,
			Latency: Latency{P50: 15 * time.Microsecond, P90: 20 * time.Microsecond, P99: 2 * time.Millisecond, P999: 3 * time.Millisecond, Max: time.Second}},
		{Target: "redis", Kind: "redis", Mode: "lua-gcra", Family: "gcra", Conns: 50, Pipeline: 16,
			Requests: 1000, Allowed: 899, Limited: 100, Errors: 1, Throughput: 100000, FirstError: "NOSCRIPT No matching script",
			ServerCPU: 7400 * time.Microsecond, ServerCPUPerOp: 7.4, ServerCPUUtil: 0.99},
		{Target: "redis", Kind: "redis", Mode: "ping", Family: "ping", Conns: 50, Pipeline: 16, Requests: 10, Throughput: 10},
	}
	var table bytes.Buffer
	if err := WriteTable(&table, results); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{"decisions/s", "15.0us", "2.00ms", "1.00s", "gcra: sluice cl.throttle / redis lua-gcra throughput = 2.00x",
		"gcra: redis lua-gcra uses 7.40 us/decision, sluice cl.throttle 1.10 us (6.7x less)",
		"1.10us", "97%", "NOSCRIPT"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, Report{Results: results}); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Results[0].Latency.P99 != 2*time.Millisecond {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	var cs bytes.Buffer
	if err := WriteCSV(&cs, results); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(rows) != 4 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("CSV: %v %v", err, rows)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	if rows[1][col["server_cpu_us_per_op"]] != "1.100" || rows[2][col["server_cpu_ns"]] != "7400000" ||
		rows[1][col["server_cpu_util"]] != "0.970" || rows[3][col["server_cpu_us_per_op"]] != "0.000" {
		t.Fatalf("CSV CPU columns: %v", rows)
	}
	if back.Results[0].ServerCPUPerOp != 1.1 || !strings.Contains(js.String(), `"server_cpu_us_per_op": 1.1`) ||
		strings.Contains(js.String(), `"server_cpu_us_per_op": 0`) {
		t.Fatalf("JSON CPU fields: %s", js.String())
	}
}

func TestConfigValidation(t *testing.T) {
	base := Config{Target: Target{Addr: "127.0.0.1:1"}, Mode: "ping"}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Mode = "nope" },
		func(c *Config) { c.Conns = -1 },
		func(c *Config) { c.Hot = 1.5 },
		func(c *Config) { c.Keys = -3 },
		func(c *Config) { c.Limit.Period = -1 },
		func(c *Config) { c.Target.Addr = "" },
	} {
		c := base
		bad(&c)
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
	c, _, err := base.prepare()
	if err != nil || c.Duration != defaultDuration || c.Conns != defaultConns || c.Limit.Burst != 99 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}
