package sluicetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Redis is a real redis-server for differential tests: the oracle for
// every behaviour Sluice copies.
type Redis struct {
	// Network and Addr are what to dial: a unix socket by default, so that
	// no TCP port needs picking.
	Network, Addr string
	cmd           *exec.Cmd
}

// StartRedis runs redis-server with persistence off on a unix socket in a
// temporary directory (plus args), and stops it when the test ends. It
// skips (or, under CI, fails) when redis-server is missing.
func StartRedis(tb testing.TB, args ...string) *Redis {
	tb.Helper()
	bin := Require(tb, "redis-server")
	dir := tb.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	full := append([]string{"--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, args...)
	cmd := exec.Command(bin, full...)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	r := &Redis{Network: "unix", Addr: sock, cmd: cmd}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return r
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			tb.Fatalf("redis-server did not start:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RawConn speaks RESP by hand: it sends commands and returns each reply's
// exact bytes, so that differential tests compare replies byte for byte
// rather than as a client library decodes them.
type RawConn struct {
	c net.Conn
	r *bufio.Reader
}

// DialRaw connects to network/addr; the connection closes when the test
// ends.
func DialRaw(tb testing.TB, network, addr string) *RawConn {
	tb.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &RawConn{c: c, r: bufio.NewReader(c)}
}

// Conn is the underlying connection.
func (rc *RawConn) Conn() net.Conn { return rc.c }

// EncodeCommand is a command as clients send it: a RESP array of bulk
// strings.
func EncodeCommand(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// Do sends one command and returns its reply's bytes.
func (rc *RawConn) Do(tb testing.TB, args ...string) string {
	tb.Helper()
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(EncodeCommand(args...)); err != nil {
		tb.Fatalf("%q: %v", args, err)
	}
	out, err := ReadReply(rc.r)
	if err != nil {
		tb.Fatalf("%q: reading the reply: %v", args, err)
	}
	return string(out)
}

// Read reads the next reply (a pub/sub message, or the reply to a command
// sent with Send).
func (rc *RawConn) Read(tb testing.TB) string {
	tb.Helper()
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	out, err := ReadReply(rc.r)
	if err != nil {
		tb.Fatalf("reading a reply: %v", err)
	}
	return string(out)
}

// Send sends one command and reads nothing: for commands the server does
// not answer (after CLIENT REPLY OFF or SKIP).
func (rc *RawConn) Send(tb testing.TB, args ...string) {
	tb.Helper()
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(EncodeCommand(args...)); err != nil {
		tb.Fatalf("%q: %v", args, err)
	}
}

// ReadReply reads one whole RESP reply (any type, nested) and returns its
// bytes.
func ReadReply(r *bufio.Reader) ([]byte, error) {
	var out []byte
	if err := readReply(r, &out); err != nil {
		return out, err
	}
	return out, nil
}

func readReply(r *bufio.Reader, out *[]byte) error {
	line, err := r.ReadBytes('\n')
	*out = append(*out, line...)
	if err != nil {
		return err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return errors.New("malformed RESP line")
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '=', '!':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return err
		}
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, buf...)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if err := readReply(r, out); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown RESP type %q", line[0])
}
