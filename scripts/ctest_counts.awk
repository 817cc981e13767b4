# Counts test cases in the output of `ctest -V` (every output line is
# prefixed with its test's number, "N: "). Per test, the first of these that
# its output holds gives its counts:
#   cmocka     "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" /
#              "[  SKIPPED ] N test(s)" (summed over the groups of one
#              executable)
#   node:test  the TAP summary "# pass N" / "# fail N" / "# skipped N", and
#              "# todo N" (known failures tied to an issue) counted as
#              skipped
#   vitest     "Tests  N failed | N passed | N skipped (N)"
#   a script   its last "N passed, M failed[, K skipped]" line
# A test that reports none of these counts as one case. A test that ctest
# reports failed (exit status, timeout, crash) with no failing case counts
# one failure (and, reporting nothing, no passed case). Prints "PASSED
# FAILED SKIPPED", then the numbers of the failed tests.
function add_fields(t, kind, n,    a, k, i) {
  k = split(t, a, /[ |(),]+/)
  for (i = 1; i < k; i++) {
    if (a[i] ~ /^[0-9]+$/ && a[i + 1] == "passed") kp[kind, n] = a[i]
    if (a[i] ~ /^[0-9]+$/ && a[i + 1] == "failed") kf[kind, n] = a[i]
    if (a[i] ~ /^[0-9]+$/ && a[i + 1] == "skipped") ks[kind, n] = a[i]
  }
  has[kind, n] = 1
}
/^[0-9]+: / {
  n = substr($0, 1, index($0, ":") - 1)
  t = substr($0, index($0, ":") + 2)
  if (t ~ /^\[  PASSED  \] [0-9]+ test/) { split(t, a, / +/); kp["cm", n] += a[4]; has["cm", n] = 1 }
  else if (t ~ /^\[  FAILED  \] [0-9]+ test/) { split(t, a, / +/); kf["cm", n] += a[4]; has["cm", n] = 1 }
  else if (t ~ /^\[  SKIPPED \] [0-9]+ test/) { split(t, a, / +/); ks["cm", n] += a[4]; has["cm", n] = 1 }
  else if (t ~ /^# pass [0-9]+$/) { kp["tap", n] = $4; has["tap", n] = 1 }
  else if (t ~ /^# fail [0-9]+$/) { kf["tap", n] = $4; has["tap", n] = 1 }
  else if (t ~ /^# skipped [0-9]+$/) { ks["tap", n] += $4; has["tap", n] = 1 }
  else if (t ~ /^# todo [0-9]+$/) { ks["tap", n] += $4; has["tap", n] = 1 }
  else if (t ~ /^ +Tests +[0-9]+ (passed|failed|skipped)/) { kp["vi", n] = 0; kf["vi", n] = 0; ks["vi", n] = 0; add_fields(t, "vi", n) }
  else if (t ~ /^[0-9]+ passed, [0-9]+ failed/) { kp["sh", n] = 0; kf["sh", n] = 0; ks["sh", n] = 0; add_fields(t, "sh", n) }
  next
}
/Test +#[0-9]+: / {
  s = substr($0, index($0, "#") + 1)
  n = substr(s, 1, index(s, ":") - 1)
  ran[n] = 1
  if ($0 ~ /\*\*\*|Failed|Not Run/) bad[n] = 1
}
END {
  P = 0; F = 0; S = 0; list = ""
  for (n in ran) {
    p = bad[n] ? 0 : 1; f = 0; k = 0
    if (has["cm", n]) { p = kp["cm", n] + 0; f = kf["cm", n] + 0; k = ks["cm", n] + 0 }
    else if (has["tap", n]) { p = kp["tap", n] + 0; f = kf["tap", n] + 0; k = ks["tap", n] + 0 }
    else if (has["vi", n]) { p = kp["vi", n] + 0; f = kf["vi", n] + 0; k = ks["vi", n] + 0 }
    else if (has["sh", n]) { p = kp["sh", n] + 0; f = kf["sh", n] + 0; k = ks["sh", n] + 0 }
    if (bad[n] && f == 0) f = 1
    if (bad[n]) list = list " " n
    P += p; F += f; S += k
  }
  print P, F, S list
}
