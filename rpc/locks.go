package rpc

import (
	"context"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/leader"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Lock leases and locks: validate, then one helper of call.go.

// ---- lock leases ----

func (s *Service) CreateLockLease(ctx context.Context, r *pb.CreateLockLeaseRequest) (*pb.CreateLockLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateProcessID("process_id", r.ProcessId),
		checkPrintable("process_id", r.ProcessId), fsm.ValidateTTL("ttl_seconds", r.TtlSeconds, s.cfg.Limits.MaxTTLSeconds),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CreateLockLease), func(t *leader.Term) (*pb.CreateLockLeaseResponse, error) {
		res, err := t.Write(ctx, &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{
			NamespaceName: r.NamespaceName, LeaseId: leader.NewLockLeaseID(), ProcessId: r.ProcessId, TtlSeconds: r.TtlSeconds,
			Metadata: r.Metadata}}})
		return applied(ctx, res, err, func(res *fsm.Result) *pb.CreateLockLeaseResponse {
			return &pb.CreateLockLeaseResponse{Lease: res.LockLease}
		})
	})
}

func (s *Service) GetLockLease(ctx context.Context, r *pb.GetLockLeaseRequest) (*pb.GetLockLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseKind("lease_id", r.LeaseId, true)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetLockLease), func(now int64) (*pb.GetLockLeaseResponse, error) {
		l, err := s.fsm.GetLockLease(r.NamespaceName, r.LeaseId, now)
		return &pb.GetLockLeaseResponse{Lease: l}, err
	})
}

func (s *Service) RefreshLockLease(ctx context.Context, r *pb.RefreshLockLeaseRequest) (*pb.RefreshLockLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseKind("lease_id", r.LeaseId, true),
		fsm.ValidateTTL("ttl_seconds", r.TtlSeconds, s.cfg.Limits.MaxTTLSeconds)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.RefreshLockLease),
		&fsmpb.Command{Op: &fsmpb.Command_RefreshLease{RefreshLease: &fsmpb.RefreshLease{
			NamespaceName: r.NamespaceName, LeaseId: r.LeaseId, TtlSeconds: r.TtlSeconds}}},
		func(res *fsm.Result) *pb.RefreshLockLeaseResponse {
			return &pb.RefreshLockLeaseResponse{Lease: res.LockLease}
		})
}

func (s *Service) RevokeLockLease(ctx context.Context, r *pb.RevokeLockLeaseRequest) (*pb.RevokeLockLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseKind("lease_id", r.LeaseId, true)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.RevokeLockLease), func(t *leader.Term) (*pb.RevokeLockLeaseResponse, error) {
		res, err := t.Revoke(ctx, r.NamespaceName, r.LeaseId)
		return applied(ctx, res, err, func(*fsm.Result) *pb.RevokeLockLeaseResponse { return &pb.RevokeLockLeaseResponse{} })
	})
}

func (s *Service) ListLockLeases(ctx context.Context, r *pb.ListLockLeasesRequest) (*pb.ListLockLeasesResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	if r.ProcessId != "" {
		if err := firstInvalid(fsm.ValidateProcessID("process_id", r.ProcessId), checkPrintable("process_id", r.ProcessId)); err != nil {
			return nil, err
		}
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListLockLeases), func(now int64) (*pb.ListLockLeasesResponse, error) {
		p, err := s.fsm.ListLockLeases(r.NamespaceName, r.ProcessId, r.Limit, r.PaginationToken, now)
		return &pb.ListLockLeasesResponse{Leases: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

// ---- locks ----

func (s *Service) AcquireLock(ctx context.Context, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLockName("lock_name", r.LockName),
		fsm.ValidateLeaseKind("lease_id", r.LeaseId, true), checkTimeout("timeout_seconds", r.TimeoutSeconds, s.cfg.MaxTimeoutSeconds),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.AcquireLock), func(t *leader.Term) (*pb.AcquireLockResponse, error) {
		resp, index, err := t.AcquireLock(ctx, leader.LockRequest{Namespace: r.NamespaceName, Lock: r.LockName, LeaseID: r.LeaseId,
			Exclusive: r.Exclusive, Metadata: r.Metadata, Timeout: time.Duration(r.TimeoutSeconds) * time.Second})
		setIndex(ctx, index)
		return resp, err
	})
}

func (s *Service) ReleaseLock(ctx context.Context, r *pb.ReleaseLockRequest) (*pb.ReleaseLockResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLockName("lock_name", r.LockName),
		fsm.ValidateLeaseKind("lease_id", r.LeaseId, true)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ReleaseLock), func(t *leader.Term) (*pb.ReleaseLockResponse, error) {
		res, err := t.ReleaseLock(ctx, r.NamespaceName, r.LockName, r.LeaseId)
		return applied(ctx, res, err, func(res *fsm.Result) *pb.ReleaseLockResponse {
			return &pb.ReleaseLockResponse{Lock: res.Lock, Released: res.Released}
		})
	})
}

func (s *Service) GetLock(ctx context.Context, r *pb.GetLockRequest) (*pb.GetLockResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLockName("lock_name", r.LockName)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetLock), func(now int64) (*pb.GetLockResponse, error) {
		l, err := s.fsm.GetLock(r.NamespaceName, r.LockName, now)
		return &pb.GetLockResponse{Lock: l}, err
	})
}

func (s *Service) ListLocks(ctx context.Context, r *pb.ListLocksRequest) (*pb.ListLocksResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	if r.Prefix != "" {
		if err := firstInvalid(fsm.ValidateLockName("prefix", r.Prefix)); err != nil {
			return nil, err
		}
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListLocks), func(now int64) (*pb.ListLocksResponse, error) {
		p, err := s.fsm.ListLocks(r.NamespaceName, r.Prefix, r.Limit, r.PaginationToken, now)
		return &pb.ListLocksResponse{Locks: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

func (s *Service) DeleteLock(ctx context.Context, r *pb.DeleteLockRequest) (*pb.DeleteLockResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLockName("lock_name", r.LockName)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.DeleteLock), func(t *leader.Term) (*pb.DeleteLockResponse, error) {
		res, err := t.DeleteLock(ctx, r.NamespaceName, r.LockName)
		return applied(ctx, res, err, func(res *fsm.Result) *pb.DeleteLockResponse {
			return &pb.DeleteLockResponse{Existed: res.Released}
		})
	})
}
