package rpc

import (
	"context"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Every handler: validate; then run on the leader, or forward to it.

// write applies a command on the leader, or forwards the call with fwd.
func (s *Service) write(ctx context.Context, cmd *fsmpb.Command, fwd func(context.Context, pb.GrackleServiceClient) error) (*fsm.Result, error) {
	conn, ls, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return nil, fwd(forwardCtx(ctx), pb.NewGrackleServiceClient(conn))
	}
	res, err := s.apply(ctx, ls, cmd)
	if err != nil {
		return nil, err
	}
	return res, statusFromFSM(res.Err)
}

// read runs a linearizable read on the leader, or forwards the call.
func (s *Service) read(ctx context.Context, fwd func(context.Context, pb.GrackleServiceClient) error, local func(now int64) error) error {
	if faultOn("stale-read") {
		return local(time.Now().UnixNano()) // broken on purpose (faultinject builds only)
	}
	conn, _, err := s.route(ctx)
	if err != nil {
		return err
	}
	if conn != nil {
		return fwd(forwardCtx(ctx), pb.NewGrackleServiceClient(conn))
	}
	now, err := s.linearize(ctx)
	if err != nil {
		return err
	}
	return local(now)
}

// ---- namespaces ----

func (s *Service) CreateNamespace(ctx context.Context, r *pb.CreateNamespaceRequest) (out *pb.CreateNamespaceResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("name", r.Name), fsm.ValidateDescription("description", r.Description),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{
		Name: r.Name, Description: r.Description, Metadata: r.Metadata}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.CreateNamespace(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.CreateNamespaceResponse{Namespace: res.Namespace}, nil
}

func (s *Service) GetNamespace(ctx context.Context, r *pb.GetNamespaceRequest) (out *pb.GetNamespaceResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName)); err != nil {
		return nil, err
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.GetNamespace(ctx, r)
		return
	},
		func(int64) error {
			ns, e := s.fsm.GetNamespace(r.NamespaceName)
			out = &pb.GetNamespaceResponse{Namespace: ns}
			return statusFromErrOrNil(e)
		})
	return out, err
}

func (s *Service) ListNamespaces(ctx context.Context, r *pb.ListNamespacesRequest) (out *pb.ListNamespacesResponse, err error) {
	if err := checkLimit(r.Limit); err != nil {
		return nil, err
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.ListNamespaces(ctx, r)
		return
	},
		func(int64) error {
			p, e := s.fsm.ListNamespaces(r.Limit, r.PaginationToken)
			out = &pb.ListNamespacesResponse{Namespaces: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}
			return statusFromErrOrNil(e)
		})
	return out, err
}

func (s *Service) UpdateNamespace(ctx context.Context, r *pb.UpdateNamespaceRequest) (out *pb.UpdateNamespaceResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateDescription("description", r.Description),
		fsm.ValidateMetadata("metadata", r.Metadata), fsm.ValidateExpectedVersion("expected_version", r.ExpectedVersion)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_UpdateNamespace{UpdateNamespace: &fsmpb.UpdateNamespace{
		Name: r.NamespaceName, Description: r.Description, Metadata: r.Metadata, ExpectedVersion: r.ExpectedVersion}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.UpdateNamespace(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.UpdateNamespaceResponse{Namespace: res.Namespace}, nil
}

func (s *Service) DeleteNamespace(ctx context.Context, r *pb.DeleteNamespaceRequest) (out *pb.DeleteNamespaceResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_DeleteNamespace{DeleteNamespace: &fsmpb.DeleteNamespace{Name: r.NamespaceName}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.DeleteNamespace(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.DeleteNamespaceResponse{Existed: res.RemovedNamespace != ""}, nil
}

// ---- semaphores ----

func (s *Service) CreateSemaphore(ctx context.Context, r *pb.CreateSemaphoreRequest) (out *pb.CreateSemaphoreResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateDescription("description", r.Description), fsm.ValidatePermits("permits", r.Permits, s.cfg.Limits.MaxPermits),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_CreateSemaphore{CreateSemaphore: &fsmpb.CreateSemaphore{
		NamespaceName: r.NamespaceName, Name: r.SemaphoreName, Description: r.Description, Permits: r.Permits, Metadata: r.Metadata}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.CreateSemaphore(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.CreateSemaphoreResponse{Semaphore: res.Semaphore}, nil
}

func (s *Service) GetSemaphore(ctx context.Context, r *pb.GetSemaphoreRequest) (out *pb.GetSemaphoreResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName)); err != nil {
		return nil, err
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.GetSemaphore(ctx, r)
		return
	},
		func(now int64) error {
			sem, e := s.fsm.GetSemaphore(r.NamespaceName, r.SemaphoreName, now)
			out = &pb.GetSemaphoreResponse{Semaphore: sem}
			return statusFromErrOrNil(e)
		})
	return out, err
}

func (s *Service) ListSemaphores(ctx context.Context, r *pb.ListSemaphoresRequest) (out *pb.ListSemaphoresResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.ListSemaphores(ctx, r)
		return
	},
		func(now int64) error {
			p, e := s.fsm.ListSemaphores(r.NamespaceName, r.Limit, r.PaginationToken, now)
			out = &pb.ListSemaphoresResponse{Semaphores: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}
			return statusFromErrOrNil(e)
		})
	return out, err
}

func (s *Service) UpdateSemaphore(ctx context.Context, r *pb.UpdateSemaphoreRequest) (out *pb.UpdateSemaphoreResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateDescription("description", r.Description), fsm.ValidatePermits("permits", r.Permits, s.cfg.Limits.MaxPermits),
		fsm.ValidateMetadata("metadata", r.Metadata), fsm.ValidateExpectedVersion("expected_version", r.ExpectedVersion)); err != nil {
		return nil, err
	}
	conn, ls, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewGrackleServiceClient(conn).UpdateSemaphore(forwardCtx(ctx), r)
	}
	cmd := &fsmpb.Command{Op: &fsmpb.Command_UpdateSemaphore{UpdateSemaphore: &fsmpb.UpdateSemaphore{
		NamespaceName: r.NamespaceName, Name: r.SemaphoreName, Description: r.Description, Permits: r.Permits,
		Metadata: r.Metadata, ExpectedVersion: r.ExpectedVersion}}}
	// Raised permits wake waiters in the update's own entry.
	var ws []*waiter
	if permits, _, ok := s.fsm.SemaphoreCapacity(r.NamespaceName, r.SemaphoreName); ok && r.Permits > permits {
		ws = ls.q.attach(cmd, fsm.SemKey{Namespace: r.NamespaceName, Semaphore: r.SemaphoreName}, r.Permits-permits)
	}
	res, err := s.apply(ctx, ls, cmd)
	ls.q.settle(ws, 0, res)
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, statusFromFSM(res.Err)
	}
	return &pb.UpdateSemaphoreResponse{Semaphore: res.Semaphore}, nil
}

func (s *Service) DeleteSemaphore(ctx context.Context, r *pb.DeleteSemaphoreRequest) (out *pb.DeleteSemaphoreResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_DeleteSemaphore{DeleteSemaphore: &fsmpb.DeleteSemaphore{
		NamespaceName: r.NamespaceName, Name: r.SemaphoreName}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.DeleteSemaphore(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.DeleteSemaphoreResponse{Existed: len(res.RemovedSemaphores) > 0}, nil
}

func (s *Service) ListSemaphoreHolders(ctx context.Context, r *pb.ListSemaphoreHoldersRequest) (out *pb.ListSemaphoreHoldersResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.ListSemaphoreHolders(ctx, r)
		return
	},
		func(now int64) error {
			p, e := s.fsm.ListSemaphoreHolders(r.NamespaceName, r.SemaphoreName, r.Limit, r.PaginationToken, now)
			out = &pb.ListSemaphoreHoldersResponse{Holders: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}
			return statusFromErrOrNil(e)
		})
	return out, err
}

// ---- acquire and release ----

func (s *Service) AcquireSemaphore(ctx context.Context, r *pb.AcquireSemaphoreRequest) (*pb.AcquireSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateLeaseID("lease_id", r.LeaseId), fsm.ValidateWeight("weight", r.Weight),
		checkTimeout("timeout_seconds", r.TimeoutSeconds, s.cfg.MaxTimeoutSeconds), fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	conn, ls, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewGrackleServiceClient(conn).AcquireSemaphore(forwardCtx(ctx), r)
	}
	// The wait is measured from the call's arrival at the leader.
	deadline := time.Now().Add(time.Duration(r.TimeoutSeconds) * time.Second)
	key := fsm.SemKey{Namespace: r.NamespaceName, Semaphore: r.SemaphoreName}
	w := &waiter{ctx: ctx, key: key, leaseID: r.LeaseId, weight: r.Weight, md: r.Metadata, done: make(chan waitResult, 1)}
	queued, err := ls.q.enqueue(w)
	if err != nil {
		return nil, err
	}
	if faultOn("early-grant") && !queued {
		if early := s.earlyGrant(ls, w, r); early != nil {
			return early, nil // broken on purpose (faultinject builds only)
		}
	}
	res, err := s.apply(ctx, ls, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Queued: queued,
		Grant:  &fsmpb.Grant{NamespaceName: r.NamespaceName, SemaphoreName: r.SemaphoreName, LeaseId: r.LeaseId, Weight: r.Weight, Metadata: r.Metadata},
	}}})
	q := ls.q
	q.mu.Lock()
	w.inFlight = false
	switch {
	case w.finished:
		// Ended meanwhile (granted by another command, or leadership lost).
	case err != nil:
		q.removeLocked(w)
		w.finished = true
		q.pumpLocked(map[fsm.SemKey]bool{key: true})
		q.mu.Unlock()
		return nil, err
	case res.Err != nil:
		q.removeLocked(w)
		w.finished = true
		q.pumpLocked(map[fsm.SemKey]bool{key: true})
		q.mu.Unlock()
		return nil, statusFromFSM(res.Err)
	case res.Acquired:
		q.finishLocked(w, waitResult{granted: true, sem: res.Semaphore, holder: res.Holder})
		q.pumpLocked(map[fsm.SemKey]bool{key: true})
	case r.TimeoutSeconds == 0:
		q.finishLocked(w, waitResult{sem: res.Semaphore})
		q.pumpLocked(map[fsm.SemKey]bool{key: true})
	default:
		w.registered, w.mustWait = true, true
		q.pumpLocked(map[fsm.SemKey]bool{key: true})
	}
	q.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var wr waitResult
	select {
	case wr = <-w.done:
	case <-timer.C:
		wr = s.stopWaiting(ls, w)
	case <-ctx.Done():
		wr = s.stopWaiting(ls, w)
	}
	return s.acquireResponse(ctx, r, wr, r.TimeoutSeconds == 0)
}

// stopWaiting takes a waiter out of its queue when its time ran out or its
// caller went away. A waiter whose grant is already in Raft waits for that
// grant's outcome instead: it may have been granted.
func (s *Service) stopWaiting(ls *leaderState, w *waiter) waitResult {
	q := ls.q
	q.mu.Lock()
	if !w.finished && !w.inFlight {
		q.finishLocked(w, waitResult{})
		q.pumpLocked(map[fsm.SemKey]bool{w.key: true})
	}
	w.abandoned = true
	q.mu.Unlock()
	return <-w.done
}

func (s *Service) acquireResponse(ctx context.Context, r *pb.AcquireSemaphoreRequest, wr waitResult, nonBlocking bool) (*pb.AcquireSemaphoreResponse, error) {
	if wr.err != nil {
		return nil, wr.err
	}
	if wr.granted {
		return &pb.AcquireSemaphoreResponse{Semaphore: wr.sem, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED, Holder: wr.holder}, nil
	}
	if ctx.Err() != nil {
		return nil, s.fromRaft(ctx, ctx.Err())
	}
	outcome := pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT
	if nonBlocking {
		outcome = pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE
	}
	sem := wr.sem
	if sem == nil || !nonBlocking {
		// TIMED_OUT reports the semaphore's state now.
		cur, err := s.fsm.GetSemaphore(r.NamespaceName, r.SemaphoreName, s.clock.now())
		if err != nil {
			return nil, statusFromErr(err)
		}
		sem = cur
	}
	return &pb.AcquireSemaphoreResponse{Semaphore: sem, Outcome: outcome}, nil
}

func (s *Service) ReleaseSemaphore(ctx context.Context, r *pb.ReleaseSemaphoreRequest) (*pb.ReleaseSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateLeaseID("lease_id", r.LeaseId)); err != nil {
		return nil, err
	}
	conn, ls, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewGrackleServiceClient(conn).ReleaseSemaphore(forwardCtx(ctx), r)
	}
	cmd := &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{
		NamespaceName: r.NamespaceName, SemaphoreName: r.SemaphoreName, LeaseId: r.LeaseId}}}
	// The hand-off rides in the release's own entry.
	key := fsm.SemKey{Namespace: r.NamespaceName, Semaphore: r.SemaphoreName}
	ws := ls.q.attach(cmd, key, s.fsm.HeldWeight(r.NamespaceName, r.SemaphoreName, r.LeaseId))
	res, err := s.apply(ctx, ls, cmd)
	ls.q.settle(ws, 0, res)
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, statusFromFSM(res.Err)
	}
	// Freed names the semaphore exactly when a hold was dropped.
	return &pb.ReleaseSemaphoreResponse{Semaphore: res.Semaphore, Released: len(res.Freed) > 0}, nil
}

// ---- leases ----

func (s *Service) CreateSemaphoreLease(ctx context.Context, r *pb.CreateSemaphoreLeaseRequest) (out *pb.CreateSemaphoreLeaseResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateProcessID("process_id", r.ProcessId),
		fsm.ValidateTTL("ttl_seconds", r.TtlSeconds, s.cfg.Limits.MaxTTLSeconds)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{
		NamespaceName: r.NamespaceName, LeaseId: newLeaseID(), ProcessId: r.ProcessId, TtlSeconds: r.TtlSeconds}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.CreateSemaphoreLease(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.CreateSemaphoreLeaseResponse{Lease: res.Lease}, nil
}

func (s *Service) GetSemaphoreLease(ctx context.Context, r *pb.GetSemaphoreLeaseRequest) (out *pb.GetSemaphoreLeaseResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseID("lease_id", r.LeaseId)); err != nil {
		return nil, err
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.GetSemaphoreLease(ctx, r)
		return
	},
		func(now int64) error {
			l, e := s.fsm.GetSemaphoreLease(r.NamespaceName, r.LeaseId, now)
			out = &pb.GetSemaphoreLeaseResponse{Lease: l}
			return statusFromErrOrNil(e)
		})
	return out, err
}

func (s *Service) RefreshSemaphoreLease(ctx context.Context, r *pb.RefreshSemaphoreLeaseRequest) (out *pb.RefreshSemaphoreLeaseResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseID("lease_id", r.LeaseId),
		fsm.ValidateTTL("ttl_seconds", r.TtlSeconds, s.cfg.Limits.MaxTTLSeconds)); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, &fsmpb.Command{Op: &fsmpb.Command_RefreshLease{RefreshLease: &fsmpb.RefreshLease{
		NamespaceName: r.NamespaceName, LeaseId: r.LeaseId, TtlSeconds: r.TtlSeconds}}},
		func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
			out, e = c.RefreshSemaphoreLease(ctx, r)
			return
		})
	if res == nil || err != nil {
		return out, err
	}
	return &pb.RefreshSemaphoreLeaseResponse{Lease: res.Lease}, nil
}

func (s *Service) RevokeSemaphoreLease(ctx context.Context, r *pb.RevokeSemaphoreLeaseRequest) (*pb.RevokeSemaphoreLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseID("lease_id", r.LeaseId)); err != nil {
		return nil, err
	}
	conn, ls, err := s.route(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewGrackleServiceClient(conn).RevokeSemaphoreLease(forwardCtx(ctx), r)
	}
	cmd := &fsmpb.Command{Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: r.NamespaceName, LeaseId: r.LeaseId}}}
	var ws []*waiter
	for _, sem := range s.fsm.LeaseHolds(r.NamespaceName, r.LeaseId) {
		ws = append(ws, ls.q.attach(cmd, fsm.SemKey{Namespace: r.NamespaceName, Semaphore: sem},
			s.fsm.HeldWeight(r.NamespaceName, sem, r.LeaseId))...)
	}
	res, err := s.apply(ctx, ls, cmd)
	ls.q.settle(ws, 0, res)
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, statusFromFSM(res.Err)
	}
	return &pb.RevokeSemaphoreLeaseResponse{}, nil
}

func (s *Service) ListSemaphoreLeases(ctx context.Context, r *pb.ListSemaphoreLeasesRequest) (out *pb.ListSemaphoreLeasesResponse, err error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	if r.ProcessId != "" {
		if err := firstInvalid(fsm.ValidateProcessID("process_id", r.ProcessId)); err != nil {
			return nil, err
		}
	}
	err = s.read(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (e error) {
		out, e = c.ListSemaphoreLeases(ctx, r)
		return
	},
		func(now int64) error {
			p, e := s.fsm.ListSemaphoreLeases(r.NamespaceName, r.ProcessId, r.Limit, r.PaginationToken, now)
			out = &pb.ListSemaphoreLeasesResponse{Leases: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}
			return statusFromErrOrNil(e)
		})
	return out, err
}

func statusFromErrOrNil(err error) error {
	if err == nil {
		return nil
	}
	return statusFromErr(err)
}

// earlyGrant acknowledges an acquire that fits in this node's current view
// before its command commits (the fault "early-grant"; faultinject builds
// only). The command is still proposed, in the background.
func (s *Service) earlyGrant(ls *leaderState, w *waiter, r *pb.AcquireSemaphoreRequest) *pb.AcquireSemaphoreResponse {
	permits, holds, ok := s.fsm.SemaphoreCapacity(r.NamespaceName, r.SemaphoreName)
	if !ok || holds-s.fsm.HeldWeight(r.NamespaceName, r.SemaphoreName, r.LeaseId)+r.Weight > permits {
		return nil
	}
	ls.q.mu.Lock()
	ls.q.removeLocked(w)
	w.finished = true
	ls.q.mu.Unlock()
	go s.apply(context.Background(), ls, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{
		Grant: &fsmpb.Grant{NamespaceName: r.NamespaceName, SemaphoreName: r.SemaphoreName, LeaseId: r.LeaseId, Weight: r.Weight, Metadata: r.Metadata}}}})
	sem, _ := s.fsm.GetSemaphore(r.NamespaceName, r.SemaphoreName, s.clock.now())
	return &pb.AcquireSemaphoreResponse{Semaphore: sem, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED,
		Holder: &pb.SemaphoreHolder{LeaseId: r.LeaseId, Weight: r.Weight, FencingToken: s.fsm.AppliedIndex() + 1}}
}
