package resolve_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/router"
	"github.com/sandbox-gitops/sandbox-gitops/router/resolve"
)

// view is an in-memory View for the table below; the informer-backed Cache is tested against
// a real API server in cache_test.go.
type view struct {
	sandboxes []*agentsv1beta1.Sandbox
	pods      []*corev1.Pod
}

func (v view) SandboxByUID(uid string) (*agentsv1beta1.Sandbox, bool) {
	for _, s := range v.sandboxes {
		if string(s.UID) == uid {
			return s, true
		}
	}
	return nil, false
}

func (v view) Sandbox(ns, name string) (*agentsv1beta1.Sandbox, bool) {
	for _, s := range v.sandboxes {
		if s.Namespace == ns && s.Name == name {
			return s, true
		}
	}
	return nil, false
}

func (v view) Pod(ns, name string) (*corev1.Pod, bool) {
	for _, p := range v.pods {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

func sandbox(ns, name, uid string, ready metav1.ConditionStatus, mods ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
	s := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	if ready != "" {
		s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: "DependenciesNotReady", Message: "Pod exists with phase: Pending"}}
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func pod(ns, name, sandboxName, ownerUID string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{agentsv1beta1.SandboxNameHashLabel: render.NameHash(sandboxName)}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if ownerUID != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: sandboxName, UID: types.UID(ownerUID), Controller: ptr.To(true)}}
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestResolve(t *testing.T) {
	ready := metav1.ConditionTrue
	base := view{
		sandboxes: []*agentsv1beta1.Sandbox{
			sandbox("default", "sb", "uid-1", ready),
			sandbox("default", "pending", "uid-2", metav1.ConditionFalse),
			sandbox("default", "fresh", "uid-3", ""),
			sandbox("team-a", "warm-abcde", "uid-4", ready, func(s *agentsv1beta1.Sandbox) {
				s.Annotations = map[string]string{agentsv1beta1.SandboxPodNameAnnotation: "warm-abcde-pod"}
			}),
			sandbox("default", "deleting", "uid-5", ready, func(s *agentsv1beta1.Sandbox) { s.DeletionTimestamp = &metav1.Time{} }),
			sandbox("default", "no-pod", "uid-6", ready),
			sandbox("default", "foreign", "uid-7", ready),
			sandbox("default", "unlabelled", "uid-8", ready),
			sandbox("default", "gitops", "uid-9", ready),
			sandbox("default", "finished", "uid-10", ready),
		},
		pods: []*corev1.Pod{
			pod("default", "sb", "sb", "uid-1", "10.0.0.5", "fd00::5"),
			pod("team-a", "warm-abcde-pod", "warm-abcde", "uid-4", "10.0.1.7"),
			pod("default", "deleting", "deleting", "uid-5", "10.0.0.6"),
			pod("default", "foreign", "foreign", "uid-other", "10.0.0.8"),
			func() *corev1.Pod {
				p := pod("default", "unlabelled", "unlabelled", "uid-8", "10.0.0.9")
				p.Labels = nil
				return p
			}(),
			pod("default", "gitops", "gitops", "", "10.0.0.10"), // applied from Git: no owner reference
			func() *corev1.Pod {
				p := pod("default", "finished", "finished", "uid-10", "10.0.0.11")
				p.Status.Phase = corev1.PodSucceeded
				return p
			}(),
		},
	}
	type want struct {
		Addr           string
		Status         int
		Reason, Header string
	}
	cases := map[string]struct {
		reason string
		req    router.Request
		served resolve.Namespaces
		want   want
	}{
		"ready by name":   {reason: "a Ready Sandbox's Pod, primary IP", req: req("default", "sb"), want: want{Addr: "10.0.0.5:8888"}},
		"ready by uid":    {reason: "X-Sandbox-UID pins the incarnation", req: withUID(req("default", "sb"), "uid-1"), want: want{Addr: "10.0.0.5:8888"}},
		"pod ip honoured": {reason: "X-Sandbox-Pod-IP that is the Pod's second IP", req: withIP(req("default", "sb"), "fd00::5"), want: want{Addr: "[fd00::5]:8888"}},
		"warm, pod-name annotation": {
			reason: "a warm or claimed Sandbox without a Service, its Pod named by the annotation",
			req:    req("team-a", "warm-abcde"), want: want{Addr: "10.0.1.7:8888"},
		},
		"gitops pod without owner": {reason: "a Pod applied from a render carries the label but no owner reference", req: req("default", "gitops"), want: want{Addr: "10.0.0.10:8888"}},
		"port from header":         {reason: "the port is the caller's", req: func() router.Request { r := req("default", "sb"); r.Port = 3000; return r }(), want: want{Addr: "10.0.0.5:3000"}},
		"missing": {
			reason: "a name that is no Sandbox (a Service, say) is refused, never looked up in DNS",
			req:    req("default", "kubernetes"), want: want{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"},
		},
		"wrong namespace": {reason: "names are per namespace", req: req("team-a", "sb"), want: want{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-ID"}},
		"stale uid": {
			reason: "a UID of an earlier incarnation is refused, not routed to the new one",
			req:    withUID(req("default", "sb"), "uid-old"), want: want{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-UID"},
		},
		"uid of another sandbox": {reason: "UID and name must agree", req: withUID(req("default", "sb"), "uid-2"), want: want{Status: 404, Reason: "SandboxNotFound", Header: "X-Sandbox-UID"}},
		"not ready":              {reason: "Ready=False", req: req("default", "pending"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"no condition":           {reason: "no Ready condition yet", req: req("default", "fresh"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"deleting":               {reason: "a deleting Sandbox", req: req("default", "deleting"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"pod not cached":         {reason: "Ready but the Pod is not in the cache", req: req("default", "no-pod"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"pod of someone else":    {reason: "a Pod of that name controlled by another object", req: req("default", "foreign"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"pod without label":      {reason: "a Pod without the Sandbox's name-hash label", req: req("default", "unlabelled"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"pod finished":           {reason: "a Pod that is not Running", req: req("default", "finished"), want: want{Status: 404, Reason: "SandboxNotReady", Header: "X-Sandbox-ID"}},
		"pod ip of another pod": {
			reason: "X-Sandbox-Pod-IP must be the Sandbox's own Pod: no dialling arbitrary IPs",
			req:    withIP(req("default", "sb"), "10.0.1.7"), want: want{Status: 404, Reason: "PodIPMismatch", Header: "X-Sandbox-Pod-IP"},
		},
		"namespace not served": {
			reason: "--namespaces", req: req("default", "sb"), served: resolve.Namespaces{"team-a": true},
			want: want{Status: 404, Reason: "NamespaceNotServed", Header: "X-Sandbox-Namespace"},
		},
		"namespace served": {reason: "--namespaces", req: req("team-a", "warm-abcde"), served: resolve.Namespaces{"team-a": true}, want: want{Addr: "10.0.1.7:8888"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolve.Resolve(tc.req, base, tc.served)
			var g want
			if err != nil {
				if err.Detail == "" {
					t.Errorf("%s: refusal without a detail", tc.reason)
				}
				g = want{Status: err.Status, Reason: err.Reason, Header: err.Header}
			} else {
				g = want{Addr: got.Addr.String()}
				if got.Namespace != tc.req.Namespace || got.Name != tc.req.Name || got.UID == "" {
					t.Errorf("%s: target %+v does not name the Sandbox", tc.reason, got)
				}
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func req(ns, name string) router.Request {
	return router.Request{Namespace: ns, Name: name, Port: router.DefaultPort}
}

func withUID(r router.Request, uid string) router.Request { r.UID = uid; return r }

func withIP(r router.Request, ip string) router.Request { r.PodIP = netip.MustParseAddr(ip); return r }
