// Package apierr is Grackle's error contract. Every error whose meaning
// matters for a retry decision carries a google.rpc.ErrorInfo detail with
// a Reason below, in Domain, and (when the answering node knows them) the
// leader's id and gRPC address in its metadata. Clients, the CLI and the
// fault-injection suite decide on the gRPC code and the reason, never on
// message text: messages are for people and may change.
package apierr

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo domain of every Grackle reason.
const Domain = "grackle.v1"

// Reasons. NotLeader and NotSent prove the request never reached the Raft
// log, so even a non-idempotent write may be retried; OutcomeUnknown says
// it may have been applied (or may still be).
const (
	// NotLeader: the node asked does not lead (or stopped leading before
	// it proposed anything) and did not forward; nothing was written. The
	// metadata names the leader when known. Code Unavailable.
	NotLeader = "NOT_LEADER"
	// NotSent: the request never reached the Raft log for another reason:
	// the leader was not ready (its post-election barrier was pending), a
	// forwarding follower could not reach the leader, raft refused to
	// enqueue it in time, the caller's context ended before the proposal,
	// or the connection never carried it. Code Unavailable (or
	// DeadlineExceeded/Canceled when the caller's context ended).
	NotSent = "NOT_SENT"
	// OutcomeUnknown: the request was proposed (or may have been) and its
	// result is unknown: leadership was lost before it committed, the node
	// shut down, the apply deadline passed, a waiting acquire's leader
	// stepped down, or a connection broke after the request was written.
	// Code Unavailable or DeadlineExceeded.
	OutcomeUnknown = "OUTCOME_UNKNOWN"
	// WeightExceedsPermits: an acquire's weight is larger than the
	// semaphore's permits, so it can never be granted. Code
	// InvalidArgument.
	WeightExceedsPermits = "WEIGHT_EXCEEDS_PERMITS"
	// Superseded: a waiting acquire was replaced by a newer acquire of the
	// same lease on the same semaphore. Code Aborted.
	Superseded = "SUPERSEDED"
	// WatchStalled: a WatchSemaphore stream took no message for the
	// node's watch stall timeout and was cut off, so that a slow watcher
	// never holds the leader back; reopening it reads the whole state
	// again. Code ResourceExhausted.
	WatchStalled = "WATCH_STALLED"
	// ACLDisabled: ACLService.Bootstrap on a node started without --acl:
	// a token minted there would become an admin on "*" the day access
	// control is turned on. Code FailedPrecondition.
	ACLDisabled = "ACL_DISABLED"
	// InsecureJoin: AddMember on a node without access control (--acl)
	// and without --insecure, of a node beyond loopback or from a caller
	// beyond loopback: without access control anyone who reaches the
	// gRPC port could add members. Start every node with --acl (the
	// joining node with --join-token), or accept it with --insecure on
	// every node. Code FailedPrecondition.
	InsecureJoin = "INSECURE_JOIN"
	// RaftAddressInUse: AddMember of a node whose raft_address another
	// member already has. The metadata names that member
	// (KeyMember). Code AlreadyExists.
	RaftAddressInUse = "RAFT_ADDRESS_IN_USE"
	// Overloaded: the leader's queue of commands waiting to be proposed
	// is full (--max-queued-proposals); the write was refused before it
	// was proposed, so nothing was written. Retry later, with backoff.
	// Code ResourceExhausted.
	Overloaded = "OVERLOADED"
	// QueueFull: the semaphore's or lock's queue of waiters is full
	// (--max-waiters), or the caller's process already has its share of
	// it (--max-waiters-per-process). Nothing was queued. A non-blocking
	// acquire is not refused: it answers outcome UNAVAILABLE. Code
	// ResourceExhausted.
	QueueFull = "QUEUE_FULL"
	// StateQuota: the replicated state has reached its quota
	// (--max-state-bytes): a write that would grow it (a create, an
	// acquire, completed jobs, an arrival, an update with more metadata)
	// was refused and changed nothing. Releases, revokes, deletes and
	// expiry still work and free room. Code ResourceExhausted.
	StateQuota = "STATE_QUOTA"
)

// Not-found reasons say which thing is missing, so that a caller can tell
// "my lease is gone" (its session is lost) from "that semaphore does not
// exist" (a mistake in the call) without reading the message. Every
// NotFound the server gives carries one of them. Code NotFound.
const (
	// NamespaceNotFound: the namespace does not exist (or was deleted
	// while the call waited); nor, then, does any lease in it.
	NamespaceNotFound = "NAMESPACE_NOT_FOUND"
	// SemaphoreNotFound: the semaphore does not exist (or was deleted
	// while the call waited).
	SemaphoreNotFound = "SEMAPHORE_NOT_FOUND"
	// LeaseNotFound: the lease does not exist: never created, revoked, or
	// expired (an expired lease does not exist).
	LeaseNotFound = "LEASE_NOT_FOUND"
	// MemberNotFound: the node id is not a member of the cluster.
	MemberNotFound = "MEMBER_NOT_FOUND"
	// TokenNotFound: the access token id does not exist.
	TokenNotFound = "TOKEN_NOT_FOUND"
	// WaitGroupNotFound: the wait group does not exist (or was deleted,
	// by DeleteWaitGroup or after delete_after_finished_seconds).
	WaitGroupNotFound = "WAIT_GROUP_NOT_FOUND"
	// BarrierNotFound: the barrier does not exist (or was deleted, by
	// DeleteBarrier or after delete_inactive_after_seconds).
	BarrierNotFound = "BARRIER_NOT_FOUND"
)

// UpgradeConflict: AcquireLock of a shared holder asking for exclusive
// while another lease's upgrade of the same lock (or an ancestor or a
// descendant) waits; nothing changed. Code FailedPrecondition.
const UpgradeConflict = "UPGRADE_CONFLICT"

// GenerationMismatch: ArriveAtBarrier with an expected_generation that is
// neither the barrier's current one nor (for a counted arrival) the
// previous one, WaitAtBarrier with a generation that has not begun, or
// ListBarrierParticipants with a generation no longer kept. The metadata
// names the current generation (KeyCurrentGeneration). Code
// FailedPrecondition.
const GenerationMismatch = "GENERATION_MISMATCH"

// WaitGroupNotActive: new jobs for a wait group that is COMPLETED or
// EXPIRED (or past its expires_at), or an update of one. The metadata
// names its status (KeyStatus). Code FailedPrecondition.
const WaitGroupNotActive = "WAIT_GROUP_NOT_ACTIVE"

// LeaseGone reports whether err says the caller's lease no longer exists:
// NotFound with LeaseNotFound, or with NamespaceNotFound (deleting a
// namespace deletes its leases). A missing semaphore is not a lost lease.
func LeaseGone(err error) bool {
	if status.Code(err) != codes.NotFound {
		return false
	}
	r := ReasonOf(err)
	return r == LeaseNotFound || r == NamespaceNotFound
}

// Metadata keys of the ErrorInfo detail.
const (
	KeyLeaderID      = "leader_id"
	KeyLeaderAddress = "leader_address"
	KeyNode          = "node_id" // the node that produced the error
	// KeyCurrentGeneration: a barrier's current generation (GenerationMismatch).
	KeyCurrentGeneration = "current_generation"
	// KeyStatus: a wait group's status (WaitGroupNotActive).
	KeyStatus = "status"
	// KeyMember: the member that holds a Raft address (RaftAddressInUse).
	KeyMember = "member"
)

// Leader names the leader as the answering node knew it; empty fields
// mean unknown.
type Leader struct {
	ID      string
	Address string
}

// New builds a status error with code, message and an ErrorInfo carrying
// reason, the answering node's id and the leader (empty fields omitted).
func New(code codes.Code, reason, node string, leader Leader, msg string) error {
	return WithReason(status.New(code, msg), reason, node, leader).Err()
}

// NewWithMetadata is New for an error whose ErrorInfo carries metadata of
// its own (a barrier's current generation, a wait group's status).
func NewWithMetadata(code codes.Code, reason, msg string, md map[string]string) error {
	ei := &errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md}
	st, err := status.New(code, msg).WithDetails(ei)
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// WithReason returns st with an ErrorInfo detail added (st itself is not
// changed). An st that already has one is returned as it is.
func WithReason(st *status.Status, reason, node string, leader Leader) *status.Status {
	if info(st) != nil {
		return st
	}
	md := map[string]string{}
	if node != "" {
		md[KeyNode] = node
	}
	if leader.ID != "" {
		md[KeyLeaderID] = leader.ID
	}
	if leader.Address != "" {
		md[KeyLeaderAddress] = leader.Address
	}
	ei := &errdetails.ErrorInfo{Reason: reason, Domain: Domain}
	if len(md) > 0 {
		ei.Metadata = md
	}
	out, err := st.WithDetails(ei)
	if err != nil {
		// Only a nil or OK status fails here; keep the status as it is.
		return st
	}
	return out
}

// Annotate adds reason to err's status (code and message unchanged) when
// it has none. A non-status error is converted with status.Convert.
func Annotate(err error, reason, node string, leader Leader) error {
	if err == nil {
		return nil
	}
	return WithReason(status.Convert(err), reason, node, leader).Err()
}

func info(st *status.Status) *errdetails.ErrorInfo {
	if st == nil {
		return nil
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == Domain {
			return ei
		}
	}
	return nil
}

// Info returns err's Grackle ErrorInfo, or nil.
func Info(err error) *errdetails.ErrorInfo {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		var se interface{ GRPCStatus() *status.Status }
		if !errors.As(err, &se) {
			return nil
		}
		st = se.GRPCStatus()
	}
	return info(st)
}

// ReasonOf returns err's reason ("" when it has none).
func ReasonOf(err error) string { return Info(err).GetReason() }

// LeaderOf returns the leader named by err's ErrorInfo (empty if none).
func LeaderOf(err error) Leader {
	md := Info(err).GetMetadata()
	return Leader{ID: md[KeyLeaderID], Address: md[KeyLeaderAddress]}
}

// ProvesNotSent reports whether err proves the request never reached the
// Raft log (reason NotLeader, NotSent or Overloaded), so that retrying even
// a non-idempotent write cannot apply it twice.
func ProvesNotSent(err error) bool {
	switch ReasonOf(err) {
	case NotLeader, NotSent, Overloaded:
		return true
	}
	return false
}
