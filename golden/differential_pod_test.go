package golden

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/renderconfig"
	"github.com/sandbox-gitops/sandbox-gitops/testkit/testenv"
)

// podFieldsBase is the Sandbox the Pod-field mutations change: one field of each kind they
// reach (env, resources, a mount of its own volume and of a volume claim template's, a port, a
// toleration), every one valid.
const podFieldsBase = `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: diff
  namespace: default
spec:
  podTemplate:
    spec:
      containers:
      - name: python
        image: python:3.12
        env:
        - {name: HOME, value: /root}
        ports:
        - {containerPort: 8888}
        resources:
          requests: {cpu: 100m, memory: 64Mi}
          limits: {cpu: "1", memory: 128Mi}
        volumeMounts:
        - {name: work, mountPath: /work}
      volumes:
      - {name: work, emptyDir: {}}
      tolerations:
      - {key: example.com/t, operator: Equal, value: v, effect: NoSchedule}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`

// podFieldsConfig is the SandboxRender the mutants render with: the defaults, under a name.
const podFieldsConfig = "apiVersion: " + renderconfig.APIVersion + "\nkind: " + renderconfig.Kind + "\nmetadata:\n  name: render\n"

// pt is where the pod template's spec is in a Sandbox, and so where most mutations write.
const pt = "spec.podTemplate.spec."

// podFieldMutation sets fields of podFieldsBase (or of podFieldsConfig) to values, and says what
// the API server does with the result.
type podFieldMutation struct {
	name string
	// set maps a field to the YAML of its new value. A field is a dotted path from the root of the
	// Sandbox (config. leads one of the SandboxRender), a number indexing a list; setting the item
	// one past the end of a list appends it.
	set     map[string]string
	refused bool
}

// podFieldMutations are the Pod fields a bad-input pass found accepted by the render and refused
// by the API server (issue 37), each next to values the API server accepts, so that the render
// is held to refuse no more than it does either.
var podFieldMutations = []podFieldMutation{
	// Env names: any printable ASCII but '=' (RelaxedEnvironmentVariableValidation, locked on).
	{"env name A=B", map[string]string{pt + "containers.0.env.0.name": `"A=B"`}, true},
	{"env name =", map[string]string{pt + "containers.0.env.0.name": `"="`}, true},
	{"env name empty", map[string]string{pt + "containers.0.env.0.name": `""`}, true},
	{"env name newline", map[string]string{pt + "containers.0.env.0.name": `"a\nb"`}, true},
	{"env name ä", map[string]string{pt + "containers.0.env.0.name": `"ä"`}, true},
	{"env name tab", map[string]string{pt + "containers.0.env.0.name": `"a\tb"`}, true},
	{"env name with a space", map[string]string{pt + "containers.0.env.0.name": `"A B"`}, false},
	{"env name a digit first", map[string]string{pt + "containers.0.env.0.name": `"1abc"`}, false},
	{"env name punctuation", map[string]string{pt + "containers.0.env.0.name": `"my.env-name:{x}"`}, false},
	{"env valueFrom empty", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {}}`}, true},
	{"env value and valueFrom", map[string]string{pt + "containers.0.env.0": `{name: X, value: v, valueFrom: {fieldRef: {fieldPath: metadata.name}}}`}, true},
	{"env two sources", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {fieldRef: {fieldPath: metadata.name}, secretKeyRef: {name: s, key: k}}}`}, true},
	{"env fieldRef", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {fieldRef: {fieldPath: metadata.name}}}`}, false},
	{"env fieldRef status.phase", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {fieldRef: {fieldPath: status.phase}}}`}, true},
	{"env fieldRef a label", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}`}, false},
	{"env fieldRef a bad label key", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {fieldRef: {fieldPath: "metadata.labels['a b']"}}}`}, true},
	{"env fieldRef apiVersion v2", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {fieldRef: {apiVersion: v2, fieldPath: metadata.name}}}`}, true},
	{"env configMapKeyRef bad name", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {configMapKeyRef: {name: Bad_Name, key: k}}}`}, true},
	{"env secretKeyRef bad key", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {secretKeyRef: {name: s, key: "a/b"}}}`}, true},
	{"env secretKeyRef", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {secretKeyRef: {name: s, key: k.pem}}}`}, false},
	{"env resourceFieldRef unknown", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {resourceFieldRef: {resource: limits.gpu}}}`}, true},
	{"env resourceFieldRef", map[string]string{pt + "containers.0.env.0": `{name: X, valueFrom: {resourceFieldRef: {resource: limits.memory}}}`}, false},
	{"envFrom prefix with =", map[string]string{pt + "containers.0.envFrom": `[{prefix: "A=", configMapRef: {name: c}}]`}, true},
	{"envFrom two sources", map[string]string{pt + "containers.0.envFrom": `[{configMapRef: {name: c}, secretRef: {name: s}}]`}, true},
	{"envFrom no source", map[string]string{pt + "containers.0.envFrom": `[{prefix: P_}]`}, true},
	{"envFrom", map[string]string{pt + "containers.0.envFrom": `[{prefix: "P_", secretRef: {name: s}}]`}, false},

	// Resources.
	{"request negative", map[string]string{pt + "containers.0.resources.requests.cpu": `"-1"`}, true},
	{"request above its limit", map[string]string{pt + "containers.0.resources.requests.memory": `256Mi`}, true},
	{"request at its limit", map[string]string{pt + "containers.0.resources.requests.cpu": `"1"`}, false},
	{"resource bogus.resource", map[string]string{pt + "containers.0.resources.requests.bogus\\.resource": `"1"`}, true},
	{"resource pods", map[string]string{pt + "containers.0.resources.requests.pods": `"1"`}, true},
	{"resource a/b/c", map[string]string{pt + "containers.0.resources.requests.a/b/c": `"1"`}, true},
	{"resource in kubernetes.io", map[string]string{pt + "containers.0.resources.requests.kubernetes\\.io/foo": `"1"`}, false},
	{"GPU request without a limit", map[string]string{pt + "containers.0.resources.requests.example\\.com/gpu": `"1"`}, true},
	{"GPU limit alone", map[string]string{pt + "containers.0.resources.limits.example\\.com/gpu": `"1"`}, false},
	{"GPU request below its limit", map[string]string{pt + "containers.0.resources": `{requests: {example.com/gpu: "1"}, limits: {example.com/gpu: "2"}}`}, true},
	{"GPU request at its limit", map[string]string{pt + "containers.0.resources": `{requests: {example.com/gpu: "1"}, limits: {example.com/gpu: "1"}}`}, false},
	{"GPU fraction", map[string]string{pt + "containers.0.resources.limits.example\\.com/gpu": `500m`}, true},
	{"huge pages not whole", map[string]string{pt + "containers.0.resources.limits.hugepages-2Mi": `3Mi`}, true},
	{"huge pages", map[string]string{pt + "containers.0.resources.limits.hugepages-2Mi": `4Mi`}, false},
	{"huge pages alone", map[string]string{pt + "containers.0.resources": `{limits: {hugepages-2Mi: 4Mi}}`}, true},

	// Mounts.
	{"mount of no volume", map[string]string{pt + "containers.0.volumeMounts.0.name": `nothing`}, true},
	{"mount without a name", map[string]string{pt + "containers.0.volumeMounts.0.name": `""`}, true},
	{"mount of a volume claim template", map[string]string{pt + "containers.0.volumeMounts.0.name": `data`}, false},
	{"mount path twice", map[string]string{pt + "containers.0.volumeMounts.1": `{name: data, mountPath: /work}`}, true},
	{"subPath with ..", map[string]string{pt + "containers.0.volumeMounts.0.subPath": `../x`}, true},
	{"subPath absolute", map[string]string{pt + "containers.0.volumeMounts.0.subPath": `/x`}, true},
	{"subPath", map[string]string{pt + "containers.0.volumeMounts.0.subPath": `x/y`}, false},
	{"subPath and subPathExpr", map[string]string{pt + "containers.0.volumeMounts.0.subPath": `x`, pt + "containers.0.volumeMounts.0.subPathExpr": `$(HOME)`}, true},
	{"Bidirectional unprivileged", map[string]string{pt + "containers.0.volumeMounts.0.mountPropagation": `Bidirectional`}, true},
	{"mountPropagation unknown", map[string]string{pt + "containers.0.volumeMounts.0.mountPropagation": `Sideways`}, true},
	{"HostToContainer", map[string]string{pt + "containers.0.volumeMounts.0.mountPropagation": `HostToContainer`}, false},
	{"recursiveReadOnly without readOnly", map[string]string{pt + "containers.0.volumeMounts.0.recursiveReadOnly": `Enabled`}, true},

	// The Pod's own fields.
	{"restartPolicy Sometimes", map[string]string{pt + "restartPolicy": `Sometimes`}, true},
	{"restartPolicy OnFailure", map[string]string{pt + "restartPolicy": `OnFailure`}, false},
	{"toleration operator", map[string]string{pt + "tolerations.0.operator": `Bogus`}, true},
	{"toleration operator Lt", map[string]string{pt + "tolerations.0": `{key: k, operator: Lt, value: "5"}`}, true},
	{"toleration effect", map[string]string{pt + "tolerations.0.effect": `Sometimes`}, true},
	{"toleration key", map[string]string{pt + "tolerations.0.key": `bad key`}, true},
	{"toleration Exists with a value", map[string]string{pt + "tolerations.0": `{key: k, operator: Exists, value: x}`}, true},
	{"toleration of everything", map[string]string{pt + "tolerations.0": `{operator: Exists}`}, false},
	{"toleration no key, Equal", map[string]string{pt + "tolerations.0": `{operator: Equal}`}, true},
	{"toleration seconds without NoExecute", map[string]string{pt + "tolerations.0.tolerationSeconds": `5`}, true},
	{"toleration seconds", map[string]string{pt + "tolerations.0": `{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 5}`}, false},
	{"toleration bad value", map[string]string{pt + "tolerations.0.value": `a b`}, true},
	{"runAsUser -1", map[string]string{pt + "securityContext": `{runAsUser: -1}`}, true},
	{"runAsUser 1000", map[string]string{pt + "securityContext": `{runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000}`}, false},
	{"fsGroup -1", map[string]string{pt + "securityContext": `{fsGroup: -1}`}, true},
	{"supplementalGroups -1", map[string]string{pt + "securityContext": `{supplementalGroups: [-1]}`}, true},
	{"fsGroupChangePolicy", map[string]string{pt + "securityContext": `{fsGroupChangePolicy: Sometimes}`}, true},
	{"seccomp Localhost without a profile", map[string]string{pt + "securityContext": `{seccompProfile: {type: Localhost}}`}, true},
	{"seccomp RuntimeDefault", map[string]string{pt + "securityContext": `{seccompProfile: {type: RuntimeDefault}}`}, false},
	{"container runAsGroup -1", map[string]string{pt + "containers.0.securityContext": `{runAsGroup: -1}`}, true},
	{"privileged without escalation", map[string]string{pt + "containers.0.securityContext": `{allowPrivilegeEscalation: false, privileged: true}`}, true},
	{"procMount Unmasked with host users", map[string]string{pt + "containers.0.securityContext": `{procMount: Unmasked}`}, true},
	{"activeDeadlineSeconds -5", map[string]string{pt + "activeDeadlineSeconds": `-5`}, true},
	{"activeDeadlineSeconds 0", map[string]string{pt + "activeDeadlineSeconds": `0`}, true},
	{"activeDeadlineSeconds 60", map[string]string{pt + "activeDeadlineSeconds": `60`}, false},
	{"hostname", map[string]string{pt + "hostname": `Bad_Host`}, true},
	{"hostname a label", map[string]string{pt + "hostname": `my-host`}, false},
	{"subdomain", map[string]string{pt + "subdomain": `a.b`}, true},
	{"subdomain a label", map[string]string{pt + "subdomain": `svc`}, false},
	{"hostnameOverride", map[string]string{pt + "hostnameOverride": `Bad_Host`}, true},
	{"dnsPolicy", map[string]string{pt + "dnsPolicy": `Bogus`}, true},
	{"dnsPolicy None alone", map[string]string{pt + "dnsPolicy": `None`}, true},
	{"dnsPolicy None", map[string]string{pt + "dnsPolicy": `None`, pt + "dnsConfig": `{nameservers: [10.0.0.10], searches: [svc.cluster.local]}`}, false},
	{"dnsConfig nameserver", map[string]string{pt + "dnsConfig": `{nameservers: [not-an-ip]}`}, true},
	{"nodeSelector key", map[string]string{pt + "nodeSelector": `{"bad key": x}`}, true},
	{"serviceAccountName", map[string]string{pt + "serviceAccountName": `Bad_SA`}, true},
	{"serviceAccount", map[string]string{pt + "serviceAccount": `Bad_SA`}, true},
	{"hostAliases ip", map[string]string{pt + "hostAliases": `[{ip: "1.2.3", hostnames: [a]}]`}, true},
	{"hostAliases", map[string]string{pt + "hostAliases": `[{ip: "10.1.2.3", hostnames: [a.example.com]}]`}, false},
	{"terminationGracePeriodSeconds -1", map[string]string{pt + "terminationGracePeriodSeconds": `-1`}, false},
	{"readinessGates", map[string]string{pt + "readinessGates": `[{conditionType: "bad type!"}]`}, true},
	{"schedulingGates repeated", map[string]string{pt + "schedulingGates": `[{name: example.com/a}, {name: example.com/a}]`}, true},
	{"os", map[string]string{pt + "os": `{name: plan9}`}, true},
	{"preemptionPolicy", map[string]string{pt + "preemptionPolicy": `Sometimes`}, true},
	{"hostNetwork with another hostPort", map[string]string{pt + "hostNetwork": `true`, pt + "containers.0.ports.0.hostPort": `9999`}, true},
	{"hostNetwork", map[string]string{pt + "hostNetwork": `true`}, false},
	{"shareProcessNamespace with hostPID", map[string]string{pt + "shareProcessNamespace": `true`, pt + "hostPID": `true`}, true},
	{"hostUsers false with hostIPC", map[string]string{pt + "hostUsers": `false`, pt + "hostIPC": `true`}, true},
	{"one host port twice", map[string]string{pt + "containers.0.ports.0.hostPort": `9999`, pt + "containers.1": `{name: b, image: busybox, ports: [{containerPort: 80, hostPort: 9999}]}`}, true},

	// A container's own fields.
	{"imagePullPolicy", map[string]string{pt + "containers.0.imagePullPolicy": `Sometimes`}, true},
	{"terminationMessagePolicy", map[string]string{pt + "containers.0.terminationMessagePolicy": `Bogus`}, true},
	{"probe without a handler", map[string]string{pt + "containers.0.livenessProbe": `{periodSeconds: 5}`}, true},
	{"probe with two handlers", map[string]string{pt + "containers.0.livenessProbe": `{exec: {command: ["true"]}, tcpSocket: {port: 8888}}`}, true},
	{"liveness successThreshold 2", map[string]string{pt + "containers.0.livenessProbe": `{tcpSocket: {port: 8888}, successThreshold: 2}`}, true},
	{"readiness successThreshold 2", map[string]string{pt + "containers.0.readinessProbe": `{tcpSocket: {port: 8888}, successThreshold: 2}`}, false},
	{"probe negative period", map[string]string{pt + "containers.0.livenessProbe": `{tcpSocket: {port: 8888}, periodSeconds: -1}`}, true},
	{"probe port 0", map[string]string{pt + "containers.0.livenessProbe": `{httpGet: {port: 0}}`}, true},
	{"probe httpGet", map[string]string{pt + "containers.0.livenessProbe": `{httpGet: {port: http-alt}}`}, false},
	{"probe exec without a command", map[string]string{pt + "containers.0.startupProbe": `{exec: {}}`}, true},
	{"readiness grace period", map[string]string{pt + "containers.0.readinessProbe": `{exec: {command: ["true"]}, terminationGracePeriodSeconds: 5}`}, true},
	{"preStop sleep past the grace period", map[string]string{pt + "containers.0.lifecycle": `{preStop: {sleep: {seconds: 60}}}`}, true},
	{"preStop sleep", map[string]string{pt + "containers.0.lifecycle": `{preStop: {sleep: {seconds: 5}}}`}, false},
	{"postStart without a handler", map[string]string{pt + "containers.0.lifecycle": `{postStart: {}}`}, true},
	{"init container with a probe", map[string]string{pt + "initContainers": `[{name: init, image: busybox, livenessProbe: {exec: {command: ["true"]}}}]`}, true},
	{"sidecar with a probe", map[string]string{pt + "initContainers": `[{name: init, image: busybox, restartPolicy: Always, livenessProbe: {exec: {command: ["true"]}}}]`}, false},

	// Object metadata, and the SandboxRender's name.
	{"ownerReference unknown key", map[string]string{"metadata.ownerReferences": `[{apiVersion: v1, kind: ConfigMap, name: c, uid: u, owner: me}]`}, true},
	{"ownerReference without a uid", map[string]string{"metadata.ownerReferences": `[{apiVersion: v1, kind: ConfigMap, name: c}]`}, true},
	{"ownerReference", map[string]string{"metadata.ownerReferences": `[{apiVersion: v1, kind: ConfigMap, name: c, uid: u}]`}, false},
	{"SandboxRender named a/b", map[string]string{"config.metadata.name": `a/b`}, true},
	{"SandboxRender named in capitals", map[string]string{"config.metadata.name": `Render`}, true},
}

// TestDifferentialPodFields holds the render to the API server on the Pod fields of issue 37:
// each mutation of podFieldMutations gets the same verdict from the render (rendered, or
// refused with findings) as from a real kube-apiserver (every object created with a server-side
// dry run under strict field validation, kubectl's default, or one refused). What the API
// server is given is what the render would have written: the mutated Sandbox, its Pod (the
// rendered Pod of the base with the same mutation: the render copies the pod template's spec,
// volume claim templates' volumes added at the end), and the copy of the SandboxRender.
func TestDifferentialPodFields(t *testing.T) {
	base := yamlObject(t, podFieldsBase)
	baseConfig := yamlObject(t, podFieldsConfig)
	baseObjs, ok := renderMutant(mutant{stream: encodeAll(t, []*unstructured.Unstructured{base}), config: []byte(podFieldsConfig)})
	if !ok {
		t.Fatal("the base Sandbox does not render")
	}
	var basePod *unstructured.Unstructured
	for _, o := range baseObjs {
		if o.GetKind() == "Pod" {
			basePod = o
		}
	}
	if basePod == nil {
		t.Fatal("the base Sandbox renders no Pod")
	}

	cfg, _ := testenv.StartAPIServer(t)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d := &dryRunner{c: c, strict: true, created: map[string]error{}}

	agree := 0
	for _, m := range append([]podFieldMutation{{name: "base"}}, podFieldMutations...) {
		sb, pod, config := base.DeepCopy(), basePod.DeepCopy(), baseConfig.DeepCopy()
		for path, value := range m.set {
			v := yamlValue(t, value)
			switch {
			case strings.HasPrefix(path, "config."):
				setPath(t, config.Object, strings.TrimPrefix(path, "config."), v)
			case strings.HasPrefix(path, pt):
				setPath(t, sb.Object, path, v)
				setPath(t, pod.Object, "spec."+strings.TrimPrefix(path, pt), runtime.DeepCopyJSONValue(v))
			default:
				setPath(t, sb.Object, path, v)
			}
		}
		configText, err := yaml.Marshal(config.Object)
		if err != nil {
			t.Fatal(err)
		}
		rendered, renderErr := renderMutantErr(mutant{stream: encodeAll(t, []*unstructured.Unstructured{sb}), config: configText})
		renderOK := renderErr == nil
		// As the CLI writes the config's copy beside the objects it renders.
		copyOf := &unstructured.Unstructured{Object: map[string]any{"apiVersion": renderconfig.APIVersion, "kind": renderconfig.Kind,
			"metadata": map[string]any{"name": config.GetName(), "namespace": "default"}}}
		objs := []*unstructured.Unstructured{sb, pod, copyOf}
		if renderOK {
			objs = append(rendered, copyOf)
		}
		var refusals []string
		for _, o := range objs {
			if unknown, err := d.create(ctx, o); unknown {
				t.Fatalf("%s: the API server does not know %s", m.name, o.GetKind())
			} else if err != nil {
				refusals = append(refusals, fmt.Sprintf("%s %s: %v", o.GetKind(), describeObject(o), err))
			}
		}
		apiOK := len(refusals) == 0
		switch {
		case renderOK && !apiOK:
			t.Errorf("%s: the render accepted what the API server refuses: %s", m.name, strings.Join(refusals, "; "))
		case !renderOK && apiOK:
			t.Errorf("%s: the render refused what the API server accepts: %v", m.name, renderErr)
		default:
			agree++
		}
		if apiOK == m.refused {
			t.Errorf("%s: the API server %s it, the table says otherwise: %s", m.name, map[bool]string{true: "accepts", false: "refuses"}[apiOK], strings.Join(refusals, "; "))
		}
	}
	t.Logf("%d Pod-field mutations and the base: %d verdicts agree", len(podFieldMutations), agree)
}

// yamlObject is the object a YAML document holds.
func yamlObject(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	m, ok := yamlValue(t, doc).(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", doc)
	}
	return &unstructured.Unstructured{Object: m}
}

// yamlValue is the value a YAML text holds, its whole numbers int64 as a decoded object holds
// them.
func yamlValue(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	var whole func(any) any
	whole = func(v any) any {
		switch x := v.(type) {
		case float64:
			if x == float64(int64(x)) {
				return int64(x)
			}
		case map[string]any:
			for k, e := range x {
				x[k] = whole(e)
			}
		case []any:
			for i, e := range x {
				x[i] = whole(e)
			}
		}
		return v
	}
	return whole(v)
}

// setPath sets the field a dotted path names (a number indexes a list, one past its end
// appends; `\.` is a dot inside a key), creating the mappings on the way.
func setPath(t *testing.T, root map[string]any, path string, value any) {
	t.Helper()
	keys := strings.Split(strings.ReplaceAll(path, `\.`, "\x00"), ".")
	for i := range keys {
		keys[i] = strings.ReplaceAll(keys[i], "\x00", ".")
	}
	var cur any = root
	for i, k := range keys {
		last := i == len(keys)-1
		switch node := cur.(type) {
		case map[string]any:
			if last {
				node[k] = value
				return
			}
			next, ok := node[k]
			if !ok {
				if _, err := strconv.Atoi(keys[i+1]); err == nil {
					next = []any{}
				} else {
					next = map[string]any{}
				}
				node[k] = next
			}
			if l, isList := next.([]any); isList {
				// A list grows in place only through its parent.
				j, err := strconv.Atoi(keys[i+1])
				if err != nil {
					t.Fatalf("%s: %s is a list", path, k)
				}
				if j == len(l) {
					l = append(l, map[string]any{})
					node[k] = l
				}
			}
			cur = node[k]
		case []any:
			j, err := strconv.Atoi(k)
			if err != nil || j >= len(node) {
				t.Fatalf("%s: no item %s", path, k)
			}
			if last {
				node[j] = value
				return
			}
			cur = node[j]
		default:
			t.Fatalf("%s: %s is not a mapping or a list", path, strings.Join(keys[:i], "."))
		}
	}
}
