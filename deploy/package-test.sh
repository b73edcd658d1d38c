#!/usr/bin/env bash
# The package, tested as a vehicle would get it (called by deploy/test.sh; root, on a throwaway
# Debian machine where systemd need not run): builds dist/fleetcast_<version>_<arch>.deb with
# deploy/package.sh, installs it with apt, checks what it put in place, runs the installed
# binaries for real — the agent as the user fleetcast, under the unit's system-call filter,
# MemoryDenyWriteExecute and address families (deploy/deb/sandbox.c), on the simulated
# receiver, a serial port (a pseudo-terminal), gpsd (gpsfake) and a TLS broker, speaking
# sd_notify to a socket standing in for systemd — runs lintian, rates the unit with
# systemd-analyze, and purges the package again.
# FLEET_WATCH: a built fleet-watch, which reads what the installed agents publish.
# Needs what deploy/test.sh installs: mosquitto, mosquitto-clients, socat, gpsd-clients,
# openssl, lintian, dpkg-dev, libseccomp-dev, systemd (for systemd-analyze), gcc.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "package-test.sh: run as root (it installs and purges the package)" >&2
  exit 1
fi

work=$(mktemp -d)
chmod 0755 "$work"   # the agent runs as fleetcast and reaches its sockets and files in here
pids=() groups=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for group in "${groups[@]}"; do kill -- "-$group" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "package-test.sh: FAILED: $*" >&2
  for log in "$work"/*.log; do
    [ -s "$log" ] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}
step() { echo "==> package: $*"; }

step "building (deploy/package.sh)"
started=$SECONDS
deb=$(bash deploy/package.sh)
echo "    built $deb ($(du -k "$deb" | cut -f1) KiB) in $((SECONDS - started)) s"

step "lintian"
lintian --fail-on error "$deb" | tee "$work/lintian.txt" || fail "lintian reports errors"

step "installing with apt (no systemd running needed)"
if dpkg-query -W -f='${Status}' fleetcast 2>/dev/null | grep -q 'install ok'; then
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fleetcast >/dev/null
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$deb" >"$work/apt-install.log" 2>&1 \
  || fail "apt-get install ./$deb"
version=$(dpkg-query -W -f='${Version}' fleetcast)
[ "$(/usr/bin/fleetcast-agent --version)" = "$version" ] \
  || fail "fleetcast-agent --version is not the package's version $version"
[ ! -e /usr/bin/fleet-watch ] || fail "the vehicle package installs fleet-watch, the fleet side's tool"
echo "    fleetcast $version; Depends: $(dpkg-query -W -f='${Depends}' fleetcast)"

step "the installed binaries need no Swift library"
for binary in /usr/bin/fleetcast-agent; do
  ldd "$binary" >"$work/ldd.txt"
  if grep -E 'libswift|libFoundation|lib_Foundation|libicu|libdispatch|libBlocksRuntime|not found' "$work/ldd.txt"; then
    fail "$binary loads the libraries above"
  fi
  echo "    $binary: $(awk '{print $1}' "$work/ldd.txt" | tr '\n' ' ')"
  # Packed relocations (DT_RELR) need glibc 2.36's loader: Depends must say so, or apt installs
  # the package where the agent cannot start.
  if grep -q GLIBC_ABI_DT_RELR <<<"$(readelf -V "$binary")"; then
    dpkg-query -W -f='${Depends}' fleetcast | grep -Eq 'libc6 \(>= 2\.(3[6-9]|[4-9][0-9])' \
      || fail "$binary needs glibc >= 2.36 (GLIBC_ABI_DT_RELR) but Depends does not say so"
  fi
done

step "what the package put in place"
unit=/lib/systemd/system/fleetcast-agent.service
[ -f "$unit" ] || fail "no $unit"
[ -f /lib/udev/rules.d/60-fleetcast-gnss.rules ] || fail "no udev rule"
dpkg-query -W -f='${Conffiles}\n' fleetcast | grep -q '^ /etc/fleetcast/agent.yaml ' \
  || fail "/etc/fleetcast/agent.yaml is not a conffile"
getent passwd fleetcast >/dev/null || fail "no user fleetcast"
id -nG fleetcast | tr ' ' '\n' | grep -qx dialout || fail "fleetcast is not in dialout"
# Not enabled on a fresh installation (the config names an example vehicle and broker).
[ ! -e /etc/systemd/system/multi-user.target.wants/fleetcast-agent.service ] \
  || fail "the unit was enabled on installation"
# And the shipped configuration does not start: its password and CA files do not exist yet.
set +e
setpriv --reuid=fleetcast --regid=fleetcast --init-groups \
  /usr/bin/fleetcast-agent run --config /etc/fleetcast/agent.yaml --state-dir "$work" >"$work/conf.log" 2>&1
status=$?
set -e
if [ "$status" -ne 78 ] || ! grep -q 'broker.passwordFile' "$work/conf.log"; then
  fail "the shipped /etc/fleetcast/agent.yaml should stop the agent (78, naming broker.passwordFile), got $status"
fi

# fleetcast-agent check, as the README says to run it before enabling: the shipped file is a
# configuration error (78); with a working source and broker every step passes (0).
set +e
setpriv --reuid=fleetcast --regid=fleetcast --init-groups \
  /usr/bin/fleetcast-agent check --config /etc/fleetcast/agent.yaml >"$work/check-conf.log" 2>&1
status=$?
set -e
[ "$status" -eq 78 ] || fail "fleetcast-agent check on the shipped configuration: expected 78, got $status"

step "the unit: systemd-analyze verify and security"
systemd-analyze verify "$unit" || fail "systemd-analyze verify $unit"
rating=$(systemd-analyze security --offline=true "$unit" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
echo "    exposure $rating"
awk -v r="$rating" 'BEGIN { exit !(r != "" && r <= 3.0) }' || fail "systemd-analyze security rates the unit '$rating' (want <= 3.0)"

step "the udev rule parses"
# udevadm verify needs systemd >= 254; each rule line here must be KEY[{attr}]OP"value" pairs.
key='[A-Z_]+(\{[^}]+\})?(==|!=|\+=|-=|:=|=)"[^"]*"'
grep -n -v -E '^[[:space:]]*(#|$)' /lib/udev/rules.d/60-fleetcast-gnss.rules | while IFS= read -r numbered; do
  line=${numbered#*:}
  [[ $line =~ ^$key(,[[:space:]]*$key)*$ ]] || fail "udev rule line ${numbered%%:*} does not parse: $line"
done
grep -q 'ATTRS{idVendor}=="1546", ATTRS{idProduct}=="01a9", SYMLINK+="gnss0", GROUP="dialout"' \
  /lib/udev/rules.d/60-fleetcast-gnss.rules || fail "no u-blox 9 rule"

step "running the installed agent as the unit would"
# The unit's system-call filter, expanded as systemd expands it.
for setting in MemoryDenyWriteExecute=yes SystemCallErrorNumber=EPERM 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6'; do
  grep -qx "$setting" "$unit" || fail "the unit no longer says $setting: update deploy/deb/sandbox.c to match"
done
expand() {
  systemd-analyze syscall-filter --no-pager "$1" | while read -r word _; do
    case $word in
      '' | '#'*) ;;
      @*) [ "$word" = "$1" ] || expand "$word" ;;
      *) echo "$word" ;;
    esac
  done
}
: >"$work/allow"; : >"$work/deny"
while IFS= read -r filter; do
  list=allow
  [[ $filter == '~'* ]] && { list=deny; filter=${filter#\~}; }
  for item in $filter; do
    if [[ $item == @* ]]; then expand "$item"; else echo "$item"; fi >>"$work/$list"
  done
done < <(sed -n 's/^SystemCallFilter=//p' "$unit")
sort -u "$work/allow" -o "$work/allow"; sort -u "$work/deny" -o "$work/deny"
comm -23 "$work/allow" "$work/deny" >"$work/syscalls"
gcc -O2 -Wall -o "$work/sandbox" deploy/deb/sandbox.c -lseccomp || fail "building deploy/deb/sandbox.c"
echo "    $(wc -l <"$work/syscalls") system calls allowed"

# A free loopback port: a random one in the ephemeral range that nothing answers on.
free_port() {
  local port
  for _ in $(seq 50); do
    port=$(shuf -i 20000-60999 -n 1)
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  fail "no free port"
}
wait_port() {
  for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done
  fail "nothing listens on $1"
}

# Two brokers: plain, and TLS with a CA and server certificate made here.
port=$(free_port)
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n' "$port" >"$work/mosquitto.conf"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=Fleetcast test CA" \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
  -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
echo "subjectAltName=DNS:localhost" >"$work/server.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
  -extfile "$work/server.ext" -out "$work/server.crt" 2>/dev/null
chmod 0644 "$work/ca.crt"
tls_port=$(free_port)
printf 'listener %s 127.0.0.1\nallow_anonymous true\ncafile %s\ncertfile %s\nkeyfile %s\n' \
  "$tls_port" "$work/ca.crt" "$work/server.crt" "$work/server.key" >>"$work/mosquitto.conf"
/usr/sbin/mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
pids+=($!)
wait_port "$port"; wait_port "$tls_port"

# The agent as the unit starts it: user fleetcast with its groups (dialout), no capabilities,
# umask 0077, the sandbox; a datagram socket standing in for systemd's $NOTIFY_SOCKET.
agent=
start_agent() {  # VEHICLE SOURCE BROKER [FLAG…]
  local vehicle=$1 source=$2 broker=$3
  shift 3
  install -d -o fleetcast -g fleetcast -m 0750 "$work/state-$vehicle"
  socat -u "UNIX-RECV:$work/notify-$vehicle,perm=0777" "OPEN:$work/notify-$vehicle.log,creat,append" &
  pids+=($!)
  for _ in $(seq 50); do [ -S "$work/notify-$vehicle" ] && break; sleep 0.1; done
  (umask 0077; exec env NOTIFY_SOCKET="$work/notify-$vehicle" WATCHDOG_USEC=2000000 \
    setpriv --reuid=fleetcast --regid=fleetcast --init-groups --inh-caps=-all --bounding-set=-all \
    "$work/sandbox" "$work/syscalls" -- /usr/bin/fleetcast-agent run --vehicle "$vehicle" \
    --source "$source" --broker "$broker" --state-dir "$work/state-$vehicle" "$@") \
    >"$work/agent-$vehicle.log" 2>&1 &
  agent=$!
  pids+=("$agent")
}
expect_fix() {  # VEHICLE PORT [mosquitto_sub FLAG…]
  local vehicle=$1 port=$2
  shift 2
  mosquitto_sub -h 127.0.0.1 -p "$port" "$@" -t "fleet/$vehicle/fix" -C 1 -W 40 >"$work/fix-$vehicle.txt" 2>&1 || true
  grep -q "\"vehicle\":\"$vehicle\"" "$work/fix-$vehicle.txt" || fail "no fix from $vehicle"
  echo "    $vehicle: $(head -c 120 "$work/fix-$vehicle.txt")…"
}
stop_agent() {  # VEHICLE: SIGTERM, exit 0, the notify protocol spoken, the outbox on disk
  local vehicle=$1 status=0
  sleep 2   # at least one watchdog interval
  kill -TERM "$agent"
  wait "$agent" || status=$?
  [ "$status" -eq 0 ] || fail "$vehicle: the agent exited $status after SIGTERM"
  for message in READY=1 WATCHDOG=1 STOPPING=1; do
    grep -q "$message" "$work/notify-$vehicle.log" || fail "$vehicle: no $message on \$NOTIFY_SOCKET"
  done
  [ -s "$work/state-$vehicle/$vehicle.outbox" ] || fail "$vehicle: no outbox in the state directory"
  [ "$(stat -c %U "$work/state-$vehicle/$vehicle.outbox")" = fleetcast ] || fail "$vehicle: outbox not the user's"
}

echo "    simulated receiver, plain MQTT"
start_agent sim-1 'sim:?rate=10' "mqtt://127.0.0.1:$port"
expect_fix sim-1 "$port"
stop_agent sim-1

echo "    serial port (a pseudo-terminal in group dialout), TLS broker with a CA file"
# The receiver: saab-r4's sentences, over and over, 50 a second, CR LF as on a real line.
grep -a '^\$' Tests/GNSSSourcesTests/Fixtures/saab-r4.log | sed 's/\r*$/\r/' >"$work/receiver.nmea"
cat >"$work/receiver.sh" <<'END'
while :; do
  while IFS= read -r sentence; do printf '%s\n' "$sentence"; sleep 0.02; done <receiver.nmea
done
END
(cd "$work" && exec socat "PTY,link=$work/gnss0,rawer,group=dialout,perm=0660" "EXEC:sh receiver.sh") &
pids+=($!)
for _ in $(seq 50); do [ -e "$work/gnss0" ] && break; sleep 0.1; done
start_agent serial-1 "serial:$work/gnss0?baud=4800" "mqtts://localhost:$tls_port" --ca-file "$work/ca.crt"
expect_fix serial-1 "$port"
stop_agent serial-1

echo "    gpsd (gpsfake)"
gpsd_port=$(free_port)
# gpsfake and the gpsd it starts: their own process group, ended as one.
setsid gpsfake -q -P "$gpsd_port" -c 0.05 Tests/NMEATests/Fixtures/gpsd/bt451.log >"$work/gpsfake.log" 2>&1 &
groups+=($!)
wait_port "$gpsd_port"
start_agent gpsd-1 "gpsd://127.0.0.1:$gpsd_port" "mqtt://127.0.0.1:$port"
expect_fix gpsd-1 "$port"
stop_agent gpsd-1

echo "    fleetcast-agent check, as fleetcast"
setpriv --reuid=fleetcast --regid=fleetcast --init-groups /usr/bin/fleetcast-agent check \
  --source 'sim:?rate=10' --vehicle check-1 --broker "mqtt://127.0.0.1:$port" --timeout 20 >"$work/check.log" 2>&1 \
  || fail "fleetcast-agent check with sim: and the test broker"
sed 's/^/    /' "$work/check.log"

step "fleet-watch (the fleet side, from this repository's build) reads what the installed agents publish"
fleet_watch=${FLEET_WATCH:-}
[ -x "$fleet_watch" ] || fail "FLEET_WATCH='$fleet_watch' is not a built fleet-watch (deploy/test.sh sets it)"
"$fleet_watch" --broker "mqtt://127.0.0.1:$port" --once >"$work/watch.log" 2>&1 || fail "fleet-watch --once"
for vehicle in sim-1 serial-1 gpsd-1; do
  grep -q "$vehicle" "$work/watch.log" || fail "fleet-watch --once does not list $vehicle"
done

step "purging"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fleetcast >"$work/apt-purge.log" 2>&1 || fail "apt-get purge fleetcast"
for path in /usr/bin/fleetcast-agent "$unit" /lib/udev/rules.d/60-fleetcast-gnss.rules \
  /etc/fleetcast/agent.yaml /var/lib/fleetcast; do
  [ ! -e "$path" ] || fail "$path is still there after purge"
done
echo "    gone; the user fleetcast stays (Debian leaves system users in place)"
echo "==> package: every check passed"
