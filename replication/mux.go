package replication

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Several Raft groups share one node's Raft port: a connection is
// authenticated first (as a lone group's is, by the same authLayer, with
// its caps and deadlines), then the dialer sends one byte naming the group
// whose transport it belongs to, and the acceptor hands it to that group's
// Accept. An operator opens one port per node whatever the group count,
// and a peer that fails authentication never learns which groups exist.

// groupLayer is one group's raft.StreamLayer over a shared authLayer.
type groupLayer struct {
	shared    *authLayer
	group     byte
	ready     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

var _ raft.StreamLayer = (*groupLayer)(nil)

// maxGroups is the most groups one listener routes (the group is a byte,
// and a cluster has at most Slots groups of one slot each long before).
const maxGroups = 256

// listenGroups opens the shared listener and one layer per group. The
// layers are closed by their transports; the shared listener by
// closeShared once every transport is.
func listenGroups(bind string, advertise net.Addr, auth *peerAuth, cfg *Config, groups int) (*authLayer, []*groupLayer, error) {
	if groups < 1 || groups > maxGroups {
		return nil, nil, fmt.Errorf("replication: %d groups: want 1 to %d", groups, maxGroups)
	}
	l, err := listenAuth(bind, advertise, auth, cfg, cfg.Logger)
	if err != nil {
		return nil, nil, err
	}
	layers := make([]*groupLayer, groups)
	for g := range layers {
		layers[g] = &groupLayer{shared: l, group: byte(g), ready: make(chan net.Conn), done: make(chan struct{})}
	}
	// Set before any connection can be accepted: the accept loop reads
	// groups only after a handshake, which follows this return... but the
	// loop is already running, so publish under the layer's lock.
	l.mu.Lock()
	l.groups = layers
	l.mu.Unlock()
	return l, layers, nil
}

// readGroup reads the group byte a dialer sends after authenticating (the
// handshake's deadline still applies).
func (l *authLayer) readGroup(c net.Conn) (*groupLayer, error) {
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return nil, fmt.Errorf("reading the raft group: %w", err)
	}
	l.mu.Lock()
	groups := l.groups
	l.mu.Unlock()
	if int(b[0]) >= len(groups) {
		return nil, fmt.Errorf("raft group %d does not exist here (%d groups)", b[0], len(groups))
	}
	return groups[b[0]], nil
}

var errGroupClosed = fmt.Errorf("replication: raft group's stream layer closed: %w", net.ErrClosed)

// Accept returns the next connection for this group.
func (g *groupLayer) Accept() (net.Conn, error) {
	select {
	case c := <-g.ready:
		return c, nil
	case <-g.done:
		return nil, errGroupClosed
	case <-g.shared.done:
		return nil, errLayerClosed
	}
}

// Close stops this group's Accept; the shared listener stays open for the
// other groups.
func (g *groupLayer) Close() error {
	g.closeOnce.Do(func() { close(g.done) })
	return nil
}

// Addr is the shared listener's (advertised) address: every group of a
// node has the same Raft address.
func (g *groupLayer) Addr() net.Addr { return g.shared.Addr() }

// Dial opens an authenticated connection for this group.
func (g *groupLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-g.done:
		return nil, errGroupClosed
	default:
	}
	return g.shared.dial(address, timeout, func(c net.Conn) error {
		_, err := c.Write([]byte{g.group})
		if err != nil {
			return errors.Join(errors.New("sending the raft group"), err)
		}
		return nil
	})
}
