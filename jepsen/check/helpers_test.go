package check

import (
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// hb builds hand-written histories; times are in milliseconds.
type hb struct {
	h  *history.History
	id int
}

func newHB(permits map[string]int64) *hb {
	return &hb{h: &history.History{Seed: 1, Nodes: 3, Duration: 10 * time.Second, Permits: permits, Meta: map[string]string{}}}
}

func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

func (b *hb) add(o history.Op, inv, comp float64) int {
	b.id++
	o.ID = b.id
	o.Namespace = "ns"
	o.Invoke = ms(inv)
	if o.Outcome == "" {
		o.Outcome = history.OK
	}
	if o.Outcome != history.Info {
		o.Complete = ms(comp)
	}
	b.h.Ops = append(b.h.Ops, o)
	return o.ID
}

func (b *hb) lease(p int, lease string, inv, comp float64, ttl int64) int {
	return b.add(history.Op{Process: p, Kind: history.CreateLease, Lease: lease, TTL: ttl}, inv, comp)
}

func (b *hb) refresh(p int, lease string, inv, comp float64, ttl int64, outcome, err string) int {
	return b.add(history.Op{Process: p, Kind: history.Refresh, Lease: lease, TTL: ttl, Outcome: outcome, Error: err, Code: codeOf(err)}, inv, comp)
}

// codeOf is the gRPC code name a test error string starts with.
func codeOf(err string) string {
	c, _, _ := strings.Cut(err, ":")
	return c
}

// acq records an acquire; res is ACQUIRED/UNAVAILABLE/TIMED_OUT, or
// history.Info / history.Fail.
func (b *hb) acq(p int, sem, lease string, w int64, inv, comp float64, res string, token uint64) int {
	o := history.Op{Process: p, Kind: history.Acquire, Semaphore: sem, Lease: lease, Weight: w}
	switch res {
	case history.Info, history.Fail:
		o.Outcome = res
	default:
		o.AcquireOutcome = res
		if res == history.Acquired {
			o.Token = token
		}
	}
	return b.add(o, inv, comp)
}

func (b *hb) rel(p int, sem, lease string, inv, comp float64, outcome string) int {
	return b.add(history.Op{Process: p, Kind: history.Release, Semaphore: sem, Lease: lease, Outcome: outcome}, inv, comp)
}

func (b *hb) revoke(p int, sem, lease string, inv, comp float64, outcome string) int {
	return b.add(history.Op{Process: p, Kind: history.Revoke, Semaphore: sem, Lease: lease, Outcome: outcome}, inv, comp)
}

func (b *hb) get(p int, sem string, inv, comp float64, holds, count int64) int {
	return b.add(history.Op{Process: p, Kind: history.GetSemaphore, Semaphore: sem, ActiveHolds: holds, HoldersCount: count}, inv, comp)
}

func (b *hb) holders(p int, sem string, inv, comp float64, hs ...history.Holder) int {
	return b.add(history.Op{Process: p, Kind: history.ListHolders, Semaphore: sem, Holders: hs}, inv, comp)
}

func (b *hb) fence(p int, sem, lease string, at float64, token uint64, accepted bool) int {
	return b.add(history.Op{Process: p, Kind: history.FenceWrite, Semaphore: sem, Lease: lease, Token: token, Accepted: accepted}, at, at)
}

func hold(lease string, w int64, token uint64) history.Holder {
	return history.Holder{Lease: lease, Weight: w, Token: token}
}

// expect asserts a result's verdict; with kind, that an anomaly of that
// kind is listed (and returns it).
func expect(t *testing.T, r Result, valid, kind string) *Anomaly {
	t.Helper()
	if r.Valid != valid {
		t.Fatalf("%s: valid = %q, want %q\n%s", r.Name, r.Valid, valid, dump(r))
	}
	if kind == "" {
		return nil
	}
	for i := range r.Anomalies {
		if r.Anomalies[i].Kind == kind {
			return &r.Anomalies[i]
		}
	}
	t.Fatalf("%s: no anomaly of kind %q\n%s", r.Name, kind, dump(r))
	return nil
}

func dump(r Result) string {
	var b strings.Builder
	b.WriteString(r.Name + " " + r.Valid + "\n")
	for _, n := range r.Notes {
		b.WriteString("  note: " + n + "\n")
	}
	for _, a := range r.Anomalies {
		b.WriteString("  " + a.Kind + ": " + a.Description + "\n")
		for _, o := range a.Ops {
			b.WriteString("    " + FormatOp(o) + "\n")
		}
	}
	return b.String()
}

func hasOps(a *Anomaly, ids ...int) bool {
	for _, id := range ids {
		found := false
		for _, o := range a.Ops {
			if o.ID == id {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func allOK(t *testing.T, h *history.History) {
	t.Helper()
	for _, r := range All(h, Options{LinearizabilityTimeout: 20 * time.Second}) {
		if r.Skipped {
			continue
		}
		if r.Valid != Valid {
			t.Errorf("%s: %s, want ok\n%s", r.Name, r.Valid, dump(r))
		}
	}
}
