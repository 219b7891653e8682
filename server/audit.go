package server

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// auditMaxIDs bounds the lease ids one expiry line lists.
const auditMaxIDs = 100

// auditor writes the audit trail: one structured line (logger "audit",
// level info) per lease revoke (either kind), per expiry batch, per
// DeleteLock that dropped holders, per wait group or barrier deleted
// (by a call or by its timer) and per wait group expired, and per membership
// change and per access-control change, with the ids involved and the
// Raft index that made it so (a token's id, role and namespace: never its
// secret nor the secret's hash).
// Every node applies every command; only the leader's lines are written,
// so the trail is the cluster's once (a line may be missing or doubled
// around a leadership change). It never logs a credential or a fencing
// token.
type auditor struct {
	log  hclog.Logger
	raft func() *raft.Raft
}

func (a *auditor) observe(index uint64, cmd *fsmpb.Command, res *fsm.Result) {
	r := a.raft()
	if r == nil || r.State() != raft.Leader {
		return
	}
	a.line(index, cmd, res)
}

// line writes the audit line of one applied command (the FSM reports each
// command of a packed entry on its own).
func (a *auditor) line(index uint64, cmd *fsmpb.Command, res *fsm.Result) {
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_RevokeLease:
		if res.Err == nil {
			a.log.Info("lease revoked", "index", index, "namespace", op.RevokeLease.GetNamespaceName(),
				"lease_id", op.RevokeLease.GetLeaseId(), "freed_semaphores", len(res.Freed), "freed_locks", len(res.FreedLocks))
		}
	case *fsmpb.Command_ExpireLeases, *fsmpb.Command_RefreshLease:
		if len(res.RemovedLeases) == 0 {
			return
		}
		ids := make([]string, 0, min(len(res.RemovedLeases), auditMaxIDs))
		for i, l := range res.RemovedLeases {
			if i == auditMaxIDs {
				break
			}
			ids = append(ids, l.Namespace+"/"+l.LeaseID)
		}
		a.log.Info("leases expired", "index", index, "count", len(res.RemovedLeases), "leases", ids,
			"listed", len(ids), "freed_semaphores", len(res.Freed), "freed_locks", len(res.FreedLocks))
	case *fsmpb.Command_DeleteLock:
		if res.Err == nil && res.Released {
			a.log.Info("lock deleted (holders dropped)", "index", index, "namespace", op.DeleteLock.GetNamespaceName(),
				"lock", op.DeleteLock.GetLockName())
		}
	case *fsmpb.Command_DeleteWaitGroup:
		if res.Err == nil && res.Existed {
			a.log.Info("wait group deleted", "index", index, "namespace", op.DeleteWaitGroup.GetNamespaceName(),
				"wait_group", op.DeleteWaitGroup.GetName())
		}
	case *fsmpb.Command_DeleteBarrier:
		if res.Err == nil && res.Existed {
			a.log.Info("barrier deleted", "index", index, "namespace", op.DeleteBarrier.GetNamespaceName(),
				"barrier", op.DeleteBarrier.GetName())
		}
	case *fsmpb.Command_ExpireTimers:
		for _, k := range res.Woken {
			kind := "wait group expired or deleted after delete_after_finished_seconds"
			if k.Kind == fsm.KindBarrier {
				kind = "barrier deleted after delete_inactive_after_seconds"
			}
			a.log.Info(kind, "index", index, "namespace", k.Namespace, "name", k.Name)
		}
	case *fsmpb.Command_DeleteNamespace:
		if res.Err == nil && len(res.RemovedLeases) > 0 {
			a.log.Info("leases removed with their namespace", "index", index, "namespace", op.DeleteNamespace.GetName(),
				"count", len(res.RemovedLeases))
		}
	case *fsmpb.Command_SetMember:
		if res.Err == nil {
			a.log.Info("member set", "index", index, "node_id", op.SetMember.GetNodeId(),
				"raft_address", op.SetMember.GetRaftAddress(), "grpc_address", op.SetMember.GetGrpcAddress())
		}
	case *fsmpb.Command_AclBootstrap:
		if res.Err == nil {
			tk := op.AclBootstrap.GetToken()
			a.log.Info("acl bootstrapped", "index", index, "token_id", tk.GetId(), "role", tk.GetRole(), "namespace", tk.GetNamespace())
		}
	case *fsmpb.Command_AclCreateToken:
		if res.Err == nil {
			tk := op.AclCreateToken.GetToken()
			a.log.Info("acl token created", "index", index, "token_id", tk.GetId(), "role", tk.GetRole(), "namespace", tk.GetNamespace())
		}
	case *fsmpb.Command_AclRevokeToken:
		if res.Err == nil {
			a.log.Info("acl token revoked", "index", index, "token_id", op.AclRevokeToken.GetId())
		}
	case *fsmpb.Command_RemoveMember:
		if res.Err == nil {
			a.log.Info("member removed", "index", index, "node_id", op.RemoveMember.GetNodeId())
		}
	}
}
