package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/internal/version"
	"github.com/sandbox-gitops/sandbox-gitops/router"
	"github.com/sandbox-gitops/sandbox-gitops/router/authz"
	"github.com/sandbox-gitops/sandbox-gitops/router/resolve"
)

const exitCodesHelp = `

Exit codes:
  0  stopped cleanly (SIGTERM or SIGINT)
  1  could not start or keep running (API server unreachable, cache did not sync, port in use)
  2  usage or configuration error`

const long = `sandbox-router is the one way into a sandbox. Clients (the agent-sandbox SDKs) send ordinary HTTP,
WebSocket or h2c requests to the router's Service, sandbox-router-svc, with upstream's routing headers:

  X-Sandbox-ID         the Sandbox name (required, a DNS-1123 label)
  X-Sandbox-Namespace  its namespace (default "default")
  X-Sandbox-Port       the port in the Pod (default 8888)
  X-Sandbox-UID        optional: only this incarnation of the Sandbox
  X-Sandbox-Pod-IP     optional: honoured only if it is an IP of that Sandbox's Pod

The router forwards the request to the Pod of that Sandbox, which must exist and be Ready in its
informer cache of Sandboxes and Pods (warm-pool and claimed Sandboxes included, Service or not).
Anything else is a 404 with a JSON error naming the header at fault: unlike upstream's routers there
is no DNS fallback, so the router never reaches a Service that is not a Sandbox. The inbound Host and
Authorization headers are not forwarded; responses stream as the Pod writes them.

With --authz=kubernetes the caller must send "Authorization: Bearer <token>"; the token is checked
with a TokenReview, and the user with a SubjectAccessReview for verb "get" on sandboxes/proxy
(group agents.x-k8s.io) of that Sandbox in its namespace, so RBAC decides who may reach which sandbox.
Decisions are cached for --authz-cache-ttl. The router's own ServiceAccount then needs create on
tokenreviews and subjectaccessreviews (bases/router/authz).

Requests without X-Sandbox-ID to /healthz (alive) and /readyz (cache synced) are answered by the
router; Prometheus metrics are served on --metrics-listen at /metrics.` + exitCodesHelp

const example = `  # In the cluster (bases/router), the defaults suffice.
  sandbox-router

  # From a workstation, against the current kubeconfig, two namespaces, with RBAC checks:
  sandbox-router --kubeconfig ~/.kube/config --namespaces team-a,team-b --authz kubernetes --listen 127.0.0.1:8080
  curl -H 'X-Sandbox-ID: my-sandbox' -H 'X-Sandbox-Namespace: team-a' \
       -H "Authorization: Bearer $(kubectl create token my-agent -n team-a)" http://127.0.0.1:8080/`

type config struct {
	listen, metricsListen string
	kubeconfig            string
	namespaces            []string
	authz                 string
	audiences             []string
	authzTTL              time.Duration
	proxyTimeout          time.Duration
	upstream              router.UpstreamOptions
	syncTimeout           time.Duration
	shutdownTimeout       time.Duration
	shutdownDelay         time.Duration
	logLevel              string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Run(newCommand(ctx, stdout, stderr), args, stderr)
}

func newCommand(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	c := config{}
	cmd := &cobra.Command{
		Use:           "sandbox-router",
		Short:         "Route requests to agent-sandbox Sandboxes, and only to them",
		Long:          long,
		Example:       example,
		Version:       version.String("sandbox-router"),
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(*cobra.Command, []string) error {
			if err := c.validate(); err != nil {
				return err
			}
			return serve(ctx, c, stderr)
		},
	}
	// The one --version line of every command of this repository (internal/version).
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	f := cmd.Flags()
	f.StringVar(&c.listen, "listen", ":8080", "address of the proxy (HTTP/1.1 and h2c), also answering /healthz and /readyz")
	f.StringVar(&c.metricsListen, "metrics-listen", ":9090", `address of the Prometheus /metrics endpoint ("" to disable)`)
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means $KUBECONFIG, ~/.kube/config, or the in-cluster ServiceAccount")
	f.StringSliceVar(&c.namespaces, "namespaces", nil, "serve only Sandboxes in these namespaces (comma-separated); the cache then watches only them. Empty: all namespaces")
	f.StringVar(&c.authz, "authz", "none", `caller authorisation: "none" (upstream's behaviour: whoever reaches the router reaches every sandbox it serves) or "kubernetes" (TokenReview + SubjectAccessReview on sandboxes/proxy)`)
	f.StringSliceVar(&c.audiences, "authz-audiences", nil, "audiences the bearer token must be issued for (TokenReview spec.audiences); empty: the API server's")
	f.DurationVar(&c.authzTTL, "authz-cache-ttl", authz.DefaultTTL, "how long an authorisation decision is reused; a revoked binding takes effect after at most this long")
	f.DurationVar(&c.proxyTimeout, "proxy-timeout", router.DefaultProxyTimeout, "bound on a whole proxied request, response included (upgraded connections are not bounded); 0: none")
	f.DurationVar(&c.upstream.DialTimeout, "dial-timeout", router.DefaultUpstreamOptions.DialTimeout, "bound on one TCP connect to a Pod")
	f.IntVar(&c.upstream.DialRetries, "dial-retries", router.DefaultUpstreamOptions.DialRetries, "connects retried after refused, unreachable or timed-out attempts (nothing was sent, so any request is safe to retry); 0: none")
	f.DurationVar(&c.upstream.RetryDelay, "dial-retry-delay", router.DefaultUpstreamOptions.RetryDelay, "wait before the first retry; doubles each time")
	f.DurationVar(&c.upstream.ResponseHeaderTimeout, "response-header-timeout", 0, "bound on waiting for a Pod's response headers; 0: only --proxy-timeout")
	f.DurationVar(&c.upstream.IdleConnTimeout, "idle-conn-timeout", router.DefaultUpstreamOptions.IdleConnTimeout, "close kept-alive connections to a Pod unused this long")
	f.IntVar(&c.upstream.MaxIdleConnsPerHost, "max-idle-conns-per-pod", router.DefaultUpstreamOptions.MaxIdleConnsPerHost, "kept-alive connections pooled per Pod")
	f.IntVar(&c.upstream.MaxConnsPerHost, "max-conns-per-pod", 0, "cap on connections to one Pod; 0: no cap")
	f.DurationVar(&c.syncTimeout, "cache-sync-timeout", 2*time.Minute, "give up (exit 1) if the Sandbox and Pod cache has not synced by then")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, wait this long for requests in flight before closing them")
	f.DurationVar(&c.shutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, fail /readyz and keep serving this long first, so endpoints stop sending new requests before the listener closes")
	f.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (JSON on standard error)")
	return cmd
}

func (c *config) validate() error {
	switch c.authz {
	case "none", "kubernetes":
	default:
		return cli.Usagef(`--authz: Unsupported value: %q: supported values: "none", "kubernetes"`, c.authz)
	}
	if c.authz == "none" && len(c.audiences) > 0 {
		return cli.Usagef("--authz-audiences: Forbidden: only meaningful with --authz kubernetes")
	}
	for _, ns := range c.namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return cli.Usagef("--namespaces: Invalid value: %q: %s", ns, errs[0])
		}
	}
	for name, d := range map[string]time.Duration{"--authz-cache-ttl": c.authzTTL, "--proxy-timeout": c.proxyTimeout,
		"--dial-timeout": c.upstream.DialTimeout, "--dial-retry-delay": c.upstream.RetryDelay,
		"--response-header-timeout": c.upstream.ResponseHeaderTimeout, "--idle-conn-timeout": c.upstream.IdleConnTimeout,
		"--cache-sync-timeout": c.syncTimeout, "--shutdown-timeout": c.shutdownTimeout, "--shutdown-delay": c.shutdownDelay} {
		if d < 0 {
			return cli.Usagef("%s: Invalid value: %s: must not be negative", name, d)
		}
	}
	if c.authzTTL == 0 || c.upstream.DialTimeout == 0 || c.syncTimeout == 0 {
		return cli.Usagef("--authz-cache-ttl, --dial-timeout and --cache-sync-timeout must be positive")
	}
	if c.upstream.DialRetries < 0 || c.upstream.MaxIdleConnsPerHost < 1 || c.upstream.MaxConnsPerHost < 0 {
		return cli.Usagef("--dial-retries and --max-conns-per-pod must not be negative, --max-idle-conns-per-pod must be at least 1")
	}
	if c.upstream.DialRetries == 0 {
		c.upstream.DialRetries = -1 // UpstreamOptions: negative disables, zero means the default
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.logLevel) {
		return cli.Usagef(`--log-level: Unsupported value: %q: supported values: "debug", "info", "warn", "error"`, c.logLevel)
	}
	return nil
}

func restConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own message suggests KUBERNETES_MASTER, which nothing here reads.
		return nil, errors.New("no API server to talk to: not running in a cluster, and no kubeconfig found ($KUBECONFIG is unset and ~/.kube/config does not exist); pass --kubeconfig FILE")
	}
	if err != nil {
		return nil, fmt.Errorf("loading the API server configuration: %w", err)
	}
	cfg.UserAgent = "sandbox-router/" + version.Get().Version
	return cfg, nil
}

// routerOptions are the proxy's options: resolution through the cache, its metrics in reg, and
// with --authz=kubernetes an authorizer asking the API server.
func (c config) routerOptions(cfg *rest.Config, cache *resolve.Cache, reg *prometheus.Registry, log *slog.Logger) (router.Options, error) {
	opts := router.Options{
		Resolver:     cache,
		Upstream:     c.upstream,
		ProxyTimeout: c.proxyTimeout,
		Metrics:      router.NewMetrics(reg),
		Log:          log,
	}
	if c.authz == "kubernetes" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return router.Options{}, err
		}
		opts.Authorizer = authz.New(cs, authz.Options{Audiences: c.audiences, TTL: c.authzTTL})
	}
	return opts, nil
}

// serve runs the router until ctx ends.
func serve(ctx context.Context, c config, stderr io.Writer) error {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.logLevel))
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))

	cfg, err := restConfig(c.kubeconfig)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitFailure, Err: err}
	}
	cache, err := resolve.NewCache(cfg, c.namespaces)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitFailure, Err: err}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts, err := c.routerOptions(cfg, cache, reg, log)
	if err != nil {
		return &cli.ExitError{Code: cli.ExitFailure, Err: err}
	}
	handler := router.New(opts)
	defer handler.Close()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	servers := []*http.Server{router.NewServer(c.listen, handler)}
	if c.metricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Addr: c.metricsListen, Handler: mux, ReadHeaderTimeout: 10 * time.Second})
	}
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("listening on %s: %w", s.Addr, err)}
		}
		log.Info("listening", "addr", ln.Addr().String())
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cancel(fmt.Errorf("serving on %s: %w", s.Addr, err))
			}
		}()
	}

	go func() {
		log.Info("syncing the Sandbox and Pod cache", "namespaces", c.namespaces, "authz", c.authz)
		if err := cache.Start(ctx, c.syncTimeout); err != nil {
			cancel(err)
			return
		}
		log.Info("ready")
	}()

	<-ctx.Done()
	cause := context.Cause(ctx)
	log.Info("shutting down", "cause", cause.Error())
	if errors.Is(cause, context.Canceled) && c.shutdownDelay > 0 {
		handler.Drain()
		time.Sleep(c.shutdownDelay)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
	defer scancel()
	for _, s := range servers {
		_ = s.Shutdown(sctx)
	}
	handler.Close()
	if errors.Is(cause, context.Canceled) {
		return nil // a signal: a clean stop
	}
	return &cli.ExitError{Code: cli.ExitFailure, Err: cause}
}
