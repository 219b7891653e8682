package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// healthCmd probes a node's HTTP port: the image's HEALTHCHECK (an image
// FROM scratch has no curl) and anything else that wants an exit code.
func (a *app) healthCmd() *cobra.Command {
	var (
		addr     string
		live     bool
		useTLS   bool
		deadline time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if the node at --http-addr is ready (/readyz), 1 if not",
		Long: `Ask a node's HTTP port whether it is ready (/readyz: a member that knows the
leader and has applied close to its commit index), or with --live only
whether it is alive and knows a leader (/healthz). Exit 0 when it answers
200, 1 otherwise, with the node's reason on stderr. The container image
uses it as its HEALTHCHECK.`,
		Args: positional(),
		RunE: func(*cobra.Command, []string) error {
			path := "/readyz"
			if live {
				path = "/healthz"
			}
			scheme := "http"
			tr := &http.Transport{}
			if useTLS {
				// A probe of the node's own port from inside its container:
				// the certificate is for the advertised name, not 127.0.0.1.
				scheme = "https"
				tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // local probe, no secret sent
			}
			c := &http.Client{Timeout: deadline, Transport: tr}
			resp, err := c.Get(scheme + "://" + addr + path)
			if err != nil {
				return &exitError{code: exitCallFailed, msg: "health: " + err.Error()}
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return &exitError{code: exitCallFailed, msg: fmt.Sprintf("health: %s %d: %s", path, resp.StatusCode, strings.TrimSpace(string(body)))}
			}
			fmt.Fprintln(a.stdout, strings.TrimSpace(string(body)))
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "http-addr", "127.0.0.1:7422", "the node's HTTP address")
	cmd.Flags().BoolVar(&live, "live", false, "check liveness (/healthz) instead of readiness")
	cmd.Flags().BoolVar(&useTLS, "tls", false, "the HTTP port serves TLS (the certificate is not verified: a local probe)")
	durationVar(cmd.Flags(), &deadline, "timeout", 2*time.Second, "deadline of the probe (a Go duration; a bare number is seconds)")
	return cmd
}
