#!/usr/bin/env bash
# The Debian packages, installed for real: builds runnel, librunnel0 and
# librunnel-dev (packaging/deb.sh), installs them with dpkg -i, checks what
# the install made (the runnel user, the unit, the configuration file,
# /var/lib/runnel, man pages, completions, pkg-config), runs the installed
# runnel as the runnel user on a temporary data directory with the
# installed client talking to it, builds and runs a program against the
# installed library with `pkg-config --cflags --libs runnel`, then purges
# the packages: data kept unless RUNNEL_PURGE_DATA=yes. Needs root; leaves
# the machine as it found it (a runnel user the test made is removed).
# Ends with "N passed, M failed"; when it cannot run here (not root, or the
# packages already installed) it prints "SKIP ...: reason" and ends with
# "0 passed, 0 failed, 1 skipped".
set -uo pipefail
cd "$(dirname "$0")/../.."
passed=0
failed=0
skipped=0
check() { # check DESCRIPTION COMMAND...: counts and prints; returns COMMAND's success
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then
    passed=$((passed + 1))
    echo "ok   $what"
  else
    failed=$((failed + 1))
    echo "FAIL $what"
    return 1
  fi
}
finish() {
  if [ "$skipped" -eq 0 ]; then echo "$passed passed, $failed failed"
  else echo "$passed passed, $failed failed, $skipped skipped"; fi
  [ "$failed" -eq 0 ]
  exit
}
skip_all() { # skip_all REASON: the whole test could not run here; counted as one skip
  skipped=1
  echo "SKIP the Debian packages: $1"
  finish
}

if [ "$(id -u)" -ne 0 ]; then
  skip_all "installing packages needs root (CI runs as root)"
fi
for p in runnel librunnel0 librunnel-dev; do
  if dpkg -s "$p" >/dev/null 2>&1; then
    skip_all "$p is installed on this machine; the test installs and purges its own and leaves the machine as found"
  fi
done
user_existed=0
getent passwd runnel >/dev/null && user_existed=1
data_existed=0
[ -e /var/lib/runnel ] && data_existed=1

# in /tmp itself, not under $TMPDIR: scripts/test.sh's scratch directories
# are private (0700), and the runnel user must reach the data directory
work=$(mktemp -d /tmp/runnel-package-XXXXXX)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  flock /tmp/apt.lock dpkg --purge librunnel-dev librunnel0 runnel >/dev/null 2>&1
  [ "$data_existed" -eq 0 ] && rm -rf /var/lib/runnel
  if [ "$user_existed" -eq 0 ] && getent passwd runnel >/dev/null; then
    deluser --quiet runnel >/dev/null 2>&1
    delgroup --quiet runnel >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "building the packages (packaging/deb.sh)"
if ! packaging/deb.sh "$work/build" >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log"
  check "the packages build" false
  finish
fi
check "three packages built" test "$(ls "$work"/build/*.deb | wc -l)" -eq 3
check "dpkg -i installs them" flock /tmp/apt.lock dpkg -i "$work"/build/runnel_*.deb \
  "$work"/build/librunnel0_*.deb "$work"/build/librunnel-dev_*.deb

check "the runnel system user exists" getent passwd runnel
check "its shell is nologin" sh -c 'getent passwd runnel | grep -q nologin'
check "/var/lib/runnel belongs to runnel" sh -c '[ "$(stat -c %U /var/lib/runnel)" = runnel ]'
check "/etc/runnel/runnel.conf is installed" test -f /etc/runnel/runnel.conf
check "it is a conffile" sh -c 'dpkg-query -W -f="\${Conffiles}" runnel | grep -q /etc/runnel/runnel.conf'
check "the hardened unit runs /usr/bin/runnel with the conf" \
  grep -q '^ExecStart=/usr/bin/runnel serve --config /etc/runnel/runnel.conf$' /usr/lib/systemd/system/runnel.service
check "the unit runs as runnel" grep -q '^User=runnel$' /usr/lib/systemd/system/runnel.service
check "runnel(1), runnel-serve(8), librunnel(3) are installed" \
  test -f /usr/share/man/man1/runnel.1 -a -f /usr/share/man/man8/runnel-serve.8 -a -f /usr/share/man/man3/librunnel.3
check "bash and zsh completions are installed" \
  test -f /usr/share/bash-completion/completions/runnel -a -f /usr/share/zsh/vendor-completions/_runnel
check "librunnel.so.0 is the SONAME" sh -c 'objdump -p /usr/lib/x86_64-linux-gnu/librunnel.so.0 | grep -q "SONAME.*librunnel.so.0"'
check "pkg-config --cflags --libs runnel" pkg-config --cflags --libs runnel
check "runnel --version" /usr/bin/runnel --version

# the installed server, as the runnel user, on a temporary data directory
data="$work/data"
install -d -o runnel -g runnel "$data"
chmod 755 "$work"
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
url="http://127.0.0.1:$port"
setpriv --reuid=runnel --regid=runnel --init-groups /usr/bin/runnel serve --listen "127.0.0.1:$port" --data-dir "$data" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/__runnel/readyz")" = 200 ] && break
  sleep 0.1
done
check "the installed server answers" curl -sf "$url/__runnel/readyz" || tail -20 "$work/server.log"
check "it runs as the runnel user" sh -c "[ \"\$(ps -o user= -p $server_pid)\" = runnel ]"
check "what it wrote belongs to runnel" \
  sh -c "[ -n \"\$(ls -A '$data')\" ] && [ -z \"\$(find '$data' -mindepth 1 ! -user runnel)\" ]"
check "the installed client creates a stream" /usr/bin/runnel --url "$url" create pkg/s --type text/plain
check "and appends stdin exactly once" sh -c "printf 'a\nb\n' | XDG_STATE_HOME='$work/state' /usr/bin/runnel --url '$url' append pkg/s --producer p -q"
check "and reads it back" sh -c "[ \"\$(/usr/bin/runnel --url '$url' read pkg/s -q)\" = \"\$(printf 'a\nb')\" ]"

# a program built against the installed library
cat >"$work/app.c" <<'EOF'
#include <runnel/client.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    runnel_client_options o = {.base_url = argv[1]};
    runnel_client *c = runnel_client_new(&o);
    runnel_answer a;
    runnel_body b = {.data = "c\n", .len = 2};
    runnel_append_options ao = {.content_type = "text/plain"};
    runnel_result r = runnel_append(c, "/v1/stream/pkg/s", &b, &ao, &a);
    printf("%s %s\n", runnel_result_name(r), runnel_outcome_name(runnel_classify(RUNNEL_WRITE_APPEND, &a)));
    runnel_client_free(c);
    return r == RUNNEL_OK ? 0 : 1;
}
EOF
check "a program builds with pkg-config --cflags --libs runnel" \
  sh -c "cc -o '$work/app' '$work/app.c' \$(pkg-config --cflags --libs runnel)"
check "it links librunnel.so.0 and appends" sh -c "ldd '$work/app' | grep -q librunnel.so.0 && '$work/app' '$url' | grep -q 'ok applied'"
check "a static build links too, and appends" \
  sh -c "cc -o '$work/app-static' '$work/app.c' \$(pkg-config --cflags runnel) /usr/lib/x86_64-linux-gnu/librunnel.a \$(pkg-config --libs libcurl jansson) -lpthread && ! ldd '$work/app-static' | grep -q librunnel && '$work/app-static' '$url' | grep -q 'ok applied'"
kill -TERM "$server_pid"
wait "$server_pid"
stopped=$?
check "the server stops cleanly on SIGTERM (exit 0)" test "$stopped" -eq 0
server_pid=

# purge keeps the data unless asked
echo kept >/var/lib/runnel/marker
check "dpkg --purge removes the packages" flock /tmp/apt.lock dpkg --purge librunnel-dev librunnel0 runnel
check "the binary and the unit are gone" test ! -e /usr/bin/runnel -a ! -e /usr/lib/systemd/system/runnel.service
check "the configuration is gone" test ! -e /etc/runnel/runnel.conf
check "the data is kept on purge" test -f /var/lib/runnel/marker
check "a reinstall works" flock /tmp/apt.lock dpkg -i "$work"/build/runnel_*.deb
check "RUNNEL_PURGE_DATA=yes purges the data too" sh -c 'RUNNEL_PURGE_DATA=yes flock /tmp/apt.lock dpkg --purge runnel && test ! -e /var/lib/runnel'
finish
