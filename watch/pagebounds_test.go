package watch

import "testing"

// A lock's queue with an upgrade at its head is not in sequence order:
// paging forward and back still lists each waiter once, in queue order.
func TestPageBoundsUpgradeAtHead(t *testing.T) {
	all := []QueuedWaiter{{Seq: 10, Upgrade: true}, {Seq: 1}, {Seq: 2}, {Seq: 3}, {Seq: 4}}
	var seen []uint64
	c := cursor{}
	for page := 0; page < 5; page++ {
		from, to := pageBounds(all, c, 2)
		for _, w := range all[from:to] {
			seen = append(seen, w.Seq)
		}
		if to == len(all) {
			break
		}
		c = cursor{set: true, seq: all[to-1].Seq}
	}
	if len(seen) != 5 || seen[0] != 10 || seen[1] != 1 || seen[4] != 4 {
		t.Fatalf("pages listed %v, want 10 1 2 3 4", seen)
	}
	// Back from the page that starts at seq 2: the page before is 10, 1.
	from, to := pageBounds(all, cursor{set: true, backward: true, seq: 2}, 2)
	if from != 0 || to != 2 {
		t.Fatalf("backward page [%d, %d), want [0, 2)", from, to)
	}
	// A cursor whose waiter left falls back to sequence numbers.
	if from, _ := pageBounds(all[1:], cursor{set: true, seq: 10}, 2); from != 4 {
		t.Fatalf("cursor of a gone waiter: from %d", from)
	}
}
