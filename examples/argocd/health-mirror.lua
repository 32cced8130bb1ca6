-- Argo CD health for tributary.dev/Mirror, from status.phase (the API's state names).
local hs = { status = "Progressing", message = "waiting for the operator" }
if obj.status == nil or obj.status.phase == nil then
  return hs
end
local phase = obj.status.phase
if obj.status.observedGeneration ~= nil and obj.metadata.generation ~= nil
    and obj.status.observedGeneration < obj.metadata.generation then
  hs.message = "spec change not yet applied"
  return hs
end
if phase == "STATUS_RUNNING" or phase == "STATUS_COMPLETED" then
  hs.status = "Healthy"
  hs.message = phase
elseif phase == "STATUS_PAUSED" then
  hs.status = "Suspended"
  hs.message = "paused"
elseif phase == "STATUS_FAILED" then
  hs.status = "Degraded"
  hs.message = obj.status.errorMessage or "failed"
else
  hs.status = "Progressing"
  hs.message = phase
end
return hs
