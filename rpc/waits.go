package rpc

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/leader"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Wait groups and barriers: validate, then one helper of call.go. The
// state machine checks every field again (and what needs the leader's
// now: expires_at), so a bound here only saves a round trip.

func checkNonNegative(field string, v int64) error {
	if v < 0 {
		return apierr.FieldOutOfRange(field, 0, math.MaxInt64, fmt.Sprintf("must be >= 0, got %d", v))
	}
	return nil
}

func checkJobs(jobs []*pb.WaitGroupJob, max int64) error {
	if n := int64(len(jobs)); n < 1 || n > max {
		return apierr.InvalidField("jobs", fmt.Sprintf("must hold 1..%d jobs, got %d", max, n))
	}
	for i, j := range jobs {
		if err := firstInvalid(fsm.ValidateJobID("jobs["+strconv.Itoa(i)+"].job_id", j.GetJobId()),
			fsm.ValidateMetadata("jobs["+strconv.Itoa(i)+"].metadata", j.GetMetadata())); err != nil {
			return err
		}
	}
	return nil
}

// ---- wait groups ----

func (s *Service) CreateWaitGroup(ctx context.Context, r *pb.CreateWaitGroupRequest) (*pb.CreateWaitGroupResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName),
		fsm.ValidateDescription("description", r.Description), fsm.ValidateCount("counter", r.Counter, s.cfg.Limits.MaxWaitGroupCounter),
		checkNonNegative("expires_at", r.ExpiresAt), fsm.ValidateKeepSeconds("delete_after_finished_seconds", r.DeleteAfterFinishedSeconds),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CreateWaitGroup),
		&fsmpb.Command{Op: &fsmpb.Command_CreateWaitGroup{CreateWaitGroup: &fsmpb.CreateWaitGroup{
			NamespaceName: r.NamespaceName, Name: r.WaitGroupName, Description: r.Description, Counter: r.Counter,
			ExpiresAt: r.ExpiresAt, DeleteAfterFinishedSeconds: r.DeleteAfterFinishedSeconds, Metadata: r.Metadata}}},
		func(res *fsm.Result) *pb.CreateWaitGroupResponse {
			return &pb.CreateWaitGroupResponse{WaitGroup: res.WaitGroup}
		})
}

func (s *Service) GetWaitGroup(ctx context.Context, r *pb.GetWaitGroupRequest) (*pb.GetWaitGroupResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetWaitGroup), func(now int64) (*pb.GetWaitGroupResponse, error) {
		w, err := s.fsm.GetWaitGroup(r.NamespaceName, r.WaitGroupName, now)
		return &pb.GetWaitGroupResponse{WaitGroup: w}, err
	})
}

func (s *Service) ListWaitGroups(ctx context.Context, r *pb.ListWaitGroupsRequest) (*pb.ListWaitGroupsResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListWaitGroups), func(now int64) (*pb.ListWaitGroupsResponse, error) {
		p, err := s.fsm.ListWaitGroups(r.NamespaceName, r.Limit, r.PaginationToken, now)
		return &pb.ListWaitGroupsResponse{WaitGroups: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

func (s *Service) UpdateWaitGroup(ctx context.Context, r *pb.UpdateWaitGroupRequest) (*pb.UpdateWaitGroupResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName),
		fsm.ValidateDescription("description", r.Description), fsm.ValidateCount("counter", r.Counter, s.cfg.Limits.MaxWaitGroupCounter),
		checkNonNegative("expires_at", r.ExpiresAt), fsm.ValidateKeepSeconds("delete_after_finished_seconds", r.DeleteAfterFinishedSeconds),
		fsm.ValidateMetadata("metadata", r.Metadata), fsm.ValidateExpectedVersion("expected_version", r.ExpectedVersion)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.UpdateWaitGroup),
		&fsmpb.Command{Op: &fsmpb.Command_UpdateWaitGroup{UpdateWaitGroup: &fsmpb.UpdateWaitGroup{
			NamespaceName: r.NamespaceName, Name: r.WaitGroupName, Description: r.Description, Counter: r.Counter,
			ExpiresAt: r.ExpiresAt, DeleteAfterFinishedSeconds: r.DeleteAfterFinishedSeconds, Metadata: r.Metadata,
			ExpectedVersion: r.ExpectedVersion}}},
		func(res *fsm.Result) *pb.UpdateWaitGroupResponse {
			return &pb.UpdateWaitGroupResponse{WaitGroup: res.WaitGroup}
		})
}

func (s *Service) DeleteWaitGroup(ctx context.Context, r *pb.DeleteWaitGroupRequest) (*pb.DeleteWaitGroupResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.DeleteWaitGroup),
		&fsmpb.Command{Op: &fsmpb.Command_DeleteWaitGroup{DeleteWaitGroup: &fsmpb.DeleteWaitGroup{NamespaceName: r.NamespaceName, Name: r.WaitGroupName}}},
		func(res *fsm.Result) *pb.DeleteWaitGroupResponse {
			return &pb.DeleteWaitGroupResponse{Existed: res.Existed}
		})
}

func (s *Service) CompleteJobsFromWaitGroup(ctx context.Context, r *pb.CompleteJobsFromWaitGroupRequest) (*pb.CompleteJobsFromWaitGroupResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName),
		checkJobs(r.Jobs, s.cfg.Limits.MaxJobsPerCall)); err != nil {
		return nil, err
	}
	jobs := make([]*fsmpb.JobCompletion, len(r.Jobs))
	for i, j := range r.Jobs {
		jobs[i] = &fsmpb.JobCompletion{JobId: j.JobId, Metadata: j.Metadata}
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CompleteJobsFromWaitGroup),
		&fsmpb.Command{Op: &fsmpb.Command_CompleteJobs{CompleteJobs: &fsmpb.CompleteJobs{NamespaceName: r.NamespaceName, Name: r.WaitGroupName, Jobs: jobs}}},
		func(res *fsm.Result) *pb.CompleteJobsFromWaitGroupResponse {
			return &pb.CompleteJobsFromWaitGroupResponse{WaitGroup: res.WaitGroup, NewlyCompleted: res.NewJobs}
		})
}

func (s *Service) ListWaitGroupCompletedJobs(ctx context.Context, r *pb.ListWaitGroupCompletedJobsRequest) (*pb.ListWaitGroupCompletedJobsResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName),
		checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListWaitGroupCompletedJobs), func(now int64) (*pb.ListWaitGroupCompletedJobsResponse, error) {
		p, err := s.fsm.ListWaitGroupCompletedJobs(r.NamespaceName, r.WaitGroupName, r.Limit, r.PaginationToken, now)
		return &pb.ListWaitGroupCompletedJobsResponse{Jobs: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

func (s *Service) WaitForWaitGroup(ctx context.Context, r *pb.WaitForWaitGroupRequest) (*pb.WaitForWaitGroupResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("wait_group_name", r.WaitGroupName),
		checkTimeout("timeout_seconds", r.TimeoutSeconds, s.cfg.MaxTimeoutSeconds)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.WaitForWaitGroup), func(t *leader.Term) (*pb.WaitForWaitGroupResponse, error) {
		return t.WaitForWaitGroup(ctx, r.NamespaceName, r.WaitGroupName, time.Duration(r.TimeoutSeconds)*time.Second)
	})
}

// ---- barriers ----

func (s *Service) CreateBarrier(ctx context.Context, r *pb.CreateBarrierRequest) (*pb.CreateBarrierResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName),
		fsm.ValidateDescription("description", r.Description),
		fsm.ValidateCount("expected_processes", r.ExpectedProcesses, s.cfg.Limits.MaxBarrierProcesses),
		fsm.ValidateKeepSeconds("delete_inactive_after_seconds", r.DeleteInactiveAfterSeconds),
		fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.CreateBarrier),
		&fsmpb.Command{Op: &fsmpb.Command_CreateBarrier{CreateBarrier: &fsmpb.CreateBarrier{
			NamespaceName: r.NamespaceName, Name: r.BarrierName, Description: r.Description, ExpectedProcesses: r.ExpectedProcesses,
			DeleteInactiveAfterSeconds: r.DeleteInactiveAfterSeconds, Metadata: r.Metadata}}},
		func(res *fsm.Result) *pb.CreateBarrierResponse {
			return &pb.CreateBarrierResponse{Barrier: res.Barrier}
		})
}

func (s *Service) GetBarrier(ctx context.Context, r *pb.GetBarrierRequest) (*pb.GetBarrierResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.GetBarrier), func(int64) (*pb.GetBarrierResponse, error) {
		b, err := s.fsm.GetBarrier(r.NamespaceName, r.BarrierName)
		return &pb.GetBarrierResponse{Barrier: b}, err
	})
}

func (s *Service) ListBarriers(ctx context.Context, r *pb.ListBarriersRequest) (*pb.ListBarriersResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListBarriers), func(int64) (*pb.ListBarriersResponse, error) {
		p, err := s.fsm.ListBarriers(r.NamespaceName, r.Limit, r.PaginationToken)
		return &pb.ListBarriersResponse{Barriers: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous}, err
	})
}

func (s *Service) UpdateBarrier(ctx context.Context, r *pb.UpdateBarrierRequest) (*pb.UpdateBarrierResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName),
		fsm.ValidateDescription("description", r.Description),
		fsm.ValidateCount("expected_processes", r.ExpectedProcesses, s.cfg.Limits.MaxBarrierProcesses),
		fsm.ValidateKeepSeconds("delete_inactive_after_seconds", r.DeleteInactiveAfterSeconds),
		fsm.ValidateMetadata("metadata", r.Metadata), fsm.ValidateExpectedVersion("expected_version", r.ExpectedVersion)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.UpdateBarrier),
		&fsmpb.Command{Op: &fsmpb.Command_UpdateBarrier{UpdateBarrier: &fsmpb.UpdateBarrier{
			NamespaceName: r.NamespaceName, Name: r.BarrierName, Description: r.Description, ExpectedProcesses: r.ExpectedProcesses,
			DeleteInactiveAfterSeconds: r.DeleteInactiveAfterSeconds, Metadata: r.Metadata, ExpectedVersion: r.ExpectedVersion}}},
		func(res *fsm.Result) *pb.UpdateBarrierResponse {
			return &pb.UpdateBarrierResponse{Barrier: res.Barrier, Tripped: res.Tripped}
		})
}

func (s *Service) DeleteBarrier(ctx context.Context, r *pb.DeleteBarrierRequest) (*pb.DeleteBarrierResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.DeleteBarrier),
		&fsmpb.Command{Op: &fsmpb.Command_DeleteBarrier{DeleteBarrier: &fsmpb.DeleteBarrier{NamespaceName: r.NamespaceName, Name: r.BarrierName}}},
		func(res *fsm.Result) *pb.DeleteBarrierResponse {
			return &pb.DeleteBarrierResponse{Existed: res.Existed}
		})
}

func (s *Service) ArriveAtBarrier(ctx context.Context, r *pb.ArriveAtBarrierRequest) (*pb.ArriveAtBarrierResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName),
		fsm.ValidateProcessID("process_id", r.ProcessId), checkPrintable("process_id", r.ProcessId),
		fsm.ValidateGeneration("expected_generation", r.ExpectedGeneration), fsm.ValidateMetadata("metadata", r.Metadata)); err != nil {
		return nil, err
	}
	return write(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ArriveAtBarrier),
		&fsmpb.Command{Op: &fsmpb.Command_ArriveAtBarrier{ArriveAtBarrier: &fsmpb.ArriveAtBarrier{
			NamespaceName: r.NamespaceName, Name: r.BarrierName, ProcessId: r.ProcessId, ExpectedGeneration: r.ExpectedGeneration,
			Metadata: r.Metadata}}},
		func(res *fsm.Result) *pb.ArriveAtBarrierResponse {
			return &pb.ArriveAtBarrierResponse{Barrier: res.Barrier, AllArrived: res.AllArrived}
		})
}

func (s *Service) WaitAtBarrier(ctx context.Context, r *pb.WaitAtBarrierRequest) (*pb.WaitAtBarrierResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName),
		fsm.ValidateGeneration("expected_generation", r.ExpectedGeneration),
		checkTimeout("timeout_seconds", r.TimeoutSeconds, s.cfg.MaxTimeoutSeconds)); err != nil {
		return nil, err
	}
	return serve(s, ctx, grackleRPC(r, pb.GrackleServiceClient.WaitAtBarrier), func(t *leader.Term) (*pb.WaitAtBarrierResponse, error) {
		return t.WaitAtBarrier(ctx, r.NamespaceName, r.BarrierName, r.ExpectedGeneration, time.Duration(r.TimeoutSeconds)*time.Second)
	})
}

func (s *Service) ListBarrierParticipants(ctx context.Context, r *pb.ListBarrierParticipantsRequest) (*pb.ListBarrierParticipantsResponse, error) {
	if err := firstInvalid(fsm.ValidateName("namespace_name", r.NamespaceName), fsm.ValidateName("barrier_name", r.BarrierName),
		checkNonNegative("generation", r.Generation), checkLimit(r.Limit)); err != nil {
		return nil, err
	}
	return read(s, ctx, grackleRPC(r, pb.GrackleServiceClient.ListBarrierParticipants), func(int64) (*pb.ListBarrierParticipantsResponse, error) {
		p, gen, err := s.fsm.ListBarrierParticipants(r.NamespaceName, r.BarrierName, r.Generation, r.Limit, r.PaginationToken)
		return &pb.ListBarrierParticipantsResponse{Participants: p.Items, NextPaginationToken: p.Next, PreviousPaginationToken: p.Previous,
			Generation: gen}, err
	})
}
