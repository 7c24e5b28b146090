-- wrk: POST a JSON body (BODY, KEY from the environment) with its "namespace":"bench" replaced,
-- per request, by one of 64 namespaces: writers that do not meet on one namespace's clock row.
local body = os.getenv("BODY")
local key = os.getenv("KEY")
request = function()
  local b = string.gsub(body, '"namespace":"bench"', '"namespace":"bench-' .. math.random(1, 64) .. '"')
  local headers = { ["Content-Type"] = "application/json" }
  if key and key ~= "" then headers["Authorization"] = "Bearer " .. key end
  return wrk.format("POST", nil, headers, b)
end
