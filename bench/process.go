package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a server process started by this package. Close stops it.
type Server struct {
	// Name is "redis" or "sluice".
	Name string
	// Addr is the 127.0.0.1:port it listens on.
	Addr string
	// CPU is the CPU it is pinned to, or -1.
	CPU int

	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has been waited for
	waitErr  error
	tail     *tailBuffer
	drained  chan struct{} // closed when its output has been read to EOF
	stopOnce sync.Once
	stopErr  error
}

// Pid returns the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Close stops the server: SIGTERM, then SIGKILL if it has not exited within
// 10 seconds. It waits for the process and reports an unclean exit.
func (s *Server) Close() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.exited:
			s.stopErr = fmt.Errorf("%s exited before it was stopped: %v; last output:\n%s", s.Name, s.waitErr, s.tail)
			return
		default:
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("%s did not exit within 10s of SIGTERM; killed", s.Name)
			return
		}
		if s.waitErr != nil {
			s.stopErr = fmt.Errorf("%s: %v after SIGTERM; last output:\n%s", s.Name, s.waitErr, s.tail)
		}
	})
	return s.stopErr
}

// Output returns the last few KiB the server printed.
func (s *Server) Output() string { return s.tail.String() }

// RedisOptions configures StartRedis. The zero value is usable.
type RedisOptions struct {
	// Path is the redis-server binary. Default "redis-server" from PATH.
	Path string
	// CPU is the CPU to pin the server to (with taskset) when PinCPU is
	// set; unpinned otherwise.
	CPU    int
	PinCPU bool
	// Args are extra configuration arguments, e.g. "--maxmemory", "1gb".
	Args []string
	// TLS, when set, makes the server listen for TLS only, with these
	// files and no client certificates required.
	TLS *TLSFiles
}

// TLSFiles are a server certificate, its key and the CA that signed it.
type TLSFiles struct{ CertFile, KeyFile, CAFile string }

// ClientConfig is what a client needs to connect to a server with these
// files: the CA, and the name the certificate carries.
func (f *TLSFiles) ClientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", f.CAFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, nil
}

// StartRedis starts redis-server on a free 127.0.0.1 port with persistence
// off (--save "" --appendonly no) and a temporary working directory. A port
// is chosen at random and bound by Redis itself; if it is taken, another
// is tried, so there is no window between choosing and binding.
func StartRedis(ctx context.Context, opts RedisOptions) (*Server, error) {
	path := opts.Path
	if path == "" {
		path = "redis-server"
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("start redis: %w (install Debian's redis-server, or pass --redis-addr)", err)
	}
	dir, err := os.MkdirTemp("", "sluice-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	const attempts = 20
	var lastErr error
	for range attempts {
		port := 20000 + rand.IntN(40000)
		args := []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
		}
		if opts.TLS != nil {
			args = []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--tls-cert-file", opts.TLS.CertFile, "--tls-key-file", opts.TLS.KeyFile,
				"--tls-ca-cert-file", opts.TLS.CAFile, "--tls-auth-clients", "no"}
		}
		args = append(args,
			"--save", "",
			"--appendonly", "no",
			"--daemonize", "no",
			"--dir", dir,
			"--logfile", "",
		)
		args = append(args, opts.Args...)
		s, err := startProcess(ctx, "redis", bin, args, dir, opts.PinCPU, opts.CPU, 10*time.Second, func(line string) (string, bool) {
			if strings.Contains(line, "Ready to accept connections") {
				return "127.0.0.1:" + strconv.Itoa(port), true
			}
			return "", false
		})
		if err == nil {
			go func() {
				<-s.exited
				os.RemoveAll(dir)
			}()
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("start redis: %w", lastErr)
}

// SluiceOptions configures StartSluice.
type SluiceOptions struct {
	// Path is the sluice-server binary. Required.
	Path string
	// CPU pins the server to one CPU with taskset when PinCPU is set.
	CPU    int
	PinCPU bool
	// Args are extra arguments after --port auto --bind 127.0.0.1.
	Args []string
	// TLS, when set, makes the server listen for TLS only, with these
	// files and no client certificates required.
	TLS *TLSFiles
	// ReadyTimeout bounds the wait for the ready line. Default 10s.
	ReadyTimeout time.Duration
}

// StartSluice starts sluice-server with --port auto --bind 127.0.0.1
// --appendonly no (as StartRedis turns Redis's persistence off; an
// --appendonly in Args overrides it) in a temporary working directory of
// its own, removed when it exits, so that no server ever loads another's
// state. It waits for the log line that says it is listening
// (msg="Ready to accept connections" with addr=HOST:PORT, from slog's
// TextHandler on stderr).
func StartSluice(ctx context.Context, opts SluiceOptions) (*Server, error) {
	if opts.Path == "" {
		return nil, errors.New("start sluice: no sluice-server path")
	}
	bin, err := exec.LookPath(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("start sluice: %w", err)
	}
	// The working directory changes below: resolve a relative path first.
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	args := []string{"--port", "auto", "--bind", "127.0.0.1"}
	if opts.TLS != nil {
		args = []string{"--port", "0", "--tls-port", "auto", "--bind", "127.0.0.1",
			"--tls-cert-file", opts.TLS.CertFile, "--tls-key-file", opts.TLS.KeyFile,
			"--tls-ca-cert-file", opts.TLS.CAFile, "--tls-auth-clients", "no"}
	}
	if !slices.ContainsFunc(opts.Args, func(a string) bool { return strings.HasPrefix(strings.TrimLeft(a, "-"), "appendonly") }) {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, opts.Args...)
	dir, err := os.MkdirTemp("", "sluice-bench-sluice-")
	if err != nil {
		return nil, fmt.Errorf("start sluice: %w", err)
	}
	s, err := startProcess(ctx, "sluice", bin, args, dir, opts.PinCPU, opts.CPU, timeout, parseReadyLine)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start sluice: %w", err)
	}
	go func() {
		<-s.exited
		os.RemoveAll(dir)
	}()
	return s, nil
}

// parseReadyLine recognises sluice-server's ready line and returns the
// addr= value, e.g. from
//
//	time=... level=INFO msg="Ready to accept connections" addr=127.0.0.1:40123
func parseReadyLine(line string) (string, bool) {
	if !strings.Contains(line, `msg="Ready to accept connections"`) {
		return "", false
	}
	for f := range strings.FieldsSeq(line) {
		v, ok := strings.CutPrefix(f, "addr=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		if v != "" {
			return v, true
		}
	}
	return "", false
}

// startProcess starts bin in dir (under taskset when pin is set), reads its
// combined output line by line until ready returns an address, and keeps
// draining the output afterwards so the server never blocks on a full pipe.
func startProcess(ctx context.Context, name, bin string, args []string, dir string, pin bool, cpu int, timeout time.Duration,
	ready func(line string) (string, bool)) (*Server, error) {
	argv := append([]string{bin}, args...)
	if pin {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("pin %s to CPU %d: %w (taskset is in Debian's util-linux)", name, cpu, err)
		}
		argv = append([]string{ts, "-c", strconv.Itoa(cpu)}, argv...)
	} else {
		cpu = -1
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = serverProcAttr()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pw.Close()
	s := &Server{
		Name:    name,
		CPU:     cpu,
		cmd:     cmd,
		exited:  make(chan struct{}),
		tail:    &tailBuffer{max: 8 << 10},
		drained: make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	found := make(chan string, 1)
	go func() {
		defer close(s.drained)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			s.tail.WriteLine(line)
			if !announced {
				if addr, ok := ready(line); ok {
					announced = true
					found <- addr
				}
			}
		}
		// Lines longer than the scanner allows: keep draining raw.
		io.Copy(io.Discard, pr)
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	fail := func(err error) (*Server, error) {
		cmd.Process.Kill()
		<-s.exited
		<-s.drained
		return nil, fmt.Errorf("%s: %w; last output:\n%s", name, err, s.tail)
	}
	select {
	case addr := <-found:
		if _, err := CheckAddr(addr, false); err != nil {
			return fail(fmt.Errorf("ready line names %w", err))
		}
		s.Addr = addr
		return s, nil
	case <-s.exited:
		<-s.drained
		return nil, fmt.Errorf("%s exited before it was ready (%v); last output:\n%s", name, s.waitErr, s.tail)
	case <-timer.C:
		return fail(fmt.Errorf("not ready within %v (no ready line)", timeout))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
}

// tailBuffer keeps the last max bytes of a process's output, in lines.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	size  int
	lines []string
}

func (t *tailBuffer) WriteLine(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line) + 1
	for t.size > t.max && len(t.lines) > 1 {
		t.size -= len(t.lines[0]) + 1
		t.lines = t.lines[1:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
