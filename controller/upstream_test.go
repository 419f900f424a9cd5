package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

var upstreamKeys = []string{agentsv1beta1.SandboxPodNameAnnotation, extv1beta1.AssignedSandboxNameAnnotation,
	render.ClaimFirstObservedAnnotation, render.ClaimFirstReadyAnnotation}

// TestUpstreamAnnotations: with --upstream-annotations a warm claim, a cold claim and their
// Sandboxes carry upstream's four annotations with upstream's values, applied under their own
// field manager (the Sandboxes' spec stays ours); without the switch, none; with
// --disable-claim-observability-annotations, no timing ones. No version of a claim a watch shows
// is Ready without the annotations asked for.
func TestUpstreamAnnotations(t *testing.T) {
	for name, tc := range map[string]struct {
		u          render.UpstreamAnnotations
		wantTiming bool
		wantNames  bool
	}{
		"On":        {u: render.UpstreamAnnotations{Enabled: true, ClaimTiming: true}, wantTiming: true, wantNames: true},
		"TimingOff": {u: render.UpstreamAnnotations{Enabled: true}, wantNames: true},
		"Off":       {},
	} {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			startController(t, ns, controller.Options{Upstream: tc.u})
			create(t, template(ns, "python", func(tp *extv1beta1.SandboxTemplate) {
				tp.Spec.EnvVarsInjectionPolicy = extv1beta1.EnvVarsInjectionPolicyAllowed
			}))
			create(t, warmPool(ns, "pool", "python", 1))
			waitPoolReady(t, ns, "pool", 1)
			// Every version of the claims a watch shows, to check that none is Ready without
			// upstream's annotations: its clients read them the moment they see Ready.
			wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			w, err := wc.Watch(context.Background(), &extv1beta1.SandboxClaimList{}, client.InNamespace(ns))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			start := time.Now()
			create(t, sandboxClaim(ns, "warm", "pool"))
			create(t, sandboxClaim(ns, "cold", "pool", func(c *extv1beta1.SandboxClaim) {
				c.Spec.Env = []extv1beta1.EnvVar{{Name: "TASK", Value: ptr.To("x")}}
			}))
			warm := waitClaim(t, ns, "warm", metav1.ConditionTrue, "")
			waitClaim(t, ns, "cold", metav1.ConditionTrue, "")
			sandboxOf := map[string]string{"warm": warm.Status.SandboxStatus.Name, "cold": "cold"}
			check := func() error {
				for _, c := range []string{"warm", "cold"} {
					claim := &extv1beta1.SandboxClaim{}
					if err := get(ns, c, claim); err != nil {
						return err
					}
					sb := &agentsv1beta1.Sandbox{}
					if err := get(ns, sandboxOf[c], sb); err != nil {
						return err
					}
					want := map[string]bool{}
					if tc.wantNames {
						want[agentsv1beta1.SandboxPodNameAnnotation+" on Sandbox"] = true
						if c == "warm" {
							want[extv1beta1.AssignedSandboxNameAnnotation] = true
						}
					}
					if tc.wantTiming {
						want[render.ClaimFirstObservedAnnotation] = true
						want[render.ClaimFirstReadyAnnotation] = true
					}
					got := map[string]bool{}
					if v := sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation]; v != "" {
						if v != sb.Name {
							return fmt.Errorf("%s: pod-name %q, want the Pod's name %q", c, v, sb.Name)
						}
						got[agentsv1beta1.SandboxPodNameAnnotation+" on Sandbox"] = true
					}
					for _, k := range upstreamKeys[1:] {
						v := claim.Annotations[k]
						if v == "" {
							continue
						}
						got[k] = true
						switch k {
						case extv1beta1.AssignedSandboxNameAnnotation:
							if v != sb.Name {
								return fmt.Errorf("%s: sandbox-name %q, want %q", c, v, sb.Name)
							}
						default:
							at, err := time.Parse(time.RFC3339Nano, v)
							if err != nil || at.Before(start.Add(-time.Second)) || at.After(time.Now()) {
								return fmt.Errorf("%s: %s %q is not a time of this test (%v)", c, k, v, err)
							}
						}
					}
					if fmt.Sprint(want) != fmt.Sprint(got) {
						return fmt.Errorf("%s: annotations %v, want %v", c, got, want)
					}
					if first, ready := claim.Annotations[render.ClaimFirstObservedAnnotation], claim.Annotations[render.ClaimFirstReadyAnnotation]; first > ready && ready != "" {
						return fmt.Errorf("%s: first Ready %s before first observed %s", c, ready, first)
					}
					if sb.Spec.PodTemplate.Spec.Containers == nil {
						return fmt.Errorf("%s: the Sandbox lost its spec", c)
					}
				}
				return nil
			}
			eventually(t, time.Minute, "upstream's annotations as asked", check)
			readySeen := map[string]bool{}
			for len(readySeen) < 2 {
				var ev watch.Event
				select {
				case ev = <-w.ResultChan():
				case <-time.After(10 * time.Second):
					t.Fatalf("the watch showed %v Ready, not both claims", readySeen)
				}
				c, ok := ev.Object.(*extv1beta1.SandboxClaim)
				if !ok || !meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady) {
					continue
				}
				readySeen[c.Name] = true
				var missing []string
				if tc.wantTiming && (c.Annotations[render.ClaimFirstObservedAnnotation] == "" || c.Annotations[render.ClaimFirstReadyAnnotation] == "") {
					missing = append(missing, "timing")
				}
				if tc.wantNames && c.Name == "warm" && c.Annotations[extv1beta1.AssignedSandboxNameAnnotation] == "" {
					missing = append(missing, extv1beta1.AssignedSandboxNameAnnotation)
				}
				if len(missing) > 0 {
					t.Errorf("claim %s is Ready (resourceVersion %s) without upstream's %v: a client that waits for Ready reads them then", c.Name, c.ResourceVersion, missing)
				}
			}
			if !tc.wantNames {
				// None comes later either.
				settle(t, 10*time.Second)
				if err := check(); err != nil {
					t.Error(err)
				}
			}
			// The adopted member's Pod is the one pod-name names.
			if err := get(ns, sandboxOf["warm"], &corev1.Pod{}); err != nil {
				t.Errorf("the warm Sandbox's Pod: %v", err)
			}
		})
	}
}

// TestUpstreamPodNameAfterTheSwitch: members warmed up before --upstream-annotations was turned
// on get pod-name once the switch is on, whether a claim adopts them or not.
func TestUpstreamPodNameAfterTheSwitch(t *testing.T) {
	ns := newNamespace(t)
	stop := startController(t, ns, controller.Options{})
	create(t, template(ns, "python"))
	create(t, warmPool(ns, "pool", "python", 2))
	members := waitPoolReady(t, ns, "pool", 2)
	stop()
	startController(t, ns, controller.Options{Upstream: render.UpstreamAnnotations{Enabled: true, ClaimTiming: true}})
	create(t, sandboxClaim(ns, "warm", "pool"))
	waitClaim(t, ns, "warm", metav1.ConditionTrue, "")
	eventually(t, time.Minute, "pod-name on both members", func() error {
		for _, m := range members {
			sb := &agentsv1beta1.Sandbox{}
			if err := get(ns, m.Name, sb); err != nil {
				return err
			}
			if v := sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation]; v != sb.Name {
				return fmt.Errorf("%s: pod-name %q", sb.Name, v)
			}
		}
		return nil
	})
}
