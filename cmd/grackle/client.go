package main

// Helpers shared by the client commands: flags, environment, argument
// checks, dialing and calling.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/tlsutil"
)

const (
	flagEndpoints = "endpoints"
	flagTimeout   = "timeout"
	flagOutput    = "output"

	defaultEndpoint = "127.0.0.1:7420"
	defaultTimeout  = 10 * time.Second
	// connectTimeout bounds the wait for one endpoint before trying the next.
	connectTimeout = 3 * time.Second

	// maxListLimit is the bound on List* limit (docs/API.md, Pagination) (0 = server default 100).
	maxListLimit = 250
)

// envName is the environment variable of a flag: node-id -> GRACKLE_NODE_ID.
func envName(flag string) string {
	return "GRACKLE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag of fs that was not given on the command line
// from its GRACKLE_<FLAG> environment variable, if set.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		key := envName(f.Name)
		v, ok := lookup(key)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = usagef("%s: %v", key, e)
		}
	})
	return err
}

// group makes a command that only holds subcommands, with the client flags.
func (a *app) group(use, short string, aliases ...string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Aliases: aliases,
		// A group given an unknown subcommand is a usage error, not help.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q (see grackle %s --help)", args[0], cmd.Name())
			}
			return cmd.Help()
		},
	}
	fs := cmd.PersistentFlags()
	fs.StringSliceVar(&a.endpoints, flagEndpoints, []string{defaultEndpoint},
		"gRPC addresses (host:port, comma-separated) tried in order until one connects [$GRACKLE_ENDPOINTS]")
	fs.DurationVar(&a.timeout, flagTimeout, defaultTimeout,
		"deadline of each call [$GRACKLE_TIMEOUT]")
	fs.StringVarP(&a.output, flagOutput, "o", "table",
		"output format: table, json (protojson, proto field names) or id [$GRACKLE_OUTPUT]")
	fs.StringVar(&a.cacert, "cacert", "", "connect with TLS, verifying the server with this CA file (PEM) [$GRACKLE_CACERT]")
	fs.StringVar(&a.cert, "cert", "", "client certificate (PEM) for servers that require mutual TLS; implies TLS [$GRACKLE_CERT]")
	fs.StringVar(&a.key, "key", "", "the client certificate's private key (PEM) [$GRACKLE_KEY]")
	fs.StringVar(&a.token, "token", "", "access token of a server started with --acl [$GRACKLE_TOKEN]")
	return cmd
}

// tlsConfig is the client TLS of --cacert, --cert and --key (nil: none
// given, plaintext).
func (a *app) tlsConfig() (*tls.Config, error) {
	if a.cacert == "" && a.cert == "" && a.key == "" {
		return nil, nil
	}
	c, err := tlsutil.ClientConfig(a.cacert, a.cert, a.key)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return c, nil
}

// dialOptions are the transport credentials and token of the client
// flags. onHandshake sees each TLS handshake error.
func (a *app) dialOptions(onHandshake func(error)) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if a.tls != nil {
		cfg := a.tls
		creds = tlsutil.ClientCreds(func() *tls.Config { return cfg }, onHandshake)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if a.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tlsutil.Token(a.token)))
	}
	return opts
}

func (a *app) checkClientFlags() error {
	switch a.output {
	case "table", "json", "id":
	default:
		return usagef("output: must be table, json or id, got %q", a.output)
	}
	if a.timeout <= 0 {
		return usagef("timeout: must be positive, got %s", a.timeout)
	}
	var eps []string
	for _, e := range a.endpoints {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return usagef("endpoints: need at least one host:port")
	}
	a.endpoints = eps
	var err error
	a.tls, err = a.tlsConfig()
	return err
}

// positional returns an argument check that wants exactly the named
// arguments, each non-empty.
func positional(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != len(names) {
			if len(names) == 0 {
				return usagef("takes no arguments, got %q", strings.Join(args, " "))
			}
			return usagef("want arguments %s, got %d", strings.Join(names, " "), len(args))
		}
		for i, v := range args {
			if v == "" {
				return usagef("%s: must not be empty", names[i])
			}
		}
		return nil
	}
}

// optional wants at most one argument, named name.
func optional(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usagef("want at most one argument %s, got %d", name, len(args))
		}
		return nil
	}
}

// metadataFlag registers a repeatable --metadata key=value flag.
func metadataFlag(fs *pflag.FlagSet, p *[]string, what string) {
	fs.StringArrayVar(p, "metadata", nil, what+" metadata as key=value (repeatable; the value may contain '=' and ',')")
}

// parseMetadata turns key=value pairs into a map; nil when there are none.
func parseMetadata(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usagef("metadata: want key=value, got %q", kv)
		}
		if k == "" {
			return nil, usagef("metadata: empty key in %q", kv)
		}
		if _, dup := m[k]; dup {
			return nil, usagef("metadata: key %q given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

// listFlags are --limit and --page-token of List* commands.
type listFlags struct {
	limit int32
	token string
}

func (l *listFlags) register(fs *pflag.FlagSet) {
	fs.Int32Var(&l.limit, "limit", 0, fmt.Sprintf("page size, 1..%d (0 = the server's default, 100)", maxListLimit))
	fs.StringVar(&l.token, "page-token", "", "resume from this token (printed by the previous page)")
}

func (l *listFlags) check() error {
	if l.limit < 0 || l.limit > maxListLimit {
		return usagef("limit: must be 0..%d (0 = server default), got %d", maxListLimit, l.limit)
	}
	return nil
}

// changed reports whether any of the named flags was given.
func changed(cmd *cobra.Command, names ...string) bool {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// clients are the stubs of one connection.
type clients struct {
	api      pb.GrackleServiceClient
	cluster  pb.ClusterServiceClient
	endpoint string
}

// call connects to the first reachable endpoint and runs fn with a
// deadline of --timeout plus extra (the server-side wait of an acquire).
// Errors become one-line exit errors.
func call[T any](a *app, cmd *cobra.Command, extra time.Duration, fn func(context.Context, clients) (T, error)) (T, error) {
	var zero T
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	conn, ep, err := a.dialFirst(ctx, min(a.timeout, connectTimeout))
	if err != nil {
		return zero, callError(ctx, err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, a.timeout+extra)
	defer cancel()
	resp, err := fn(cctx, clients{api: pb.NewGrackleServiceClient(conn), cluster: pb.NewClusterServiceClient(conn), endpoint: ep})
	if err != nil {
		return zero, callError(ctx, err)
	}
	return resp, nil
}

// callError turns a call's error into "Code: message" (exit 1), or
// "interrupted" (exit 130) when the parent context was cancelled.
func callError(parent context.Context, err error) error {
	if parent.Err() != nil && errors.Is(parent.Err(), context.Canceled) {
		return &exitError{code: exitInterrupted, msg: "interrupted"}
	}
	st := status.Convert(err)
	return &exitError{code: exitCallFailed, msg: oneLine(fmt.Sprintf("%s: %s", st.Code(), st.Message()))}
}

// dialFirst is dialFirst with the client flags' credentials.
func (a *app) dialFirst(ctx context.Context, perTry time.Duration) (*grpc.ClientConn, string, error) {
	return dialFirst(ctx, a.endpoints, perTry, a)
}

// dialFirst returns a ready connection to the first endpoint that accepts
// one within perTry. The server forwards calls to the leader, so any
// reachable node will do. a (if not nil) gives the credentials.
func dialFirst(ctx context.Context, endpoints []string, perTry time.Duration, a ...*app) (*grpc.ClientConn, string, error) {
	var why []string
	for _, ep := range endpoints {
		var (
			mu      sync.Mutex
			lastErr error
		)
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if len(a) > 0 && a[0] != nil {
			opts = a[0].dialOptions(func(err error) {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			})
		}
		dialer := func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
			return c, err
		}
		conn, err := grpc.NewClient(ep, append(opts, grpc.WithContextDialer(dialer))...)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", ep, err))
			continue
		}
		tctx, cancel := context.WithTimeout(ctx, perTry)
		ok := waitReady(tctx, conn)
		cancel()
		if ok {
			return conn, ep, nil
		}
		conn.Close()
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		mu.Lock()
		reason := "not reachable within " + perTry.String()
		var opErr *net.OpError
		if errors.As(lastErr, &opErr) && opErr.Err != nil {
			reason = opErr.Err.Error() // "connect: connection refused"
		} else if lastErr != nil {
			reason = lastErr.Error()
		}
		mu.Unlock()
		why = append(why, fmt.Sprintf("%s: %s", ep, reason))
	}
	return nil, "", status.Errorf(codes.Unavailable, "no endpoint reachable (%s)", strings.Join(why, "; "))
}

// waitReady connects conn and waits until it is ready (true) or has
// failed or ctx is done (false).
func waitReady(ctx context.Context, conn *grpc.ClientConn) bool {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
