// Package webui serves Grackle's read-only web view at /ui/ on a node's
// HTTP port: namespaces, semaphores with permits used and free, a
// semaphore's holders and queue updated live (server-sent events fed by
// WatchSemaphore), a namespace's locks as a tree with a lock's holders and
// queue updated live (fed by WatchLock), semaphore and lock leases by
// process id, wait groups with their progress and barriers with their
// current generation's arrivals (polled every second: there is no watch
// for them), and the cluster's members and leader. The page is plain
// HTML, CSS and JavaScript embedded in the binary (no CDN, no build step). Everything it shows comes through the
// public API (Backend), with the caller's access token when one is given.
package webui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

//go:embed assets
var assets embed.FS

// Backend is what the view reads: a few calls of the public API, as any
// client makes them (client.Client satisfies it).
type Backend interface {
	ListNamespaces(ctx context.Context, in *pb.ListNamespacesRequest, opts ...grpc.CallOption) (*pb.ListNamespacesResponse, error)
	ListSemaphores(ctx context.Context, in *pb.ListSemaphoresRequest, opts ...grpc.CallOption) (*pb.ListSemaphoresResponse, error)
	ListSemaphoreLeases(ctx context.Context, in *pb.ListSemaphoreLeasesRequest, opts ...grpc.CallOption) (*pb.ListSemaphoreLeasesResponse, error)
	GetClusterStatus(ctx context.Context, in *pb.GetClusterStatusRequest, opts ...grpc.CallOption) (*pb.GetClusterStatusResponse, error)
	Watch(ctx context.Context, ns, sem string) <-chan client.WatchUpdate
	ListLocks(ctx context.Context, in *pb.ListLocksRequest, opts ...grpc.CallOption) (*pb.ListLocksResponse, error)
	ListLockWaiters(ctx context.Context, in *pb.ListLockWaitersRequest, opts ...grpc.CallOption) (*pb.ListLockWaitersResponse, error)
	ListLockLeases(ctx context.Context, in *pb.ListLockLeasesRequest, opts ...grpc.CallOption) (*pb.ListLockLeasesResponse, error)
	// WatchLock is the raw stream (its first message is the full state);
	// watchLock reopens it after a leader change.
	WatchLock(ctx context.Context, in *pb.WatchLockRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchLockResponse], error)
	GetWaitGroup(ctx context.Context, in *pb.GetWaitGroupRequest, opts ...grpc.CallOption) (*pb.GetWaitGroupResponse, error)
	ListWaitGroups(ctx context.Context, in *pb.ListWaitGroupsRequest, opts ...grpc.CallOption) (*pb.ListWaitGroupsResponse, error)
	ListWaitGroupCompletedJobs(ctx context.Context, in *pb.ListWaitGroupCompletedJobsRequest, opts ...grpc.CallOption) (*pb.ListWaitGroupCompletedJobsResponse, error)
	GetBarrier(ctx context.Context, in *pb.GetBarrierRequest, opts ...grpc.CallOption) (*pb.GetBarrierResponse, error)
	ListBarriers(ctx context.Context, in *pb.ListBarriersRequest, opts ...grpc.CallOption) (*pb.ListBarriersResponse, error)
	ListBarrierParticipants(ctx context.Context, in *pb.ListBarrierParticipantsRequest, opts ...grpc.CallOption) (*pb.ListBarrierParticipantsResponse, error)
}

var _ Backend = (*client.Client)(nil)

// Connect returns the backend, connecting on first use.
type Connect func(ctx context.Context) (Backend, error)

// maxListed bounds the items one list shows (pages of the API are read
// until then).
const maxListed = 2000

// keepAlive is the interval of SSE comments that keep idle proxies open.
const keepAlive = 15 * time.Second

type handler struct {
	connect Connect
	mu      sync.Mutex
	be      Backend
	files   http.Handler
}

// Handler serves the view under prefix /ui/.
func Handler(connect Connect) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	h := &handler{connect: connect, files: http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/api/cluster", h.cluster)
	mux.HandleFunc("GET /ui/api/namespaces", h.namespaces)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/semaphores", h.semaphores)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/leases", h.leases)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/semaphores/{sem}/watch", h.watch)
	// Lock names hold slashes: the name is the path's tail.
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/locks", h.locks)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/lock-waiters/{lock...}", h.lockWaiters)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/lock-watch/{lock...}", h.lockWatch)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/lock-leases", h.lockLeases)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/wait-groups", h.waitGroups)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/wait-groups/{wg}", h.waitGroup)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/wait-groups/{wg}/jobs", h.waitGroupJobs)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/barriers", h.barriers)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/barriers/{bar}", h.barrier)
	mux.HandleFunc("GET /ui/api/namespaces/{ns}/barriers/{bar}/participants", h.barrierParticipants)
	mux.HandleFunc("GET /ui/", h.static)
	return mux
}

func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	h.files.ServeHTTP(w, r)
}

func (h *handler) backend(ctx context.Context) (Backend, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.be != nil {
		return h.be, nil
	}
	be, err := h.connect(ctx)
	if err != nil {
		// The first contact carries the caller's token: a refusal is the
		// caller's answer (the page asks for a token), not an outage.
		if c := status.Code(err); c == codes.Unauthenticated || c == codes.PermissionDenied {
			return nil, err
		}
		return nil, status.Errorf(codes.Unavailable, "cannot reach the API: %v", err)
	}
	h.be = be
	return be, nil
}

// callCtx carries the browser's token (Authorization: Bearer ...) to the
// API as gRPC metadata; the view never keeps it.
func callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	return withToken(ctx, r), cancel
}

func withToken(ctx context.Context, r *http.Request) context.Context {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a)
	}
	return ctx
}

// httpStatus maps a gRPC code onto the answer's HTTP status.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.FailedPrecondition:
		// e.g. a barrier generation no longer kept (GENERATION_MISMATCH).
		return http.StatusConflict
	case codes.Unavailable, codes.DeadlineExceeded:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}

// apiError is the JSON of a refusal: the gRPC code, the ErrorInfo reason
// (what the page decides on, e.g. which sign-in prompt to show) and a
// message for the person at the page.
type apiError struct {
	Code    string `json:"code"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
}

func errorOf(err error) apiError {
	st := status.Convert(err)
	reason := apierr.ReasonOf(err)
	return apiError{Code: st.Code().String(), Reason: reason, Message: browserMessage(reason, st.Message())}
}

// browserMessage is what a person at the page reads: the API's own words,
// except for the token refusals, whose words speak to a command line
// (--token, GRACKLE_TOKEN) where the page has a sign-in form.
func browserMessage(reason, msg string) string {
	switch reason {
	case acl.ReasonTokenMissing:
		return "this cluster has access control on: sign in with an ACL token"
	case acl.ReasonTokenUnknown:
		return "the token is unknown or was revoked: sign in with another ACL token"
	}
	return msg
}

func writeErr(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	code := httpStatus(status.Code(err))
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="grackle"`)
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorOf(err))
}

var marshal = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := marshal.Marshal(m)
	if err != nil {
		writeErr(w, status.Error(codes.Internal, err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func (h *handler) cluster(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	be, err := h.backend(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	st, err := be.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		writeErr(w, err)
		return
	}
	writeProto(w, st)
}

func (h *handler) namespaces(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, func(ctx context.Context, be Backend, tok string) ([]*pb.Namespace, string, error) {
		p, err := be.ListNamespaces(ctx, &pb.ListNamespacesRequest{Limit: 250, PaginationToken: tok})
		return p.GetNamespaces(), p.GetNextPaginationToken(), err
	}, func(items []*pb.Namespace, next string) proto.Message {
		return &pb.ListNamespacesResponse{Namespaces: items, NextPaginationToken: next}
	})
}

func (h *handler) semaphores(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, func(ctx context.Context, be Backend, tok string) ([]*pb.Semaphore, string, error) {
		p, err := be.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: r.PathValue("ns"), Limit: 250, PaginationToken: tok})
		return p.GetSemaphores(), p.GetNextPaginationToken(), err
	}, func(items []*pb.Semaphore, next string) proto.Message {
		return &pb.ListSemaphoresResponse{Semaphores: items, NextPaginationToken: next}
	})
}

func (h *handler) leases(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, func(ctx context.Context, be Backend, tok string) ([]*pb.SemaphoreLease, string, error) {
		p, err := be.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: r.PathValue("ns"),
			ProcessId: r.URL.Query().Get("process_id"), Limit: 250, PaginationToken: tok})
		return p.GetLeases(), p.GetNextPaginationToken(), err
	}, func(items []*pb.SemaphoreLease, next string) proto.Message {
		return &pb.ListSemaphoreLeasesResponse{Leases: items, NextPaginationToken: next}
	})
}

// serveList answers a List request with the whole list (up to maxListed
// items, read a page at a time by readPages), as one response that answer
// makes of the items and the token to go on from: every list handler but
// for the call and the response it makes.
func serveList[T any](h *handler, w http.ResponseWriter, r *http.Request,
	page func(ctx context.Context, be Backend, tok string) ([]T, string, error), answer func(items []T, next string) proto.Message) {
	ctx, cancel := callCtx(r)
	defer cancel()
	be, err := h.backend(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	items, next, err := readPages(func(tok string) ([]T, string, error) { return page(ctx, be, tok) })
	if err != nil {
		writeErr(w, err)
		return
	}
	writeProto(w, answer(items, next))
}

// readPages follows a List call's pages until it ends or maxListed items
// are read; next is the token to continue from when it stopped early
// (empty when the list is whole).
func readPages[T any](page func(tok string) ([]T, string, error)) (items []T, next string, err error) {
	for tok := ""; ; {
		got, tok2, err := page(tok)
		if err != nil {
			return nil, "", err
		}
		items = append(items, got...)
		if tok2 == "" || len(got) == 0 {
			return items, "", nil
		}
		if len(items) >= maxListed {
			return items, tok2, nil
		}
		tok = tok2
	}
}

// watch relays WatchSemaphore as server-sent events (relay says how).
// The client's watch resumes across leader changes, so the page only sees
// the end when the semaphore is gone or the call is refused.
func (h *handler) watch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(withToken(r.Context(), r))
	defer cancel()
	be, err := h.backend(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	relay(ctx, w, be.Watch(ctx, r.PathValue("ns"), r.PathValue("sem")), func(u client.WatchUpdate) (proto.Message, bool, error) {
		return u.State, u.Resumed, u.Err
	})
}

// relay sends a watch's updates as server-sent events: a "state" event
// carries one state (protojson), preceded by a "resumed" event when the
// watch was reopened (after a leader change) and that state is the new
// stream's first; a final "end" event carries the error that ended it.
// split tells an update's state, whether it is a resume, and its error.
func relay[U any](ctx context.Context, w http.ResponseWriter, updates <-chan U, split func(U) (proto.Message, bool, error)) {
	rc := http.NewResponseController(w)
	// The first update decides the HTTP status (a refused watch is a
	// plain error answer the page can act on, e.g. ask for a token).
	var first U
	select {
	case u, ok := <-updates:
		if !ok {
			return
		}
		first = u
	case <-ctx.Done():
		return
	}
	if _, _, err := split(first); err != nil {
		writeErr(w, err)
		return
	}
	// A stream outlives the server's write timeout.
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data []byte) error {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	state := func(u U) error {
		m, resumed, _ := split(u)
		if resumed {
			if err := send("resumed", []byte("{}")); err != nil {
				return err
			}
		}
		b, err := marshal.Marshal(m)
		if err != nil {
			return err
		}
		return send("state", b)
	}
	if err := state(first); err != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				return
			}
			if _, _, err := split(u); err != nil {
				if ctx.Err() == nil {
					b, _ := json.Marshal(errorOf(err))
					_ = send("end", b)
				}
				return
			}
			if err := state(u); err != nil {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

var errNoBackend = errors.New("webui: no backend")

// Unavailable is a Connect that always fails (a node without an API).
func Unavailable(context.Context) (Backend, error) { return nil, errNoBackend }
