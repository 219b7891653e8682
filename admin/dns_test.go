package admin_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeDNS answers this test binary's host name lookups (net.DefaultResolver,
// which gRPC's DNS resolver and the server's address checks use) for a
// few names under the test's control, as a container network's DNS does
// for its containers: an A record for a name it knows, NXDOMAIN for any
// other. It counts the lookups of each name.
type fakeDNS struct {
	mu      sync.Mutex
	hosts   map[string]net.IP
	lookups map[string]int
	looked  chan struct{} // closed at the next lookup
}

// startDNS routes net.DefaultResolver to a fake DNS server until the test
// ends. Call it before starting anything that resolves names, so that its
// cleanup runs after theirs.
func startDNS(t *testing.T) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDNS{hosts: map[string]net.IP{}, lookups: map[string]int{}, looked: make(chan struct{})}
	go d.serve(pc)
	r := net.DefaultResolver
	prefer, dial := r.PreferGo, r.Dial
	r.PreferGo = true
	r.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "udp", pc.LocalAddr().String())
	}
	t.Cleanup(func() {
		r.PreferGo, r.Dial = prefer, dial
		pc.Close()
	})
	return d
}

// set points name at ip.
func (d *fakeDNS) set(name string, ip string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hosts[name] = net.ParseIP(ip).To4()
}

// count returns how many times name was looked up, and a channel closed at
// the next lookup of any name.
func (d *fakeDNS) count(name string) (int, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lookups[name], d.looked
}

func (d *fakeDNS) serve(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := d.answer(buf[:n]); out != nil {
			pc.WriteTo(out, from)
		}
	}
}

func (d *fakeDNS) answer(req []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	d.mu.Lock()
	ip, known := d.hosts[name]
	if q.Type == dnsmessage.TypeA {
		d.lookups[name]++
		close(d.looked)
		d.looked = make(chan struct{})
	}
	d.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	if known && q.Type == dnsmessage.TypeA {
		var a dnsmessage.AResource
		copy(a.A[:], ip)
		if b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, a) != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
