package server_test

import (
	"context"
	"fmt"
	"github.com/grackle-coord/grackle/internal/syncbuf"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// mountSmallFS mounts a 4 MiB tmpfs for the test (skipping, with the
// reason, where mounting is not possible).
func mountSmallFS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a small filesystem to fill needs root")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file that leaves about room bytes free on dir's filesystem.
func fill(t *testing.T, dir string, room int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for left := free - room; left > 0; left -= int64(len(buf)) {
		n := int64(len(buf))
		if left < n {
			n = left
		}
		if _, err := f.Write(buf[:n]); err != nil {
			break // full already
		}
	}
	return p
}

// A full disk is named as such in the failed calls, /healthz and the log;
// nothing acknowledged is lost and writes resume once space is freed.
func TestDiskFullIsNamed(t *testing.T) {
	dir := mountSmallFS(t)
	var logs syncbuf.Buffer
	cfg := servertest.Config(t, "node1")
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.SnapshotThreshold = 1 << 30 // no snapshot during the test
	// Segments that fit the 4 MiB filesystem several times: the WAL starts
	// new ones while the disk fills (and keeps one free).
	cfg.RaftWALSegmentSize = 256 << 10
	s, err := server.Start(cfg, bufLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &servertestClient{t: t, addr: s.GRPCAddr()}
	defer c.close()
	servertest.Eventually(t, "a leader", 20*time.Second, func() bool { return s.IsLeader() })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	api := c.api()
	waitOK(t, func() error {
		_, err := api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "disk"})
		return err
	})

	// Room for a few segments beyond the one the WAL keeps free (256 KiB
	// plus 1 MiB): writes go on while the WAL starts segments, until it
	// would start one into its reserve.
	filler := fill(t, dir, (256<<10)+(1<<20)+(600<<10))
	desc := strings.Repeat("d", 1000)
	var acked []string
	var full error
	for i := 0; i < 5000 && full == nil && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("s%05d", i)
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := api.CreateSemaphore(cctx, &pb.CreateSemaphoreRequest{NamespaceName: "disk", SemaphoreName: name, Permits: 1, Description: desc})
		ccancel()
		switch {
		case err == nil:
			acked = append(acked, name)
		case strings.Contains(err.Error(), "the disk is full"):
			full = err
		}
	}
	if full == nil {
		t.Fatalf("no call failed naming the full disk after %d acknowledged writes", len(acked))
	}
	t.Logf("after %d writes: %v", len(acked), full)
	if !strings.Contains(full.Error(), "no space left on device") {
		t.Fatalf("the error does not name the cause: %v", full)
	}
	code, body := httpGet(t, "http://"+s.HTTPAddr()+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "the disk is full") {
		t.Fatalf("/healthz on a full disk: %d %q", code, body)
	}
	if !strings.Contains(logs.String(), "the disk is full") {
		t.Fatalf("the log does not say the disk is full:\n%s", logs.String())
	}

	// Free the space: writes resume, /healthz recovers, nothing acknowledged is lost.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitOK(t, func() error {
		_, err := api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "disk", SemaphoreName: "after", Permits: 1})
		return err
	})
	servertest.Eventually(t, "/healthz ok again", 30*time.Second, func() bool {
		code, _ := httpGet(t, "http://"+s.HTTPAddr()+"/healthz")
		return code == http.StatusOK
	})
	for _, name := range acked {
		if _, err := api.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "disk", SemaphoreName: name}); err != nil {
			t.Fatalf("acknowledged semaphore %s: %v", name, err)
		}
	}
}

func waitOK(t *testing.T, f func() error) {
	t.Helper()
	var err error
	servertest.Eventually(t, "a successful write", 60*time.Second, func() bool {
		err = f()
		return err == nil
	})
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// servertestClient is a plaintext connection to one node.
type servertestClient struct {
	t    *testing.T
	addr string
	cc   *grpc.ClientConn
}

func (c *servertestClient) api() pb.GrackleServiceClient {
	cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.cc = cc
	return pb.NewGrackleServiceClient(cc)
}

func (c *servertestClient) close() {
	if c.cc != nil {
		c.cc.Close()
	}
}
