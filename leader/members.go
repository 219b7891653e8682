package leader

import (
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/raftnode"
)

// Membership changes are checked against what the leader knows of its
// voters (etcd's strict reconfiguration check): a change that could leave
// the cluster without a reachable quorum is refused before it reaches
// Raft, because once committed nothing else can be (not even the change
// that would undo it).

// PeerContacts is the leader's record of each peer's last answered
// AppendEntries (raftnode.Contacts).
type PeerContacts interface {
	Get(id raft.ServerID) (raftnode.PeerContact, bool)
	// Changed returns a channel closed at the next answer recorded.
	Changed() <-chan struct{}
}

// Reach is the leader's count of its voters, at one configuration.
type Reach struct {
	// Index is the configuration's Raft index: a change made with it as
	// prevIndex is refused by raft if the configuration changed since, so
	// a check and the change it allowed see the same members.
	Index       uint64
	Servers     []raft.Server
	Voters      int
	Reachable   int      // voters this node heard from within ReachableWithin (itself included)
	Unreachable []string // the other voters' ids
}

// quorum is the majority of n voters.
func quorum(n int) int { return n/2 + 1 }

// Reach counts the voters of the current configuration and how many of
// them answered this node's AppendEntries within ReachableWithin. It
// means something only while this node leads (only a leader sends
// AppendEntries).
func (l *Leader) Reach() (Reach, error) {
	f := l.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return Reach{}, fromRaft(err)
	}
	r := Reach{Index: f.Index(), Servers: f.Configuration().Servers}
	now := time.Now()
	for _, srv := range r.Servers {
		if srv.Suffrage != raft.Voter {
			continue
		}
		r.Voters++
		if l.reachable(srv, now) {
			r.Reachable++
		} else {
			r.Unreachable = append(r.Unreachable, string(srv.ID))
		}
	}
	return r, nil
}

// reachable: this node, or a peer that answered at its configured address
// within ReachableWithin.
func (l *Leader) reachable(srv raft.Server, now time.Time) bool {
	if string(srv.ID) == l.cfg.NodeID {
		return true
	}
	pc, ok := l.contact(srv)
	return ok && now.Sub(pc.At) <= l.cfg.ReachableWithin
}

func (l *Leader) contact(srv raft.Server) (raftnode.PeerContact, bool) {
	if l.cfg.Contacts == nil {
		return raftnode.PeerContact{}, false
	}
	pc, ok := l.cfg.Contacts.Get(srv.ID)
	return pc, ok && pc.Address == srv.Address
}

// LastContact is when peer id last answered this node's AppendEntries at
// its configured address (zero: never, or this node never led).
func (l *Leader) LastContact(srv raft.Server) time.Time {
	pc, _ := l.contact(srv)
	return pc.At
}

func (r Reach) unreachable() string {
	if len(r.Unreachable) == 0 {
		return ""
	}
	return " (unreachable: " + strings.Join(r.Unreachable, ", ") + ")"
}

// CheckAddVoter refuses a new voter unless the cluster would keep a
// reachable quorum even if the newcomer never answered: reachable voters
// >= quorum(voters+1). A cluster of one voter may always grow (it cannot
// otherwise), which is safe only because a newcomer joins as a nonvoter
// and votes once it has caught up. The same check runs when the AddMember
// call arrives and again just before the promotion.
func (r Reach) CheckAddVoter(id string) error {
	if r.Voters <= 1 {
		return nil
	}
	need := quorum(r.Voters + 1)
	if r.Reachable >= need {
		return nil
	}
	return newError(codes.FailedPrecondition, "",
		"adding voter %s: %d of %d voters are reachable%s, and %d voters need %d reachable to keep a quorum if the new one never answers; bring the unreachable voters back or remove them first",
		id, r.Reachable, r.Voters, r.unreachable(), r.Voters+1, need)
}

// DefaultMaxNonvoters bounds the nonvoters of a configuration by default
// (etcd allows one learner; here a voter also joins as a nonvoter until it
// is promoted, so a few may be on their way at once).
const DefaultMaxNonvoters = 3

// CheckAddNonvoter refuses a new member (every member joins as a nonvoter)
// while the configuration already holds max nonvoters (max <= 0: no
// bound). The leader runs one replication goroutine, and keeps one
// connection, per member, whether it answers or not: without a bound an
// admin, or a stolen admin token, could add members without end.
func (r Reach) CheckAddNonvoter(id string, max int) error {
	if max <= 0 {
		return nil
	}
	var ids []string
	for _, srv := range r.Servers {
		if srv.Suffrage != raft.Voter {
			ids = append(ids, string(srv.ID))
		}
	}
	if len(ids) < max {
		return nil
	}
	return newError(codes.FailedPrecondition, "",
		"adding %s: the cluster already has %d nonvoters (%s), the most --max-nonvoters allows (%d); wait for them to be promoted, or remove one first",
		id, len(ids), strings.Join(ids, ", "), max)
}

// CheckRemove refuses to remove a voter when the voters left would not
// have a reachable quorum among them. Removing a nonvoter (or a node not
// in the configuration) changes no quorum and is always allowed.
func (r Reach) CheckRemove(id string) error {
	var target *raft.Server
	for i := range r.Servers {
		if string(r.Servers[i].ID) == id {
			target = &r.Servers[i]
		}
	}
	if target == nil || target.Suffrage != raft.Voter {
		return nil
	}
	left := r.Voters - 1
	if left == 0 {
		return newError(codes.FailedPrecondition, "", "removing %s: it is the only voter, and a cluster without voters can never commit again", id)
	}
	reach := r.Reachable
	var unreachable []string
	for _, u := range r.Unreachable {
		if u == id {
			continue
		}
		unreachable = append(unreachable, u)
	}
	if len(unreachable) == len(r.Unreachable) {
		reach-- // the target was counted reachable
	}
	if need := quorum(left); reach < need {
		return newError(codes.FailedPrecondition, "",
			"removing voter %s would leave %d voters with %d reachable%s, and %d voters need %d for a quorum; bring the unreachable voters back (or remove them) first",
			id, left, reach, Reach{Unreachable: unreachable}.unreachable(), left, need)
	}
	return nil
}
