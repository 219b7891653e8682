package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Result is one run of one workload against one target.
type Result struct {
	Target   string `json:"target"`
	Workload string `json:"workload"`
	Run      int    `json:"run"`
	// Rate is the workload's throughput: pairs/s, acquisitions/s,
	// leases/s, reads/s (0 for expiry, which measures lateness only).
	Rate    float64 `json:"rate"`
	Ops     int64   `json:"ops"`
	Errors  int     `json:"errors"`
	Metrics Metrics `json:"metrics"`
	// Latency holds the distributions, named (acquire, release, ...).
	Latency   map[string]Summary `json:"latency"`
	LastError string             `json:"last_error,omitempty"`

	latencyOrder []string
}

// Metric is one named figure of a run.
type Metric struct {
	Name  string
	Value float64
}

// Metrics keep their order in the RESULT line; in JSON they are an object.
type Metrics []Metric

// Get returns a metric's value.
func (m Metrics) Get(name string) (float64, bool) {
	for _, x := range m {
		if x.Name == name {
			return x.Value, true
		}
	}
	return 0, false
}

func (m Metrics) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, x := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(x.Name)
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(x.Value, 'f', -1, 64))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (m *Metrics) UnmarshalJSON(b []byte) error {
	var o map[string]float64
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	*m = (*m)[:0]
	for _, k := range keys {
		*m = append(*m, Metric{k, o[k]})
	}
	return nil
}

func (r *Result) add(name string, v float64) { r.Metrics = append(r.Metrics, Metric{name, v}) }

func (r *Result) addLatency(name string, s Summary) {
	if r.Latency == nil {
		r.Latency = map[string]Summary{}
	}
	r.Latency[name] = s
	r.latencyOrder = append(r.latencyOrder, name)
}

// Line is the result as one "RESULT key=value ..." line.
func (r Result) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "RESULT target=%s workload=%s run=%d rate=%s ops=%d errors=%d", r.Target, r.Workload, r.Run, num(r.Rate), r.Ops, r.Errors)
	for _, m := range r.Metrics {
		fmt.Fprintf(&b, " %s=%s", m.Name, num(m.Value))
	}
	order := r.latencyOrder
	if len(order) == 0 {
		for k := range r.Latency {
			order = append(order, k)
		}
		sort.Strings(order)
	}
	for _, k := range order {
		s := r.Latency[k]
		fmt.Fprintf(&b, " %s_n=%d %s_mean_ms=%.3f %s_p50_ms=%.3f %s_p90_ms=%.3f %s_p99_ms=%.3f %s_p999_ms=%.3f %s_max_ms=%.3f",
			k, s.N, k, s.Mean, k, s.P50, k, s.P90, k, s.P99, k, s.P999, k, s.Max)
		if s.Negative > 0 {
			fmt.Fprintf(&b, " %s_negative=%d", k, s.Negative)
		}
	}
	return b.String()
}

func num(v float64) string {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// Write prints r as a RESULT line (format "text") or a JSON object on one
// line (format "json").
func (r Result) Write(w io.Writer, format string) error {
	if format == "json" {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w, r.Line())
	return err
}

// ReadResults reads JSON result lines; other lines (logs, RESULT text)
// are skipped.
func ReadResults(r io.Reader) ([]Result, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var res Result
		if err := json.Unmarshal(line, &res); err != nil {
			return nil, fmt.Errorf("bad result line %.60q: %w", line, err)
		}
		out = append(out, res)
	}
	return out, nil
}
