package clientlib

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP returns the address of the client that sent r. X-Forwarded-For
// is believed only as far as it was written by trusted proxies: when the
// direct peer is in trusted, the header's hops are walked from the right
// (the hop the nearest proxy appended) past every trusted address, and the
// first untrusted one is the client. Anything to its left was written by
// the client itself and could be forged, so it is never used. A malformed
// hop stops the walk at the last trusted address, which then is the key
// (refusing a proxy rather than believing a spoofable header). With no
// trusted proxies, the header is ignored.
func ClientIP(r *http.Request, trusted []netip.Prefix) string {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if !inPrefixes(peer, trusted) {
		return peer.String()
	}
	addr := peer
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		line := hops[i]
		for line != "" {
			var hop string
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				hop, line = line[j+1:], line[:j]
			} else {
				hop, line = line, ""
			}
			a, ok := parseHop(strings.TrimSpace(hop))
			if !ok {
				return addr.String()
			}
			if !inPrefixes(a, trusted) {
				return a.String()
			}
			addr = a
		}
	}
	// Every hop is a trusted proxy: the leftmost is as close to the client
	// as anyone trustworthy saw.
	return addr.String()
}

// KeyByIP keys requests by ClientIP(r, trusted).
func KeyByIP(trusted ...netip.Prefix) KeyFunc {
	return func(r *http.Request) string { return ClientIP(r, trusted) }
}

// KeyByHeader keys requests by a header, such as an API key. Requests
// without it are not limited by the rule (an empty key skips the rule), so
// pair it with an IP rule.
func KeyByHeader(name string) KeyFunc {
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// parseHop accepts "1.2.3.4", "1.2.3.4:80", "::1" and "[::1]:80", and
// unmaps IPv4-in-IPv6 so that one client has one key.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
