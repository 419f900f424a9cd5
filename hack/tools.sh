#!/usr/bin/env bash
# Builds the real test and generation tools (kube-apiserver, etcd, kustomize, controller-gen, helm,
# for `make cluster` kube-controller-manager, kube-scheduler and kwok, for its real node kubelet,
# kube-proxy, CoreDNS, the local-path provisioner and kube-router (its NetworkPolicy firewall), and distribution's registry for the image
# push test) from the Go module
# proxy, each from a wrapper module under hack/tools/ (kube-controller-manager and kube-scheduler
# share hack/tools/kube-control-plane, which pins the same Kubernetes as hack/tools/kube-apiserver),
# so that none of their dependencies enter the main module's go.mod or its test builds.
# Upstream agent-sandbox's e2e suite is built the same way, as two test binaries (`go test -c`,
# tools named *.test, from hack/tools/agent-sandbox-e2e) for `make e2e-upstream`; they are not
# among the default tools. Upstream's controller itself (cmd/agent-sandbox-controller of the same
# version, tool agent-sandbox-controller, from hack/tools/agent-sandbox-controller) is a default tool:
# `make bench-scale` runs it beside ours (SANDBOX_SCALE_CONTROLLERS). It has a wrapper of its own so
# that its go.sum, and so its hash, is not the e2e binaries' (a change to one rebuilds only it).
# Upstream's sandbox runtime daemon (packages/sandboxd/cmd/sandboxd of the same version, tool
# sandboxd, from hack/tools/sandboxd) is a default tool too: `make e2e-upstream-node` builds
# upstream's sandboxd image from it, with Debian's busybox as its shell, for the real node.
#
# Binaries are cached outside the clone, keyed by a hash of everything that goes into them (the
# wrapper's go.mod and go.sum, the ldflags and the Go version), so a fresh clone on a machine that
# built them before skips the build. ./bin holds symlinks to the cached binaries and is what
# KUBEBUILDER_ASSETS points at.
#
# Usage: hack/tools.sh [TOOL...]   (default: all tools)
# Environment: SANDBOX_GITOPS_TOOLS_CACHE overrides the cache directory.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

export CGO_ENABLED=0
# Keep whatever GOFLAGS the machine sets and never let a build rewrite a wrapper's go.mod.
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

cache=${SANDBOX_GITOPS_TOOLS_CACHE:-$(go env GOPATH)/sandbox-gitops-tools}
bin="$root/bin"
mkdir -p "$cache" "$bin"

k8s_version=v1.37.2
v=k8s.io/component-base/version
declare -A pkg=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [etcd]=go.etcd.io/etcd/server/v3
  [kustomize]=sigs.k8s.io/kustomize/kustomize/v5
  [controller-gen]=sigs.k8s.io/controller-tools/cmd/controller-gen
  [helm]=helm.sh/helm/v3/cmd/helm
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [registry]=github.com/distribution/distribution/v3/cmd/registry
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
  [coredns]=github.com/coredns/coredns
  [local-path-provisioner]=github.com/rancher/local-path-provisioner
  [kube-router]=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  [agent-sandbox-e2e.test]=sigs.k8s.io/agent-sandbox/test/e2e
  [agent-sandbox-e2e-extensions.test]=sigs.k8s.io/agent-sandbox/test/e2e/extensions
  [agent-sandbox-controller]=sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
  [sandboxd]=sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd
)
# The wrapper module of a tool, when it is not hack/tools/<tool>.
declare -A wrapper=(
  [kube-controller-manager]=kube-control-plane
  [kube-scheduler]=kube-control-plane
  [kubelet]=kube-node
  [kube-proxy]=kube-node
  [agent-sandbox-e2e.test]=agent-sandbox-e2e
  [agent-sandbox-e2e-extensions.test]=agent-sandbox-e2e
)
k8s_ldflags="-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
declare -A ldflags=(
  [kube-apiserver]="-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
  [etcd]="-s -w"
  [kustomize]="-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v5.8.2"
  [controller-gen]="-s -w"
  [registry]="-s -w -X github.com/distribution/distribution/v3/version.version=v3.1.2"
  # As helm's own Makefile sets them: its version, and the Kubernetes version that `helm template`
  # and `helm lint` assume (.Capabilities.KubeVersion), from the client-go it is built with.
  [helm]="-s -w -X helm.sh/helm/v3/internal/version.version=v3.22.0 -X helm.sh/helm/v3/internal/version.gitTreeState=clean -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
  [kube-controller-manager]="$k8s_ldflags"
  [kube-scheduler]="$k8s_ldflags"
  [kwok]="-s -w"
  [kubelet]="$k8s_ldflags"
  [kube-proxy]="$k8s_ldflags"
  [coredns]="-s -w"
  [local-path-provisioner]="-s -w -X main.VERSION=v0.0.30"
  [kube-router]="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v2.1.0"
  [agent-sandbox-e2e.test]="-s -w"
  [agent-sandbox-e2e-extensions.test]="-s -w"
  # As upstream's Makefile stamps its version (`agent-sandbox-controller --version`); no build date,
  # so that the binary depends on its inputs only.
  [agent-sandbox-controller]="-s -w -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=v1.0.1"
  # As upstream's sandboxd Dockerfile stamps it (GIT_VERSION), without the build date.
  [sandboxd]="-s -w -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=v1.0.1"
)

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(kube-apiserver etcd kustomize controller-gen helm kube-controller-manager kube-scheduler kwok registry kubelet kube-proxy coredns local-path-provisioner kube-router agent-sandbox-controller sandboxd)

# kwok's binary has no stages built in: kwokctl hands it its default ones (fake nodes become Ready
# and keep a lease, Pods on them become Running and Ready with an IP, deletions complete) in a
# config file. Those stages are YAML files in the same kwok module, so they are taken from the
# module the binary was built from and cached beside it: bin/kwok-stages.
kwok_stages=(
  kustomize/stage/node/fast/node-initialize.yaml
  kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  kustomize/stage/pod/fast/pod-ready.yaml
  kustomize/stage/pod/fast/pod-complete.yaml
  kustomize/stage/pod/fast/pod-delete.yaml
)

# The real node's runtime comes from Debian's packages: containerd (with ctr), runc, the CNI
# plugins, busybox-static (the volume provisioner's helper shell), iptables and iproute2. They are
# installed only when missing, and only as root (the node needs root anyway).
node_packages() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  [ -x /bin/busybox ] || need+=(busybox-static)
  command -v iptables >/dev/null || need+=(iptables)
  command -v ip >/dev/null || need+=(iproute2)
  command -v ipset >/dev/null || need+=(ipset)
  apt_install "the real node" "${need[@]}"
}

# apt_install FOR PACKAGE...: installs the Debian packages given (none: nothing to do) with
# apt-get, as root; otherwise says what FOR needs and goes on.
apt_install() {
  local what=$1
  shift
  [ $# -gt 0 ] || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "tools: $what needs $* (Debian packages); install them as root" >&2
    return 0
  fi
  echo "tools: installing $* with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
case " ${tools[*]} " in *" kubelet "*) node_packages ;; esac

# Upstream's Python SDK, which `make e2e-upstream-node` runs from the module cache, needs the
# Kubernetes client and prometheus_client: Debian's python3-kubernetes and
# python3-prometheus-client (its pydantic 2 is the interpreter's; Debian 12 has only 1.x).
sdk_packages() {
  local need=()
  [ -d /usr/lib/python3/dist-packages/kubernetes ] || need+=(python3-kubernetes)
  [ -d /usr/lib/python3/dist-packages/prometheus_client ] || need+=(python3-prometheus-client)
  apt_install "upstream's Python SDK" "${need[@]}"
}
case " ${tools[*]} " in *" sandboxd "*) sdk_packages ;; esac

for tool in "${tools[@]}"; do
  [ -n "${pkg[$tool]:-}" ] || { echo "hack/tools.sh: unknown tool $tool" >&2; exit 2; }
  dir="hack/tools/${wrapper[$tool]:-$tool}"
  key=$( { cat "$dir/go.mod" "$dir/go.sum"; echo "${ldflags[$tool]}"; go env GOVERSION; } | sha256sum | cut -c1-16)
  out="$cache/$tool-$key/$tool"
  if [ -x "$out" ]; then
    echo "tools: $tool up to date ($out)"
  else
    echo "tools: building $tool (${pkg[$tool]})"
    [ "$tool" != kube-apiserver ] || echo "tools: the first kube-apiserver build takes 5-8 minutes on 2 cores"
    start=$SECONDS
    tmp="$out.tmp.$$"
    mkdir -p "$(dirname "$out")"
    case "$tool" in
      *.test) (cd "$dir" && go test -c -trimpath -ldflags="${ldflags[$tool]}" -o "$tmp" "${pkg[$tool]}") ;;
      *) (cd "$dir" && go build -trimpath -ldflags="${ldflags[$tool]}" -o "$tmp" "${pkg[$tool]}") ;;
    esac
    if [ "$tool" = kwok ]; then
      src=$(cd "$dir" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
      rm -rf "$out-stages" && mkdir -p "$out-stages"
      for f in "${kwok_stages[@]}"; do cp "$src/$f" "$out-stages/"; done
      chmod -R u+w "$out-stages"
    fi
    mv "$tmp" "$out"
    echo "tools: built $tool in $((SECONDS - start))s"
  fi
  ln -sfn "$out" "$bin/$tool"
  [ "$tool" != kwok ] || ln -sfn "$out-stages" "$bin/kwok-stages"
done

echo "KUBEBUILDER_ASSETS=$bin"
