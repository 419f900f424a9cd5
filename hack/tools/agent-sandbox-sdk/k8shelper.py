"""Upstream agent-sandbox's Python SDK (clients/python/agentic-sandbox-client of v1.0.1, from the
Go module cache) on its K8sHelper path, as SandboxClient.create_sandbox takes it, with the
defaults that method declares: create a claim on a warm pool, wait until it is Ready, resolve the
Sandbox's name, then delete the claim. e2e/upstream_test.go runs it on the real node against
this repository's controller.

Usage: python3 k8shelper.py SDK_DIR WARMPOOL   (KUBECONFIG names the cluster)

Each step's latency is printed as a line "sdk-step<TAB>step<TAB>milliseconds ms"; any failure raises,
and the exit status is not 0.
"""

import inspect
import sys
import time
import uuid

sdk_dir, warmpool = sys.argv[1], sys.argv[2]
sys.path.insert(0, sdk_dir)
# Debian's python3-kubernetes (and python3-prometheus-client, which the SDK's package imports),
# after the interpreter's own packages, so that those win where both have one (pydantic 2, which
# the SDK needs and Debian 12 does not have, comes from the interpreter's).
sys.path.append("/usr/lib/python3/dist-packages")

from k8s_agent_sandbox.k8s_helper import K8sHelper  # noqa: E402
from k8s_agent_sandbox.sandbox_client import SandboxClient  # noqa: E402


def step(name, f):
    start = time.monotonic()
    result = f()
    print(f"sdk-step\t{name}\t{(time.monotonic() - start) * 1000:.1f} ms", flush=True)
    return result


# The defaults of SandboxClient.create_sandbox, read from the SDK rather than repeated here.
params = inspect.signature(SandboxClient.create_sandbox).parameters
namespace = params["namespace"].default
timeout = params["sandbox_ready_timeout"].default
print(f"defaults: namespace={namespace!r} sandbox_ready_timeout={timeout}", flush=True)

helper = step("K8sHelper() (kubeconfig)", K8sHelper)
# The name create_sandbox gives a claim.
claim = f"sandbox-claim-{uuid.uuid4().hex[:8]}"
created = step("create the claim", lambda: helper.create_sandbox_claim(claim, warmpool, namespace))
rv = (created.get("metadata") or {}).get("resourceVersion")
try:
    ready_name = step("wait until the claim is Ready", lambda: helper.wait_for_claim_ready(claim, namespace, timeout, resource_version=rv))
    name = step("resolve the sandbox name", lambda: helper.resolve_sandbox_name(claim, namespace, timeout))
    if name != ready_name or not name:
        raise SystemExit(f"resolved Sandbox {name!r}, but the Ready claim named {ready_name!r}")
    sb = helper.get_sandbox(name, namespace)
    if sb is None:
        raise SystemExit(f"Sandbox {name}, which claim {claim} names, does not exist")
    ready = [c for c in (sb.get("status") or {}).get("conditions", []) if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") != "True":
        raise SystemExit(f"Sandbox {name} is not Ready: {ready}")
    print(f"claim {claim}: Sandbox {name}, Ready", flush=True)
finally:
    step("delete the claim", lambda: helper.delete_sandbox_claim(claim, namespace))
