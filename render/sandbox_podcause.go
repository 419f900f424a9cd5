package render

import (
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

// stuckWaitingReasons are the kubelet's reasons for a container that waits and will not start
// without someone acting: its image cannot be pulled or named, its configuration refers to
// something missing, or it keeps crashing. A container waiting for anything else
// (ContainerCreating, PodInitializing) is starting normally.
var stuckWaitingReasons = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// stuckCausePrefixes start every cause podStuckCause names, so that a claim can tell from its
// Sandbox's Ready message alone that the Sandbox reports one (sandboxReportsStuck).
var stuckCausePrefixes = []string{"Pod is unschedulable: ", "container \"", "init container \""}

// maxCauseMessage bounds the text kept of one cause's message: a kubelet's pull error can be long,
// and the condition it goes into is read by people and by GitOps tools' health checks.
const maxCauseMessage = 256

// maxCauses is how many causes one message names; more are counted.
const maxCauses = 3

// podStuckCause says why a Pod that is not Ready will not become Ready by itself, "" when nothing
// in its status says so: the scheduler finds no node for it (an unbound PersistentVolumeClaim is
// one of the scheduler's reasons), or a container or init container waits with one of the
// kubelet's reasons that do not clear without someone acting (stuckWaitingReasons), each named
// with the kubelet's reason and message (a crashing container with its last exit code instead,
// which stays the same from one restart to the next, where the back-off message does not).
// Upstream's Ready message says only the Pod's phase; issue 32 asked for the cause beside it.
func podStuckCause(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	var causes []string
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			causes = append(causes, "Pod is unschedulable: "+clip(c.Message))
		}
	}
	causes = appendWaiting(causes, "init container", pod.Status.InitContainerStatuses)
	causes = appendWaiting(causes, "container", pod.Status.ContainerStatuses)
	if len(causes) > maxCauses {
		causes = append(causes[:maxCauses], "and "+strconv.Itoa(len(causes)-maxCauses)+" more")
	}
	return strings.Join(causes, "; ")
}

func appendWaiting(causes []string, what string, statuses []corev1.ContainerStatus) []string {
	for _, s := range statuses {
		w := s.State.Waiting
		if w == nil || !stuckWaitingReasons[w.Reason] {
			continue
		}
		cause := what + " " + strconv.Quote(s.Name) + ": " + w.Reason
		switch t := s.LastTerminationState.Terminated; {
		case w.Reason == "CrashLoopBackOff" && t != nil:
			cause += ", last exit code " + strconv.Itoa(int(t.ExitCode))
			if t.Reason != "" {
				cause += " (" + t.Reason + ")"
			}
		case w.Reason == "CrashLoopBackOff":
		case w.Message != "":
			cause += ": " + clip(w.Message)
		}
		causes = append(causes, cause)
	}
	return causes
}

// clip cuts s to maxCauseMessage bytes on a rune boundary, marking the cut.
func clip(s string) string {
	if len(s) <= maxCauseMessage {
		return s
	}
	cut := maxCauseMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// sandboxReportsStuck reports whether a Sandbox's Ready condition names a cause podStuckCause
// found: a claim writes such a status at once rather than hold it as a normal start.
func sandboxReportsStuck(message string) bool {
	for _, p := range stuckCausePrefixes {
		if strings.Contains(message, "; "+p) {
			return true
		}
	}
	return false
}

// observedStuckStatuses keeps, of a Pod's container statuses, only those podStuckCause reads (a
// container waiting for a reason in stuckWaitingReasons), and of those only the fields it reads,
// so that a cached Pod of a running Sandbox keeps nothing of them.
func observedStuckStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range in {
		if s.State.Waiting == nil || !stuckWaitingReasons[s.State.Waiting.Reason] {
			continue
		}
		kept := corev1.ContainerStatus{Name: s.Name, State: corev1.ContainerState{Waiting: s.State.Waiting.DeepCopy()}}
		if t := s.LastTerminationState.Terminated; t != nil {
			kept.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
		}
		out = append(out, kept)
	}
	return out
}
