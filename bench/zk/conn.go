package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// A ZooKeeper session is the lease of every recipe here: its ephemeral
// nodes go when it ends, by Close (a closeSession transaction) or by
// expiry. One session is one zk.Conn, one TCP connection to one server;
// the client keeps it alive by pinging every third of its timeout (pings
// are answered by the server the client is connected to and replicate
// nothing).
type conn struct {
	*zk.Conn
	timeout time.Duration // negotiated with the server
	tap     *tap
	touched atomic.Bool // the session's touch node exists
}

// expires is when the server expires the session unless it hears from it
// again: the last reply plus the timeout. The server started counting when
// it received the request that reply answered, a little earlier, so this
// is a slight overestimate of the expiry (and lateness measured from it a
// slight underestimate).
func (c *conn) expires() time.Time {
	return time.Unix(0, c.tap.lastRead.Load()).Add(c.timeout)
}

// tap sits between the client and its TCP connection. It reads the
// session timeout the server granted out of the connect response
// (go-zookeeper does not expose it), records when the server last said
// anything, and, for a session that must not be kept alive, drops the
// client's pings and refuses to reconnect (a reconnect would revalidate
// the session, which is a refresh).
type tap struct {
	dropPings bool
	dials     atomic.Int32
	lastRead  atomic.Int64 // unix nanoseconds

	// negotiated receives the session timeout of the first connection
	// that read a whole connect response: not always the first
	// connection, whose connect may fail under load (go-zookeeper then
	// connects again and the session is granted on the next).
	negotiated chan time.Duration
}

func newTap(dropPings bool) *tap {
	return &tap{dropPings: dropPings, negotiated: make(chan time.Duration, 1)}
}

var errNoReconnect = errors.New("session not kept alive: not reconnecting")

func (t *tap) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	n := t.dials.Add(1)
	if n > 1 && t.dropPings {
		return nil, errNoReconnect
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &tappedConn{Conn: c, t: t}, nil
}

type tappedConn struct {
	net.Conn
	t    *tap
	head []byte // the first bytes this connection read (its connect response)
}

// A connect response starts with its length (4 bytes), the protocol
// version (4) and the session timeout in milliseconds (4).
const connectHead = 12

func (c *tappedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.t.lastRead.Store(time.Now().UnixNano())
		if len(c.head) < connectHead {
			c.head = append(c.head, p[:min(n, connectHead-len(c.head))]...)
			if len(c.head) == connectHead {
				ms := int32(binary.BigEndian.Uint32(c.head[8:12]))
				select {
				case c.t.negotiated <- time.Duration(ms) * time.Millisecond:
				default: // a later connection of the same session
				}
			}
		}
	}
	return n, err
}

// A ping is one Write of a packet whose header is xid -2, opcode 11.
func isPing(p []byte) bool {
	return len(p) >= 12 && int32(binary.BigEndian.Uint32(p[4:8])) == -2 && binary.BigEndian.Uint32(p[8:12]) == 11
}

func (c *tappedConn) Write(p []byte) (int, error) {
	if c.t.dropPings && isPing(p) {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// go-zookeeper allocates 1.5 MB for sending and 1.5 MB for receiving per
// connection unless told otherwise; at the leases workload's rate of new
// sessions that is the load generator's main cost. These bound the largest
// request (a multi of 500 deletes) and reply (a listing of a few thousand
// children) the recipes make, with room to spare.
const (
	sendBuffer = 128 << 10
	recvBuffer = 512 << 10
)

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// dial opens a session on one server with the given timeout and waits
// until the server has granted it; keepAlive false: the client never
// pings, so the session expires timeout after its last request.
func dial(ctx context.Context, server string, timeout time.Duration, keepAlive bool) (*conn, error) {
	t := newTap(!keepAlive)
	has := make(chan struct{})
	var once sync.Once
	onEvent := func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			once.Do(func() { close(has) })
		}
	}
	c, _, err := zk.Connect([]string{server}, timeout, zk.WithDialer(t.dial), zk.WithLogger(quietLogger{}),
		zk.WithLogInfo(false), zk.WithEventCallback(onEvent),
		zk.WithMaxConnBufferSize(sendBuffer), zk.WithMaxBufferSize(recvBuffer))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*conn, error) { c.Close(); return nil, err }
	select {
	case <-has:
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(10 * time.Second):
		return fail(fmt.Errorf("zookeeper %s: no session within 10s", server))
	}
	var got time.Duration
	select {
	case got = <-t.negotiated: // read before the session was granted
	case <-time.After(10 * time.Second):
		return fail(fmt.Errorf("zookeeper %s: granted a session, but no connect response was seen within 10s", server))
	}
	if got != timeout.Truncate(time.Millisecond) {
		return fail(fmt.Errorf("zookeeper %s granted a session timeout of %s for the %s asked: the server's minSessionTimeout and maxSessionTimeout must allow it",
			server, got, timeout))
	}
	return &conn{Conn: c, timeout: got, tap: t}, nil
}

var acl = zk.WorldACL(zk.PermAll)

// ensurePath creates path and its missing parents as persistent nodes.
func ensurePath(c *zk.Conn, p string) error {
	if p == "/" || p == "" {
		return nil
	}
	if ok, _, err := c.Exists(p); err != nil || ok {
		return err
	}
	if err := ensurePath(c, path.Dir(p)); err != nil {
		return err
	}
	if _, err := c.Create(p, nil, zk.FlagPersistent, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// deleteTree deletes p and everything under it, leaves first, up to 500
// deletes to a multi (one transaction each).
func deleteTree(c *zk.Conn, p string) error {
	var order []string // parents after their children
	var walk func(string) error
	walk = func(p string) error {
		kids, _, err := c.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		order = append(order, p)
		return nil
	}
	if err := walk(p); err != nil {
		return err
	}
	for len(order) > 0 {
		n := min(len(order), 500)
		ops := make([]any, n)
		for i, q := range order[:n] {
			ops[i] = &zk.DeleteRequest{Path: q, Version: -1}
		}
		if err := multi(c, ops...); err != nil {
			return fmt.Errorf("delete under %s: %w", p, err)
		}
		order = order[n:]
	}
	return nil
}

// multi runs ops as one transaction; its error is the first op's error.
func multi(c *zk.Conn, ops ...any) error {
	rs, err := c.Multi(ops...)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Error != nil {
			return r.Error
		}
	}
	return nil
}

// seqOf is the sequence number ZooKeeper appended to a sequential node's
// name (10 digits).
func seqOf(name string) (uint64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseUint(name[len(name)-10:], 10, 64)
	return n, err == nil
}

// sortBySeq sorts sequential node names by their sequence numbers (the
// prefixes may differ).
func sortBySeq(names []string) {
	sort.Slice(names, func(i, j int) bool {
		a, _ := seqOf(names[i])
		b, _ := seqOf(names[j])
		return a < b
	})
}

// fourLetter sends a four-letter-word command to a server and returns its
// answer (the server closes the connection after it).
func fourLetter(ctx context.Context, server, cmd string) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 1<<20))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

var (
	srvrZxid = regexp.MustCompile(`(?m)^Zxid: 0x([0-9a-fA-F]+)\s*$`)
	srvrMode = regexp.MustCompile(`(?m)^Mode: (\w+)\s*$`)
)

// srvr is what `srvr` says of a server: its role and its last zxid (the
// epoch in the high 32 bits, a counter of transactions in the low 32).
func srvr(ctx context.Context, server string) (mode string, zxid uint64, err error) {
	out, err := fourLetter(ctx, server, "srvr")
	if err != nil {
		return "", 0, err
	}
	m, z := srvrMode.FindStringSubmatch(out), srvrZxid.FindStringSubmatch(out)
	if m == nil || z == nil {
		return "", 0, fmt.Errorf("zookeeper %s: srvr: no Mode or Zxid in %q (is srvr in 4lw.commands.whitelist?)", server, strings.TrimSpace(out))
	}
	zxid, err = strconv.ParseUint(z[1], 16, 64)
	if err != nil {
		return "", 0, fmt.Errorf("zookeeper %s: srvr: zxid %q: %v", server, z[1], err)
	}
	return m[1], zxid, nil
}

// findLeader returns the server whose srvr says leader (standalone for a
// single server).
func findLeader(ctx context.Context, servers []string) (string, error) {
	var last error
	for try := 0; try < 50; try++ {
		for _, s := range servers {
			mode, _, err := srvr(ctx, s)
			if err != nil {
				last = err
				continue
			}
			if mode == "leader" || mode == "standalone" {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no zookeeper leader among %v (last error: %v)", servers, last)
}
