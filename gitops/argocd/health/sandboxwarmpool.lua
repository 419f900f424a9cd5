-- Argo CD health check for extensions.agents.x-k8s.io/SandboxWarmPool (sandbox-gitops, gitops/argocd).
--
-- The pool has no conditions: its controller writes replicas, readyReplicas and
-- observedGeneration, and omits replicas and readyReplicas when they are 0.
--
--   status.observedGeneration < generation   Progressing  status describes an older spec
--   readyReplicas >= spec.replicas           Healthy      "N/M ready"; 0 desired is Healthy
--   otherwise                                Progressing  "N/M ready"
--
-- spec.replicas defaults to 1 when absent, as the CRD does. A pool never reports a failure
-- (a missing SandboxTemplate just stops replenishment), so it is never Degraded; it has no
-- suspend or expiry either.
--
-- Only the base and table libraries are used: Argo CD opens no string library by default.

local function health(status, message)
  return { status = status, message = message }
end

local status = obj.status or {}
local generation = obj.metadata.generation
if generation ~= nil and (status.observedGeneration or 0) < generation then
  return health("Progressing", "Waiting for the controller to observe generation " .. generation)
end

local desired = 1
if obj.spec ~= nil and obj.spec.replicas ~= nil then
  desired = obj.spec.replicas
end
local ready = status.readyReplicas or 0
local message = ready .. "/" .. desired .. " ready"
if ready >= desired then
  return health("Healthy", message)
end
return health("Progressing", message)
