package render

// DefaultClusterDomain is upstream's --cluster-domain default.
const DefaultClusterDomain = "cluster.local"

// Options are the knobs that are not part of any custom resource.
type Options struct {
	// ClusterDomain forms status.serviceFQDN (<svc>.<ns>.svc.<domain>); empty means cluster.local.
	ClusterDomain string
}

func (o Options) clusterDomain() string {
	if o.ClusterDomain == "" {
		return DefaultClusterDomain
	}
	return o.ClusterDomain
}
