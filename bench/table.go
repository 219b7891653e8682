package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// A row of the comparison table: one figure of one workload.
type row struct {
	workload, figure string
	value            func(Result) (float64, bool)
	digits           int
	ratio            bool // a throughput: show target / base
}

func metric(name string) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) { return r.Metrics.Get(name) }
}

func rate(r Result) (float64, bool) { return r.Rate, true }

func lat(series string, q func(Summary) float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		s, ok := r.Latency[series]
		if !ok || s.N == 0 {
			return 0, false
		}
		return q(s), true
	}
}

func p50(s Summary) float64 { return s.P50 }
func p99(s Summary) float64 { return s.P99 }

var tableRows = []row{
	{"pairs", "acquire+release pairs/s", rate, 0, true},
	{"pairs", "acquire p50 ms", lat("acquire", p50), 2, false},
	{"pairs", "acquire p99 ms", lat("acquire", p99), 2, false},
	{"pairs", "commits per pair", metric("commits_per_op"), 2, false},
	{"pairs", "server CPU µs per pair", metric("server_cpu_us_per_op"), 0, false},
	{"handoff", "acquisitions/s", rate, 0, true},
	{"handoff", "share of 1 / (hold + one commit)", metric("of_limit"), 2, false},
	{"handoff", "one commit (p50 ms, measured alone)", metric("commit_p50_ms"), 3, false},
	{"handoff", "hold p50 ms (measured)", lat("hold", p50), 3, false},
	{"handoff", "release p50 ms", lat("release", p50), 3, false},
	{"handoff", "hand-off p50 ms", lat("handoff", p50), 3, false},
	{"handoff", "hand-off p99 ms", lat("handoff", p99), 3, false},
	{"handoff", "self hand-off share", metric("self_handoff_frac"), 2, false},
	{"handoff", "commits per acquisition", metric("commits_per_op"), 2, false},
	{"handoff", "server CPU µs per acquisition", metric("server_cpu_us_per_op"), 0, false},
	{"leases", "create+revoke leases/s", rate, 0, true},
	{"leases", "create p99 ms", lat("create", p99), 2, false},
	{"leases", "server CPU µs per lease", metric("server_cpu_us_per_op"), 0, false},
	{"reads", "linearizable reads/s", rate, 0, true},
	{"reads", "read p99 ms", lat("read", p99), 2, false},
	{"reads", "server CPU µs per read", metric("server_cpu_us_per_op"), 0, false},
	{"reads", "load generator CPU µs per read", metric("loadgen_cpu_us_per_op"), 0, false},
	{"expiry", "lateness p50 ms", lat("lateness", p50), 1, false},
	{"expiry", "lateness p99 ms", lat("lateness", p99), 1, false},
	{"locks", "acquire+release pairs/s", rate, 0, true},
	{"locks", "acquire p50 ms", lat("acquire", p50), 2, false},
	{"locks", "acquire p99 ms", lat("acquire", p99), 2, false},
	{"locks", "commits per pair", metric("commits_per_op"), 2, false},
	{"locks", "server CPU µs per pair", metric("server_cpu_us_per_op"), 0, false},
	{"lockhandoff", "acquisitions/s", rate, 0, true},
	{"lockhandoff", "share of 1 / (hold + one commit)", metric("of_limit"), 2, false},
	{"lockhandoff", "one commit (p50 ms, measured alone)", metric("commit_p50_ms"), 3, false},
	{"lockhandoff", "hold p50 ms (measured)", lat("hold", p50), 3, false},
	{"lockhandoff", "release p50 ms", lat("release", p50), 3, false},
	{"lockhandoff", "hand-off p50 ms", lat("handoff", p50), 3, false},
	{"lockhandoff", "hand-off p99 ms", lat("handoff", p99), 3, false},
	{"lockhandoff", "self hand-off share", metric("self_handoff_frac"), 2, false},
	{"lockhandoff", "commits per acquisition", metric("commits_per_op"), 2, false},
	{"lockhandoff", "server CPU µs per acquisition", metric("server_cpu_us_per_op"), 0, false},
	{"waitgroup", "completion calls/s", rate, 0, true},
	{"waitgroup", "jobs/s", metric("jobs_per_s"), 0, true},
	{"waitgroup", "groups/s", metric("groups_per_s"), 1, true},
	{"waitgroup", "complete p50 ms", lat("complete", p50), 2, false},
	{"waitgroup", "complete p99 ms", lat("complete", p99), 2, false},
	{"waitgroup", "wake p50 ms (last batch -> waiter)", lat("wake", p50), 3, false},
	{"waitgroup", "wake p99 ms", lat("wake", p99), 3, false},
	{"waitgroup", "commits per call", metric("commits_per_op"), 2, false},
	{"waitgroup", "server CPU µs per call", metric("server_cpu_us_per_op"), 0, false},
	{"waitgroup", "server CPU µs per job", metric("server_cpu_us_per_job"), 1, false},
	{"barrier", "rounds/s", rate, 1, true},
	{"barrier", "trip p50 ms (last arrival -> last waiter)", lat("trip", p50), 3, false},
	{"barrier", "trip p99 ms", lat("trip", p99), 3, false},
	{"barrier", "wake spread p50 ms", lat("wake_spread", p50), 3, false},
	{"barrier", "commits per round", metric("commits_per_op"), 1, false},
	{"barrier", "server CPU µs per round", metric("server_cpu_us_per_op"), 0, false},
}

// Table writes a Markdown table of results: one column per target (in
// order of appearance), every run's value separated by " / ", and for
// throughputs the ratio of each target's mean to base's (base "": the
// last target).
func Table(w io.Writer, results []Result, base string) error {
	targets, by := byTarget(results)
	if len(targets) == 0 {
		return fmt.Errorf("no results")
	}
	if base == "" {
		base = targets[len(targets)-1]
	}
	if by[base] == nil {
		return fmt.Errorf("base target %q has no results (targets: %s)", base, strings.Join(targets, ", "))
	}
	var ratios [][2]string
	for _, t := range targets {
		if t != base {
			ratios = append(ratios, [2]string{t, base})
		}
	}
	writeTable(w, targets, by, ratios, shapes(results))
	return nil
}

// TableOf writes the table of Table with, for throughputs, the ratio of
// subject's mean to each other target's (Grackle beside etcd and
// ZooKeeper: "grackle / etcd", "grackle / zookeeper").
func TableOf(w io.Writer, results []Result, subject string) error {
	targets, by := byTarget(results)
	if len(targets) == 0 {
		return fmt.Errorf("no results")
	}
	if by[subject] == nil {
		return fmt.Errorf("subject target %q has no results (targets: %s)", subject, strings.Join(targets, ", "))
	}
	var ratios [][2]string
	for _, t := range targets {
		if t != subject {
			ratios = append(ratios, [2]string{subject, t})
		}
	}
	writeTable(w, targets, by, ratios, shapes(results))
	return nil
}

// byTarget groups results by target (in order of appearance) and by
// workload and connection shape (key of shapeKey).
func byTarget(results []Result) ([]string, map[string]map[string][]Result) {
	var targets []string
	by := map[string]map[string][]Result{} // target -> workload@shape -> runs
	for _, r := range results {
		if by[r.Target] == nil {
			by[r.Target] = map[string][]Result{}
			targets = append(targets, r.Target)
		}
		k := shapeKey(r.Workload, connections(r))
		by[r.Target][k] = append(by[r.Target][k], r)
	}
	return targets, by
}

// connections is the client connections a result was measured with (1
// for results that do not say).
func connections(r Result) int {
	if v, ok := r.Metrics.Get("connections"); ok && v >= 1 {
		return int(v)
	}
	return 1
}

func shapeKey(workload string, conns int) string { return fmt.Sprintf("%s@%d", workload, conns) }

// shapes are the connection counts the results were measured with, in
// increasing order.
func shapes(results []Result) []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range results {
		if c := connections(r); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out
}

// writeTable writes a column per target and a ratio column per pair
// (numerator, denominator); with more than one connection shape, each
// workload's rows once per shape, labelled with it.
func writeTable(w io.Writer, targets []string, by map[string]map[string][]Result, ratios [][2]string, conns []int) {
	head := []string{"workload", "figure"}
	head = append(head, targets...)
	for _, r := range ratios {
		head = append(head, r[0]+" / "+r[1])
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
	for _, n := range conns {
		for _, rw := range tableRows {
			k := shapeKey(rw.workload, n)
			label := rw.workload
			if len(conns) > 1 {
				label = fmt.Sprintf("%s, %d conn", rw.workload, n)
				if n > 1 {
					label += "s"
				}
			}
			cells := []string{label, rw.figure}
			any := false
			for _, t := range targets {
				c := cell(by[t][k], rw)
				any = any || c != "–"
				cells = append(cells, c)
			}
			if !any {
				continue
			}
			for _, r := range ratios {
				c := ""
				if rw.ratio {
					a, okA := mean(by[r[0]][k], rw.value)
					b, okB := mean(by[r[1]][k], rw.value)
					if okA && okB && b > 0 {
						c = fmt.Sprintf("%.2fx", a/b)
					}
				}
				cells = append(cells, c)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
}

func cell(runs []Result, rw row) string {
	var parts []string
	for _, r := range runs {
		if v, ok := rw.value(r); ok {
			parts = append(parts, group(v, rw.digits))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, " / ")
}

func mean(runs []Result, f func(Result) (float64, bool)) (float64, bool) {
	sum, n := 0.0, 0
	for _, r := range runs {
		if v, ok := f(r); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// group formats v with digits decimals and thousands separators.
func group(v float64, digits int) string {
	s := fmt.Sprintf("%.*f", digits, math.Abs(v))
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String() + frac
}
