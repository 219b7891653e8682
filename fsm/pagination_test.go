package fsm

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"testing"
)

// docs/API.md, Pagination: limit 0 = 100, 1..250, else InvalidArgument; opaque
// position tokens (not snapshots); next empty on the last page, previous
// empty on the first; a malformed token is InvalidArgument.

type lister func(limit int32, token string) (keys []string, next, prev string, err error)

func nsLister(f *FSM) lister {
	return func(limit int32, token string) ([]string, string, string, error) {
		p, err := f.ListNamespaces(limit, token)
		var ks []string
		for _, n := range p.Items {
			ks = append(ks, n.Name)
		}
		return ks, p.Next, p.Previous, err
	}
}

func semLister(f *FSM, ns string, now int64) lister {
	return func(limit int32, token string) ([]string, string, string, error) {
		p, err := f.ListSemaphores(ns, limit, token, now)
		var ks []string
		for _, x := range p.Items {
			ks = append(ks, x.Name)
		}
		return ks, p.Next, p.Previous, err
	}
}

func holderLister(f *FSM, ns, sem string, now int64) lister {
	return func(limit int32, token string) ([]string, string, string, error) {
		p, err := f.ListSemaphoreHolders(ns, sem, limit, token, now)
		var ks []string
		for _, x := range p.Items {
			ks = append(ks, x.LeaseId)
		}
		return ks, p.Next, p.Previous, err
	}
}

func leaseLister(f *FSM, ns, proc string, now int64) lister {
	return func(limit int32, token string) ([]string, string, string, error) {
		p, err := f.ListSemaphoreLeases(ns, proc, limit, token, now)
		var ks []string
		for _, x := range p.Items {
			ks = append(ks, x.LeaseId)
		}
		return ks, p.Next, p.Previous, err
	}
}

type page struct {
	keys       []string
	next, prev string
}

// checkPaging walks forward through every page, then back from the last
// page to the first with previous tokens, and checks both against want.
func checkPaging(t *testing.T, what string, list lister, want []string, limit int32) {
	t.Helper()
	var fwd []page
	var all []string
	tok := ""
	for i := 0; ; i++ {
		ks, next, prev, err := list(limit, tok)
		if err != nil {
			t.Fatalf("%s: page %d: %v", what, i, err)
		}
		if len(ks) > int(limit) {
			t.Fatalf("%s: page %d has %d items, limit %d", what, i, len(ks), limit)
		}
		if i == 0 && prev != "" {
			t.Fatalf("%s: first page has a previous token", what)
		}
		if i > 0 && prev == "" {
			t.Fatalf("%s: page %d has no previous token", what, i)
		}
		if next != "" && len(ks) != int(limit) {
			t.Fatalf("%s: page %d is short (%d) but has a next token", what, i, len(ks))
		}
		fwd = append(fwd, page{ks, next, prev})
		all = append(all, ks...)
		if next == "" {
			break
		}
		if i > len(want)+2 {
			t.Fatalf("%s: paging does not end", what)
		}
		tok = next
	}
	if !(len(all) == 0 && len(want) == 0) && !reflect.DeepEqual(all, want) {
		t.Fatalf("%s: forward pages give %v, want %v", what, all, want)
	}
	// Backward, from the last page.
	for i := len(fwd) - 1; i > 0; i-- {
		ks, next, prev, err := list(limit, fwd[i].prev)
		if err != nil {
			t.Fatalf("%s: back to page %d: %v", what, i-1, err)
		}
		if !reflect.DeepEqual(ks, fwd[i-1].keys) {
			t.Fatalf("%s: back to page %d gives %v, want %v", what, i-1, ks, fwd[i-1].keys)
		}
		if (prev == "") != (i-1 == 0) {
			t.Fatalf("%s: back at page %d: previous token %q", what, i-1, prev)
		}
		if next == "" {
			t.Fatalf("%s: back at page %d: no next token", what, i-1)
		}
		// And forward again from there.
		ks2, _, _, err := list(limit, next)
		if err != nil || !reflect.DeepEqual(ks2, fwd[i].keys) {
			t.Fatalf("%s: forward from back page %d gives %v %v, want %v", what, i-1, ks2, err, fwd[i].keys)
		}
		fwd[i-1].prev = prev
	}
}

func TestPaginationAllLists(t *testing.T) {
	h := newHarness(t)
	var nsNames, semNames, leaseIDs, p1, holders []string
	for i := 0; i < 23; i++ {
		n := fmt.Sprintf("ns-%02d", i)
		h.ok(cNS(n))
		nsNames = append(nsNames, n)
	}
	for i := 0; i < 17; i++ {
		n := fmt.Sprintf("s%02d", i)
		h.ok(cSem("ns-00", n, 100))
		semNames = append(semNames, n)
	}
	h.ok(cSem("ns-01", "other", 1)) // must not show in ns-00's lists
	// Leases created and acquired in an order unrelated to their ids.
	for i := 0; i < 19; i++ {
		j := (i * 7) % 19
		proc := "p0"
		if j%3 == 1 {
			proc = "p1"
		}
		h.ok(cLease("ns-00", lid(j), proc, 100))
		h.ok(cAcq("ns-00", "s00", lid(j), 1))
		holders = append(holders, lid(j))
	}
	h.ok(cLease("ns-01", lid(99), "p1", 100))
	for j := 0; j < 19; j++ {
		leaseIDs = append(leaseIDs, lid(j))
		if j%3 == 1 {
			p1 = append(p1, lid(j))
		}
	}
	for _, limit := range []int32{1, 2, 5, 17, 19, 23, 250} {
		checkPaging(t, fmt.Sprint("namespaces/", limit), nsLister(h.f), nsNames, limit)
		checkPaging(t, fmt.Sprint("semaphores/", limit), semLister(h.f, "ns-00", h.now), semNames, limit)
		checkPaging(t, fmt.Sprint("leases/", limit), leaseLister(h.f, "ns-00", "", h.now), leaseIDs, limit)
		checkPaging(t, fmt.Sprint("leases of p1/", limit), leaseLister(h.f, "ns-00", "p1", h.now), p1, limit)
		checkPaging(t, fmt.Sprint("holders/", limit), holderLister(h.f, "ns-00", "s00", h.now), holders, limit)
	}
	// Empty lists.
	checkPaging(t, "no semaphores", semLister(h.f, "ns-02", h.now), nil, 5)
	checkPaging(t, "no holders", holderLister(h.f, "ns-00", "s01", h.now), nil, 5)
	checkPaging(t, "no leases", leaseLister(h.f, "ns-02", "", h.now), nil, 5)
}

func TestPaginationLimits(t *testing.T) {
	h := newHarness(t)
	h.check = false
	for i := 0; i < 260; i++ {
		h.ok(cNS(fmt.Sprintf("n%03d", i)))
	}
	h.ok(cSem("n000", "s", 1000))
	for i := 0; i < 260; i++ {
		h.ok(cSem("n001", fmt.Sprintf("s%03d", i), 1))
		h.ok(cLease("n000", lid(i), "p", 100))
		h.ok(cAcq("n000", "s", lid(i), 1))
	}
	lists := map[string]lister{
		"namespaces": nsLister(h.f), "semaphores": semLister(h.f, "n001", h.now),
		"leases": leaseLister(h.f, "n000", "", h.now), "leases by process": leaseLister(h.f, "n000", "p", h.now),
		"holders": holderLister(h.f, "n000", "s", h.now),
	}
	for name, list := range lists {
		ks, next, _, err := list(0, "")
		if err != nil || len(ks) != 100 || next == "" {
			t.Fatalf("%s: limit 0 gives %d items, next %q, %v", name, len(ks), next, err)
		}
		ks, next, _, err = list(250, "")
		if err != nil || len(ks) != 250 || next == "" {
			t.Fatalf("%s: limit 250 gives %d items, %v", name, len(ks), err)
		}
		ks, _, _, err = list(250, next)
		if err != nil || len(ks) != 10 {
			t.Fatalf("%s: second page of 250 gives %d items, %v", name, len(ks), err)
		}
		for _, bad := range []int32{251, -1, 1 << 30, -1 << 31} {
			_, _, _, err := list(bad, "")
			expectCode(t, err, CodeInvalidArgument, "limit")
		}
	}
}

func TestPaginationBadTokens(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cNS("ns2"))
	h.ok(cSem("ns", "s", 10))
	h.ok(cSem("ns", "t", 10))
	h.ok(cLease("ns", lid(1), "p", 100))
	h.ok(cLease("ns", lid(2), "p", 100))
	h.ok(cAcq("ns", "s", lid(1), 1))
	h.ok(cAcq("ns", "s", lid(2), 1))
	lists := map[string]lister{
		"namespaces": nsLister(h.f), "semaphores": semLister(h.f, "ns", h.now),
		"leases": leaseLister(h.f, "ns", "", h.now), "holders": holderLister(h.f, "ns", "s", h.now),
	}
	tokens := map[string]string{}
	for name, list := range lists {
		_, next, _, err := list(1, "")
		if err != nil || next == "" {
			t.Fatalf("%s: %v", name, err)
		}
		tokens[name] = next
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, list := range lists {
		for _, bad := range []string{"%%%", "not base64!", b64("garbage"), b64("ns|x|a"), b64("sem|x|a"), b64("||"),
			b64("hold|f|notanumber"), b64("hold|b|-1"), "AAAA"} {
			_, _, _, err := list(1, bad)
			expectCode(t, err, CodeInvalidArgument, "pagination_token")
		}
		for other, tok := range tokens {
			if other == name {
				continue
			}
			_, _, _, err := list(1, tok)
			expectCode(t, err, CodeInvalidArgument, "pagination_token")
		}
	}
	// A lease-list token works with and without the process filter (both
	// are lease lists, positions by lease id).
	ks, _, _, err := leaseLister(h.f, "ns", "p", h.now)(1, tokens["leases"])
	if err != nil || !reflect.DeepEqual(ks, []string{lid(2)}) {
		t.Fatalf("%v %v", ks, err)
	}
}

// Tokens are positions, not snapshots: a cursor whose entry was deleted
// still works, and entries added after it show up.
func TestPaginationDeletedCursor(t *testing.T) {
	h := newHarness(t)
	var names []string
	for i := 0; i < 10; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
		h.ok(cNS(names[i]))
	}
	list := nsLister(h.f)
	ks, next, _, _ := list(3, "")
	if !reflect.DeepEqual(ks, names[:3]) {
		t.Fatal(ks)
	}
	h.ok(cNSDelete("n2")) // the cursor's own entry
	h.ok(cNSDelete("n3")) // and the next one
	ks, next2, prev2, err := list(3, next)
	if err != nil || !reflect.DeepEqual(ks, []string{"n4", "n5", "n6"}) {
		t.Fatalf("after deleting the cursor: %v %v", ks, err)
	}
	h.ok(cNS("n2a")) // inserted before the position of prev2
	ks, _, prev, err := list(3, prev2)
	if err != nil || !reflect.DeepEqual(ks, []string{"n0", "n1", "n2a"}) || prev != "" {
		t.Fatalf("back: %v prev=%q %v", ks, prev, err)
	}
	h.ok(cNSDelete("n4"))
	ks, _, _, err = list(3, prev2) // the backward cursor's entry is gone
	if err != nil || !reflect.DeepEqual(ks, []string{"n0", "n1", "n2a"}) {
		t.Fatalf("back after delete: %v %v", ks, err)
	}
	ks, _, _, err = list(3, next2)
	if err != nil || !reflect.DeepEqual(ks, []string{"n7", "n8", "n9"}) {
		t.Fatalf("forward: %v %v", ks, err)
	}
	// Everything after the cursor deleted: an empty last page that still
	// leads back to the entries before it.
	for _, n := range []string{"n7", "n8", "n9"} {
		h.ok(cNSDelete(n))
	}
	ks, next, prev, err = list(3, next2)
	if err != nil || len(ks) != 0 || next != "" || prev == "" {
		t.Fatalf("empty page: %v next=%q prev=%q %v", ks, next, prev, err)
	}
	ks, _, _, err = list(3, prev)
	if err != nil || !reflect.DeepEqual(ks, []string{"n2a", "n5", "n6"}) {
		t.Fatalf("back from the empty page: %v %v", ks, err)
	}
}

// The same for holders, whose positions are acquisition sequence numbers.
func TestPaginationHoldersDeletedCursor(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 100))
	for i := 1; i <= 6; i++ {
		h.ok(cLease("ns", lid(i), "p", 100))
		h.ok(cAcq("ns", "s", lid(i), 1))
	}
	list := holderLister(h.f, "ns", "s", h.now)
	ks, next, _, _ := list(2, "")
	if !reflect.DeepEqual(ks, []string{lid(1), lid(2)}) {
		t.Fatal(ks)
	}
	h.ok(cRel("ns", "s", lid(2)))
	h.ok(cRevoke("ns", lid(3)))
	ks, next2, prev2, err := list(2, next)
	if err != nil || !reflect.DeepEqual(ks, []string{lid(4), lid(5)}) {
		t.Fatalf("after deleting the cursor: %v %v", ks, err)
	}
	// Re-acquiring after a release puts the lease last (a new hold).
	h.ok(cAcq("ns", "s", lid(2), 1))
	ks, _, _, err = list(2, next2)
	if err != nil || !reflect.DeepEqual(ks, []string{lid(6), lid(2)}) {
		t.Fatalf("tail: %v %v", ks, err)
	}
	ks, _, _, err = list(2, prev2)
	if err != nil || !reflect.DeepEqual(ks, []string{lid(1)}) {
		t.Fatalf("back: %v %v", ks, err)
	}
	// Everything after a cursor goes away: the empty page leads back to
	// the last entries before it.
	h.ok(cRel("ns", "s", lid(6)))
	h.ok(cRel("ns", "s", lid(2)))
	ks, next, prev, err := list(2, next2)
	if err != nil || len(ks) != 0 || next != "" || prev == "" {
		t.Fatalf("empty page: %v next=%q prev=%q %v", ks, next, prev, err)
	}
	ks, _, _, err = list(2, prev)
	if err != nil || !reflect.DeepEqual(ks, []string{lid(4), lid(5)}) {
		t.Fatalf("back from the empty page: %v %v", ks, err)
	}
}

// Holders: acquisition order, expired ones never listed (also across pages).
func TestPaginationHoldersOrderAndExpiry(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 100))
	var all, live []string
	for i := 0; i < 15; i++ {
		j := 14 - i // ids in reverse of acquisition order
		ttl := int64(100)
		if i%3 != 0 {
			ttl = 10
		} else {
			live = append(live, lid(j))
		}
		h.ok(cLease("ns", lid(j), "p", ttl))
		h.ok(cAcq("ns", "s", lid(j), 1))
		all = append(all, lid(j))
	}
	// Re-acquire does not move a holder.
	h.ok(cAcq("ns", "s", lid(14), 2))
	for _, limit := range []int32{1, 2, 3, 4, 250} {
		checkPaging(t, fmt.Sprint("all/", limit), holderLister(h.f, "ns", "s", h.now), all, limit)
		checkPaging(t, fmt.Sprint("live/", limit), holderLister(h.f, "ns", "s", h.now+10*sec), live, limit)
	}
	// A cursor taken while an entry was alive still works after it expired.
	_, next, _, _ := holderLister(h.f, "ns", "s", h.now)(2, "")
	ks, _, _, err := holderLister(h.f, "ns", "s", h.now+10*sec)(2, next)
	if err != nil || !reflect.DeepEqual(ks, live[1:3]) {
		t.Fatalf("%v %v want %v", ks, err, live[1:3])
	}
}
