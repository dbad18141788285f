#!/bin/sh
# test_package_deb_scripts.sh BUILD_DIR - the Debian package's documentation and maintainer
# scripts: /usr/share/doc/mooncake-c/copyright is shipped, the client flagfile no longer says
# --disk_path is refused, and postinst/prerm/postrm drive systemd through deb-systemd-helper and
# deb-systemd-invoke as Debian expects (stop on remove, restart on upgrade, nothing started on a
# first install, state purged on purge). The scripts run against stand-ins of those two tools
# that only record their arguments (no root, nothing on the machine is touched); every file is
# removed on exit.
set -eu
build=$1
tmp=$(mktemp -d /tmp/mc-debs-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_package_deb_scripts: $*" >&2; exit 1; }

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$tmp"/pkg/*.deb)
dpkg-deb -x "$deb" "$tmp/root"
test -s "$tmp/root/usr/share/doc/mooncake-c/copyright" || fail "no /usr/share/doc/mooncake-c/copyright"
grep -q '^Upstream-Name: mooncake-c' "$tmp/root/usr/share/doc/mooncake-c/copyright" ||
  fail "copyright is not in Debian's format"
test -s "$tmp/root/usr/share/doc/mooncake-c/grafana/mooncake-c-dashboard.json" ||
  fail "no Grafana dashboard"
if grep -qi 'refuse' "$tmp/root/etc/mooncake/mooncake_client.flags"; then
  fail "the client flagfile still says --disk_path is refused"
fi
grep -q '^# --disk_path=' "$tmp/root/etc/mooncake/mooncake_client.flags" ||
  fail "the client flagfile does not show --disk_path"

mkdir "$tmp/ctl"
dpkg-deb -e "$deb" "$tmp/ctl"
for s in postinst prerm postrm; do
  test -x "$tmp/ctl/$s" || fail "no executable $s"
done

# stand-ins that record their calls
mkdir "$tmp/bin"
for t in deb-systemd-helper deb-systemd-invoke systemctl; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$t" "$tmp" >"$tmp/bin/$t"
  chmod +x "$tmp/bin/$t"
done
run() { : >"$tmp/calls"; PATH="$tmp/bin:/usr/bin:/bin" sh "$tmp/ctl/$1" "$2" ${3:-} ||
  fail "$1 $2 failed"; }

run postinst configure ""          # first install: state registered, nothing (re)started
grep -q 'deb-systemd-helper update-state mooncake-master.service' "$tmp/calls" ||
  grep -q 'deb-systemd-helper was-enabled\|deb-systemd-helper --quiet was-enabled' "$tmp/calls" ||
  fail "postinst does not register the units"
if grep -q 'deb-systemd-invoke' "$tmp/calls"; then fail "first install starts a daemon"; fi

run postinst configure 0.0.9        # upgrade: the running daemons are restarted
grep -q 'deb-systemd-invoke try-restart mooncake-master.service mooncake-client.service' \
  "$tmp/calls" || fail "upgrade does not restart the daemons"

run prerm remove                    # remove: both daemons stopped
grep -q 'deb-systemd-invoke stop mooncake-client.service mooncake-master.service' "$tmp/calls" ||
  fail "remove does not stop the daemons"
run prerm upgrade 0.2.0             # upgrade: not stopped here
if grep -q 'stop' "$tmp/calls"; then fail "prerm upgrade stops the daemons"; fi

run postrm purge
grep -q 'deb-systemd-helper purge mooncake-master.service' "$tmp/calls" ||
  fail "purge does not drop the units' state"
echo "test_package_deb_scripts: ok"
