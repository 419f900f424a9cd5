package render

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandbox-gitops/sandbox-gitops/api/agents/v1beta1"
)

// sandboxStatusInputs are what a Sandbox's status is computed from: its Pod and Service as they
// will be after the pass's writes, and the pass's error. Status is a pure function of them, the
// Sandbox and the time.
type sandboxStatusInputs struct {
	// Pod is the Pod found for the Sandbox after this pass's writes (owned or not), nil if none.
	Pod *corev1.Pod
	// PodUnknown is true when looking the Pod up failed, so a nil Pod proves nothing.
	PodUnknown bool
	// Service is the Service in play for the Sandbox (see ServiceInPlay), nil if none.
	Service *corev1.Service
	// Err is the error of this pass, if any; it becomes the Ready condition.
	Err error
	// MultiplePods is set when Err is the ambiguous-Pod error (Ready reason MultiplePods).
	MultiplePods bool
}

// multiplePodsMessage is upstream's error when more than one Pod claims to be a Sandbox's.
func multiplePodsMessage(n int) string {
	return "multiple Pods (" + strconv.Itoa(n) + ") are controlled by this Sandbox; refusing to choose or create a Pod"
}

// activeStatus is the status upstream writes after a normal (not yet expiring) pass: the previous
// status with podIPs, nodeName, selector and the Service fields brought up to date, and the
// conditions set in upstream's order (Suspended, Finished, PodScheduled, Ready) with
// meta.SetStatusCondition, so their order in the list is insertion order, as upstream's is. If
// the Sandbox has expired by now, the pass ends by marking it expired, as upstream's does.
func activeStatus(sb *agentsv1beta1.Sandbox, obs sandboxStatusInputs, now metav1.Time, opts Options) agentsv1beta1.SandboxStatus {
	st := *sb.Status.DeepCopy()
	hash := NameHash(sb.Name)
	owned := obs.Pod != nil && ownershipOf(obs.Pod, sb) == ownedBySandbox

	if obs.Pod == nil {
		st.PodIPs, st.NodeName = nil, ""
	} else {
		// Never cleared when the Pod goes away; only a Retain expiry wipes it.
		st.LabelSelector = agentsv1beta1.SandboxNameHashLabel + "=" + hash
		st.PodIPs, st.NodeName = nil, ""
		if owned {
			st.PodIPs = podIPs(obs.Pod)
			st.NodeName = obs.Pod.Spec.NodeName
		}
	}
	if !obs.MultiplePods {
		// With an ambiguous Pod upstream leaves the Service, and the Service status, alone.
		if obs.Service != nil {
			st.Service = obs.Service.Name
			st.ServiceFQDN = obs.Service.Name + "." + sb.Namespace + ".svc." + opts.clusterDomain()
		} else {
			st.Service, st.ServiceFQDN = "", ""
		}
	}

	set := func(c metav1.Condition) {
		c.ObservedGeneration = sb.Generation
		c.LastTransitionTime = now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	set(suspendedCondition(sb, obs, owned))
	if c := finishedCondition(obs, owned); c != nil {
		set(*c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.ConditionFinished)
	}
	if c := podScheduledCondition(obs, owned); c != nil {
		set(*c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.ConditionPodScheduled)
	}
	set(readyCondition(sb, obs))

	if Expired(sb, now.Time) {
		markExpired(&st, sb.Generation, now)
	}
	return st
}

func podIPs(pod *corev1.Pod) []string {
	if len(pod.Status.PodIPs) == 0 {
		return nil
	}
	ips := make([]string, len(pod.Status.PodIPs))
	for i, ip := range pod.Status.PodIPs {
		ips[i] = ip.IP
	}
	return ips
}

func suspendedCondition(sb *agentsv1beta1.Sandbox, obs sandboxStatusInputs, owned bool) metav1.Condition {
	c := metav1.Condition{
		Type:    agentsv1beta1.ConditionSuspended,
		Status:  metav1.ConditionFalse,
		Reason:  agentsv1beta1.ReasonNotSuspended,
		Message: "Sandbox is not suspended",
	}
	if sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		return c
	}
	switch {
	case obs.Pod == nil && obs.PodUnknown:
		c.Status = metav1.ConditionUnknown
		c.Reason = agentsv1beta1.ReasonSuspendedPodStateUnknown
		c.Message = "Pod state is unknown. Sandbox suspension cannot be confirmed"
	case obs.Pod == nil:
		c.Status = metav1.ConditionTrue
		c.Reason = agentsv1beta1.ReasonSuspendedPodTerminated
		c.Message = "Pod has been terminated. Sandbox is suspended"
	case !owned:
		c.Reason = agentsv1beta1.ReasonSuspendedPodNotOwned
		c.Message = "Refused to delete pod because it is not owned by this sandbox"
	default:
		c.Reason = agentsv1beta1.ReasonSuspendedPodTerminating
		c.Message = "Pod is terminating. Sandbox is suspending"
	}
	return c
}

func finishedCondition(obs sandboxStatusInputs, owned bool) *metav1.Condition {
	if !owned {
		return nil
	}
	switch obs.Pod.Status.Phase {
	case corev1.PodSucceeded:
		return &metav1.Condition{Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue,
			Reason: agentsv1beta1.ReasonPodSucceeded, Message: "Pod completed successfully"}
	case corev1.PodFailed:
		return &metav1.Condition{Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue,
			Reason: agentsv1beta1.ReasonPodFailed, Message: "Pod failed"}
	}
	return nil
}

func podScheduledCondition(obs sandboxStatusInputs, owned bool) *metav1.Condition {
	c := &metav1.Condition{Type: agentsv1beta1.ConditionPodScheduled}
	if obs.Pod == nil && obs.PodUnknown {
		c.Status = metav1.ConditionUnknown
		c.Reason = agentsv1beta1.ReasonPodSchedulingUnknown
		c.Message = "Pod state is unknown. Pod scheduling cannot be determined"
		return c
	}
	if !owned {
		return nil
	}
	for _, pc := range obs.Pod.Status.Conditions {
		if pc.Type != corev1.PodScheduled {
			continue
		}
		c.Status = metav1.ConditionStatus(pc.Status)
		c.Reason = pc.Reason
		c.Message = pc.Message
		if c.Reason == "" {
			if c.Status == metav1.ConditionTrue {
				c.Reason = agentsv1beta1.ReasonPodScheduled
			} else {
				c.Reason = agentsv1beta1.ReasonPodSchedulingUnknown
			}
		}
		return c
	}
	c.Status = metav1.ConditionUnknown
	c.Reason = agentsv1beta1.ReasonPodSchedulingUnknown
	c.Message = "Pod has not reported a PodScheduled condition yet"
	return c
}

// readyCondition is a Sandbox's Ready condition as upstream's controller sets it: an error of the
// pass, suspension or the Pod's end first, then the Pod's readiness and the Service's existence.
func readyCondition(sb *agentsv1beta1.Sandbox, obs sandboxStatusInputs) metav1.Condition {
	c := metav1.Condition{
		Type:   agentsv1beta1.ConditionReady,
		Status: metav1.ConditionFalse,
		Reason: agentsv1beta1.ReasonDependenciesNotReady,
	}
	if obs.Err != nil {
		if obs.MultiplePods {
			c.Reason = agentsv1beta1.ReasonMultiplePods
			c.Message = obs.Err.Error()
		} else {
			c.Reason = agentsv1beta1.ReasonReconcilerError
			c.Message = "Error seen: " + obs.Err.Error()
		}
		return c
	}
	pod := obs.Pod
	if sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended {
		c.Reason = agentsv1beta1.ReasonSandboxSuspended
		c.Message = "Sandbox is suspended"
		if pod != nil {
			c.Message = "Sandbox is suspending"
		}
		return c
	}
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			c.Reason, c.Message = agentsv1beta1.ReasonPodSucceeded, "Pod completed successfully"
			return c
		case corev1.PodFailed:
			c.Reason, c.Message = agentsv1beta1.ReasonPodFailed, "Pod failed"
			return c
		}
	}

	message, podReady := podReadiness(pod)
	if !podReady {
		if cause := podStuckCause(pod); cause != "" {
			message += "; " + cause
		}
	}
	// A nil spec.service still requires a Service that exists (upstream's back-compat rule).
	svcRequired := obs.Service != nil
	if sb.Spec.Service != nil {
		svcRequired = *sb.Spec.Service
	}
	svcReady := true
	if svcRequired {
		if obs.Service != nil {
			message += "; Service Exists"
		} else {
			message += "; Service does not exist"
			svcReady = false
		}
	}
	c.Message = message
	if podReady && svcReady {
		c.Status = metav1.ConditionTrue
		c.Reason = agentsv1beta1.ReasonDependenciesReady
	}
	return c
}

// podReadiness is what the Ready condition's message says of the Pod (upstream's words), and
// whether the Pod is Ready with an IP.
func podReadiness(pod *corev1.Pod) (message string, podReady bool) {
	message = "Pod does not exist"
	if pod != nil {
		message = "Pod exists with phase: " + string(pod.Status.Phase)
		if pod.Status.Phase == corev1.PodRunning {
			message = "Pod is Running but not Ready"
			for _, pc := range pod.Status.Conditions {
				if pc.Type != corev1.PodReady {
					continue
				}
				if pc.Status == corev1.ConditionTrue {
					if len(pod.Status.PodIPs) == 0 {
						message = "Pod is Ready but has no podIPs yet"
					} else {
						message = "Pod is Ready"
						podReady = true
					}
				}
				break
			}
		}
	}
	return message, podReady
}

// Expired reports whether the Sandbox's shutdownTime has come.
func Expired(sb *agentsv1beta1.Sandbox, now time.Time) bool {
	return sb.Spec.ShutdownTime != nil && !now.Before(sb.Spec.ShutdownTime.Time)
}

// sandboxStatusChanged reports whether a controller writes next after computing next from prev, as
// upstream decides: not when they are semantically equal, and not when the only change is the
// node name while the Sandbox is not Ready (that change is carried by the next write, which
// saves one status write per scheduling).
func sandboxStatusChanged(prev, next *agentsv1beta1.SandboxStatus) bool {
	if equality.Semantic.DeepEqual(prev, next) {
		return false
	}
	if prev.NodeName != next.NodeName && !meta.IsStatusConditionTrue(next.Conditions, agentsv1beta1.ConditionReady) {
		p := prev.DeepCopy()
		p.NodeName = next.NodeName
		return !equality.Semantic.DeepEqual(p, next)
	}
	return true
}

// startupWindow is how long after a Sandbox (or its current Pod) is created a controller may
// hold back the status of a normal start. See sandboxStatusHold.
const startupWindow = 30 * time.Second

// sandboxStatusHold is how long a controller holds back writing next, zero meaning at once. A starting
// Sandbox passes through states nobody acts on ("Pod exists with phase: Pending", scheduled,
// running but not ready, the Service not yet seen) within a second or two; upstream writes each
// of them, and on a busy API server those writes are most of a Sandbox's cost. So while a start
// is within startupWindow of its Sandbox's or Pod's creation and going normally (Ready=False with
// DependenciesNotReady, not unschedulable), its status waits, and the first status written is
// usually Ready=True. Anything else (Ready, errors, suspension, finished Pods, expiry,
// unschedulable Pods, a Pod podStuckCause finds stuck, and any start that takes longer) is
// written at once. So is the fall of a
// Sandbox whose stored status says Ready: its Pod was deleted or failed, the agent's process and
// memory went with it, and whoever uses the Sandbox must see that before the replacement Pod is
// Ready (upstream's TestWarmPoolSandboxWatcher polls for exactly this).
func sandboxStatusHold(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, next *agentsv1beta1.SandboxStatus, now time.Time) time.Duration {
	ready := meta.FindStatusCondition(next.Conditions, agentsv1beta1.ConditionReady)
	if ready == nil || ready.Reason != agentsv1beta1.ReasonDependenciesNotReady {
		return 0
	}
	if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
		return 0
	}
	if meta.IsStatusConditionFalse(next.Conditions, agentsv1beta1.ConditionPodScheduled) || podStuckCause(pod) != "" {
		return 0
	}
	start := sb.CreationTimestamp.Time
	if pod != nil && pod.CreationTimestamp.After(start) {
		start = pod.CreationTimestamp.Time
	}
	if hold := start.Add(startupWindow).Sub(now); hold > 0 {
		return hold
	}
	return 0
}
