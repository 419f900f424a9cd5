-- Argo CD health check for extensions.agents.x-k8s.io/SandboxClaim (sandbox-gitops, gitops/argocd).
--
-- The claim's Ready condition is either the claim controller's own verdict or its Sandbox's
-- Ready condition copied verbatim, so the Sandbox reasons appear here too and map as in the
-- Sandbox check.
--
--   no Ready condition                        Progressing  not reconciled yet
--   Ready True                                Healthy
--   ClaimExpired, SandboxExpired              Suspended    see (1)
--   SandboxSuspended (copied)                 Suspended    someone suspended the Sandbox
--   PodSucceeded (copied)                     Healthy      ran to completion, as a Job
--   TemplateNotFound, WarmPoolNotFound,
--   InvalidMetadata, EnvVarsInjectionRejected,
--   VolumeClaimTemplatesError, ReconcilerError,
--   PodFailed, MultiplePods (copied)          Degraded     needs a fix in Git or the cluster
--   ProgressDeadlineExceeded                  Degraded     see (2)
--   SandboxNotReady, SandboxMissing,
--   SandboxCreatePending, AdoptionConflict,
--   DependenciesNotReady, any other reason    Progressing
--
-- (1) An expired claim (lifecycle.shutdownTime or ttlSecondsAfterFinished reached) has had its
--     Sandbox deleted; with shutdownPolicy Retain the claim stays, and it gets a Sandbox again
--     only after a change in Git (a later shutdownTime). That is an intended stop, not a fault,
--     so Suspended, as for an expired Sandbox. "Claim expired. <error>; deletion skipped." is
--     still an expiry; the message carries the detail.
--
-- (2) This project's controller turns a claim whose Sandbox is not Ready after
--     claimReadyDeadlineSeconds (a SandboxRender option, 600 by default) to
--     ProgressDeadlineExceeded, keeping the cause in the message (an image that cannot be
--     pulled, a Pod that cannot be scheduled, a crash loop). Before the deadline the same claim
--     is Progressing, with the same cause in its message.
--
-- Not checked: Ready.observedGeneration. At upstream HEAD every claim condition carries the
-- claim's generation, but v0.5.6 copies the Sandbox's Ready with the Sandbox's generation, so
-- a comparison with the claim's generation would leave an edited claim Progressing forever.
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

local suspendedReasons = {
  ClaimExpired = true,
  SandboxExpired = true,
  SandboxSuspended = true,
}

local degradedReasons = {
  TemplateNotFound = true,
  WarmPoolNotFound = true,
  InvalidMetadata = true,
  EnvVarsInjectionRejected = true,
  VolumeClaimTemplatesError = true,
  ReconcilerError = true,
  PodFailed = true,
  MultiplePods = true,
  ProgressDeadlineExceeded = true,
}

local progressingReasons = {
  SandboxNotReady = true,
  SandboxMissing = true,
  SandboxCreatePending = true,
  AdoptionConflict = true,
  DependenciesNotReady = true,
}

local ready = condition("Ready")
if ready == nil then
  return health("Progressing", "Waiting for the controller to report the Ready condition")
end
if ready.status == "True" then
  return health("Healthy", text(ready))
end

local reason = ready.reason or ""
if suspendedReasons[reason] then
  return health("Suspended", text(ready))
end
if reason == "PodSucceeded" then
  return health("Healthy", text(ready))
end
if degradedReasons[reason] then
  return health("Degraded", text(ready))
end
if progressingReasons[reason] then
  return health("Progressing", text(ready))
end
if reason == "" then
  return health("Progressing", text(ready))
end
return health("Progressing", reason .. ": " .. text(ready))
