package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TableOf puts the subject over every other target: Grackle beside etcd
// and ZooKeeper gets a ratio column for each, means over the runs.
func TestTableOfSubjectOverEachTarget(t *testing.T) {
	res := func(target string, run int, rate float64) Result {
		return Result{Target: target, Workload: "pairs", Run: run, Rate: rate}
	}
	rs := []Result{res("grackle", 1, 3000), res("etcd", 1, 1000), res("zookeeper", 1, 500),
		res("zookeeper", 2, 700), res("etcd", 2, 1000), res("grackle", 2, 3000)}
	var b bytes.Buffer
	if err := TableOf(&b, rs, "grackle"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if want := "| workload | figure | grackle | etcd | zookeeper | grackle / etcd | grackle / zookeeper |"; lines[0] != want {
		t.Fatalf("header %q, want %q", lines[0], want)
	}
	if want := "| pairs | acquire+release pairs/s | 3,000 / 3,000 | 1,000 / 1,000 | 500 / 700 | 3.00x | 5.00x |"; lines[2] != want {
		t.Fatalf("row %q, want %q", lines[2], want)
	}
	if err := TableOf(&b, rs, "nobody"); err == nil {
		t.Fatal("a subject without results: no error")
	}
	// Table with a base keeps its columns: each other target over the base.
	b.Reset()
	if err := Table(&b, rs, "etcd"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| grackle / etcd | zookeeper / etcd |") {
		t.Fatalf("Table with base etcd: %s", b.String())
	}
}

// Results measured with different numbers of connections are shapes of
// their own: each gets its rows, labelled, and its own ratios.
func TestTableShowsEachConnectionShapeApart(t *testing.T) {
	res := func(target string, conns int, rate float64) Result {
		r := Result{Target: target, Workload: "pairs", Run: 1, Rate: rate}
		r.add("connections", float64(conns))
		return r
	}
	rs := []Result{res("grackle", 1, 8000), res("etcd", 1, 2000), res("grackle", 64, 6000), res("etcd", 64, 1000),
		res("grackle", 1000, 5000), res("etcd", 1000, 2500)}
	var b bytes.Buffer
	if err := TableOf(&b, rs, "grackle"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| pairs, 1 conn | acquire+release pairs/s | 8,000 | 2,000 | 4.00x |",
		"| pairs, 64 conns | acquire+release pairs/s | 6,000 | 1,000 | 6.00x |",
		"| pairs, 1000 conns | acquire+release pairs/s | 5,000 | 2,500 | 2.00x |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("no row %q in:\n%s", want, b.String())
		}
	}
	if i, j := strings.Index(b.String(), "64 conns"), strings.Index(b.String(), "1000 conns"); i > j {
		t.Fatalf("shapes out of order:\n%s", b.String())
	}
}
