package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// ErrNotLoopback is returned for a target outside 127.0.0.0/8 and ::1 when
// remote targets are not allowed.
var ErrNotLoopback = errors.New("not a loopback address (load is sent only to 127.0.0.0/8, ::1 or localhost; --allow-remote overrides)")

// CheckAddr vets a host:port target and returns the address to dial. Unless
// allowRemote is set, only loopback IP literals and "localhost" pass; a
// localhost name is resolved here, every address it resolves to must be
// loopback, and the IP literal is what gets dialed, so the check and the
// connection cannot disagree. Other host names are refused without being
// resolved.
func CheckAddr(addr string, allowRemote bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("target %q: %w", addr, err)
	}
	if port == "" {
		return "", fmt.Errorf("target %q: missing port", addr)
	}
	if allowRemote {
		return addr, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" || !ip.Unmap().IsLoopback() {
			return "", fmt.Errorf("target %q: %w", addr, ErrNotLoopback)
		}
		return net.JoinHostPort(ip.Unmap().String(), port), nil
	}
	if host != "localhost" {
		return "", fmt.Errorf("target %q: %w", addr, ErrNotLoopback)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("target %q: resolve localhost: %v", addr, err)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return "", fmt.Errorf("target %q: localhost resolves to %s: %w", addr, ip, ErrNotLoopback)
		}
	}
	// Prefer IPv4: servers started here bind 127.0.0.1.
	best := ips[0].Unmap()
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			best = ip.Unmap()
			break
		}
	}
	return net.JoinHostPort(best.String(), port), nil
}
