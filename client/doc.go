// Package client is the Go client of Grackle, the Raft-replicated
// distributed semaphore service.
//
// A Client takes several endpoints, finds the Raft leader (through
// ClusterService.GetClusterStatus and through the leader address that an
// Unavailable error carries), sends its calls to one endpoint picked at
// random (its home: followers serve reads and forward writes; waits and
// watches go to the leader; Config.LeaderOnly sends everything to the
// leader), rediscovers the leader when leadership moves, and retries the
// calls that are safe to retry with jittered exponential backoff, always
// within the caller's context.
//
// On top of the raw API (every RPC of grackle.v1.GrackleService and
// grackle.v1.ClusterService is a method of Client taking the generated
// request types), the package offers:
//
//   - Session: a semaphore lease that is refreshed in the background and
//     reports, through Done, Err and Context, when it is lost;
//   - Semaphore: Acquire (blocking, bounded by the context), TryAcquire and
//     Release for one semaphore under a session's lease;
//   - WithPermits: run a function while holding permits, releasing them
//     however the function ends (also when it panics);
//   - WithLease and Session.Orphan: resume an existing lease after a
//     restart, and leave one without revoking it (hand-over);
//   - LockSession (NewLockSession), Lock and WithLock: the same for locks,
//     exclusive or shared on /-separated names, under a lock lease (ll_);
//     Client.WatchLockState follows a lock;
//   - WaitGroup (Client.WaitGroup): complete jobs in batches (Complete,
//     CompleteJobs) and wait until all are done (Wait); Barrier
//     (Client.Barrier): Arrive, Wait and ArriveAndWait, generation after
//     generation; retries never count a job or an arrival twice
//     (docs/waitgroups-barriers.md);
//   - Config.Observer: three events per acquire (start, rejected, stop),
//     exported as Prometheus metrics by client/promobserver;
//   - reachability: a member address this client cannot dial is routed
//     around through the endpoints (followers forward), logged once to
//     Config.Logger.
//
// docs/CLIENT.md explains these choices.
//
// The happy path:
//
//	cli, err := client.New(ctx, client.Config{Endpoints: []string{"10.0.0.1:7420", "10.0.0.2:7420"}})
//	sess, err := cli.NewSession(ctx, "jobs", "worker-7", 30*time.Second)
//	grant, err := sess.Semaphore("db").Acquire(ctx, 1)
//	// ... use the resource, passing grant.FencingToken along ...
//	err = sess.Semaphore("db").Release(ctx)
//	err = sess.Close(ctx)
//
// # Which calls are retried
//
// Only failures with the gRPC code Unavailable are retried (no leader, the
// leader changed, the node is unreachable); every other code is returned at
// once. Among Unavailable failures:
//
//   - reads (Get*, List*, GetClusterStatus) are always retried;
//   - idempotent writes are always retried: RefreshSemaphoreLease (it sets
//     expires_at = now + ttl), ReleaseSemaphore (releasing what is not held
//     is a no-op), AcquireSemaphore (a re-acquire under the same lease sets
//     the same hold again, docs/API.md, Re-acquire), DeleteNamespace and
//     DeleteSemaphore (deleting what is missing is not an error),
//     RevokeSemaphoreLease (a retry after a revoke that did apply answers
//     NotFound, which Session.Close treats as success), UpdateNamespace and
//     UpdateSemaphore (expected_version makes a second apply impossible: a
//     retry after an update that did apply answers InvalidArgument
//     "version mismatch"); and the lock calls in the same way
//     (RefreshLockLease, RevokeLockLease, AcquireLock, ReleaseLock,
//     DeleteLock); CompleteJobsFromWaitGroup (idempotent per job_id),
//     ArriveAtBarrier (idempotent per generation and process, retried with
//     the same expected_generation), DeleteWaitGroup and DeleteBarrier;
//   - waits (WaitForWaitGroup, WaitAtBarrier) are reads: retried on any
//     Unavailable, asking for what is left of their timeout;
//   - calls that are not idempotent (CreateNamespace, CreateSemaphore,
//     CreateSemaphoreLease, CreateLockLease, CreateWaitGroup,
//     CreateBarrier, UpdateWaitGroup, UpdateBarrier, AddMember,
//     RemoveMember, TransferLeadership) are retried only when the error proves that the
//     call never reached the Raft log: its google.rpc.ErrorInfo reason
//     (package apierr) is
//     NOT_LEADER (raft refused the entry, or the node does not lead and did
//     not forward) or NOT_SENT (the leader was not ready, raft never
//     enqueued the entry, a follower could not reach the leader, or this
//     client's connection never carried the request). Any other
//     Unavailable (reason OUTCOME_UNKNOWN: leadership lost before the write
//     committed; or none: a connection that broke after the request was
//     sent) is returned to the caller. The decision never reads message
//     text.
//
// Retries stop when the caller's context ends, and, after Config.RetryTimeout
// (default 30 s) of consecutive failures of one call, even if the context
// has no deadline.
package client
