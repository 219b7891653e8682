package leader

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
)

func reachOf(voters, reachable int, nonvoters ...string) Reach {
	var r Reach
	for i := 0; i < voters; i++ {
		id := string(rune('a' + i))
		r.Servers = append(r.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id)})
		r.Voters++
		if i < reachable {
			r.Reachable++
		} else {
			r.Unreachable = append(r.Unreachable, id)
		}
	}
	for _, id := range nonvoters {
		r.Servers = append(r.Servers, raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id)})
	}
	return r
}

func refused(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	e, ok := err.(*Error)
	if !ok || e.Code != codes.FailedPrecondition {
		t.Fatalf("%s: %v, want FailedPrecondition", what, err)
	}
	for _, w := range words {
		if !strings.Contains(e.Msg, w) {
			t.Fatalf("%s: %q does not say %q", what, e.Msg, w)
		}
	}
}

// A new voter needs a reachable quorum of the grown cluster without it; a
// lone voter may always grow.
func TestCheckAddVoter(t *testing.T) {
	for _, tc := range []struct{ voters, reachable int }{{1, 1}, {2, 2}, {3, 3}, {4, 3}, {5, 4}} {
		if err := reachOf(tc.voters, tc.reachable).CheckAddVoter("x"); err != nil {
			t.Fatalf("%d voters, %d reachable: %v", tc.voters, tc.reachable, err)
		}
	}
	refused(t, "3 voters, 2 reachable", reachOf(3, 2).CheckAddVoter("x"), "2 of 3 voters are reachable", "(unreachable: c)", "4 voters need 3")
	refused(t, "2 voters, 1 reachable", reachOf(2, 1).CheckAddVoter("x"), "1 of 2")
	refused(t, "5 voters, 3 reachable", reachOf(5, 3).CheckAddVoter("x"), "6 voters need 4")
}

// A voter's removal needs a reachable quorum among the voters left; a
// nonvoter's never matters; the last voter stays.
func TestCheckRemove(t *testing.T) {
	r := reachOf(3, 2, "learner") // a, b reachable; c not
	if err := r.CheckRemove("c"); err != nil {
		t.Fatalf("removing the unreachable voter: %v", err)
	}
	refused(t, "removing a reachable voter", r.CheckRemove("b"), "2 voters with 1 reachable", "(unreachable: c)", "need 2")
	if err := r.CheckRemove("learner"); err != nil {
		t.Fatalf("removing a nonvoter: %v", err)
	}
	if err := reachOf(3, 3).CheckRemove("a"); err != nil {
		t.Fatalf("3 of 3 reachable: %v", err)
	}
	if err := reachOf(2, 2).CheckRemove("a"); err != nil {
		t.Fatalf("2 of 2 reachable: %v", err)
	}
	refused(t, "the last voter", reachOf(1, 1).CheckRemove("a"), "only voter")
	if err := reachOf(1, 1).CheckRemove("nobody"); err != nil {
		t.Fatalf("not a member: %v", err)
	}
}

func TestCheckAddNonvoterBoundsNonvoters(t *testing.T) {
	if err := reachOf(3, 3, "x", "y").CheckAddNonvoter("z", 3); err != nil {
		t.Fatalf("a third nonvoter of 3: %v", err)
	}
	refused(t, "a fourth nonvoter of 3", reachOf(3, 3, "x", "y", "z").CheckAddNonvoter("w", 3), "3 nonvoters", "x, y, z", "(3)")
	if err := reachOf(3, 3, "x", "y", "z").CheckAddNonvoter("w", 0); err != nil {
		t.Fatalf("no bound: %v", err)
	}
}
