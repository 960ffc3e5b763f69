--[[
elastic-slurm job_submit.lua: recognise elastic submissions and check their node range.

elastic-slurm writes a job's kind and node range into its comment:
    elastic-slurm:kind=malleable;min=2;max=8
This script, loaded with `JobSubmitPlugins=lua` (slurm.conf; the file lies beside slurm.conf),
refuses at submission, with a message the user sees in sbatch's error:
  * a malformed tag, an unknown kind, or an impossible range (min < 1, min > max,
    a rigid job with a range);
  * a node count outside the job's own range;
  * a range wider than the site allows (ELASTIC_MAX_NODES below; 0 = no limit).
Jobs without the tag (including elastic-slurm's expander and sibling allocations) pass
unchanged. Installed by an administrator; see docs/install-site.md.
--]]

local ELASTIC_MAX_NODES = 0  -- the most nodes an elastic job may ask for (0: no limit)
local KINDS = { rigid = true, moldable = true, malleable = true, evolving = true }
local PREFIX = "elastic-slurm:"

local function refuse(fmt, ...)
   slurm.log_user("elastic-slurm: " .. fmt, ...)
   return slurm.ERROR
end

local function set(value)
   return value ~= nil and value ~= slurm.NO_VAL and value ~= slurm.NO_VAL16
      and value ~= 0
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   local comment = job_desc.comment
   if comment == nil or string.sub(comment, 1, #PREFIX) ~= PREFIX then
      return slurm.SUCCESS
   end
   local kind = string.match(comment, "kind=(%a+)")
   local lo = tonumber(string.match(comment, "min=(%-?%d+)"))
   local hi = tonumber(string.match(comment, "max=(%-?%d+)"))
   if kind == nil or lo == nil or hi == nil then
      return refuse("malformed elastic tag '%s': expected %skind=K;min=A;max=B", comment, PREFIX)
   end
   if not KINDS[kind] then
      return refuse("unknown job kind '%s': use rigid, moldable, malleable or evolving", kind)
   end
   if lo < 1 or lo > hi then
      return refuse("impossible node range %d-%d: need 1 <= min <= max", lo, hi)
   end
   if kind == "rigid" and lo ~= hi then
      return refuse("a rigid job has one size, not the range %d-%d", lo, hi)
   end
   if ELASTIC_MAX_NODES > 0 and hi > ELASTIC_MAX_NODES then
      return refuse("node range %d-%d exceeds this site's limit of %d nodes for elastic jobs",
                    lo, hi, ELASTIC_MAX_NODES)
   end
   local asked = job_desc.min_nodes
   if set(asked) and (asked < lo or asked > hi) then
      return refuse("the job asks for %d node(s), outside its range %d-%d", asked, lo, hi)
   end
   local asked_max = job_desc.max_nodes
   if set(asked_max) and asked_max > hi then
      return refuse("the job asks for up to %d node(s), above its maximum %d", asked_max, hi)
   end
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end

return slurm.SUCCESS
