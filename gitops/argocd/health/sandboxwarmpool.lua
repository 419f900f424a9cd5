-- Argo CD health check for extensions.agents.x-k8s.io/SandboxWarmPool (sandbox-gitops, gitops/argocd).
--
-- This project's controller writes the Available and Progressing conditions, in the spirit of a
-- Deployment's, beside replicas, readyReplicas, updatedReplicas, updatedReadyReplicas and
-- observedGeneration:
--
--   status.observedGeneration < generation    Progressing  status describes an older spec
--   Progressing False ProgressDeadlineExceeded Degraded     a rollout or a fill made no progress
--                                                           for progressDeadlineSeconds: a member
--                                                           made from the current template does
--                                                           not become Ready (the old members
--                                                           still serve claims)
--   Progressing False TemplateNotFound        Degraded     the SandboxTemplate is missing
--   Progressing True (NewMembersCreated,
--   MembersUpdated)                           Progressing  filling up, or rolling out a template
--                                                           change
--   Progressing False RolloutComplete         Healthy      every member wanted exists and is Ready
--
-- The message is the condition's, which carries the counts. Any other Progressing reason is
-- Progressing with the reason shown.
--
-- Upstream's controller writes no conditions: then the verdict is readyReplicas against
-- spec.replicas (1 when absent, as the CRD defaults it; 0 desired is Healthy), "N/M ready", and
-- such a pool is never Degraded. Both omit replicas and readyReplicas when they are 0.
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

local progressing = nil
if status.conditions ~= nil then
  for _, c in ipairs(status.conditions) do
    if c.type == "Progressing" then
      progressing = c
    end
  end
end

if progressing ~= nil then
  local reason = progressing.reason or ""
  local message = progressing.message or reason
  if progressing.status == "False" and (reason == "ProgressDeadlineExceeded" or reason == "TemplateNotFound") then
    return health("Degraded", message)
  end
  if progressing.status == "False" and reason == "RolloutComplete" then
    return health("Healthy", message)
  end
  if progressing.status == "True" and (reason == "NewMembersCreated" or reason == "MembersUpdated") then
    return health("Progressing", message)
  end
  return health("Progressing", reason .. ": " .. message)
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
