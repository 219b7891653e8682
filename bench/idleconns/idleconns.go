// Package idleconns measures what an idle client connection costs a
// Grackle member: it opens N gRPC connections to one member of a running
// cluster (the leader or a follower), makes one call on each so that the
// server holds its transport (and, as the Go client does, its
// multiplexed stream), and reads the member's resident memory
// (/proc/PID/status VmRSS), Go heap (go_memstats_heap_inuse_bytes),
// goroutines and their stacks (go_goroutines,
// go_memstats_stack_inuse_bytes; all three from its /metrics) before and
// after.
// With the member's profiles on (--pprof), each reading follows a
// garbage collection (/debug/pprof/heap?gc=1), so the heap figure is what
// is live. `grackle bench idle-conns` runs it; bench/idleconns.sh (make
// idle-bench) starts the clusters.
package idleconns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Options of one measurement.
type Options struct {
	Endpoints []string // gRPC addresses of the members
	HTTP      []string // their HTTP addresses (/metrics, /debug/pprof), in the same order
	PIDs      []int    // their process IDs on this machine, in the same order
	Member    string   // "leader" or "follower": whom the connections go to
	Conns     int      // connections to open
	Unary     bool     // unary calls only: no multiplexed stream
	Settle    time.Duration
	// Label names the build measured (written into the result).
	Label string
	// HeapProfile, if set, receives the member's heap profile once the
	// connections are open (needs --pprof on the member).
	HeapProfile string
	// DialOptions for every connection (credentials, token).
	DialOptions []grpc.DialOption
	// Parallel is how many connections are being opened at once (default 32).
	Parallel int
	// Progress, if set, is told how many connections are open as they open.
	Progress io.Writer
	// HTTPClient reads /metrics and the profiles (default: a client with a
	// 30 s timeout).
	HTTPClient *http.Client
}

// Sample is one reading of a member.
type Sample struct {
	RSS        int64 `json:"rss_bytes"`
	Heap       int64 `json:"heap_inuse_bytes"`
	Goroutines int64 `json:"goroutines"`
	Stack      int64 `json:"stack_inuse_bytes"` // goroutine stacks (outside the heap)
	// GC: the reading followed a forced collection.
	GC bool `json:"gc"`
}

// Result is one measurement.
type Result struct {
	Label        string  `json:"label"`
	Member       string  `json:"member"`
	Mode         string  `json:"mode"` // "mux" (as the Go client) or "unary"
	Conns        int     `json:"conns"`
	Before       Sample  `json:"before"`
	After        Sample  `json:"after"`
	RSSPerConn   float64 `json:"rss_per_conn"`
	HeapPerConn  float64 `json:"heap_per_conn"`
	GorPerConn   float64 `json:"goroutines_per_conn"`
	StackPerConn float64 `json:"stack_per_conn"`
	OpenSeconds  float64 `json:"open_seconds"`
}

// Text is the result as one RESULT line.
func (r Result) Text() string {
	return fmt.Sprintf("RESULT idle-conns label=%s member=%s mode=%s conns=%d rss_per_conn=%.0f heap_per_conn=%.0f goroutines_per_conn=%.2f stack_per_conn=%.0f rss_before=%d rss_after=%d heap_before=%d heap_after=%d goroutines_before=%d goroutines_after=%d gc=%t open_s=%.2f",
		r.Label, r.Member, r.Mode, r.Conns, r.RSSPerConn, r.HeapPerConn, r.GorPerConn, r.StackPerConn,
		r.Before.RSS, r.After.RSS, r.Before.Heap, r.After.Heap, r.Before.Goroutines, r.After.Goroutines, r.After.GC, r.OpenSeconds)
}

// Validate checks the options.
func (o *Options) Validate() error {
	if len(o.Endpoints) == 0 {
		return errors.New("no endpoints")
	}
	if len(o.HTTP) != len(o.Endpoints) {
		return fmt.Errorf("--http-endpoints: %d addresses for %d endpoints (one per endpoint, in the same order)", len(o.HTTP), len(o.Endpoints))
	}
	if len(o.PIDs) != len(o.Endpoints) {
		return fmt.Errorf("--server-pids: %d PIDs for %d endpoints (one per endpoint, in the same order)", len(o.PIDs), len(o.Endpoints))
	}
	if o.Member != "leader" && o.Member != "follower" {
		return fmt.Errorf("--member %q: leader or follower", o.Member)
	}
	if o.Conns < 1 {
		return fmt.Errorf("--conns %d: at least 1", o.Conns)
	}
	return nil
}

// Run opens the connections, measures, and closes them.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	if o.Parallel <= 0 {
		o.Parallel = 32
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	res := Result{Label: o.Label, Member: o.Member, Mode: "mux", Conns: o.Conns}
	if o.Unary {
		res.Mode = "unary"
	}
	i, err := pick(ctx, o)
	if err != nil {
		return res, err
	}
	target, httpAddr, pid := o.Endpoints[i], o.HTTP[i], o.PIDs[i]

	if res.Before, err = sample(ctx, o.HTTPClient, httpAddr, pid, o.Settle); err != nil {
		return res, err
	}
	start := time.Now()
	held, err := open(ctx, o, target)
	defer held.close()
	if err != nil {
		return res, err
	}
	res.OpenSeconds = time.Since(start).Seconds()
	if res.After, err = sample(ctx, o.HTTPClient, httpAddr, pid, o.Settle); err != nil {
		return res, err
	}
	if o.HeapProfile != "" {
		if err := saveProfile(ctx, o.HTTPClient, httpAddr, o.HeapProfile); err != nil {
			return res, err
		}
	}
	n := float64(o.Conns)
	res.RSSPerConn = float64(res.After.RSS-res.Before.RSS) / n
	res.HeapPerConn = float64(res.After.Heap-res.Before.Heap) / n
	res.GorPerConn = float64(res.After.Goroutines-res.Before.Goroutines) / n
	res.StackPerConn = float64(res.After.Stack-res.Before.Stack) / n
	return res, nil
}

// pick returns the index of the member the connections go to: the
// leader, or the first endpoint that is not the leader.
func pick(ctx context.Context, o Options) (int, error) {
	var lastErr error
	for _, ep := range o.Endpoints {
		cc, err := grpc.NewClient(ep, o.DialOptions...)
		if err != nil {
			return 0, err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := pb.NewClusterServiceClient(cc).GetClusterStatus(cctx, &pb.GetClusterStatusRequest{})
		cancel()
		cc.Close()
		if err != nil {
			lastErr = err
			continue
		}
		if st.LeaderAddress == "" {
			lastErr = fmt.Errorf("%s knows no leader", ep)
			continue
		}
		for i, e := range o.Endpoints {
			if (e == st.LeaderAddress) == (o.Member == "leader") {
				return i, nil
			}
		}
		return 0, fmt.Errorf("the leader %s is not among the endpoints %v, or no endpoint is a follower", st.LeaderAddress, o.Endpoints)
	}
	return 0, fmt.Errorf("no endpoint answered: %w", lastErr)
}

type held struct {
	mu    sync.Mutex
	ccs   []*grpc.ClientConn
	muxes []*mux.Conn
}

func (h *held) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.muxes {
		m.Close()
	}
	for _, c := range h.ccs {
		c.Close()
	}
	h.ccs, h.muxes = nil, nil
}

// open opens o.Conns connections to target, each with one call answered
// (on its multiplexed stream, unless Unary).
func open(ctx context.Context, o Options, target string) (*held, error) {
	h := &held{}
	var next, done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(o.Conns) && ctx.Err() == nil {
				if err := openOne(ctx, o, target, h); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				if d := done.Add(1); o.Progress != nil && d%1000 == 0 {
					fmt.Fprintf(o.Progress, "\ropen: %d/%d", d, o.Conns)
				}
			}
		}()
	}
	wg.Wait()
	if o.Progress != nil {
		fmt.Fprintln(o.Progress)
	}
	if firstErr != nil {
		return h, fmt.Errorf("connection %d of %d: %w", done.Load()+1, o.Conns, firstErr)
	}
	return h, ctx.Err()
}

func openOne(ctx context.Context, o Options, target string, h *held) error {
	cc, err := grpc.NewClient(target, o.DialOptions...)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.ccs = append(h.ccs, cc)
	h.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if o.Unary {
		_, err := pb.NewClusterServiceClient(cc).GetClusterStatus(cctx, &pb.GetClusterStatusRequest{}, grpc.WaitForReady(true))
		return err
	}
	m := mux.NewConn(cc)
	h.mu.Lock()
	h.muxes = append(h.muxes, m)
	h.mu.Unlock()
	api := pb.NewClusterServiceClient(m)
	// The stream opens in the background: the first calls go unary until
	// it is open. (A call with options other than grpc.Header and
	// grpc.Trailer always goes unary: these have none.)
	for m.StreamCalls() == 0 {
		if _, err := api.GetClusterStatus(cctx, &pb.GetClusterStatusRequest{}); err != nil {
			return err
		}
		if m.StreamCalls() == 0 {
			select {
			case <-cctx.Done():
				return fmt.Errorf("the multiplexed stream did not open: %w", cctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// sample waits settle, collects the member's garbage (when it serves its
// profiles) and reads its figures.
func sample(ctx context.Context, hc *http.Client, httpAddr string, pid int, settle time.Duration) (Sample, error) {
	var s Sample
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(settle):
	}
	if httpAddr != "" {
		// ?gc=1 runs a collection before the profile is taken.
		code, err := get(ctx, hc, "http://"+httpAddr+"/debug/pprof/heap?gc=1", io.Discard)
		if err != nil {
			return s, err
		}
		s.GC = code == http.StatusOK
		var buf strings.Builder
		code, err = get(ctx, hc, "http://"+httpAddr+"/metrics", &buf)
		if err != nil {
			return s, err
		}
		if code != http.StatusOK {
			return s, fmt.Errorf("%s/metrics: HTTP %d", httpAddr, code)
		}
		m := parseMetrics(buf.String())
		s.Heap = int64(m["go_memstats_heap_inuse_bytes"])
		s.Goroutines = int64(m["go_goroutines"])
		s.Stack = int64(m["go_memstats_stack_inuse_bytes"])
	}
	rss, err := rssBytes(pid)
	if err != nil {
		return s, err
	}
	s.RSS = rss
	return s, nil
}

func get(ctx context.Context, hc *http.Client, url string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}

func saveProfile(ctx context.Context, hc *http.Client, httpAddr, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	code, err := get(ctx, hc, "http://"+httpAddr+"/debug/pprof/heap", f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%s/debug/pprof/heap: HTTP %d (is the member started with --pprof?)", httpAddr, code)
	}
	return err
}

// parseMetrics reads the unlabelled samples of a Prometheus text page.
func parseMetrics(text string) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || strings.ContainsRune(f[0], '{') {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			m[f[0]] = v
		}
	}
	return m
}

// rssBytes is a process's resident memory, VmRSS of /proc/PID/status.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseRSS(string(b))
}

func parseRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS: %q", v)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS line")
}
