// Command sluice-bench loads Sluice and a real Redis side by side with the
// same workload and prints one table. See package bench for the flags and
// what each mode sends.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/sluicehq/sluice/bench"
	"github.com/sluicehq/sluice/internal/certs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1 // a run failed, or a target answered errors
	exitUsage   = 2
	exitNoStart = 3 // a server could not be started
)

type options struct {
	host        string
	port        int
	conns       int
	pipeline    int
	requests    int64
	duration    time.Duration
	rate        float64
	keys        int
	hot         float64
	modes       string
	jsonPath    string
	plotPath    string
	csvPath     string
	seed        uint64
	keyPrefix   string
	timeout     time.Duration
	allowRemote bool
	cpu         int
	quiet       bool
	memoryKeys  int

	limit  int64
	period float64
	burst  int64
	cost   int64

	redisAddr   string
	startRedis  bool
	redisServer string
	redisCPU    int

	sluiceAddr  string
	startSluice string
	sluiceCPU   int
	sluiceArgs  string
	tls         bool
	cacert      string
	user        string
	pass        string
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "experiment" {
		return runExperiments(args[1:], stdout, stderr)
	}
	var o options
	fs := flag.NewFlagSet("sluice-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice-bench [flags]
       sluice-bench experiment NAME... [flags]   (see sluice-bench experiment -h)

Loads Sluice and/or a real Redis with the same workload and prints one table.
Load goes to loopback only. Each family in -t runs on every target in that
server's own terms (gcra: CL.THROTTLE on Sluice, the GCRA Lua script on Redis).

Example:
  sluice-bench --start-sluice ./sluice-server --sluice-cpu 0 \
      --start-redis --redis-cpu 0 --cpu 1 -t gcra,incr -c 50 -P 16 -d 5s

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.host, "h", "127.0.0.1", "target host for -t modes run as named (used when no --redis-*/--sluice-* target is given, or when -h/-p is set)")
	fs.IntVar(&o.port, "p", 6379, "target port for -h")
	fs.IntVar(&o.conns, "c", 50, "connections per run")
	fs.IntVar(&o.pipeline, "P", 1, "requests per pipeline batch")
	fs.Int64Var(&o.requests, "n", 0, "total requests per run (0: bounded by -d only)")
	fs.DurationVar(&o.duration, "d", 0, "duration per run (default 5s when -n is not given)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: total requests/s per run, latency from intended send time (0: closed loop)")
	fs.IntVar(&o.keys, "keys", 10000, "distinct keys, chosen uniformly")
	fs.Float64Var(&o.hot, "hot", 0, "fraction of requests (0..1) on one hot key")
	fs.StringVar(&o.modes, "t", "gcra", "modes or families, comma-separated: "+strings.Join(bench.ModeNames(), ", ")+"; families: ping, incr, gcra, sliding-window, fixed-window, sliding-log; limiter libraries' scripts, sent as they send them: redis-rate, redis-rate-atmost, rlflex, rate-limit-redis, ulule, fastify, limits-fixed, limits-moving")
	fs.StringVar(&o.jsonPath, "json", "", "write results as JSON to this file")
	fs.StringVar(&o.plotPath, "plot", "", "write charts (decisions/s and latency per target) as PNG files named after this path")
	fs.StringVar(&o.csvPath, "csv", "", "write results as CSV to this file")
	fs.Uint64Var(&o.seed, "seed", 0, "key-choice seed (0: from the clock; the seed used is printed)")
	fs.StringVar(&o.keyPrefix, "key-prefix", "", `key prefix (default "sluice-bench:<mode>:")`)
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "dial and per-reply timeout")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow targets outside loopback")
	fs.IntVar(&o.cpu, "cpu", -1, "pin the load generator to this CPU (re-executes itself with that affinity)")
	fs.BoolVar(&o.quiet, "q", false, "no progress bar")
	fs.IntVar(&o.memoryKeys, "memory", 0, "instead of load: store this many keys of each data-type shape (2-field hash, 100-member sorted set, 10-element list, string) on every target and report bytes per key (used_memory, and RSS for started servers)")

	fs.Int64Var(&o.limit, "limit", 100, "limit: units per period (CL.THROTTLE count; SW/SL/FW limit)")
	fs.Float64Var(&o.period, "period", 1, "period or window in seconds (decimal allowed)")
	fs.Int64Var(&o.burst, "burst", 0, "CL.THROTTLE max_burst (default limit-1); redis-rate's burst (default limit, as PerSecond sets it)")
	fs.Int64Var(&o.cost, "cost", 1, "units per request")

	fs.StringVar(&o.redisAddr, "redis-addr", "", "measure an existing Redis at host:port")
	fs.BoolVar(&o.startRedis, "start-redis", false, "start redis-server on a free 127.0.0.1 port (no persistence) and measure it")
	fs.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary for --start-redis")
	fs.IntVar(&o.redisCPU, "redis-cpu", -1, "pin the started redis-server to this CPU (taskset)")

	fs.StringVar(&o.sluiceAddr, "sluice-addr", "", "measure an existing Sluice at host:port")
	fs.StringVar(&o.startSluice, "start-sluice", "", "start this sluice-server binary on a free 127.0.0.1 port and measure it")
	fs.IntVar(&o.sluiceCPU, "sluice-cpu", -1, "pin the started sluice-server to this CPU (taskset)")
	fs.StringVar(&o.sluiceArgs, "sluice-args", "", "extra arguments for the started sluice-server, space-separated")
	fs.BoolVar(&o.tls, "tls", false, "TLS: started servers listen for TLS only, with certificates made for the run; every connection does the handshake")
	fs.StringVar(&o.cacert, "cacert", "", "with --tls and --*-addr targets: the CA their certificates chain to")
	fs.StringVar(&o.user, "user", "", "ACL user every connection authenticates as (AUTH user password)")
	fs.StringVar(&o.pass, "pass", "", "password every connection authenticates with (AUTH)")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice-bench: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.redisAddr != "" && o.startRedis {
		fmt.Fprintln(stderr, "sluice-bench: --redis-addr and --start-redis are exclusive")
		return exitUsage
	}
	if o.sluiceAddr != "" && o.startSluice != "" {
		fmt.Fprintln(stderr, "sluice-bench: --sluice-addr and --start-sluice are exclusive")
		return exitUsage
	}

	// First, before anything is started: pinning re-executes this binary.
	if o.cpu >= 0 {
		if err := bench.PinSelf(o.cpu); err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			return exitUsage
		}
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var tlsFiles *bench.TLSFiles
	var clientTLS *tls.Config
	if o.tls {
		var err error
		if tlsFiles, clientTLS, err = runTLS(o.cacert); err != nil {
			fmt.Fprintf(stderr, "sluice-bench: --tls: %v\n", err)
			return exitUsage
		}
		if tlsFiles != nil {
			defer os.RemoveAll(filepath.Dir(tlsFiles.CAFile))
		}
	}
	secured := func(t bench.Target) bench.Target {
		t.TLS, t.User, t.Password = clientTLS, o.user, o.pass
		return t
	}

	var targets []bench.Target
	var servers []*bench.Server
	defer func() {
		for _, s := range servers {
			if err := s.Close(); err != nil {
				fmt.Fprintf(stderr, "sluice-bench: stop %s: %v\n", s.Name, err)
			}
		}
	}()
	if o.startSluice != "" {
		s, err := bench.StartSluice(ctx, bench.SluiceOptions{
			Path: o.startSluice, CPU: o.sluiceCPU, PinCPU: o.sluiceCPU >= 0, Args: strings.Fields(o.sluiceArgs), TLS: tlsFiles,
		})
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			return exitNoStart
		}
		servers = append(servers, s)
		fmt.Fprintf(stderr, "started sluice-server pid %d on %s%s\n", s.Pid(), s.Addr, cpuNote(s.CPU))
		targets = append(targets, secured(bench.Target{Kind: bench.KindSluice, Addr: s.Addr, Pid: s.Pid()}))
	} else if o.sluiceAddr != "" {
		targets = append(targets, secured(bench.Target{Kind: bench.KindSluice, Addr: o.sluiceAddr}))
	}
	if o.startRedis {
		s, err := bench.StartRedis(ctx, bench.RedisOptions{Path: o.redisServer, CPU: o.redisCPU, PinCPU: o.redisCPU >= 0, TLS: tlsFiles})
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			return exitNoStart
		}
		servers = append(servers, s)
		fmt.Fprintf(stderr, "started redis-server pid %d on %s%s\n", s.Pid(), s.Addr, cpuNote(s.CPU))
		targets = append(targets, secured(bench.Target{Kind: bench.KindRedis, Addr: s.Addr, Pid: s.Pid()}))
	} else if o.redisAddr != "" {
		targets = append(targets, secured(bench.Target{Kind: bench.KindRedis, Addr: o.redisAddr}))
	}
	if len(targets) == 0 || set["h"] || set["p"] {
		addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
		targets = append(targets, secured(bench.Target{Kind: bench.KindAny, Addr: addr}))
	}
	// Refuse non-loopback targets before any traffic, with one clear message.
	for _, t := range targets {
		if _, err := bench.CheckAddr(t.Addr, o.allowRemote); err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			return exitUsage
		}
	}

	if o.memoryKeys > 0 {
		fmt.Fprint(stdout, bench.MemoryTable(bench.MeasureMemory(ctx, targets, o.memoryKeys, 30*time.Second)))
		return exitOK
	}

	jobs, notes, err := bench.Plan(strings.Split(o.modes, ","), targets)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
		return exitUsage
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	var progress io.Writer
	if f, ok := stderr.(*os.File); ok && !o.quiet && term.IsTerminal(int(f.Fd())) {
		progress = stderr
	}
	fmt.Fprintf(stderr, "seed %d; %d run(s)\n", o.seed, len(jobs))

	report := bench.Report{Started: time.Now().UTC(), Settings: map[string]string{}}
	fs.VisitAll(func(f *flag.Flag) { report.Settings[f.Name] = f.Value.String() })
	report.Settings["seed"] = strconv.FormatUint(o.seed, 10)

	status := exitOK
	for _, j := range jobs {
		res, err := bench.Run(ctx, bench.Config{
			Target:      j.Target,
			Mode:        j.Mode,
			Conns:       o.conns,
			Pipeline:    o.pipeline,
			Requests:    o.requests,
			Duration:    o.duration,
			Rate:        o.rate,
			Keys:        o.keys,
			Hot:         o.hot,
			Seed:        o.seed,
			KeyPrefix:   o.keyPrefix,
			Limit:       bench.Limit{Count: o.limit, Period: o.period, Burst: o.burst, Cost: o.cost},
			Timeout:     o.timeout,
			AllowRemote: o.allowRemote,
			Progress:    progress,
		})
		report.Results = append(report.Results, res)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %s %s: %v\n", res.Target, j.Mode, err)
			status = exitFailed
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if !res.OK() {
			status = exitFailed
		}
	}

	if err := bench.WriteTable(stdout, report.Results); err != nil {
		fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
		status = exitFailed
	}
	if o.jsonPath != "" {
		if err := writeFile(o.jsonPath, func(w io.Writer) error { return bench.WriteJSON(w, report) }); err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			status = exitFailed
		}
	}
	if o.plotPath != "" {
		files, err := bench.WritePlots(o.plotPath, report.Results)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			status = exitFailed
		} else {
			fmt.Fprintf(stderr, "charts: %s\n", strings.Join(files, ", "))
		}
	}
	if o.csvPath != "" {
		if err := writeFile(o.csvPath, func(w io.Writer) error { return bench.WriteCSV(w, report.Results) }); err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			status = exitFailed
		}
	}
	return status
}

func cpuNote(cpu int) string {
	if cpu < 0 {
		return ""
	}
	return fmt.Sprintf(" (CPU %d)", cpu)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// runTLS prepares --tls: with --cacert, a client config trusting it (for
// --*-addr targets); otherwise certificates made for this run, which the
// started servers use.
func runTLS(cacert string) (*bench.TLSFiles, *tls.Config, error) {
	if cacert != "" {
		f := &bench.TLSFiles{CAFile: cacert}
		cfg, err := f.ClientConfig()
		return nil, cfg, err
	}
	dir, err := os.MkdirTemp("", "sluice-bench-tls-")
	if err != nil {
		return nil, nil, err
	}
	if err := certs.Generate(dir, []string{"127.0.0.1", "localhost"}); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	f := &bench.TLSFiles{CertFile: filepath.Join(dir, "node.crt"), KeyFile: filepath.Join(dir, "node.key"), CAFile: filepath.Join(dir, "ca.crt")}
	cfg, err := f.ClientConfig()
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return f, cfg, nil
}
