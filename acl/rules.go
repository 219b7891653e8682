package acl

import (
	"strings"

	"github.com/grackle-coord/grackle/fsm"
)

// Need is what a call needs of the caller's token.
type Need struct {
	Role      string // fsm.RoleRead, RoleWrite or RoleAdmin
	Namespace string // the namespace the call touches, "*" for the cluster
	// Open: no token needed (health, reflection, ACL bootstrap).
	Open bool
	// AnyToken: any valid token, checked by the node asked (cluster
	// status: clients discover the leader with it).
	AnyToken bool
	// Relayed: a stream that a follower relays to the leader, whose
	// handler authorizes it where it is served: checked on the leader only
	// (a follower's state may not have applied a token the leader knows).
	Relayed bool
	// Checked: already checked (a stream, on its request).
	Checked bool
}

// rule is a method's role; its namespace comes from the request.
type rule struct {
	role string
	ns   func(req any) string
	// anyToken, open, relayed: see Need.
	anyToken, open, relayed bool
}

// reqNamespace is the namespace_name field every namespaced request has.
func reqNamespace(req any) string {
	if r, ok := req.(interface{ GetNamespaceName() string }); ok {
		return r.GetNamespaceName()
	}
	return ""
}

// reqName is the name of a namespace request that calls it "name".
func reqName(req any) string {
	if r, ok := req.(interface{ GetName() string }); ok && r.GetName() != "" {
		return r.GetName()
	}
	return reqNamespace(req)
}

// tokenNamespace is the namespace of a token to create.
func tokenNamespace(req any) string {
	if r, ok := req.(interface{ GetNamespace() string }); ok {
		return r.GetNamespace()
	}
	return ""
}

func cluster(any) string { return fsm.AnyNamespace }

// rules: every RPC of the API. A method not listed needs admin on "*" (the
// check fails closed for an RPC added without a rule). docs/SECURITY.md has
// the same table for people.
var rules = map[string]rule{
	"/grackle.v1.GrackleService/CreateNamespace": {role: fsm.RoleAdmin, ns: reqName},
	"/grackle.v1.GrackleService/GetNamespace":    {role: fsm.RoleRead, ns: reqName},
	"/grackle.v1.GrackleService/ListNamespaces":  {role: fsm.RoleRead, ns: cluster},
	"/grackle.v1.GrackleService/UpdateNamespace": {role: fsm.RoleAdmin, ns: reqName},
	"/grackle.v1.GrackleService/DeleteNamespace": {role: fsm.RoleAdmin, ns: reqName},

	"/grackle.v1.GrackleService/CreateSemaphore":      {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/GetSemaphore":         {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListSemaphores":       {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/UpdateSemaphore":      {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/DeleteSemaphore":      {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/AcquireSemaphore":     {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ReleaseSemaphore":     {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListSemaphoreHolders": {role: fsm.RoleRead, ns: reqNamespace},
	// Served on the leader by package watch, which authorizes them there
	// (a follower relays them: its state may lack a token the log holds).
	"/grackle.v1.GrackleService/ListSemaphoreWaiters": {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/WatchSemaphore":       {role: fsm.RoleRead, ns: reqNamespace, relayed: true},

	"/grackle.v1.GrackleService/CreateSemaphoreLease":  {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/GetSemaphoreLease":     {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/RefreshSemaphoreLease": {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/RevokeSemaphoreLease":  {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListSemaphoreLeases":   {role: fsm.RoleRead, ns: reqNamespace},

	"/grackle.v1.GrackleService/CreateLockLease":            {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/GetLockLease":               {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/RefreshLockLease":           {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/RevokeLockLease":            {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListLockLeases":             {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/AcquireLock":                {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ReleaseLock":                {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/GetLock":                    {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListLocks":                  {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/DeleteLock":                 {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/CreateWaitGroup":            {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/GetWaitGroup":               {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListWaitGroups":             {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/UpdateWaitGroup":            {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/DeleteWaitGroup":            {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/CompleteJobsFromWaitGroup":  {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListWaitGroupCompletedJobs": {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/WaitForWaitGroup":           {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/CreateBarrier":              {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/GetBarrier":                 {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListBarriers":               {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/UpdateBarrier":              {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/DeleteBarrier":              {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/ArriveAtBarrier":            {role: fsm.RoleWrite, ns: reqNamespace},
	"/grackle.v1.GrackleService/WaitAtBarrier":              {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/ListBarrierParticipants":    {role: fsm.RoleRead, ns: reqNamespace},
	// As ListSemaphoreWaiters and WatchSemaphore (package watch).
	"/grackle.v1.GrackleService/ListLockWaiters": {role: fsm.RoleRead, ns: reqNamespace},
	"/grackle.v1.GrackleService/WatchLock":       {role: fsm.RoleRead, ns: reqNamespace, relayed: true},

	"/grackle.v1.ClusterService/GetClusterStatus":   {anyToken: true},
	"/grackle.v1.ClusterService/GetNodeInfo":        {anyToken: true},
	"/grackle.v1.ClusterService/AddMember":          {role: fsm.RoleAdmin, ns: cluster},
	"/grackle.v1.ClusterService/RemoveMember":       {role: fsm.RoleAdmin, ns: cluster},
	"/grackle.v1.ClusterService/TransferLeadership": {role: fsm.RoleAdmin, ns: cluster},
	"/grackle.v1.ClusterService/SaveSnapshot":       {role: fsm.RoleAdmin, ns: cluster},

	"/grackle.v1.ACLService/Bootstrap":   {open: true},
	"/grackle.v1.ACLService/CreateToken": {role: fsm.RoleAdmin, ns: tokenNamespace},
	"/grackle.v1.ACLService/ListTokens":  {role: fsm.RoleAdmin, ns: cluster},
	"/grackle.v1.ACLService/RevokeToken": {role: fsm.RoleAdmin, ns: cluster},

	// Each call on the stream is checked on its own, by the same rule as
	// the unary call (the server runs the interceptors per call).
	"/grackle.v1.MuxService/Calls": {open: true},

	// Internal: a follower asks the leader for a read index to serve a
	// client's read itself, and then checks that client's token on its own
	// state. Open, since the follower has no token of its own: it answers
	// only a Raft index and the leader's clock (GetClusterStatus shows the
	// index to any token), and concurrent calls share one leadership round.
	"/grackle.peer.v1.PeerService/ReadIndex": {open: true},
	// Internal: the members' health probes (package memberhealth), about
	// once a second from every other member. Open, since a probing node
	// has no token of its own: the answer is what /metrics shows anyway
	// (the node's id, Raft state, term and applied index, its build).
	"/grackle.peer.v1.PeerService/Probe": {open: true},
}

// NeedFor is what a call of fullMethod with req needs. Health checks and
// server reflection are open (probes and grpcurl need them).
func NeedFor(fullMethod string, req any) Need {
	if strings.HasPrefix(fullMethod, "/grpc.health.v1.") || strings.HasPrefix(fullMethod, "/grpc.reflection.") {
		return Need{Open: true}
	}
	r, ok := rules[fullMethod]
	if !ok {
		return Need{Role: fsm.RoleAdmin, Namespace: fsm.AnyNamespace}
	}
	n := Need{Role: r.role, Open: r.open, AnyToken: r.anyToken, Relayed: r.relayed}
	if r.ns != nil && req != nil {
		n.Namespace = r.ns(req)
	}
	return n
}

// Methods lists the methods with a rule (tests check that every RPC of
// the API has one).
func Methods() []string {
	out := make([]string, 0, len(rules))
	for m := range rules {
		out = append(out, m)
	}
	return out
}
