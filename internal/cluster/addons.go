package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// addonsManager is the field manager the cluster applies its add-ons with.
const addonsManager = "sandbox-gitops-cluster"

// coreDNSManifest is the cluster's DNS: CoreDNS serving the cluster domain and the reverse zones
// from the API server, at the Service address kubelet gives every Pod. It has no forward plugin:
// a name outside the cluster is refused, never sent on. It listens on 53 as a non-root user with
// no capability, through the Pod's net.ipv4.ip_unprivileged_port_start (a safe sysctl): a
// NetworkPolicy that allows DNS names port 53, and the Pod's port must be that one.
func coreDNSManifest() string {
	return fmt.Sprintf(coreDNSYAML, clusterDomain, coreDNSImage, clusterDNSIP)
}

// coreDNSYAML is coreDNSManifest's text, its values as fmt verbs.
const coreDNSYAML = `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    %[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
        errors
        health :8080
        ready :8181
        kubernetes %[1]s in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext:
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "53"}]
      containers:
      - name: coredns
        image: %[2]s
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          capabilities: {drop: [ALL]}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: %[3]s
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 53, protocol: TCP}
`

// LocalPathStorageClass is the default StorageClass of a cluster with a real node.
const LocalPathStorageClass = "local-path"

// localPathManifest is rancher's local-path provisioner as its own deploy/local-path-storage.yaml
// installs it, with the node's images and a directory under the cluster's state directory: a
// PersistentVolumeClaim binds to a hostPath directory on the node that the provisioner's helper
// Pod makes, and that its teardown removes.
func localPathManifest(dir string) string {
	return fmt.Sprintf(localPathYAML, localPathImage, BusyboxImage, dir, LocalPathStorageClass)
}

// localPathYAML is localPathManifest's text, its values as fmt verbs.
const localPathYAML = `apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: local-path-provisioner, namespace: local-path-storage}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: local-path-provisioner, namespace: local-path-storage}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list, watch, create, patch, update, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: local-path-provisioner}
rules:
- {apiGroups: [""], resources: [nodes, persistentvolumeclaims, configmaps, pods, pods/log], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [persistentvolumes], verbs: [get, list, watch, create, patch, update, delete]}
- {apiGroups: [""], resources: [events], verbs: [create, patch]}
- {apiGroups: [storage.k8s.io], resources: [storageclasses], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: local-path-provisioner, namespace: local-path-storage}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: local-path-provisioner}
subjects: [{kind: ServiceAccount, name: local-path-provisioner, namespace: local-path-storage}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: local-path-provisioner}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: local-path-provisioner}
subjects: [{kind: ServiceAccount, name: local-path-provisioner, namespace: local-path-storage}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: local-path-provisioner, namespace: local-path-storage}
spec:
  replicas: 1
  selector: {matchLabels: {app: local-path-provisioner}}
  template:
    metadata: {labels: {app: local-path-provisioner}}
    spec:
      serviceAccountName: local-path-provisioner
      containers:
      - name: local-path-provisioner
        image: %[1]s
        imagePullPolicy: Never
        args: [--debug, start, --config, /etc/config/config.json, --service-account-name, local-path-provisioner, --helper-image, %[2]s]
        env:
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: CONFIG_MOUNT_PATH, value: /etc/config/}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          capabilities: {drop: [ALL]}
        volumeMounts: [{name: config, mountPath: /etc/config/}]
      volumes: [{name: config, configMap: {name: local-path-config}}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %[4]s
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: |-
    {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [%[3]q]}]}
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata:
      name: helper-pod
    spec:
      priorityClassName: system-node-critical
      tolerations:
      - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
      containers:
      - name: helper-pod
        image: %[2]s
        imagePullPolicy: Never
`

// apply server-side applies every object of a multi-document YAML stream.
func apply(ctx context.Context, d dynamic.Interface, disco discovery.DiscoveryInterface, manifest string) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(raw) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: raw}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		var r dynamic.ResourceInterface = d.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			r = d.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := r.Patch(ctx, u.GetName(), "application/apply-patch+yaml", bytes.Clone(data),
			metav1.PatchOptions{FieldManager: addonsManager, Force: &force}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
}

// kubeRouterRBAC is what kube-router's firewall reads: Pods, Namespaces, Nodes and
// NetworkPolicies (and Services, for its service-range rules), for its user system:kube-router.
const kubeRouterRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:kube-router"}
rules:
- {apiGroups: [""], resources: [pods, namespaces, nodes, services, endpoints], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
- {apiGroups: [networking.k8s.io], resources: [networkpolicies], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-router"}]
`
