package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/server"
)

// portFlag is a port setting: a number (0: do not listen, as Redis), or
// "auto": a free port, named in the ready line (for tests and tools).
type portFlag struct {
	n    int
	auto bool
}

func (p *portFlag) String() string {
	if p.auto {
		return "auto"
	}
	return strconv.Itoa(p.n)
}

func (p *portFlag) Set(v string) error {
	if strings.EqualFold(v, "auto") {
		*p = portFlag{auto: true}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("a port is 0-65535 or auto, not %q", v)
	}
	*p = portFlag{n: n}
	return nil
}

// on reports whether the port listens.
func (p portFlag) on() bool { return p.auto || p.n != 0 }

func (p portFlag) listenPort() string {
	if p.auto {
		return "0"
	}
	return strconv.Itoa(p.n)
}

// listen opens the plain and TLS listeners on every bind address.
func listen(o options, t *server.TLS) (plain, secure []net.Listener, err error) {
	closeAll := func() {
		for _, ln := range append(plain, secure...) {
			ln.Close()
		}
	}
	for _, host := range strings.Fields(o.bind) {
		host = strings.TrimPrefix(host, "-")
		if o.port.on() {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, o.port.listenPort()))
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("bind %s port %s: %w", host, o.port.String(), err)
			}
			plain = append(plain, ln)
		}
		if o.tlsPort.on() {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, o.tlsPort.listenPort()))
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("bind %s tls-port %s: %w", host, o.tlsPort.String(), err)
			}
			secure = append(secure, tls.NewListener(ln, t.Config()))
		}
	}
	return plain, secure, nil
}

func addrsOf(lns []net.Listener) []string {
	out := make([]string, len(lns))
	for i, ln := range lns {
		out[i] = ln.Addr().String()
	}
	return out
}
