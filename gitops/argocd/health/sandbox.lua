-- Argo CD health check for agents.x-k8s.io/Sandbox (sandbox-gitops, gitops/argocd).
--
-- Upstream's Sandbox controller puts its verdict in the Ready condition; reasons and messages
-- are its contract. The Suspended condition is read only while Ready says SandboxSuspended,
-- because upstream leaves a stale Suspended condition behind after a resume or an expiry.
--
--   no Ready condition                       Progressing  not reconciled yet
--   Ready.observedGeneration < generation    Progressing  status describes an older spec
--   Ready reason SandboxExpired              Suspended    see (1)
--   Ready True                               Healthy
--   SandboxSuspended, Suspended True         Suspended    operatingMode Suspended, Pod gone
--   SandboxSuspended, Suspended PodNotOwned  Degraded     a foreign Pod blocks the suspension
--   SandboxSuspended otherwise               Progressing  Pod still terminating
--   Ready reason PodSucceeded                Healthy      see (2)
--   PodFailed, MultiplePods, ReconcilerError Degraded
--   DependenciesNotReady, any other reason   Progressing
--
-- (1) An expired Sandbox (shutdownTime reached, default shutdownPolicy Retain) is in the same
--     state as a suspended one: Pod and Service deleted, PVCs kept, and it runs again only
--     after a change in Git (a later shutdownTime). That is an intended stop, not a fault, so
--     not Degraded (the Application would turn red and fail its sync for a planned expiry),
--     and not Healthy either, because nothing runs. Like every Suspended resource it holds up
--     a multi-wave sync: remove expired Sandboxes from Git.
-- (2) A Pod that ran to completion is the workload's own success and upstream will not restart
--     it; Argo CD treats a completed Job the same way.
--
-- Only the base and table libraries are used: Argo CD opens no string library by default.

local function condition(conditionType)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local function text(c)
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return c.reason or ""
end

local function health(status, message)
  return { status = status, message = message }
end

local ready = condition("Ready")
if ready == nil then
  return health("Progressing", "Waiting for the controller to report the Ready condition")
end

local generation = obj.metadata.generation
if generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration < generation then
  return health("Progressing", "Waiting for the controller to observe generation " .. generation)
end

local reason = ready.reason or ""
if reason == "SandboxExpired" then
  return health("Suspended", text(ready))
end
if ready.status == "True" then
  return health("Healthy", text(ready))
end

if reason == "SandboxSuspended" then
  local suspended = condition("Suspended")
  if suspended == nil then
    return health("Progressing", text(ready))
  end
  if suspended.status == "True" then
    return health("Suspended", text(suspended))
  end
  if suspended.reason == "PodNotOwned" then
    return health("Degraded", text(suspended))
  end
  return health("Progressing", text(suspended))
end

if reason == "PodSucceeded" then
  return health("Healthy", text(ready))
end
if reason == "PodFailed" or reason == "MultiplePods" or reason == "ReconcilerError" then
  return health("Degraded", text(ready))
end
if reason == "DependenciesNotReady" then
  return health("Progressing", text(ready))
end
if reason == "" then
  return health("Progressing", text(ready))
end
return health("Progressing", reason .. ": " .. text(ready))
