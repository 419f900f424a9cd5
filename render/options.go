package render

import (
	"time"

	"github.com/sandbox-gitops/sandbox-gitops/policies"
)

// defaultClusterDomain is upstream's --cluster-domain default.
const defaultClusterDomain = "cluster.local"

// defaultAllowedLabelDomain is the label domain upstream lets claims' additionalPodMetadata use
// when none is configured.
const defaultAllowedLabelDomain = "sandbox.users.io"

// Options are the knobs that are not part of any custom resource.
type Options struct {
	// ClusterDomain forms status.serviceFQDN (<svc>.<ns>.svc.<domain>); empty means cluster.local.
	ClusterDomain string
	// Policies are the secure defaults' knobs and the opt-in policy packs.
	Policies policies.Config
	// AllowedLabelDomains are the domains (and their subdomains) claims may use for
	// additionalPodMetadata labels; empty means sandbox.users.io, as upstream.
	AllowedLabelDomains []string
	// DisableWarmPoolEviction stops marking warm pool pods safe to evict for the cluster
	// autoscaler (upstream's --enable-warm-pool-eviction=false).
	DisableWarmPoolEviction bool
	// PoolMemberNames, keyed by "namespace/pool", are the names of a pool's member Sandboxes, as a
	// controller knows them. A pool without an entry gets deterministic names from
	// PoolMemberName. Upstream uses generateName, which server-side apply cannot create.
	PoolMemberNames map[string][]string
	// Now, when set, is the moment the render previews: a Sandbox whose shutdownTime has passed
	// by then renders what a controller leaves of it (see Expiring). Unset, the render is
	// time-free, which is what a Git repository wants; a controller always knows the time.
	Now *time.Time
	// MaxPoolReplicas is the most members one SandboxWarmPool may render; a pool asking for more
	// is a field error on its spec.replicas, reported before any member is allocated. 0 means
	// defaultMaxPoolReplicas. The schema allows up to 2^31-1 replicas, which a render would try to
	// hold in memory (replicas: 2147483647 died out of memory in 0.2 s).
	MaxPoolReplicas int32
	// MaxPoolMembers is the most members all the pools of one render may ask for together; more
	// is an error before any member is allocated. 0 means defaultMaxPoolMembers. Memory grows by
	// about 49 KB per member, so without it many pools under MaxPoolReplicas each could still
	// exhaust a CI runner.
	MaxPoolMembers int64
	// ClaimReadyDeadline is how long a claim's Sandbox may stay not Ready, from the claim's
	// creation or its last Ready, before the claim's Ready condition says it will not become
	// Ready by itself (reason ProgressDeadlineExceeded). 0 means defaultClaimReadyDeadline; a
	// SandboxRender's spec.claimReadyDeadlineSeconds sets it.
	ClaimReadyDeadline time.Duration
	// Upstream are the controller's switches for upstream's annotations (--upstream-annotations);
	// no render config sets them, and the function's render writes no annotations of them.
	Upstream UpstreamAnnotations
}

// defaultClaimReadyDeadline is the default of Options.ClaimReadyDeadline: a Deployment's default
// progressDeadlineSeconds, and a pool's. It is twice upstream's 5-minute grace for a pool member
// that never becomes Ready, and long enough for a multi-gigabyte agent image pulled on a cold
// node, which a shorter deadline would report as stuck while it is only slow.
const defaultClaimReadyDeadline = 10 * time.Minute

func (o Options) claimReadyDeadline() time.Duration {
	if o.ClaimReadyDeadline <= 0 {
		return defaultClaimReadyDeadline
	}
	return o.ClaimReadyDeadline
}

// defaultMaxPoolMembers is the default of Options.MaxPoolMembers: two full pools, about 1 GB.
const defaultMaxPoolMembers = 20000

func (o Options) maxPoolMembers() int64 {
	if o.MaxPoolMembers <= 0 {
		return defaultMaxPoolMembers
	}
	return o.MaxPoolMembers
}

// defaultMaxPoolReplicas is the default of Options.MaxPoolReplicas: larger than any warm pool we
// know of, small enough that its render (about 40,000 objects) fits in a CI runner's memory.
const defaultMaxPoolReplicas = 10000

func (o Options) maxPoolReplicas() int32 {
	if o.MaxPoolReplicas <= 0 {
		return defaultMaxPoolReplicas
	}
	return o.MaxPoolReplicas
}

func (o Options) allowedLabelDomains() []string {
	if len(o.AllowedLabelDomains) == 0 {
		return []string{defaultAllowedLabelDomain}
	}
	return o.AllowedLabelDomains
}

func (o Options) clusterDomain() string {
	if o.ClusterDomain == "" {
		return defaultClusterDomain
	}
	return o.ClusterDomain
}
