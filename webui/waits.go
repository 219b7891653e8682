package webui

// The wait groups and barriers part of the view: a namespace's wait
// groups (progress, status, time left) and a group's completed jobs; its
// barriers (generation, arrivals of expected) and a barrier's
// participants of one generation in arrival order.
//
// There is no watch RPC for these, so the page is live by polling: while
// the page is visible it asks again every second. To keep that light,
// each endpoint here answers exactly one API page (one List or Get call,
// never a walk over every page as serveList does), of at most pageMax
// items; the page moves through a long list with the page tokens.

import (
	"context"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The page size of the polled lists: limit= may ask for 1..pageMax,
// pageDefault when absent.
const (
	pageDefault = 100
	pageMax     = 250
)

// pageArgs reads ?limit= and ?page_token= of a polled list.
func pageArgs(r *http.Request) (int32, string, error) {
	limit := int32(pageDefault)
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > pageMax {
			return 0, "", status.Errorf(codes.InvalidArgument, "limit: must be 1..%d, got %q", pageMax, s)
		}
		limit = int32(n)
	}
	return limit, r.URL.Query().Get("page_token"), nil
}

// serveOne answers with one call's response: the endpoints the page polls.
func serveOne[M proto.Message](h *handler, w http.ResponseWriter, r *http.Request, call func(ctx context.Context, be Backend) (M, error)) {
	ctx, cancel := callCtx(r)
	defer cancel()
	be, err := h.backend(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	m, err := call(ctx, be)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeProto(w, m)
}

// servePage is serveOne for a List call, with the page's limit and token
// from the query.
func servePage[M proto.Message](h *handler, w http.ResponseWriter, r *http.Request, call func(ctx context.Context, be Backend, limit int32, tok string) (M, error)) {
	limit, tok, err := pageArgs(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	serveOne(h, w, r, func(ctx context.Context, be Backend) (M, error) { return call(ctx, be, limit, tok) })
}

// waitGroups lists one page of a namespace's wait groups, by name.
func (h *handler) waitGroups(w http.ResponseWriter, r *http.Request) {
	servePage(h, w, r, func(ctx context.Context, be Backend, limit int32, tok string) (*pb.ListWaitGroupsResponse, error) {
		return be.ListWaitGroups(ctx, &pb.ListWaitGroupsRequest{NamespaceName: r.PathValue("ns"), Limit: limit, PaginationToken: tok})
	})
}

// waitGroup is one wait group: the page reads it when the group it shows
// is not on the page of the list it shows.
func (h *handler) waitGroup(w http.ResponseWriter, r *http.Request) {
	serveOne(h, w, r, func(ctx context.Context, be Backend) (*pb.GetWaitGroupResponse, error) {
		return be.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: r.PathValue("ns"), WaitGroupName: r.PathValue("wg")})
	})
}

// waitGroupJobs lists one page of a wait group's completed jobs, by job id.
func (h *handler) waitGroupJobs(w http.ResponseWriter, r *http.Request) {
	servePage(h, w, r, func(ctx context.Context, be Backend, limit int32, tok string) (*pb.ListWaitGroupCompletedJobsResponse, error) {
		return be.ListWaitGroupCompletedJobs(ctx, &pb.ListWaitGroupCompletedJobsRequest{NamespaceName: r.PathValue("ns"),
			WaitGroupName: r.PathValue("wg"), Limit: limit, PaginationToken: tok})
	})
}

// barriers lists one page of a namespace's barriers, by name.
func (h *handler) barriers(w http.ResponseWriter, r *http.Request) {
	servePage(h, w, r, func(ctx context.Context, be Backend, limit int32, tok string) (*pb.ListBarriersResponse, error) {
		return be.ListBarriers(ctx, &pb.ListBarriersRequest{NamespaceName: r.PathValue("ns"), Limit: limit, PaginationToken: tok})
	})
}

func (h *handler) barrier(w http.ResponseWriter, r *http.Request) {
	serveOne(h, w, r, func(ctx context.Context, be Backend) (*pb.GetBarrierResponse, error) {
		return be.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: r.PathValue("ns"), BarrierName: r.PathValue("bar")})
	})
}

// barrierParticipants lists one page of a barrier's arrivals at one
// generation (?generation=, 0 or absent: the current one; the answer says
// which) in arrival order. A generation no longer kept is 409 (the API's
// FailedPrecondition, GENERATION_MISMATCH).
func (h *handler) barrierParticipants(w http.ResponseWriter, r *http.Request) {
	var gen int64
	if s := r.URL.Query().Get("generation"); s != "" {
		var err error
		if gen, err = strconv.ParseInt(s, 10, 64); err != nil || gen < 0 {
			writeErr(w, status.Errorf(codes.InvalidArgument, "generation: must be 0 (the current one) or >= 1, got %q", s))
			return
		}
	}
	servePage(h, w, r, func(ctx context.Context, be Backend, limit int32, tok string) (*pb.ListBarrierParticipantsResponse, error) {
		return be.ListBarrierParticipants(ctx, &pb.ListBarrierParticipantsRequest{NamespaceName: r.PathValue("ns"),
			BarrierName: r.PathValue("bar"), Generation: gen, Limit: limit, PaginationToken: tok})
	})
}
