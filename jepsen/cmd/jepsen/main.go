// Command jepsen runs Grackle's fault-injection suite: a cluster in network
// namespaces, workloads recording every operation, nemeses on a seeded
// schedule, then the checkers and a report. It exits 1 on any anomaly.
//
//	go run ./jepsen/cmd/jepsen -nodes 3 -duration 60s -nemesis all -seed 42
//
// Needs root, iproute2 and iptables.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/grackle-coord/grackle/jepsen/cluster"
	"github.com/grackle-coord/grackle/jepsen/history"
	"github.com/grackle-coord/grackle/jepsen/runner"
)

func main() {
	nodes := flag.Int("nodes", 3, "cluster size (3 or 5)")
	dur := flag.Duration("duration", 60*time.Second, "how long the workloads run")
	nem := flag.String("nemesis", "all", "comma-separated nemeses, 'all' or 'none': "+strings.Join(runner.AllNemeses, ","))
	seed := flag.Int64("seed", 0, "schedule and workload seed (0: from the clock; printed)")
	out := flag.String("out", "", "output dir (default /tmp/grackle-jepsen/<time>-<seed>)")
	fault := flag.String("fault", "", "build the server with -tags faultinject and set GRACKLE_FAULT (stale-read, early-grant, lock-conflict-grant, wg-early-complete, barrier-early-trip)")
	netID := flag.Int("net", 0, "third octet of the private 10.231.X.0/24 test subnet (0: from the pid)")
	linear := flag.Int("linear", 9, "processes of the linearizability workload")
	fenced := flag.Int("fenced", 4, "processes of the fenced/expiry workload")
	locks := flag.Int("locks", 6, "processes of the lock workload (0: none; the server must serve locks)")
	waitGroups := flag.Int("waitgroups", 4, "completer processes of the wait-group workload (0: none; the server must serve wait groups)")
	barriers := flag.Int("barriers", 2, "barriers of the barrier workload, three processes each (0: none; the server must serve barriers)")
	every := flag.Duration("fault-every", 4*time.Second, "mean gap between faults")
	hold := flag.Duration("fault-for", 4*time.Second, "mean length of a fault")
	linTimeout := flag.Duration("lin-timeout", 60*time.Second, "bound of the linearizability search")
	liveness := flag.Duration("liveness", 30*time.Second, "the cluster must serve again this soon after healing")
	secure := flag.Bool("secure", os.Getenv("JEPSEN_SECURE") == "1", "client mutual TLS, peer TLS and access control on every node (certificates made with openssl into the run's dir) [$JEPSEN_SECURE=1]")
	unary := flag.Bool("unary", false, "workloads send every call as its own unary gRPC call (default: over each connection's multiplexed stream, as the Go client does)")
	recheck := flag.String("check", "", "only check an existing history.jsonl (and write its report beside it)")
	flag.Parse()

	if *recheck != "" {
		h, err := history.Load(*recheck)
		if err != nil {
			fail(2, "%v", err)
		}
		os.Exit(checkAndReport(filepath.Dir(*recheck), h, *linTimeout, *liveness))
	}

	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000_007
	}
	kinds := runner.AllNemeses
	switch *nem {
	case "all":
	case "none", "":
		kinds = nil
	default:
		kinds = strings.Split(*nem, ",")
		for _, k := range kinds {
			if !contains(runner.AllNemeses, k) {
				fail(2, "unknown nemesis %q (know: %s)", k, strings.Join(runner.AllNemeses, ","))
			}
		}
	}
	if *out == "" {
		*out = filepath.Join(os.TempDir(), "grackle-jepsen", fmt.Sprintf("%s-%d", time.Now().Format("20060102-150405"), *seed))
	}
	if *netID == 0 {
		*netID = 1 + os.Getpid()%250
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(2, "%v", err)
	}
	bin := filepath.Join(*out, "grackle")
	args := []string{"build", "-o", bin}
	var env []string
	if *fault != "" {
		args = append(args, "-tags", "faultinject")
		env = append(env, "GRACKLE_FAULT="+*fault)
	}
	args = append(args, "github.com/grackle-coord/grackle/cmd/grackle")
	build := exec.Command("go", args...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		fail(2, "go build: %v\n%s", err, b)
	}

	var sec *cluster.Secure
	if *secure {
		script, err := certScript()
		if err != nil {
			fail(2, "%v", err)
		}
		sec = &cluster.Secure{CertScript: script}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("jepsen: seed=%d nodes=%d duration=%s nemesis=%s fault=%q secure=%v out=%s\n", *seed, *nodes, *dur, strings.Join(kinds, ","), *fault, *secure, *out)
	h, err := runner.Run(ctx, runner.Config{Nodes: *nodes, Duration: *dur, Seed: *seed, Nemeses: kinds, Binary: bin, Dir: *out, Net: *netID,
		ServerEnv: env, Secure: sec, Unary: *unary, Linear: *linear, Fenced: *fenced, Locks: *locks, WaitGroups: *waitGroups, Barriers: *barriers, FaultEvery: *every, FaultFor: *hold,
		Logf: func(f string, a ...any) { fmt.Printf("jepsen: "+f+"\n", a...) }})
	if err != nil {
		fail(1, "run: %v", err)
	}
	if *fault != "" {
		h.Meta["fault"] = *fault
	}
	f, err := os.Create(filepath.Join(*out, "history.jsonl"))
	if err != nil {
		fail(1, "%v", err)
	}
	if err := h.Write(f); err != nil {
		fail(1, "%v", err)
	}
	f.Close()
	os.Exit(checkAndReport(*out, h, *linTimeout, *liveness))
}

// certScript finds deploy/gen-certs.sh in the module's root (the suite
// runs from a checkout: go run ./jepsen/cmd/jepsen).
func certScript() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		return "", fmt.Errorf("-secure: run from inside the grackle checkout (go env GOMOD: %v)", err)
	}
	p := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "deploy", "gen-certs.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("-secure: the certificate script: %w", err)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		return "", fmt.Errorf("-secure needs openssl: %w", err)
	}
	return p, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func fail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "jepsen: "+format+"\n", a...)
	os.Exit(code)
}
