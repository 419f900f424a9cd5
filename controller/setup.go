package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

// Options configure the controller: the render options the function has, and workers per kind.
type Options struct {
	// Render are the render options of a namespace without a SandboxRender of its own (the
	// cluster-wide default, --render-config); one with its SandboxRender is rendered with that.
	Render render.Options
	// SandboxWorkers and TemplateWorkers are the concurrent reconciles per kind (upstream: 100
	// and 1). Zero means those defaults.
	SandboxWorkers, TemplateWorkers int
	// ClaimWorkers and PoolWorkers are the concurrent reconciles of claims and pools (upstream:
	// 50 and 1). Zero means those defaults.
	ClaimWorkers, PoolWorkers int
	// Namespaces limits the controller to these namespaces; empty means all.
	Namespaces []string
	// Controllers are the reconcilers to run, by name (see Controllers); empty means all.
	Controllers []string
	// Upstream writes upstream's annotations into Sandboxes and claims (--upstream-annotations).
	Upstream render.UpstreamAnnotations
	// BackgroundHold is the longest a pass nobody waits on (render.Plan.Background) is held
	// while writes somebody waits on are in flight; 0 means DefaultBackgroundHold, a negative
	// value holds nothing (--background-hold).
	BackgroundHold time.Duration
	// Now is the reconcilers' clock; time.Now when nil. Time enters render only as this value,
	// so a test can run the controller at the moment a preview shows (render.Options.Now).
	Now func() time.Time
}

// Controllers are the names of the reconcilers, for Options.Controllers.
var Controllers = []string{"sandbox", "sandboxtemplate", "sandboxclaim", "sandboxwarmpool", "sandboxrender"}

func (o Options) runs(name string) bool {
	return len(o.Controllers) == 0 || slices.Contains(o.Controllers, name)
}

// Setup registers the reconcilers Options.Controllers names (all by default) with mgr. They
// share one executor, and with it one memory of their writes (expectations): a claim's adoption
// is what a pool's pass must not undo.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := indexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	p := newPolicy(opts.BackgroundHold)
	g := newGate(p, opts.Now)
	events := newEventSink(mgr.GetEventRecorder("sandbox-gitops"), g)
	g.send = events.send
	if err := mgr.Add(g); err != nil {
		return err
	}
	x := &executor{client: mgr.GetClient(), reader: mgr.GetAPIReader(), applies: newApplyTransport(mgr),
		events: events, expect: newExpectations(p), echo: newEchoWaits(), gate: g, now: opts.Now}
	configs := newRenderConfigs(mgr.GetClient(), opts.Render, opts.Upstream)
	workers := func(n, def int) int {
		if n > 0 {
			return n
		}
		return def
	}
	var members *pointerIndex[*agentsv1beta1.Sandbox]
	if opts.runs("sandboxclaim") || opts.runs("sandboxwarmpool") {
		members = poolMembers()
		if err := addIndexHandler(mgr, &agentsv1beta1.Sandbox{}, members.handler()); err != nil {
			return err
		}
	}
	reconcilers := []struct {
		name string
		r    interface{ SetupWithManager(ctrl.Manager) error }
	}{
		{"sandbox", &SandboxReconciler{x: x, configs: configs, workers: workers(opts.SandboxWorkers, 100)}},
		{"sandboxtemplate", &TemplateReconciler{x: x, configs: configs, workers: workers(opts.TemplateWorkers, 1)}},
		{"sandboxclaim", &ClaimReconciler{x: x, configs: configs, workers: workers(opts.ClaimWorkers, 50), members: members}},
		{"sandboxwarmpool", &PoolReconciler{x: x, configs: configs, workers: workers(opts.PoolWorkers, 1), members: members}},
		{"sandboxrender", &SandboxRenderReconciler{x: x, configs: configs}},
	}
	for _, rc := range reconcilers {
		if !opts.runs(rc.name) {
			continue
		}
		if err := rc.r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", rc.name, err)
		}
	}
	return nil
}
