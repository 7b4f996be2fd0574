package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/bench"
)

// runExperiments is `sluice-bench experiment NAME... [flags]`: it runs the
// experiments of EXPERIMENTS.md, writes each one's CSV, charts and markdown
// into --out, and prints the markdown.
func runExperiments(args []string, stdout, stderr io.Writer) int {
	command := strings.Join(args, " ")
	fs := flag.NewFlagSet("sluice-bench experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: sluice-bench experiment NAME... [flags]

Runs the published rate-limiter experiments against a real redis-server and
against Sluice, on loopback, starting and stopping the servers itself. Each
experiment writes NAME.csv, NAME.md and its charts (PNG) into --out; with more
than one, experiments.md gathers them. NAME is one of
  %s
or all.

Example:
  sluice-bench experiment all --start-sluice ./sluice-server --out bench-out

Flags:
`, strings.Join(bench.ExperimentNames(), ", "))
		fs.PrintDefaults()
	}
	out := fs.String("out", "bench-out", "output directory")
	smoke := fs.Bool("smoke", false, "a short, bounded run of each experiment (a few seconds)")
	startSluice := fs.String("start-sluice", "", "sluice-server binary (started with --enable-debug-command local); without it the Sluice halves are skipped")
	sluiceArgs := fs.String("sluice-args", "", "extra arguments for every sluice-server started, space-separated")
	redisServer := fs.String("redis-server", "redis-server", "redis-server binary")
	serverCPU := fs.Int("server-cpu", -1, "pin every started server to this CPU (taskset)")
	cpu := fs.Int("cpu", -1, "pin this program to this CPU (re-executes itself with that affinity)")
	seed := fs.Uint64("seed", 1, "seed for the experiments' random choices")
	kills := fs.Int("kills", 0, "failover: how many leaders to kill (default 20, 2 with --smoke)")
	quiet := fs.Bool("q", false, "no step-by-step log on stderr")

	// Names and flags may come in any order.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(names) == 0 {
		fs.Usage()
		return exitUsage
	}
	var run []string
	for _, n := range names {
		if n == "all" {
			run = append(run, bench.ExperimentNames()...)
			continue
		}
		known := false
		for _, k := range bench.ExperimentNames() {
			known = known || k == n
		}
		if !known {
			fmt.Fprintf(stderr, "sluice-bench: unknown experiment %q (known: %s, all)\n", n, strings.Join(bench.ExperimentNames(), ", "))
			return exitUsage
		}
		run = append(run, n)
	}
	if *cpu >= 0 {
		if err := bench.PinSelf(*cpu); err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			return exitUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := bench.ExperimentConfig{
		RedisServer:  *redisServer,
		SluiceServer: *startSluice,
		SluiceArgs:   strings.Fields(*sluiceArgs),
		ServerCPU:    *serverCPU,
		PinServer:    *serverCPU >= 0,
		Smoke:        *smoke,
		Seed:         *seed,
		Kills:        *kills,
	}
	if !*quiet {
		cfg.Log = stderr
	}
	if cfg.SluiceServer == "" {
		fmt.Fprintln(stderr, "note: no --start-sluice given; the Sluice halves are skipped")
	}
	started := time.Now()
	status := exitOK
	var reports []*bench.ExperimentReport
	for _, name := range run {
		rep, err := bench.RunExperiment(ctx, name, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			status = exitFailed
			if ctx.Err() != nil {
				break
			}
			continue
		}
		paths, err := bench.WriteExperiment(*out, rep)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			status = exitFailed
		}
		fmt.Fprint(stdout, rep.Markdown(""))
		fmt.Fprintf(stderr, "%s: %.1fs; wrote %s\n", name, rep.Elapsed.Seconds(), strings.Join(paths, " "))
		reports = append(reports, rep)
	}
	if len(reports) > 1 {
		path := filepath.Join(*out, "experiments.md")
		err := writeFile(path, func(w io.Writer) error {
			fmt.Fprintf(w, "# Experiments\n\n%s\n", bench.DescribeMachine(cfg))
			fmt.Fprintf(w, "Command: `sluice-bench experiment %s`; %.0f s in all.\n\n", command, time.Since(started).Seconds())
			for _, r := range reports {
				if _, err := io.WriteString(w, r.Markdown("")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
			status = exitFailed
		} else {
			fmt.Fprintf(stderr, "wrote %s\n", path)
		}
	}
	return status
}
