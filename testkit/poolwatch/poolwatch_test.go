package poolwatch

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	extv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/extensions/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
)

func member(name string, ready bool) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		Labels:          map[string]string{agentsv1beta1.SandboxWarmPoolLabel: render.NameHash("pool")},
		OwnerReferences: []metav1.OwnerReference{{Kind: extv1beta1.SandboxWarmPoolKind, Name: "pool", Controller: ptr.To(true)}}}}
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: status}}
	return sb
}

// TestWatch: the watch keeps the fewest Ready members and the most members of every state the
// events pass through, counts a member on its way out as not Ready, and ignores Sandboxes of
// another pool.
func TestWatch(t *testing.T) {
	fake := watch.NewFake()
	list := func(context.Context) ([]agentsv1beta1.Sandbox, string, error) {
		return []agentsv1beta1.Sandbox{*member("a", true), *member("b", true)}, "1", nil
	}
	w, err := Start(context.Background(), "pool", list, func(context.Context, string) (watch.Interface, error) { return fake, nil })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	other := member("x", false)
	other.Labels[agentsv1beta1.SandboxWarmPoolLabel] = render.NameHash("other")
	leaving := member("a", true)
	leaving.DeletionTimestamp = ptr.To(metav1.Now())
	fake.Add(member("c", false))   // 3 members, 2 Ready
	fake.Add(other)                // not a member
	fake.Modify(leaving)           // 3 members, 1 Ready
	fake.Delete(leaving)           // 2 members, 1 Ready
	fake.Modify(member("c", true)) // 2 members, 2 Ready
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Members()) != 2 || !Ready(w.Members()[0]) || !Ready(w.Members()[1]) {
		if time.Now().After(deadline) {
			t.Fatalf("members %v", w.Members())
		}
		time.Sleep(10 * time.Millisecond)
	}
	minReady, maxAll := w.Record()
	if diff := cmp.Diff([2]int{1, 3}, [2]int{minReady, maxAll}); diff != "" {
		t.Errorf("[fewest Ready, most members]: -want +got:\n%s", diff)
	}
}
