package rpc

import (
	"context"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/leader"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// GrackleService: validate, then one helper of call.go.

// ---- namespaces ----

func (s *Service) CreateNamespace(ctx context.Context, r *pb.CreateNamespaceRequest) (*pb.CreateNamespaceResponse, error) {
	if err := firstInvalid(fsm.ValidateName("name", r.Name), fsm.ValidateDescription("description", r.Description),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CreateNamespace),
		&fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{
			Name: r.Name, Description: r.Description, Metadata: r.Metadata}}},
		func(res *fsm.Result) *pb.CreateNamespaceResponse {
			return &pb.CreateNamespaceResponse{Namespace: res.Namespace}
		})
}

func (s *Service) GetNamespace(ctx context.Context, r *pb.GetNamespaceRequest) (*pb.GetNamespaceResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetNamespace), func(int64) (*pb.GetNamespaceResponse, error) {
		ns, err := s.fsm.GetNamespace(r.NamespaceName)
		return &pb.GetNamespaceResponse{Namespace: ns}, err
	})
}

func (s *Service) ListNamespaces(ctx context.Context, r *pb.ListNamespacesRequest) (*pb.ListNamespacesResponse, error) {
	if err := checkLimit(r.Limit); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListNamespaces), func(int64) (*pb.ListNamespacesResponse, error) {
		p, err := s.fsm.ListNamespaces(r.Limit, r.PaginationToken)
		return &pb.ListNamespacesResponse{Namespaces: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

func (s *Service) UpdateNamespace(ctx context.Context, r *pb.UpdateNamespaceRequest) (*pb.UpdateNamespaceResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateDescription("description", r.Description),
		fsm.ValidateMetadata("metadata", r.Metadata), fsm.ValidateExpectedVersion("expected_version", r.ExpectedVersion)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.UpdateNamespace),
		&fsmpb.Command{Op: &fsmpb.Command_UpdateNamespace{UpdateNamespace: &fsmpb.UpdateNamespace{
			Name: r.NamespaceName, Description: r.Description, Metadata: r.Metadata, ExpectedVersion: r.ExpectedVersion}}},
		func(res *fsm.Result) *pb.UpdateNamespaceResponse {
			return &pb.UpdateNamespaceResponse{Namespace: res.Namespace}
		})
}

func (s *Service) DeleteNamespace(ctx context.Context, r *pb.DeleteNamespaceRequest) (*pb.DeleteNamespaceResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.DeleteNamespace),
		&fsmpb.Command{Op: &fsmpb.Command_DeleteNamespace{DeleteNamespace: &fsmpb.DeleteNamespace{Name: r.NamespaceName}}},
		func(res *fsm.Result) *pb.DeleteNamespaceResponse {
			return &pb.DeleteNamespaceResponse{Existed: res.RemovedNamespace != ""}
		})
}

// ---- semaphores ----

func (s *Service) CreateSemaphore(ctx context.Context, r *pb.CreateSemaphoreRequest) (*pb.CreateSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateDescription("description", r.Description), fsm.ValidatePermits("permits", r.Permits, s.cfg.Limits.MaxPermits),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CreateSemaphore),
		&fsmpb.Command{Op: &fsmpb.Command_CreateSemaphore{CreateSemaphore: &fsmpb.CreateSemaphore{
			NamespaceName: r.NamespaceName, Name: r.SemaphoreName, Description: r.Description, Permits: r.Permits, Metadata: r.Metadata}}},
		func(res *fsm.Result) *pb.CreateSemaphoreResponse {
			return &pb.CreateSemaphoreResponse{Semaphore: res.Semaphore}
		})
}

func (s *Service) GetSemaphore(ctx context.Context, r *pb.GetSemaphoreRequest) (*pb.GetSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetSemaphore), func(now int64) (*pb.GetSemaphoreResponse, error) {
		sem, err := s.fsm.GetSemaphore(r.NamespaceName, r.SemaphoreName, now)
		return &pb.GetSemaphoreResponse{Semaphore: sem}, err
	})
}

func (s *Service) ListSemaphores(ctx context.Context, r *pb.ListSemaphoresRequest) (*pb.ListSemaphoresResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListSemaphores), func(now int64) (*pb.ListSemaphoresResponse, error) {
		p, err := s.fsm.ListSemaphores(r.NamespaceName, r.Limit, r.PaginationToken, now)
		return &pb.ListSemaphoresResponse{Semaphores: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

func (s *Service) UpdateSemaphore(ctx context.Context, r *pb.UpdateSemaphoreRequest) (*pb.UpdateSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateDescription("description", r.Description), fsm.ValidatePermits("permits", r.Permits, s.cfg.Limits.MaxPermits),
		fsm.ValidateMetadata("metadata", r.Metadata), fsm.ValidateExpectedVersion("expected_version", r.ExpectedVersion)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.UpdateSemaphore), func(t *leader.Term) (*pb.UpdateSemaphoreResponse, error) {
		res, err := t.UpdateSemaphore(ctx, &fsmpb.UpdateSemaphore{NamespaceName: r.NamespaceName, Name: r.SemaphoreName,
			Description: r.Description, Permits: r.Permits, Metadata: r.Metadata, ExpectedVersion: r.ExpectedVersion})
		return applied(ctx, res, err, func(res *fsm.Result) *pb.UpdateSemaphoreResponse {
			return &pb.UpdateSemaphoreResponse{Semaphore: res.Semaphore}
		})
	})
}

func (s *Service) DeleteSemaphore(ctx context.Context, r *pb.DeleteSemaphoreRequest) (*pb.DeleteSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.DeleteSemaphore),
		&fsmpb.Command{Op: &fsmpb.Command_DeleteSemaphore{DeleteSemaphore: &fsmpb.DeleteSemaphore{
			NamespaceName: r.NamespaceName, Name: r.SemaphoreName}}},
		func(res *fsm.Result) *pb.DeleteSemaphoreResponse {
			return &pb.DeleteSemaphoreResponse{Existed: len(res.RemovedSemaphores) > 0}
		})
}

func (s *Service) ListSemaphoreHolders(ctx context.Context, r *pb.ListSemaphoreHoldersRequest) (*pb.ListSemaphoreHoldersResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListSemaphoreHolders), func(now int64) (*pb.ListSemaphoreHoldersResponse, error) {
		p, err := s.fsm.ListSemaphoreHolders(r.NamespaceName, r.SemaphoreName, r.Limit, r.PaginationToken, now)
		return &pb.ListSemaphoreHoldersResponse{Holders: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

// ---- acquire and release ----

func (s *Service) AcquireSemaphore(ctx context.Context, r *pb.AcquireSemaphoreRequest) (*pb.AcquireSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateLeaseKind("lease_id", r.LeaseId, false), fsm.ValidateWeight("weight", r.Weight),
		checkTimeout("timeout_seconds", r.TimeoutSeconds, s.cfg.MaxTimeoutSeconds), fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.AcquireSemaphore), func(t *leader.Term) (*pb.AcquireSemaphoreResponse, error) {
		resp, index, err := t.Acquire(ctx, leader.AcquireRequest{Namespace: r.NamespaceName, Semaphore: r.SemaphoreName,
			LeaseID: r.LeaseId, Weight: r.Weight, Metadata: r.Metadata, Timeout: time.Duration(r.TimeoutSeconds) * time.Second})
		setIndex(ctx, index)
		return resp, err
	})
}

func (s *Service) ReleaseSemaphore(ctx context.Context, r *pb.ReleaseSemaphoreRequest) (*pb.ReleaseSemaphoreResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("semaphore_name", r.SemaphoreName),
		fsm.ValidateLeaseKind("lease_id", r.LeaseId, false)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ReleaseSemaphore), func(t *leader.Term) (*pb.ReleaseSemaphoreResponse, error) {
		res, err := t.Release(ctx, r.NamespaceName, r.SemaphoreName, r.LeaseId)
		return applied(ctx, res, err, func(res *fsm.Result) *pb.ReleaseSemaphoreResponse {
			// Freed names the semaphore exactly when a hold was dropped.
			return &pb.ReleaseSemaphoreResponse{Semaphore: res.Semaphore, Released: len(res.Freed) > 0}
		})
	})
}

// ---- leases ----

func (s *Service) CreateSemaphoreLease(ctx context.Context, r *pb.CreateSemaphoreLeaseRequest) (*pb.CreateSemaphoreLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateProcessID("process_id", r.ProcessId), checkPrintable("process_id", r.ProcessId),
		fsm.ValidateTTL("ttl_seconds", r.TtlSeconds, s.cfg.Limits.MaxTTLSeconds)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CreateSemaphoreLease), func(t *leader.Term) (*pb.CreateSemaphoreLeaseResponse, error) {
		res, err := t.Write(ctx, &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{
			NamespaceName: r.NamespaceName, LeaseId: leader.NewLeaseID(), ProcessId: r.ProcessId, TtlSeconds: r.TtlSeconds}}})
		return applied(ctx, res, err, func(res *fsm.Result) *pb.CreateSemaphoreLeaseResponse {
			return &pb.CreateSemaphoreLeaseResponse{Lease: res.Lease}
		})
	})
}

func (s *Service) GetSemaphoreLease(ctx context.Context, r *pb.GetSemaphoreLeaseRequest) (*pb.GetSemaphoreLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseKind("lease_id", r.LeaseId, false)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetSemaphoreLease), func(now int64) (*pb.GetSemaphoreLeaseResponse, error) {
		l, err := s.fsm.GetSemaphoreLease(r.NamespaceName, r.LeaseId, now)
		return &pb.GetSemaphoreLeaseResponse{Lease: l}, err
	})
}

func (s *Service) RefreshSemaphoreLease(ctx context.Context, r *pb.RefreshSemaphoreLeaseRequest) (*pb.RefreshSemaphoreLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseKind("lease_id", r.LeaseId, false),
		fsm.ValidateTTL("ttl_seconds", r.TtlSeconds, s.cfg.Limits.MaxTTLSeconds)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.RefreshSemaphoreLease),
		&fsmpb.Command{Op: &fsmpb.Command_RefreshLease{RefreshLease: &fsmpb.RefreshLease{
			NamespaceName: r.NamespaceName, LeaseId: r.LeaseId, TtlSeconds: r.TtlSeconds}}},
		func(res *fsm.Result) *pb.RefreshSemaphoreLeaseResponse {
			return &pb.RefreshSemaphoreLeaseResponse{Lease: res.Lease}
		})
}

func (s *Service) RevokeSemaphoreLease(ctx context.Context, r *pb.RevokeSemaphoreLeaseRequest) (*pb.RevokeSemaphoreLeaseResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateLeaseKind("lease_id", r.LeaseId, false)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.RevokeSemaphoreLease), func(t *leader.Term) (*pb.RevokeSemaphoreLeaseResponse, error) {
		res, err := t.Revoke(ctx, r.NamespaceName, r.LeaseId)
		return applied(ctx, res, err, func(*fsm.Result) *pb.RevokeSemaphoreLeaseResponse { return &pb.RevokeSemaphoreLeaseResponse{} })
	})
}

func (s *Service) ListSemaphoreLeases(ctx context.Context, r *pb.ListSemaphoreLeasesRequest) (*pb.ListSemaphoreLeasesResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	if r.ProcessId != "" {
		if err := firstInvalid(fsm.ValidateProcessID("process_id", r.ProcessId), checkPrintable("process_id", r.ProcessId)); err != nil {
			return nil, err
		}
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListSemaphoreLeases), func(now int64) (*pb.ListSemaphoreLeasesResponse, error) {
		p, err := s.fsm.ListSemaphoreLeases(r.NamespaceName, r.ProcessId, r.Limit, r.PaginationToken, now)
		return &pb.ListSemaphoreLeasesResponse{Leases: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}
