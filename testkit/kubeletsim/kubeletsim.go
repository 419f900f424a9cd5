// Package kubeletsim stands in for the kubelet and the scheduler in tests against a real API
// server (envtest runs neither): it binds every new Pod to a node, reports it Running and Ready
// with an IP (or Succeeded, Failed, or left Pending, as a test asks), and completes the graceful
// deletion a kubelet would. Everything goes through the API server, so the objects a controller
// under test sees are real ones, written the way the kubelet writes them.
package kubeletsim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// Outcome is what the simulated kubelet makes of a Pod.
type Outcome int

const (
	// Run reports the Pod Running and Ready with an IP.
	Run Outcome = iota
	// Pending binds the Pod but never starts it.
	Pending
	// Succeed reports the Pod Succeeded.
	Succeed
	// Fail reports the Pod Failed.
	Fail
	// Unschedulable leaves the Pod unbound with PodScheduled=False.
	Unschedulable
	// PullBackOff binds the Pod and reports its containers waiting in ImagePullBackOff, with the
	// kubelet's message, as for an image that cannot be pulled.
	PullBackOff
)

// Node is the node every Pod is bound to.
const Node = "sim-node-1"

// Kubelet is a running simulator.
type Kubelet struct {
	client  kubernetes.Interface
	outcome func(*corev1.Pod) Outcome
	queue   workqueue.TypedRateLimitingInterface[string]
	pods    cache.Indexer
	nextIP  atomic.Uint32
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// Start runs a simulator against cfg with the given number of workers until ctx ends or Stop is
// called. outcome decides each Pod's fate (nil: every Pod runs).
func Start(ctx context.Context, cfg *rest.Config, workers int, outcome func(*corev1.Pod) Outcome) (*Kubelet, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.UserAgent = "kubelet-simulator"
	// Protobuf, as a kubelet talks (its --kube-api-content-type default): the API server then
	// encodes each Pod event once for the simulator and the controller-runtime clients (which
	// use protobuf for built-in kinds), not a second time as JSON, and decoding costs the test
	// process less of the cores it shares with what it measures.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if outcome == nil {
		outcome = func(*corev1.Pod) Outcome { return Run }
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &Kubelet{
		client:  cs,
		outcome: outcome,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		stop:    cancel,
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	k.pods = inf.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("kubelet simulator: the Pod informer did not sync")
	}
	for range workers {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			for k.next(ctx) {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
	return k, nil
}

// Stop ends the simulator and waits for its workers.
func (k *Kubelet) Stop() {
	k.stop()
	k.wg.Wait()
}

func (k *Kubelet) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil && ctx.Err() == nil {
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

func (k *Kubelet) sync(ctx context.Context, key string) error {
	obj, exists, err := k.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	pods := k.client.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		// The kubelet confirms a graceful deletion once the containers stopped.
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		return ignoreGone(err)
	}
	outcome := k.outcome(pod)
	if pod.Spec.NodeName == "" {
		if outcome == Unschedulable {
			if hasCondition(pod, corev1.PodScheduled, corev1.ConditionFalse) {
				return nil
			}
			p := pod.DeepCopy()
			setCondition(p, corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", "0/1 nodes are available: simulated")
			_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return ignoreGone(err)
		}
		err := pods.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: Node},
		}, metav1.CreateOptions{})
		if err != nil {
			return ignoreGone(err)
		}
		// The bound Pod comes back as an update event; the status follows from that one.
		return nil
	}
	if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
		return nil
	}
	p := pod.DeepCopy()
	now := metav1.NewTime(time.Now())
	switch outcome {
	case Pending:
		if pod.Status.Phase == corev1.PodPending {
			return nil
		}
		p.Status.Phase = corev1.PodPending
	case PullBackOff:
		if pod.Status.Phase == corev1.PodPending && len(pod.Status.ContainerStatuses) > 0 {
			return nil
		}
		pullBackOff(p)
	case Succeed, Fail:
		p.Status.Phase = corev1.PodSucceeded
		if outcome == Fail {
			p.Status.Phase = corev1.PodFailed
		}
		setCondition(p, corev1.PodReady, corev1.ConditionFalse, "PodCompleted", "")
	default:
		n := k.nextIP.Add(1)
		ip := fmt.Sprintf("10.%d.%d.%d", 64+(n>>16)&63, (n>>8)&255, n&255)
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		p.Status.HostIP = "192.0.2.1"
		p.Status.StartTime = &now
		setCondition(p, corev1.PodInitialized, corev1.ConditionTrue, "", "")
		setCondition(p, corev1.ContainersReady, corev1.ConditionTrue, "", "")
		setCondition(p, corev1.PodReady, corev1.ConditionTrue, "", "")
	}
	_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return ignoreGone(err)
}

// pullBackOff reports p as a kubelet does a Pod whose images cannot be pulled: Pending, each
// container waiting in ImagePullBackOff with the kubelet's message, and not Ready.
func pullBackOff(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: fmt.Sprintf("Back-off pulling image %q", c.Image)}},
		})
	}
	unready := fmt.Sprintf("containers with unready status: [%s]", strings.Join(names, " "))
	setCondition(p, corev1.PodInitialized, corev1.ConditionTrue, "", "")
	setCondition(p, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", unready)
	setCondition(p, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", unready)
}

func hasCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == s
		}
	}
	return false
}

func setCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus, reason, message string) {
	c := corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// ignoreGone treats a Pod that went away (or changed under us: the next event retries) as done.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
