package fsm

import (
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// A Batch entry carries commands the leader packed into one Raft entry:
// one fsync and one replication round for all of them. Each applies
// exactly as an entry of its own at the batch's index would, in order, and
// gets its own Result (in Result.Batch). Fencing tokens stay unique and
// increasing because a grant at an index already used gets the next
// number (see grantOne); a batch changes which numbers, not the rule.
//
// A batch is checked whole before anything applies: a command that does not
// decode, a batch inside the batch, or an op this server does not know make
// the batch CodeInternal and change nothing (on the Raft path the node then
// stops, as for any such entry).
func (a *applier) batch(b *fsmpb.Batch) *Error {
	cmds := make([]*fsmpb.Command, len(b.GetCommands()))
	for i, data := range b.GetCommands() {
		cmd, err := Decode(data)
		if err != nil {
			return errf(CodeInternal, "batch command %d: %v", i, err)
		}
		if _, nested := cmd.GetOp().(*fsmpb.Command_Batch); nested {
			return errf(CodeInternal, "batch command %d: a batch inside a batch", i)
		}
		if unknownOp(cmd) {
			return errf(CodeInternal, "batch command %d: an op this server does not know (not skippable)", i)
		}
		cmds[i] = cmd
	}
	a.res.Batch = make([]*Result, len(cmds))
	for i, cmd := range cmds {
		a.res.Batch[i] = a.s.applyCommand(a.index, cmd)
	}
	a.res.batchCmds = cmds
	return nil
}

// unknownOp is the rule of applier.op for a command without an op this
// server knows: it may be skipped when its writer said so, or when it is
// made only of grants (semaphore or lock grants).
func unknownOp(cmd *fsmpb.Command) bool {
	if cmd.GetOp() != nil {
		return false // every op that decodes into a known oneof case is handled
	}
	if cmd.GetSkippable() {
		return false
	}
	return len(cmd.GetGrants())+len(cmd.GetLockGrants()) == 0 || len(cmd.ProtoReflect().GetUnknown()) != 0
}
