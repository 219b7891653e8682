package idleconns

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ReadResults reads JSON results, one object a line (blank lines and lines
// that are no JSON object are skipped: a log may be mixed in).
func ReadResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Table writes one Markdown row per label, member, mode and connection
// count: the median of each figure per connection over the runs, with the
// lowest and highest when there were several.
func Table(w io.Writer, rs []Result) error {
	type key struct {
		label, member, mode string
		conns               int
	}
	groups := map[key][]Result{}
	var keys []key
	var labels []string
	for _, r := range rs {
		k := key{r.Label, r.Member, r.Mode, r.Conns}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
		found := false
		for _, l := range labels {
			found = found || l == r.Label
		}
		if !found {
			labels = append(labels, r.Label)
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("no results")
	}
	labelOrder := func(l string) int {
		for i, x := range labels {
			if x == l {
				return i
			}
		}
		return len(labels)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.member != b.member {
			return a.member == "leader"
		}
		if a.mode != b.mode {
			return a.mode == "mux"
		}
		if a.conns != b.conns {
			return a.conns < b.conns
		}
		return labelOrder(a.label) < labelOrder(b.label)
	})
	fmt.Fprintln(w, "| member | calls | connections | build | RSS per connection | heap per connection | goroutines per connection | their stacks | runs |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, k := range keys {
		g := groups[k]
		fig := func(f func(Result) float64, kb bool) string {
			v := make([]float64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			sort.Float64s(v)
			med := v[len(v)/2]
			if len(v)%2 == 0 {
				med = (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
			form := func(x float64) string {
				if kb {
					return fmt.Sprintf("%.1f", x/1024)
				}
				return fmt.Sprintf("%.2f", x)
			}
			s := form(med)
			if kb {
				s += " KiB"
			}
			if len(v) > 1 {
				s += " (" + form(v[0]) + "-" + form(v[len(v)-1]) + ")"
			}
			return s
		}
		calls := "Go client (multiplexed stream)"
		if k.mode == "unary" {
			calls = "unary only"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %d |\n", k.member, calls, k.conns, k.label,
			fig(func(r Result) float64 { return r.RSSPerConn }, true),
			fig(func(r Result) float64 { return r.HeapPerConn }, true),
			fig(func(r Result) float64 { return r.GorPerConn }, false),
			fig(func(r Result) float64 { return r.StackPerConn }, true),
			len(g))
	}
	return nil
}
