package controller_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/controller"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

var updateFixtures = flag.Bool("update", false, "rewrite the health-check fixtures in gitops/argocd/testdata/*/recorded-*.yaml from what the controller writes")

// healthFixtureDir is where the Argo CD and Flux health checks read their fixtures from.
const healthFixtureDir = "../gitops/argocd/testdata"

// missingImage is an image reference that fails at once and locally: nothing listens on port 1
// of the loopback address, so a pull could never leave the machine.
const missingImage = "127.0.0.1:1/missing:v1"

// TestHealthFixtures records the objects the GitOps health checks are judged on from this
// controller, in the states a rollout and a claim go through: the Argo CD Lua checks and the Flux
// CEL expressions are tested on these very objects (gitops/argocd, gitops/flux), so they cannot
// drift from what the controller writes. Without -update each recorded object must equal its
// fixture after normalization (names of namespaces, UIDs, times and Pod IPs, which change from
// run to run); with -update the fixtures are rewritten, to be reviewed like any golden.
func TestHealthFixtures(t *testing.T) {
	t.Run("pool", func(t *testing.T) {
		ns := newNamespace(t)
		startController(t, ns, controller.Options{})
		create(t, template(ns, "python"))
		create(t, warmPool(ns, "python-pool", "python", 2, rollingUpdate(intstr.FromInt32(1), intstr.FromInt32(0)), func(p *extv1beta1.SandboxWarmPool) {
			p.Spec.ProgressDeadlineSeconds = ptr.To[int32](6)
		}))
		pool := waitPool(t, ns, "python-pool", "the pool filled", func(p *extv1beta1.SandboxWarmPool) error {
			return wantProgressing(p, metav1.ConditionFalse, extv1beta1.RolloutCompleteReason, 2, 2, 2)
		})
		recordFixture(t, ns, pool, "sandboxwarmpool", "recorded-rollout-complete",
			"a RollingUpdate pool whose two members are made from the current template and Ready")

		// A template change to an image that never starts: the rollout surges one member and
		// waits for it, keeping both old members Ready.
		changeTemplate(t, ns, "python", func(tpl *extv1beta1.SandboxTemplate) {
			tpl.Spec.PodTemplate.Spec.Containers[0].Image = missingImage
			tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: "PullBackOff"}
		})
		pool = waitPool(t, ns, "python-pool", "the rollout surged one member", func(p *extv1beta1.SandboxWarmPool) error {
			return wantProgressing(p, metav1.ConditionTrue, extv1beta1.MembersUpdatedReason, 3, 2, 1)
		})
		recordFixture(t, ns, pool, "sandboxwarmpool", "recorded-rolling",
			"a RollingUpdate in progress after a template change: one new member, not Ready yet, beside the two old ones")

		pool = waitPool(t, ns, "python-pool", "the rollout stopped at its deadline", func(p *extv1beta1.SandboxWarmPool) error {
			return wantProgressing(p, metav1.ConditionFalse, extv1beta1.ProgressDeadlineExceededReason, 3, 2, 1)
		})
		recordFixture(t, ns, pool, "sandboxwarmpool", "recorded-rollout-stuck",
			"the same rollout after progressDeadlineSeconds (6): the new member's image cannot be pulled")

		// The old members still serve claims.
		create(t, sandboxClaim(ns, "claim-a", "python-pool"))
		claim := waitClaim(t, ns, "claim-a", metav1.ConditionTrue, "")
		served := &agentsv1beta1.Sandbox{}
		if err := get(ns, claim.Status.SandboxStatus.Name, served); err != nil {
			t.Fatal(err)
		}
		if img := served.Spec.PodTemplate.Spec.Containers[0].Image; img == missingImage {
			t.Errorf("claim-a got %s, a member of the new template, which never starts", served.Name)
		}
		recordFixture(t, ns, claim, "sandboxclaim", "recorded-ready",
			"a claim on the stuck pool, served by a member of the old template")
	})

	t.Run("pool-filling", func(t *testing.T) {
		ns := newNamespace(t)
		startController(t, ns, controller.Options{})
		create(t, template(ns, "python", func(tpl *extv1beta1.SandboxTemplate) {
			tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: "Pending"}
		}))
		create(t, warmPool(ns, "python-pool", "python", 2))
		pool := waitPool(t, ns, "python-pool", "both members created", func(p *extv1beta1.SandboxWarmPool) error {
			return wantProgressing(p, metav1.ConditionTrue, extv1beta1.NewMembersCreatedReason, 2, 0, 2)
		})
		recordFixture(t, ns, pool, "sandboxwarmpool", "recorded-filling",
			"a new pool (OnReplenish) whose members are created and not Ready yet")

		create(t, warmPool(ns, "orphan-pool", "no-such-template", 1))
		pool = waitPool(t, ns, "orphan-pool", "the missing template reported", func(p *extv1beta1.SandboxWarmPool) error {
			return wantProgressing(p, metav1.ConditionFalse, extv1beta1.PoolTemplateNotFoundReason, 0, 0, 0)
		})
		recordFixture(t, ns, pool, "sandboxwarmpool", "recorded-template-not-found",
			"a pool whose SandboxTemplate does not exist")
	})

	t.Run("claim", func(t *testing.T) {
		ns := newNamespace(t)
		const deadline = 10 * time.Second
		startController(t, ns, controller.Options{Render: render.Options{ClaimReadyDeadline: deadline}})
		create(t, template(ns, "broken", func(tpl *extv1beta1.SandboxTemplate) {
			tpl.Spec.PodTemplate.Spec.Containers[0].Image = missingImage
			tpl.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{outcomeAnnotation: "PullBackOff"}
		}))
		create(t, warmPool(ns, "broken-pool", "broken", 1))
		create(t, sandboxClaim(ns, "claim-stuck", "broken-pool"))
		claim := waitClaimMessage(t, ns, "claim-stuck", agentsv1beta1.ReasonDependenciesNotReady, "ImagePullBackOff")
		recordFixture(t, ns, claim, "sandboxclaim", "recorded-stuck",
			"a claim whose Sandbox's image cannot be pulled, before its ready deadline; the message names the cause")
		sb := waitReady(t, ns, claim.Status.SandboxStatus.Name, metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady)
		recordFixture(t, ns, sb, "sandbox", "recorded-image-pull-backoff",
			"the Sandbox of that claim: its Ready message names why the Pod does not start")

		claim = waitClaimMessage(t, ns, "claim-stuck", extv1beta1.ProgressDeadlineExceededReason, "ImagePullBackOff")
		recordFixture(t, ns, claim, "sandboxclaim", "recorded-stuck-deadline-exceeded",
			"the same claim after its ready deadline (claimReadyDeadlineSeconds 10): it will not become Ready by itself")

		create(t, sandboxClaim(ns, "claim-no-pool", "no-such-pool"))
		claim = waitClaim(t, ns, "claim-no-pool", metav1.ConditionFalse, "WarmPoolNotFound")
		recordFixture(t, ns, claim, "sandboxclaim", "recorded-warm-pool-not-found",
			"a claim on a SandboxWarmPool that does not exist")
	})
}

// waitPool waits until check accepts the pool and returns it.
func waitPool(t *testing.T, ns, name, what string, check func(*extv1beta1.SandboxWarmPool) error) *extv1beta1.SandboxWarmPool {
	t.Helper()
	pool := &extv1beta1.SandboxWarmPool{}
	eventually(t, time.Minute, what, func() error {
		if err := get(ns, name, pool); err != nil {
			return err
		}
		if pool.Status.ObservedGeneration != pool.Generation {
			return fmt.Errorf("status of generation %d, want %d", pool.Status.ObservedGeneration, pool.Generation)
		}
		return check(pool)
	})
	return pool
}

// wantProgressing checks a pool's Progressing condition and its member counts.
func wantProgressing(p *extv1beta1.SandboxWarmPool, status metav1.ConditionStatus, reason string, replicas, ready, updated int32) error {
	c := meta.FindStatusCondition(p.Status.Conditions, extv1beta1.SandboxWarmPoolProgressing)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("Progressing %+v, want %s/%s", c, status, reason)
	}
	if p.Status.Replicas != replicas || p.Status.ReadyReplicas != ready || p.Status.UpdatedReplicas != updated {
		return fmt.Errorf("%d members, %d Ready, %d updated; want %d, %d, %d",
			p.Status.Replicas, p.Status.ReadyReplicas, p.Status.UpdatedReplicas, replicas, ready, updated)
	}
	return nil
}

// waitClaimMessage waits for a claim's Ready condition to be False with the reason and a
// message that names cause.
func waitClaimMessage(t *testing.T, ns, name, reason, cause string) *extv1beta1.SandboxClaim {
	t.Helper()
	c := &extv1beta1.SandboxClaim{}
	eventually(t, time.Minute, fmt.Sprintf("SandboxClaim %s Ready=False/%s naming %s", name, reason, cause), func() error {
		if err := get(ns, name, c); err != nil {
			return err
		}
		r := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
		if r == nil || r.Status != metav1.ConditionFalse || r.Reason != reason || !strings.Contains(r.Message, cause) {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
	return c
}

var (
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	podIP     = regexp.MustCompile(`\b10\.\d+\.\d+\.\d+\b`)
	// memberName is a pool member's generated name: the pool's name and five characters of
	// the API server's generateName alphabet.
	memberName = regexp.MustCompile(`\b([a-z0-9-]+-pool)-[bcdfghjklmnpqrstvwxz2456789]{5}\b`)
)

// fixtureTime stands for every time in a recorded object.
const fixtureTime = "2026-06-01T10:00:00Z"

// recordFixture writes obj, normalized, to <healthFixtureDir>/<dir>/<name>.yaml under -update,
// and otherwise compares it with that file.
func recordFixture(t *testing.T, ns string, obj client.Object, dir, name, about string) {
	t.Helper()
	got, err := normalizedFixture(ns, obj)
	if err != nil {
		t.Fatal(err)
	}
	got = fmt.Sprintf("# Recorded from the controller by TestHealthFixtures (controller/health_fixtures_test.go):\n# %s.\n# Regenerate with go test ./controller -run TestHealthFixtures -update; do not edit.\n%s", about, got)
	path := filepath.Join(healthFixtureDir, dir, name+".yaml")
	if *updateFixtures {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./controller -run TestHealthFixtures -update to record it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("the controller now writes %s differently; review, then rerun with -update (-want +got):\n%s", path, diff)
	}
}

// normalizedFixture is obj as a GitOps tool reads it, with what differs from run to run replaced
// by fixed values: the namespace (each test has its own), UIDs and pool members' generated names
// (numbered in order of appearance), every time, Pod IPs, and the fields only the API server's
// bookkeeping needs.
func normalizedFixture(ns string, obj client.Object) (string, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return "", err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	u.SetManagedFields(nil)
	u.SetResourceVersion("")
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		return "", err
	}
	out := strings.ReplaceAll(string(data), ns, "default")
	uids := map[string]string{}
	for _, uid := range collectUIDs(u.Object) {
		if _, ok := uids[uid]; !ok {
			uids[uid] = fmt.Sprintf("00000000-0000-4000-8000-%012d", len(uids)+1)
		}
	}
	for uid, fixed := range uids {
		out = strings.ReplaceAll(out, uid, fixed)
	}
	members := map[string]string{}
	out = memberName.ReplaceAllStringFunc(out, func(name string) string {
		if fixed, ok := members[name]; ok {
			return fixed
		}
		pool := memberName.FindStringSubmatch(name)[1]
		members[name] = fmt.Sprintf("%s-%s", pool, strings.Repeat(string(rune('a'+len(members))), 5))
		return members[name]
	})
	out = timestamp.ReplaceAllString(out, fixtureTime)
	return podIP.ReplaceAllString(out, "10.64.0.1"), nil
}

// collectUIDs returns the values of every "uid" field in v, in a stable order.
func collectUIDs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && k == "uid" {
				out = append(out, s)
				continue
			}
			out = append(out, collectUIDs(v[k])...)
		}
	case []any:
		for _, item := range v {
			out = append(out, collectUIDs(item)...)
		}
	}
	return out
}
