// Command sandbox-controller is the thin controller of sandbox-gitops: for each Sandbox,
// SandboxTemplate, SandboxClaim and SandboxWarmPool it applies, with server-side apply, exactly
// the objects that `sandbox-render render` shows, keeps them that way, and writes status as
// upstream's controllers do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	renderv1alpha1 "github.com/sandbox-gitops/sandbox-gitops/api/render/v1alpha1"
	"github.com/sandbox-gitops/sandbox-gitops/cli"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/internal/version"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
)

const long = `sandbox-controller reconciles the four agent-sandbox kinds exactly as sandbox-render renders
them: it applies, with server-side apply under one field manager, the objects the render shows,
keeps them so, and writes the status of Sandboxes, claims and pools as upstream's controllers do.

  Sandbox          its Pod, PVCs and headless Service (and the standalone-network-policy pack's
                   NetworkPolicy); what it applied and no longer renders is pruned
  SandboxTemplate  its NetworkPolicy: the secure default or the template's rules, none with
                   networkPolicyManagement: Unmanaged; the template itself is never written
  SandboxWarmPool  spec.replicas member Sandboxes, named as the render names them; stale and stuck
                   members are replaced, and kubectl scale or an HPA resize it
  SandboxClaim     one Sandbox per claim: a Ready member of its warm pool, adopted in one write,
                   or a cold one as rendered; its metadata kept in sync, and an expired claim's
                   shutdown policy carried out

Every replica also serves the CRDs' conversion webhook, which serves v1alpha1 without loss, with a
certificate it makes, renews and publishes in the CRDs itself (--enable-webhook,
--manage-webhook-certs).

Render options come from the same SandboxRender file the KRM function uses (--render-config),
so what a pull request previews is what the controller creates; the flags below override it.

Exit codes:
  0  stopped cleanly (SIGTERM)
  1  the controller failed (API server unreachable or without the CRDs, the manager stopped)
  2  usage error (unknown flag, bad value, unreadable --render-config, no cluster configured)`

// example is the Examples section of --help. TestHelpExamples parses both commands, and checks
// the second against config/manager's Deployment, so neither can drift from the flags.
const example = `  # From a workstation, against a kubeconfig, with a default for namespaces without a
  # SandboxRender; no conversion webhook (the API server reaches only the one in the cluster):
  sandbox-controller --kubeconfig ~/.kube/config --render-config render.yaml --enable-webhook=false

  # In the cluster, as config/manager runs it (two replicas, one leader, the webhook's Service and
  # Secret in the controller's namespace, which the Deployment passes as $(POD_NAMESPACE)):
  sandbox-controller --leader-elect --leader-election-namespace=sandbox-gitops-system --metrics-bind-address=:8080 --health-probe-bind-address=:8081 --webhook-port=9443 --webhook-namespace=sandbox-gitops-system`

func main() {
	ctx := ctrl.SetupSignalHandler()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	metricsAddr, probeAddr     string
	pprofAddr                  string
	leaderElect                bool
	upstreamAnnotations        bool
	noClaimTimingAnnotations   bool
	leaderElectionNamespace    string
	renderConfig               string
	clusterDomain              string
	packs                      string
	allowedLabelDomains        string
	sandboxWorkers, tplWorkers int
	claimWorkers, poolWorkers  int
	controllers                string
	namespaces                 string
	qps                        float64
	burst                      int
	backgroundHold             time.Duration
	separateWatches            bool
	webhook                    webhookFlags
	version                    bool
	zap                        zap.Options
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := &flags{}
	cmd := newCommand(f, stdout, stderr, func(opts *controller.Options) error { return start(ctx, f, opts) })
	// Errors are reported once, here, in one line; the usage text only on --help.
	return cli.Exit(cmd.Name(), execute(cmd, args), stderr)
}

// newCommand is the controller's command line, a cobra command as sandbox-router's and
// sandbox-render's are: double-dash flags, --help with the examples, --version. Once the flags
// are valid it calls start with the options they give.
func newCommand(f *flags, stdout, stderr io.Writer, start func(*controller.Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox-controller",
		Short:   "Reconcile agent-sandbox's Sandboxes, templates, claims and warm pools as sandbox-render renders them",
		Long:    long,
		Example: example,
		// No Version: cobra's --version needs SetVersionTemplate to print our line, and any
		// template makes the linker keep every exported method of every linked type
		// (text/template calls methods by name): 10 MB more text. --version is our own flag.
		//
		// Arguments are checked in RunE, after --version, as the flag package's NArg was; the
		// message names them as arguments, not as unknown commands.
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(_ *cobra.Command, args []string) error {
			if f.version {
				// Nothing else is checked: --version answers whatever the other flags say, as
				// --help does.
				_, err := fmt.Fprintln(stdout, version.String("sandbox-controller"))
				return err
			}
			if len(args) > 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("unexpected arguments %q: sandbox-controller takes flags only", args)}
			}
			opts, err := f.options()
			if err != nil {
				return &cli.ExitError{Code: cli.ExitUsage, Err: err}
			}
			return start(opts)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	f.bind(cmd.Flags())
	return cmd
}

// execute runs cmd on args. A long flag given with one dash, as Go's flag package took them
// (-metrics-bind-address), is what pflag reads as a group of one-letter flags and reports as
// "unknown shorthand flag: 'm' in -metrics-bind-address"; that error is replaced by one naming
// the two-dash form.
func execute(cmd *cobra.Command, args []string) error {
	err := cli.Execute(cmd, args)
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedShortnames() == "" {
		return err
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "--") || !strings.HasPrefix(a, "-") || !strings.HasSuffix(a, unknown.GetSpecifiedShortnames()) {
			continue
		}
		// The argument pflag failed on: -name or -name=value.
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) > 1 && cmd.Flags().Lookup(name) != nil {
			return fmt.Errorf("flag -%s needs two dashes: --%s", name, name)
		}
		break
	}
	return err
}

// bind defines the flags on fs. controller-runtime's --kubeconfig and the --zap-* flags are
// defined on a Go flag.FlagSet by their packages, and added to fs from it, so they take two
// dashes like the rest.
func (f *flags) bind(fs *pflag.FlagSet) {
	gofs := flag.NewFlagSet("sandbox-controller", flag.ContinueOnError)
	config.RegisterFlags(gofs)
	f.zap.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
	fs.BoolVar(&f.version, "version", false, "print the version and commit this binary was built from, and exit")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "address the Prometheus metrics endpoint binds to, e.g. :8080 as config/manager sets it; 0 (the default, as kubebuilder scaffolds it) disables it, so a workstation run takes no port another program (the router's :8080) wants")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to; 0 disables them")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "address Go's /debug/pprof profiles bind to, for diagnosing memory and CPU; 0 (the default) disables them")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader (a Lease) so only one replica reconciles at a time")
	fs.BoolVar(&f.upstreamAnnotations, "upstream-annotations", false, "write upstream's annotations into Sandboxes (agents.x-k8s.io/pod-name) and claims (agents.x-k8s.io/sandbox-name, controller-first-observed-at, claim-first-ready-at), for tools and tests written against upstream; off, nothing is written into objects users own")
	fs.BoolVar(&f.noClaimTimingAnnotations, "disable-claim-observability-annotations", false, "with --upstream-annotations, leave out the claims' two timing annotations (upstream's flag)")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the namespace the controller runs in)")
	fs.StringVar(&f.renderConfig, "render-config", "", "a SandboxRender functionConfig file (the one the KRM function uses) with the render options")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "", "cluster DNS domain for status.serviceFQDN (overrides --render-config; default cluster.local)")
	fs.StringVar(&f.packs, "policy-packs", "", "comma-separated policy packs to turn on in addition to --render-config's: restricted, standalone-network-policy")
	fs.StringVar(&f.allowedLabelDomains, "allowed-label-domains", "", "comma-separated label domains claims may use in additionalPodMetadata (overrides --render-config; default sandbox.users.io)")
	fs.StringVar(&f.namespaces, "namespaces", "", "comma-separated namespaces to reconcile (default: all)")
	fs.Float64Var(&f.qps, "kube-api-qps", 500, "requests per second the controller may send to the API server (client-side limit)")
	fs.IntVar(&f.burst, "kube-api-burst", 1000, "burst above --kube-api-qps")
	fs.IntVar(&f.sandboxWorkers, "sandbox-workers", 100, "concurrent Sandbox reconciles")
	fs.IntVar(&f.tplWorkers, "template-workers", 1, "concurrent SandboxTemplate reconciles")
	fs.IntVar(&f.claimWorkers, "claim-workers", 50, "concurrent SandboxClaim reconciles")
	fs.DurationVar(&f.backgroundHold, "background-hold", controller.DefaultBackgroundHold, "the longest writes nobody waits on (a pool's refill, re-syncs of Ready Sandboxes, events) wait behind writes somebody waits on (a claim's adoption and status, a Sandbox on its way to Ready); 0 sends them at once")
	fs.BoolVar(&f.separateWatches, "separate-watch-connection", false, "open the cache's lists and watches on a connection of their own, apart from the writes, as upstream's #1240 does (on upstream's scale scenario here it did not help: see docs/controller.md)")
	fs.IntVar(&f.poolWorkers, "warm-pool-workers", 1, "concurrent SandboxWarmPool reconciles")
	fs.StringVar(&f.controllers, "controllers", "*", "comma-separated reconcilers to run, * for all: "+strings.Join(controller.Controllers, ", "))
	f.webhook.bind(fs)
}

// options checks the parsed flags and gives the controller's options; every error is a usage
// error. The checks run in a fixed order (addresses and client limits, lists, namespaces,
// workers, reconcilers, annotations, webhook, render configuration), so that of several mistakes
// the same one is reported first.
func (f *flags) options() (*controller.Options, error) {
	if err := f.checkConnections(); err != nil {
		return nil, err
	}
	if err := f.checkLists(); err != nil {
		return nil, err
	}
	if err := f.checkNamespaces(); err != nil {
		return nil, err
	}
	if f.sandboxWorkers < 1 || f.tplWorkers < 1 || f.claimWorkers < 1 || f.poolWorkers < 1 {
		return nil, errors.New("--sandbox-workers, --template-workers, --claim-workers and --warm-pool-workers must be at least 1")
	}
	if f.backgroundHold < 0 {
		return nil, fmt.Errorf("--background-hold %v: want a duration of 0 or more", f.backgroundHold)
	}
	hold := f.backgroundHold
	if hold == 0 {
		hold = -1 // Options: negative holds nothing
	}
	controllers, err := f.reconcilers()
	if err != nil {
		return nil, err
	}
	if f.noClaimTimingAnnotations && !f.upstreamAnnotations {
		return nil, errors.New("--disable-claim-observability-annotations turns off part of --upstream-annotations, which is off: pass both, or neither")
	}
	if err := f.webhook.validate(); err != nil {
		return nil, err
	}
	cfg, err := f.loadRenderConfig()
	if err != nil {
		return nil, err
	}
	return &controller.Options{Render: cfg.Options(), SandboxWorkers: f.sandboxWorkers, TemplateWorkers: f.tplWorkers,
		ClaimWorkers: f.claimWorkers, PoolWorkers: f.poolWorkers, Namespaces: splitList(f.namespaces), Controllers: controllers,
		Upstream: render.UpstreamAnnotations{Enabled: f.upstreamAnnotations, ClaimTiming: !f.noClaimTimingAnnotations}, BackgroundHold: hold}, nil
}

// checkConnections checks what the controller listens on and how hard it may press the API
// server, so that a typo is a usage error at start-up, not a failure once the manager runs.
func (f *flags) checkConnections() error {
	for _, a := range []struct{ flag, value string }{
		{"--metrics-bind-address", f.metricsAddr}, {"--health-probe-bind-address", f.probeAddr}, {"--pprof-bind-address", f.pprofAddr},
	} {
		if err := checkBindAddress(a.value); err != nil {
			return fmt.Errorf("%s %q: %w", a.flag, a.value, err)
		}
	}
	if !(f.qps > 0) || math.IsInf(f.qps, 1) || f.burst < 1 {
		return errors.New("--kube-api-qps and --kube-api-burst must be positive numbers")
	}
	return nil
}

// checkLists refuses a list flag given but naming nothing (--namespaces=,), which would
// otherwise silently mean the default.
func (f *flags) checkLists() error {
	lists := map[string]string{"--namespaces": f.namespaces, "--policy-packs": f.packs, "--allowed-label-domains": f.allowedLabelDomains}
	for _, name := range slices.Sorted(maps.Keys(lists)) {
		if v := lists[name]; strings.TrimSpace(v) != "" && len(splitList(v)) == 0 {
			return fmt.Errorf("%s %q names nothing: leave the flag out for the default", name, v)
		}
	}
	return nil
}

// checkNamespaces checks the namespaces the flags name, so that a bad name is a usage error at
// start-up.
func (f *flags) checkNamespaces() error {
	for _, ns := range append(splitList(f.namespaces), f.leaderElectionNamespace) {
		if ns == "" {
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return fmt.Errorf("namespace %q (--namespaces or --leader-election-namespace) is not a valid namespace name: %s", ns, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// reconcilers are the reconcilers --controllers names; none for * (all).
func (f *flags) reconcilers() ([]string, error) {
	if f.controllers == "*" {
		return nil, nil
	}
	controllers := splitList(f.controllers)
	if len(controllers) == 0 {
		return nil, errors.New("--controllers: name at least one reconciler, or * for all")
	}
	for _, c := range controllers {
		if !slices.Contains(controller.Controllers, c) {
			return nil, fmt.Errorf("--controllers: unknown reconciler %q (known: %s)", c, strings.Join(controller.Controllers, ", "))
		}
	}
	return controllers, nil
}

// loadRenderConfig is the render configuration: --render-config (the KRM function's file; none:
// the defaults) with the flags that override it, validated as a whole.
func (f *flags) loadRenderConfig() (*renderconfig.Config, error) {
	cfg, err := f.readRenderConfig()
	if err != nil {
		return nil, err
	}
	if err := f.overrideRenderConfig(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readRenderConfig reads and parses --render-config, refusing spec.now: that is a preview's
// moment; the controller acts at the time it is, and would silently ignore it.
func (f *flags) readRenderConfig() (*renderconfig.Config, error) {
	var data []byte
	if f.renderConfig != "" {
		var err error
		if data, err = os.ReadFile(f.renderConfig); err != nil {
			return nil, fmt.Errorf("reading --render-config: %w", err)
		}
	}
	cfg, err := renderconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--render-config %s: %w", f.renderConfig, err)
	}
	if cfg.Spec.Now != nil {
		return nil, fmt.Errorf("--render-config %s: spec.now previews a moment in a render; the controller uses its clock, remove it", f.renderConfig)
	}
	return cfg, nil
}

// overrideRenderConfig applies the flags that override the file: the cluster domain and label
// domains replace its values, the packs are turned on in addition to its own.
func (f *flags) overrideRenderConfig(cfg *renderconfig.Config) error {
	if f.clusterDomain != "" {
		cfg.Spec.ClusterDomain = f.clusterDomain
	}
	if f.allowedLabelDomains != "" {
		cfg.Spec.AllowedLabelDomains = splitList(f.allowedLabelDomains)
	}
	for _, p := range splitList(f.packs) {
		switch p {
		case "restricted":
			cfg.Spec.Policies.Packs.Restricted = true
		case "standalone-network-policy":
			cfg.Spec.Policies.Packs.StandaloneNetworkPolicy = true
		default:
			return fmt.Errorf("--policy-packs: unknown pack %q (known: restricted, standalone-network-policy; the runtime-class pack needs its list, set it in --render-config)", p)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Scheme knows the kinds the controller reads and writes.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme, renderv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registration; cannot fail at run time
		}
	}
	return s
}

// start runs the controller with valid flags until ctx ends or it fails; its errors carry the
// exit code.
func start(ctx context.Context, f *flags, opts *controller.Options) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	log := ctrl.Log.WithName("setup")

	restConfig, err := config.GetConfig()
	if err != nil {
		return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("no cluster to talk to: %v (set --kubeconfig or KUBECONFIG, or run in a cluster)", err)}
	}
	restConfig.QPS, restConfig.Burst = float32(f.qps), f.burst
	restConfig.UserAgent = "sandbox-gitops-controller"
	if err := preflight(restConfig); err != nil {
		return &cli.ExitError{Code: cli.ExitFailure, Err: err}
	}
	webhookServer, rotator, err := f.webhook.server(restConfig)
	if err != nil {
		return fail("setting up the conversion webhook", err)
	}
	cacheOpts := controller.CacheOptions(*opts)
	if f.separateWatches {
		// A Dial of its own keeps client-go from sharing the transport (and so the HTTP/2
		// connection) the client's writes use.
		watches := rest.CopyConfig(restConfig)
		watches.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		if cacheOpts.HTTPClient, err = rest.HTTPClientFor(watches); err != nil {
			return fail("creating the watch connection", err)
		}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme(),
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "sandbox-gitops-controller",
		LeaderElectionNamespace: f.leaderElectionNamespace,
		// The process ends as soon as the manager stops, so the Lease can be given up then: a
		// stopped replica hands over at once instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		MapperProvider:                controller.NewRESTMapper,
		WebhookServer:                 webhookServer,
	})
	if err != nil {
		return fail("creating the manager", err)
	}
	if err := controller.Setup(ctx, mgr, *opts); err != nil {
		return fail("setting up the controllers", err)
	}
	if err := f.webhook.setup(mgr, rotator); err != nil {
		return fail("setting up the conversion webhook", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fail("adding the health check", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fail("adding the readiness check", err)
	}
	log.Info("starting", "fieldManager", controller.FieldManager)
	if err := mgr.Start(ctx); err != nil {
		return fail("running the manager", err)
	}
	return nil
}

// checkBindAddress accepts what the servers behind the bind-address flags can listen on: "0"
// (disabled) or host:port with a port number (an empty host is every interface), so that a typo
// is a usage error at start-up, not a failure once the manager runs.
func checkBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port, :port or 0 to disable: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q: want 0-65535", port)
	}
	return nil
}
