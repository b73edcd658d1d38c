#!/usr/bin/env bash
# The packages, tested as a vehicle and a fleet-side machine would get them (called by deploy/test.sh; root, on a throwaway
# Debian machine where systemd need not run): builds dist/fleetcast_<version>_<arch>.deb with
# deploy/package.sh, installs it with apt, checks what it put in place, runs the installed
# binaries for real — the agent as the user fleetcast, under the unit's system-call filter,
# MemoryDenyWriteExecute and address families (deploy/deb/sandbox.c), on the simulated
# receiver, a serial port (a pseudo-terminal), gpsd (gpsfake) and a TLS broker, speaking
# sd_notify to a socket standing in for systemd — runs lintian, rates the unit with
# systemd-analyze, and purges the package again. Then the fleet side's package, fleetcast-fleet:
# installed beside it, its three units rated, fleet-watch run as each unit would run it (its
# settings from the installed conffiles, as the user fleet-watch under the same sandbox) against
# an installed agent on sim:, a broker and a PostgreSQL started here, stopped with SIGTERM, purged.
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
pg_started=
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -n "$pg_started" ]; then runuser -u postgres -- "$pgbin/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
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

# FLEETCAST_DEBS=FILE: the packages are built already, FILE holding what deploy/package.sh
# printed (deploy/test.sh builds them while the tests run).
started=$SECONDS
if [ -n "${FLEETCAST_DEBS:-}" ]; then
  step "the packages deploy/package.sh built ($FLEETCAST_DEBS)"
  built=$(cat "$FLEETCAST_DEBS")
else
  step "building (deploy/package.sh)"
  built=$(bash deploy/package.sh)
fi
deb=$(sed -n 1p <<<"$built")
fleet_deb=$(sed -n 2p <<<"$built")
[[ $deb == */fleetcast_*.deb && $fleet_deb == */fleetcast-fleet_*.deb && -s $deb && -s $fleet_deb ]] ||
  fail "deploy/package.sh printed '$built'"
echo "    $deb ($(du -k "$deb" | cut -f1) KiB) and $fleet_deb ($(du -k "$fleet_deb" | cut -f1) KiB), in $((SECONDS - started)) s"

step "lintian"
for package in "$deb" "$fleet_deb"; do
  lintian --fail-on error "$package" | tee -a "$work/lintian.txt" || fail "lintian reports errors in $package"
done

step "installing with apt (no systemd running needed)"
# What an earlier run left installed goes first (the fleet package too: it holds fleet-watch).
for package in fleetcast-fleet fleetcast; do
  if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok'; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "$package" >/dev/null
  fi
done
rm -f /etc/fleetcast/fleet-watch.secrets
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
# A unit's system-call filter, expanded as systemd expands it, into the list sandbox.c takes.
expand() {
  systemd-analyze syscall-filter --no-pager "$1" | while read -r word _; do
    case $word in
      '' | '#'*) ;;
      @*) [ "$word" = "$1" ] || expand "$word" ;;
      *) echo "$word" ;;
    esac
  done
}
syscalls_of() {  # UNIT OUTPUT
  local filter list item
  for setting in MemoryDenyWriteExecute=yes SystemCallErrorNumber=EPERM 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6'; do
    grep -qx "$setting" "$1" || fail "$1 no longer says $setting: update deploy/deb/sandbox.c to match"
  done
  # In order, as systemd applies them: the first line (an allow list) starts the list, a later
  # allow line adds to it, a deny line (~…) takes from it (the agent's unit gives adjtimex back
  # after ~@privileged took it).
  : >"$2"
  while IFS= read -r filter; do
    list=allow
    [[ $filter == '~'* ]] && { list=deny; filter=${filter#\~}; }
    for item in $filter; do
      if [[ $item == @* ]]; then expand "$item"; else echo "$item"; fi
    done | sort -u >"$2.items"
    if [ "$list" = deny ]; then comm -23 "$2" "$2.items" >"$2.next"; else sort -u "$2" "$2.items" >"$2.next"; fi
    mv "$2.next" "$2"
  done < <(sed -n 's/^SystemCallFilter=//p' "$1")
  rm -f "$2.items"
}
syscalls_of "$unit" "$work/syscalls"
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
start_agent() {  # VEHICLE SOURCE BROKER [FLAG…]; EVERY_FIX=1: every fix (not the default reporting policy)
  local vehicle=$1 source=$2 broker=$3
  shift 3
  install -d -o fleetcast -g fleetcast -m 0750 "$work/state-$vehicle"
  socat -u "UNIX-RECV:$work/notify-$vehicle,perm=0777" "OPEN:$work/notify-$vehicle.log,creat,append" &
  pids+=($!)
  for _ in $(seq 50); do [ -S "$work/notify-$vehicle" ] && break; sleep 0.1; done
  (umask 0077; exec env NOTIFY_SOCKET="$work/notify-$vehicle" WATCHDOG_USEC=2000000 ${EVERY_FIX:+FLEETCAST_REPORT_EVERY_FIX=1} \
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
  # The vehicle's own topic; its payload (the standard field set names no vehicle: the topic does).
  grep -q '"seq":[0-9]*,.*"lat":' "$work/fix-$vehicle.txt" || fail "no fix from $vehicle"
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
# gpsfake and the gpsd it starts: their own process group, ended as one. TMPDIR of its own:
# gpsfake names gpsd's control socket $TMPDIR/gpsfake-<pid>.sock, gpsd leaves it behind, and
# a gpsfake with a recycled pid that finds an old one starts gpsd without its device
# (FleetcastTestSupport's GPSFake says more).
mkdir "$work/gpsfake"
TMPDIR="$work/gpsfake" setsid gpsfake -q -P "$gpsd_port" -c 0.05 Tests/NMEATests/Fixtures/gpsd/bt451.log \
  >"$work/gpsfake.log" 2>&1 &
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

step "the fleet package (fleetcast-fleet): installing with apt beside the vehicle's"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$fleet_deb" >"$work/apt-install-fleet.log" 2>&1 \
  || fail "apt-get install ./$fleet_deb"
[ "$(dpkg-query -W -f='${Version}' fleetcast-fleet)" = "$version" ] || fail "fleetcast-fleet's version is not $version"
fleet_depends=$(dpkg-query -W -f='${Depends}' fleetcast-fleet)
echo "    fleetcast-fleet $version; Depends: $fleet_depends"
grep -q libjs-leaflet <<<"$fleet_depends" || fail "fleetcast-fleet does not depend on libjs-leaflet"
ldd /usr/bin/fleet-watch >"$work/ldd-fleet.txt"
if grep -E 'libswift|libFoundation|lib_Foundation|libicu|libdispatch|libBlocksRuntime|not found' "$work/ldd-fleet.txt"; then
  fail "/usr/bin/fleet-watch loads the libraries above"
fi
echo "    /usr/bin/fleet-watch: $(awk '{print $1}' "$work/ldd-fleet.txt" | tr '\n' ' ')"
fleet_units=(fleet-watch-record.service fleet-watch-serve.service fleet-watch-bridge@.service)
for unit_file in "${fleet_units[@]}"; do
  [ -f "/lib/systemd/system/$unit_file" ] || fail "no /lib/systemd/system/$unit_file"
  [ -z "$(find /etc/systemd/system -name "$unit_file")" ] || fail "$unit_file was enabled on installation"
done
for conf in fleet-watch-record.conf fleet-watch-serve.conf fleet-watch-bridge-homeassistant.conf fleet-watch-bridge-owntracks.conf; do
  dpkg-query -W -f='${Conffiles}\n' fleetcast-fleet | grep -q "^ /etc/fleetcast/$conf " || fail "/etc/fleetcast/$conf is not a conffile"
done
getent passwd fleet-watch >/dev/null || fail "no user fleet-watch"

step "the fleet units: systemd-analyze verify and security (exposure <= 2.0 each)"
for name in fleet-watch-record.service fleet-watch-serve.service fleet-watch-bridge@owntracks.service fleet-watch-bridge@homeassistant.service; do
  systemd-analyze verify "$name" || fail "systemd-analyze verify $name"
  # Offline, a unit is rated from its file; an instance's file is its template's under its own name.
  cp "/lib/systemd/system/${name/@*./@.}" "$work/$name"
  rating=$(systemd-analyze security --offline=true "$work/$name" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
  echo "    $name: exposure $rating"
  awk -v r="$rating" 'BEGIN { exit !(r != "" && r <= 2.0) }' || fail "systemd-analyze security rates $name '$rating' (want <= 2.0)"
done

step "running the installed fleet-watch as each unit would, while an installed agent publishes"
# A stream of fixes for the fleet side to record, map and bridge.
EVERY_FIX=1 start_agent fleet-1 'sim:?rate=10' "mqtt://127.0.0.1:$port"
fleet_agent=$agent
# A PostgreSQL for the recorder, with a password (scram-sha-256), which the unit takes from
# /etc/fleetcast/fleet-watch.secrets.
pgbin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort -V | tail -n 1)
[ -x "$pgbin/initdb" ] || fail "no PostgreSQL server (postgresql)"
pgdata=$work/pg/data
install -d -o postgres -g postgres -m 0700 "$work/pg"
printf 'fleet-secret\n' >"$work/pg/password"; chown postgres "$work/pg/password"
runuser -u postgres -- "$pgbin/initdb" -D "$pgdata" -U fleetcast --pwfile="$work/pg/password" --auth=scram-sha-256 \
  >"$work/initdb.log" 2>&1 || fail "initdb"
pg_port=$(free_port)
runuser -u postgres -- "$pgbin/pg_ctl" -D "$pgdata" -l "$work/pg/postgres.log" -w \
  -o "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1" start >/dev/null || fail "pg_ctl start"
pg_started=1
PGPASSWORD=fleet-secret createdb -h 127.0.0.1 -p "$pg_port" -U fleetcast fleetcast || fail "createdb"

# What an administrator does: the settings in the conffiles, the password in the secrets file.
listen_port=$(free_port)
sed -i -e "s|^BROKER=.*|BROKER=mqtt://127.0.0.1:$port|" \
  -e "s|^POSTGRES=.*|POSTGRES=postgres://fleetcast@127.0.0.1:$pg_port/fleetcast?sslmode=disable|" \
  -e "s|^LISTEN=.*|LISTEN=127.0.0.1:$listen_port|" /etc/fleetcast/fleet-watch-*.conf
install -m 0600 /dev/null /etc/fleetcast/fleet-watch.secrets
echo 'PGPASSWORD=fleet-secret' >/etc/fleetcast/fleet-watch.secrets

# fleet-watch as UNIT (INSTANCE for a template) starts it: ExecStart with %i and the settings of
# its EnvironmentFile= lines expanded as systemd does (${VAR}: one argument; $VAR: split at
# spaces), as fleet-watch, umask 0077, no capabilities, the unit's seccomp sandbox, and a
# datagram socket standing in for systemd's $NOTIFY_SOCKET. Sets $unit_pid.
start_unit() {  # NAME UNIT-FILE [INSTANCE]
  local name=$1 file=/lib/systemd/system/$2 instance=${3:-} exec env_file command
  local -a environment=() arguments=()
  exec=$(sed -n 's/^ExecStart=//p' "$file")
  exec=${exec//%i/$instance}
  while read -r env_file; do
    env_file=${env_file//%i/$instance}
    [[ $env_file == -* ]] && { env_file=${env_file#-}; [ -e "$env_file" ] || continue; }
    while IFS= read -r line; do
      [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && environment+=("$line")
    done <"$env_file"
  done < <(sed -n 's/^EnvironmentFile=//p' "$file")
  command=$(sed -E 's/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/"${\1}"/g' <<<"$exec")
  mapfile -d '' -t arguments < <(env -i "${environment[@]}" bash -fc "printf '%s\\0' $command")
  syscalls_of "$file" "$work/syscalls-$name"
  socat -u "UNIX-RECV:$work/notify-$name,perm=0777" "OPEN:$work/notify-$name.log,creat,append" &
  pids+=($!)
  for _ in $(seq 50); do [ -S "$work/notify-$name" ] && break; sleep 0.1; done
  echo "    $name: ${arguments[*]}"
  (umask 0077; exec env "${environment[@]}" NOTIFY_SOCKET="$work/notify-$name" WATCHDOG_USEC=2000000 \
    setpriv --reuid=fleet-watch --regid=fleet-watch --init-groups --inh-caps=-all --bounding-set=-all \
    "$work/sandbox" "$work/syscalls-$name" -- "${arguments[@]}") >"$work/$name.log" 2>&1 &
  unit_pid=$!
  pids+=("$unit_pid")
  for _ in $(seq 300); do grep -q READY=1 "$work/notify-$name.log" 2>/dev/null && return; sleep 0.1; done
  fail "$name: no READY=1 within 30 s"
}
# SIGTERM to the main process, as systemctl stop sends it: exit 0 within 5 s, and the notify
# protocol spoken.
stop_unit() {  # NAME PID
  local name=$1 pid=$2 status=0 started
  started=$(date +%s%N)
  kill -TERM "$pid"
  wait "$pid" || status=$?
  local elapsed_ms=$((($(date +%s%N) - started) / 1000000))
  echo "    $name: exit $status ${elapsed_ms} ms after SIGTERM"
  [ "$status" -eq 0 ] || fail "$name exited $status after SIGTERM"
  [ "$elapsed_ms" -lt 5000 ] || fail "$name took ${elapsed_ms} ms to exit after SIGTERM"
  for message in READY=1 WATCHDOG=1 STOPPING=1; do
    grep -q "$message" "$work/notify-$name.log" || fail "$name: no $message on \$NOTIFY_SOCKET"
  done
}

start_unit record fleet-watch-record.service
record_pid=$unit_pid
start_unit serve fleet-watch-serve.service
serve_pid=$unit_pid
start_unit bridge-owntracks fleet-watch-bridge@.service owntracks
bridge_pid=$unit_pid

rows=0
for _ in $(seq 100); do
  rows=$(PGPASSWORD=fleet-secret psql -h 127.0.0.1 -p "$pg_port" -U fleetcast -d fleetcast -tAc \
    "SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'fleet-1'" 2>/dev/null || echo 0)
  [ "${rows:-0}" -ge 10 ] && break
  sleep 0.2
done
[ "${rows:-0}" -ge 10 ] || fail "record: no rows of fleet-1 in PostgreSQL"
echo "    record: $rows fixes of fleet-1 in PostgreSQL"
curl -sf "http://127.0.0.1:$listen_port/api/vehicles" | grep -q '"id":"fleet-1"' || fail "serve: fleet-1 not on the map"
curl -sS -N "http://127.0.0.1:$listen_port/events" >"$work/events.txt" 2>"$work/curl-events.log" &
browser=$!
pids+=("$browser")
location=$(mosquitto_sub -h 127.0.0.1 -p "$port" -t owntracks/fleet/fleet-1 -C 1 -W 20 2>&1 || true)
grep -q '"_type":"location"' <<<"$location" || fail "bridge: no OwnTracks location of fleet-1 ($location)"
echo "    bridge: owntracks/fleet/fleet-1 $(head -c 100 <<<"$location")…"
sleep 2   # at least one watchdog interval, and updates on the browser's stream

stop_unit serve "$serve_pid"
status=0; wait "$browser" || status=$?
[ "$status" -eq 0 ] || fail "serve: the browser's event stream did not end cleanly (curl $status)"
grep -q '^event: update' "$work/events.txt" || fail "serve: no update on the event stream"
stop_unit bridge-owntracks "$bridge_pid"
stop_unit record "$record_pid"
grep -q 'everything received is written' "$work/record.log" || fail "record: did not write what it received"
kill -TERM "$fleet_agent"; wait "$fleet_agent" || true

step "purging the fleet package"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fleetcast-fleet >"$work/apt-purge-fleet.log" 2>&1 \
  || fail "apt-get purge fleetcast-fleet"
for path in /usr/bin/fleet-watch /lib/systemd/system/fleet-watch-record.service /lib/systemd/system/fleet-watch-serve.service \
  /lib/systemd/system/fleet-watch-bridge@.service /etc/fleetcast/fleet-watch-record.conf /etc/fleetcast/fleet-watch-serve.conf \
  /etc/fleetcast/fleet-watch-bridge-homeassistant.conf /etc/fleetcast/fleet-watch-bridge-owntracks.conf; do
  [ ! -e "$path" ] || fail "$path is still there after purge"
done
# The secrets file is the administrator's, not the package's: it stays, as Debian leaves it.
[ -e /etc/fleetcast/fleet-watch.secrets ] || fail "purge removed the administrator's /etc/fleetcast/fleet-watch.secrets"
rm -f /etc/fleetcast/fleet-watch.secrets
echo "    gone; the user fleet-watch and the administrator's secrets file stay"

step "purging the vehicle package"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq fleetcast >"$work/apt-purge.log" 2>&1 || fail "apt-get purge fleetcast"
for path in /usr/bin/fleetcast-agent "$unit" /lib/udev/rules.d/60-fleetcast-gnss.rules \
  /etc/fleetcast/agent.yaml /var/lib/fleetcast; do
  [ ! -e "$path" ] || fail "$path is still there after purge"
done
echo "    gone; the user fleetcast stays (Debian leaves system users in place)"
echo "==> package: every check passed"
