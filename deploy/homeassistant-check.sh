#!/usr/bin/env bash
# `fleet-watch bridge --to homeassistant` against a real Home Assistant 2024.3.3 (the last release
# for Python 3.11, Debian's python3): discovery of a vehicle's tracker, speed and course sensors,
# its zone enter and exit as Home Assistant events (the bridge's own, then the recorder's format),
# its removal with a clean Home Assistant log, and its rediscovery within 10 s of its agent
# starting again, with no bridge restart. The vehicle is the real fleetcast-agent on its simulated
# receiver, the broker a mosquitto of its own on a free loopback port.
#
#   bash deploy/homeassistant-check.sh
#
# Not part of deploy/test.sh: Home Assistant's install is about 670 MB and takes minutes (see
# docs/fleet-watch.md, "Checked against Home Assistant"). It goes into .build/homeassistant (a
# virtual environment, git-ignored) once and is reused; HOMEASSISTANT_VENV puts it elsewhere.
# FLEET_WATCH and FLEETCAST_AGENT name other binaries (default: .build/debug/…, built if missing).
# Exits 0 when every check passed; prints each phase's time.
set -euo pipefail
cd "$(dirname "$0")/.."

HA_VERSION=2024.3.3
VENV=${HOMEASSISTANT_VENV:-.build/homeassistant}
PYTHON=/usr/bin/python3

need=()
command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
command -v mosquitto_pub >/dev/null || need+=(mosquitto-clients)
"$PYTHON" -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need[@]}"
fi

if ! "$VENV/bin/python" -c "import homeassistant.const as c, sys; sys.exit(c.__version__ != '$HA_VERSION')" 2>/dev/null; then
    echo "== installing Home Assistant $HA_VERSION into $VENV"
    start=$(date +%s)
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q "homeassistant==$HA_VERSION"
    # What the integrations Home Assistant always loads (frontend, cloud, backup, hardware, …)
    # and those the check adds (http, mqtt, onboarding) need, pinned as their manifests in
    # 2024.3.3 pin them, with Home Assistant's own constraints; whatever else they need, Home
    # Assistant installs at its first start. josepy 2 removed what the acme package imported by
    # the cloud integration's hass-nabucasa needs: without josepy < 2 the cloud fails to load.
    "$VENV/bin/pip" install -q -c "$("$VENV/bin/python" -c 'import homeassistant, os; print(os.path.dirname(homeassistant.__file__))')/package_constraints.txt" \
        'josepy<2' paho-mqtt==1.6.1 Pillow==10.2.0 janus==1.0.0 aiohttp-fast-url-dispatcher==0.3.0 aiohttp-zlib-ng==0.3.1 \
        home-assistant-frontend==20240307.0 psutil-home-assistant==0.0.1 securetar==2024.2.1 ifaddr==0.2.0
    echo "== installed in $(($(date +%s) - start)) s ($(du -sh "$VENV" | cut -f1))"
fi

FLEET_WATCH=${FLEET_WATCH:-.build/debug/fleet-watch}
FLEETCAST_AGENT=${FLEETCAST_AGENT:-.build/debug/fleetcast-agent}
if [ ! -x "$FLEET_WATCH" ] || [ ! -x "$FLEETCAST_AGENT" ]; then
    swift build --product fleet-watch
    swift build --product fleetcast-agent
fi

exec "$VENV/bin/python" deploy/homeassistant-check.py --fleet-watch "$FLEET_WATCH" --agent "$FLEETCAST_AGENT" \
    --hass "$VENV/bin/hass"
