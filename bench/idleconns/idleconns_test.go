package idleconns

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseRSS(t *testing.T) {
	got, err := parseRSS("Name:\tgrackle\nVmPeak:\t  999 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 1 kB\n")
	if err != nil || got != 51200*1024 {
		t.Fatalf("parseRSS = %d, %v", got, err)
	}
	if _, err := parseRSS("Name:\tx\n"); err == nil {
		t.Fatal("no VmRSS line: no error")
	}
}

func TestParseMetrics(t *testing.T) {
	m := parseMetrics(`# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 312
go_memstats_heap_inuse_bytes 9.617408e+06
grpc_server_handled_total{grpc_code="OK"} 5
`)
	if m["go_goroutines"] != 312 || m["go_memstats_heap_inuse_bytes"] != 9617408 {
		t.Fatalf("parsed %v", m)
	}
	if _, ok := m["grpc_server_handled_total"]; ok {
		t.Fatal("a labelled sample was read")
	}
}

// The table has a row per build, member, mode and count, with the median
// and the range over the runs.
func TestTable(t *testing.T) {
	var in bytes.Buffer
	in.WriteString("== a log line\n")
	for _, r := range []Result{
		{Label: "b", Member: "follower", Mode: "mux", Conns: 1000, RSSPerConn: 3072, HeapPerConn: 1024, GorPerConn: 4, StackPerConn: 8192},
		{Label: "a", Member: "leader", Mode: "mux", Conns: 1000, RSSPerConn: 2048, HeapPerConn: 1024, GorPerConn: 4, StackPerConn: 8192},
		{Label: "a", Member: "leader", Mode: "mux", Conns: 1000, RSSPerConn: 4096, HeapPerConn: 2048, GorPerConn: 4, StackPerConn: 8192},
		{Label: "a", Member: "leader", Mode: "mux", Conns: 1000, RSSPerConn: 1024, HeapPerConn: 1024, GorPerConn: 4, StackPerConn: 8192},
	} {
		b, _ := json.Marshal(r)
		in.Write(append(b, '\n'))
	}
	rs, err := ReadResults(&in)
	if err != nil || len(rs) != 4 {
		t.Fatalf("read %d results, %v", len(rs), err)
	}
	var out strings.Builder
	if err := Table(&out, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table:\n%s", out.String())
	}
	if want := "| leader | Go client (multiplexed stream) | 1000 | a | 2.0 KiB (1.0-4.0) | 1.0 KiB (1.0-2.0) | 4.00 (4.00-4.00) | 8.0 KiB (8.0-8.0) | 3 |"; lines[2] != want {
		t.Fatalf("row\n%s\nwant\n%s", lines[2], want)
	}
	if !strings.HasPrefix(lines[3], "| follower |") {
		t.Fatalf("the follower's row is not last:\n%s", out.String())
	}
}
