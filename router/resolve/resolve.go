// Package resolve decides which Pod a router request reaches: only the Pod of a Sandbox that
// exists and is Ready, found in an informer cache of Sandboxes and their Pods. There is no
// fallback: a name that is not a Sandbox is a 404, never a DNS guess, so the router cannot be
// used to reach Services that are not sandboxes.
//
// Resolve is a pure function over a View; Cache is the View backed by controller-runtime's
// informer cache. The split lets the decision be tested case by case and the cache be tested
// against a real API server.
package resolve

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
	"github.com/sandbox-gitops/sandbox-gitops/render"
	"github.com/sandbox-gitops/sandbox-gitops/router"
)

// View is a read-only view of Sandboxes and Pods. Returned objects must not be modified.
type View interface {
	// SandboxByUID finds a Sandbox in any namespace by UID.
	SandboxByUID(uid string) (*agentsv1beta1.Sandbox, bool)
	// Sandbox finds a Sandbox by namespace and name.
	Sandbox(namespace, name string) (*agentsv1beta1.Sandbox, bool)
	// Pod finds a Pod by namespace and name.
	Pod(namespace, name string) (*corev1.Pod, bool)
}

// Namespaces is the --namespaces allow-list; empty serves every namespace.
type Namespaces map[string]bool

// Serves reports whether ns may be routed to.
func (n Namespaces) Serves(ns string) bool { return len(n) == 0 || n[ns] }

// Resolve returns the target of req in v:
//
//  1. the namespace must be served (--namespaces);
//  2. the Sandbox is looked up by X-Sandbox-UID when given (and must then also carry the
//     requested namespace and name), else by namespace and name; warm-pool and claimed
//     Sandboxes are found like any other, Service or not;
//  3. it must not be deleting and its Ready condition must be True;
//  4. its Pod (named by the agents.x-k8s.io/pod-name annotation, else the Sandbox's name) must
//     carry the Sandbox's name-hash label, be controlled by no other object than this Sandbox,
//     be Running and have an IP;
//  5. X-Sandbox-Pod-IP, when given, must be one of that Pod's IPs, and is then the address.
//
// Every refusal is a 404 naming the header that led nowhere.
func Resolve(req router.Request, v View, served Namespaces) (router.Target, *router.Error) {
	if !served.Serves(req.Namespace) {
		return router.Target{}, router.NotFound(router.ReasonNamespaceNotServed, router.HeaderNamespace,
			fmt.Sprintf("%s: namespace %q is not served by this router", router.HeaderNamespace, req.Namespace))
	}
	var sb *agentsv1beta1.Sandbox
	if req.UID != "" {
		s, ok := v.SandboxByUID(req.UID)
		if !ok || s.Namespace != req.Namespace || s.Name != req.Name {
			return router.Target{}, router.NotFound(router.ReasonSandboxNotFound, router.HeaderUID,
				fmt.Sprintf("%s: no Sandbox %s/%s with UID %q", router.HeaderUID, req.Namespace, req.Name, req.UID))
		}
		sb = s
	} else {
		s, ok := v.Sandbox(req.Namespace, req.Name)
		if !ok {
			return router.Target{}, router.NotFound(router.ReasonSandboxNotFound, router.HeaderID,
				fmt.Sprintf("%s: no Sandbox %s/%s; the router reaches Sandboxes only", router.HeaderID, req.Namespace, req.Name))
		}
		sb = s
	}
	notReady := func(why string) (router.Target, *router.Error) {
		return router.Target{}, router.NotFound(router.ReasonSandboxNotReady, router.HeaderID,
			fmt.Sprintf("%s: Sandbox %s/%s is not ready: %s", router.HeaderID, sb.Namespace, sb.Name, why))
	}
	if sb.DeletionTimestamp != nil {
		return notReady("it is being deleted")
	}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	switch {
	case ready == nil:
		return notReady("it has no Ready condition yet")
	case ready.Status != metav1.ConditionTrue:
		return notReady(fmt.Sprintf("Ready is %s (%s: %s)", ready.Status, ready.Reason, ready.Message))
	}
	podName := sb.Name
	if a := sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation]; a != "" {
		podName = a
	}
	pod, ok := v.Pod(sb.Namespace, podName)
	if !ok {
		return notReady(fmt.Sprintf("its Pod %q is not known yet", podName))
	}
	if msg := podProblem(pod, sb); msg != "" {
		return notReady(fmt.Sprintf("its Pod %q %s", podName, msg))
	}
	ips := podIPs(pod)
	if len(ips) == 0 {
		return notReady(fmt.Sprintf("its Pod %q has no IP yet", podName))
	}
	addr := ips[0]
	if req.PodIP.IsValid() {
		found := false
		for _, ip := range ips {
			if ip == req.PodIP {
				found = true
				break
			}
		}
		if !found {
			return router.Target{}, router.NotFound(router.ReasonPodIPMismatch, router.HeaderPodIP,
				fmt.Sprintf("%s: %s is not an IP of the Pod of Sandbox %s/%s", router.HeaderPodIP, req.PodIP, sb.Namespace, sb.Name))
		}
		addr = req.PodIP
	}
	return router.Target{
		Namespace: sb.Namespace,
		Name:      sb.Name,
		UID:       string(sb.UID),
		Addr:      netip.AddrPortFrom(addr, uint16(req.Port)),
	}, nil
}

// podProblem says why pod cannot be sb's serving Pod, or "". The name-hash label is the one the
// controller (and a GitOps render) puts on the Pod and that upstream selects on; a controller
// reference, when there is one, must be the Sandbox, so a Pod of the same name owned by
// something else is never reached.
func podProblem(pod *corev1.Pod, sb *agentsv1beta1.Sandbox) string {
	if pod.Labels[agentsv1beta1.SandboxNameHashLabel] != render.NameHash(sb.Name) {
		return fmt.Sprintf("lacks the label %s=%s", agentsv1beta1.SandboxNameHashLabel, render.NameHash(sb.Name))
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && (ref.Kind != agentsv1beta1.SandboxKind || ref.UID != sb.UID) {
		return fmt.Sprintf("is controlled by %s %q, not by this Sandbox", ref.Kind, ref.Name)
	}
	if pod.DeletionTimestamp != nil {
		return "is being deleted"
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fmt.Sprintf("is in phase %q, not Running", pod.Status.Phase)
	}
	return ""
}

// podIPs are the Pod's IPs, primary first; unparsable entries are skipped.
func podIPs(pod *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			for _, o := range out {
				if o == a {
					return
				}
			}
			out = append(out, a)
		}
	}
	add(pod.Status.PodIP)
	for _, ip := range pod.Status.PodIPs {
		add(ip.IP)
	}
	return out
}
