"""The Home Assistant bridge against a real Home Assistant: run by deploy/homeassistant-check.sh
with the Python of Home Assistant's virtual environment (it has aiohttp).

It starts a mosquitto, a Home Assistant with a fresh configuration (onboarded through its REST
API, which gives the access token; its MQTT integration added through the config flow, as a user
adds it), `fleet-watch bridge --to homeassistant --zones`, and `fleetcast-agent` on its
simulated receiver (every fix), then reads what Home Assistant made of it through its REST API
and its WebSocket API (state changes), and its log (home-assistant.log: warnings and errors).
Each check prints PASS or FAIL; the exit status is 1 when one failed.
"""

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import aiohttp

VEHICLE = "van-7"
ORIGIN = (48.0, 11.0)  # the simulated vehicle's start: it drives east first, 1.2 km
HOME = (52.0, 4.0)  # Home Assistant's home, far from the drive


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def east_of_origin(metres: float) -> list:
    lon = ORIGIN[1] + metres / (111_320 * math.cos(math.radians(ORIGIN[0])))
    return [lon, ORIGIN[0]]


class Run:
    def __init__(self, args):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="homeassistant-check-")
        self.mqtt_port = free_port()
        self.http_port = free_port()
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.processes = {}
        self.failures = 0
        self.figures = []
        self.events = []  # state_changed events of the vehicle's entities, as received
        self.token = None

    # -- output

    def check(self, ok: bool, what: str, detail: str = ""):
        print(f"{'PASS' if ok else 'FAIL'}  {what}{(': ' + detail) if detail else ''}", flush=True)
        if not ok:
            self.failures += 1
        return ok

    def figure(self, what: str, seconds: float):
        self.figures.append((what, seconds))
        print(f"      {what}: {seconds:.1f} s", flush=True)

    # -- processes

    def start(self, name: str, argv: list, **kwargs):
        log = open(os.path.join(self.dir, f"{name}.log"), "ab")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, **kwargs)
        return self.processes[name]

    def stop(self, name: str, sig=signal.SIGTERM, timeout=20):
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def log_of(self, name: str) -> str:
        with open(os.path.join(self.dir, f"{name}.log"), errors="replace") as f:
            return f.read()

    def mosquitto_pub(self, topic: str, payload: str | None, retain=True):
        argv = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.mqtt_port), "-q", "1", "-t", topic]
        argv += ["-n"] if payload is None else ["-m", payload]
        if retain:
            argv.append("-r")
        subprocess.run(argv, check=True)

    def retained(self, topic: str) -> str | None:
        out = subprocess.run(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(self.mqtt_port), "-t", topic, "-C", "1", "-W", "1"],
            capture_output=True, text=True).stdout
        return out.strip() or None

    async def wait_for(self, what: str, timeout: float, condition, interval=0.25):
        """Polls `condition` (async) until it returns something true; returns it, or None."""
        deadline = time.monotonic() + timeout
        while True:
            value = await condition()
            if value:
                return value
            if time.monotonic() > deadline:
                print(f"      (timed out after {timeout:.0f} s waiting for {what})", flush=True)
                return None
            await asyncio.sleep(interval)

    # -- Home Assistant's APIs

    async def get(self, path: str):
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with self.session.get(self.base + path, headers=headers) as response:
            if response.status != 200:
                return None
            return await response.json()

    async def post(self, path: str, body: dict):
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with self.session.post(self.base + path, json=body, headers=headers) as response:
            response.raise_for_status()
            return await response.json()

    async def vehicle_states(self) -> dict:
        """The vehicle's entities, by domain: their states as the REST API gives them."""
        states = await self.get("/api/states") or []
        found = {}
        for state in states:
            domain, _, object_id = state["entity_id"].partition(".")
            if object_id.startswith("van_7"):
                found[(domain, object_id)] = state
        return found

    def entity(self, states: dict, domain: str, suffix: str = ""):
        return states.get((domain, "van_7" + suffix))

    def log_problems(self, since: int) -> list:
        """The warning and error records in Home Assistant's log after byte `since`."""
        path = os.path.join(self.config, "home-assistant.log")
        with open(path, errors="replace") as f:
            f.seek(since)
            text = f.read()
        return [line for line in text.splitlines() if " WARNING " in line or " ERROR " in line or " CRITICAL " in line]

    def log_size(self) -> int:
        path = os.path.join(self.config, "home-assistant.log")
        return os.path.getsize(path) if os.path.exists(path) else 0

    async def watch_events(self, access_token: str):
        async with self.session.ws_connect(self.base + "/api/websocket") as ws:
            await ws.receive_json()  # auth_required
            await ws.send_json({"type": "auth", "access_token": access_token})
            assert (await ws.receive_json())["type"] == "auth_ok"
            await ws.send_json({"id": 1, "type": "auth/long_lived_access_token", "client_name": "fleetcast-check", "lifespan": 1})
            self.long_lived = (await ws.receive_json())["result"]
            await ws.send_json({"id": 2, "type": "subscribe_events", "event_type": "state_changed"})
            async for message in ws:
                data = json.loads(message.data)
                if data.get("type") != "event":
                    continue
                event = data["event"]["data"]
                if event["entity_id"].startswith("event.van_7"):
                    self.events.append(event)

    def zone_events(self) -> list:
        """The zone events Home Assistant fired, in order. An event entity's state is the time of
        its latest event: it comes back after the entity was unavailable, or restored, and is
        then the same event again, so each time counts once."""
        out, times = [], set()
        for event in self.events:
            new = event.get("new_state") or {}
            attributes = new.get("attributes", {})
            if new.get("state") not in (None, "unknown", "unavailable") and "event_type" in attributes:
                if new["state"] not in times:
                    times.add(new["state"])
                    out.append(f"{attributes['event_type']} {attributes.get('zone')}")
        return out

    # -- the check

    async def main(self):
        args = self.args
        print(f"== in {self.dir}: mosquitto on {self.mqtt_port}, Home Assistant on {self.http_port}", flush=True)
        with open(os.path.join(self.dir, "mosquitto.conf"), "w") as f:
            f.write(f"listener {self.mqtt_port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
            if os.geteuid() == 0:
                f.write("user root\n")
        self.start("mosquitto", [shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", os.path.join(self.dir, "mosquitto.conf")])

        self.config = os.path.join(self.dir, "homeassistant")
        os.makedirs(self.config)
        with open(os.path.join(self.config, "configuration.yaml"), "w") as f:
            f.write(f"""homeassistant:
  name: Fleetcast check
  latitude: {HOME[0]}
  longitude: {HOME[1]}
  elevation: 0
  unit_system: metric
  time_zone: UTC
  country: DE
  currency: EUR
http:
  server_host: 127.0.0.1
  server_port: {self.http_port}
api:
config:
onboarding:
websocket_api:
logger:
  default: warning
""")
        started = time.monotonic()
        self.start("hass", [os.path.abspath(args.hass), "-c", self.config])
        self.session = aiohttp.ClientSession()

        async def http_up():
            try:
                return await self.get("/api/onboarding") is not None
            except aiohttp.ClientError:
                return False

        if not await self.wait_for("Home Assistant's HTTP API", 300, http_up, interval=0.5):
            self.check(False, "Home Assistant started", self.log_of("hass")[-3000:])
            return
        self.figure("Home Assistant start to its HTTP API", time.monotonic() - started)

        # Onboarding: the owner, and an access token for them.
        client_id = self.base + "/"
        created = await self.post(
            "/api/onboarding/users",
            {"client_id": client_id, "name": "Check", "username": "check", "password": "check-password", "language": "en"})
        async with self.session.post(
                self.base + "/auth/token",
                data={"grant_type": "authorization_code", "code": created["auth_code"], "client_id": client_id}) as r:
            access = (await r.json())["access_token"]
        self.token = access
        self.watcher = asyncio.create_task(self.watch_events(access))
        await self.wait_for("the long-lived token", 10, lambda: asyncio.sleep(0, getattr(self, "long_lived", None)))
        self.token = self.long_lived
        self.check(bool(self.token), "onboarded; a long-lived access token made")

        async def running():
            config = await self.get("/api/config")
            return config and config.get("state") == "RUNNING"
        self.check(bool(await self.wait_for("Home Assistant running", 300, running, interval=0.2)), "Home Assistant running")
        self.figure("Home Assistant start to running (every integration set up)", time.monotonic() - started)

        # The MQTT integration, as a user adds it (Settings → Integrations → MQTT).
        flow = await self.post("/api/config/config_entries/flow", {"handler": "mqtt", "show_advanced_options": False})
        done = await self.post(
            f"/api/config/config_entries/flow/{flow['flow_id']}", {"broker": "127.0.0.1", "port": self.mqtt_port})
        self.check(done.get("type") == "create_entry", "MQTT integration added", json.dumps(done)[:300])
        async def mqtt_loaded():
            entries = await self.get("/api/config/config_entries/entry") or []
            return any(e["domain"] == "mqtt" and e["state"] == "loaded" for e in entries)
        self.check(bool(await self.wait_for("the MQTT integration loaded", 30, mqtt_loaded)), "MQTT integration loaded")
        log_start = self.log_size()

        zones = os.path.join(self.dir, "zones.geojson")
        with open(zones, "w") as f:
            json.dump({"type": "FeatureCollection", "features": [
                {"type": "Feature", "properties": {"name": "Depot", "radius": 30},
                 "geometry": {"type": "Point", "coordinates": east_of_origin(60)}},
                {"type": "Feature", "properties": {"name": "Customer", "radius": 40},
                 "geometry": {"type": "Point", "coordinates": east_of_origin(300)}},
            ]}, f)
        broker = f"mqtt://127.0.0.1:{self.mqtt_port}"
        bridge_argv = [os.path.abspath(args.fleet_watch), "bridge", "--to", "homeassistant", "--broker", broker]
        self.start("bridge", bridge_argv + ["--zones", zones])
        with open(os.path.join(self.dir, "agent.yaml"), "w") as f:
            f.write("report:\n  everyFix: true\n")
        agent_argv = [
            os.path.abspath(args.agent), "run", "--config", os.path.join(self.dir, "agent.yaml"), "--vehicle", VEHICLE,
            "--broker", broker, "--state-dir", os.path.join(self.dir, "agent-state"),
            "--source", f"sim:?rate=1&speed=20&lat={ORIGIN[0]}&lon={ORIGIN[1]}",
        ]
        await asyncio.sleep(2)

        # 1. Discovery: the tracker, the speed and course sensors, the zone event entity.
        started = time.monotonic()
        self.start("agent", agent_argv)

        async def discovered():
            states = await self.vehicle_states()
            wanted = [self.entity(states, "device_tracker"), self.entity(states, "sensor", "_speed"),
                      self.entity(states, "sensor", "_course"), self.entity(states, "event", "_zone")]
            return states if all(wanted) else None

        states = await self.wait_for("the vehicle's entities", 60, discovered)
        if not self.check(states is not None, "discovered: device_tracker, speed and course sensors, zone event entity",
                          str(sorted(await self.vehicle_states()))):
            # An older bridge (FLEET_WATCH): go on with its tracker, to see what else it lacks.
            states = await self.vehicle_states()
            if not self.entity(states, "device_tracker"):
                return
        self.figure("agent start to all four entities in Home Assistant", time.monotonic() - started)
        async def positioned():
            t = self.entity(await self.vehicle_states(), "device_tracker")
            return t if t and "latitude" in t["attributes"] else None
        tracker = await self.wait_for("the tracker's position", 10, positioned) or self.entity(states, "device_tracker")
        self.check(tracker["attributes"].get("source_type") == "gps" and "latitude" in tracker["attributes"]
                   and tracker["state"] == "not_home", "the tracker has a GPS position (away from home)",
                   json.dumps(tracker)[:400])
        speed = self.entity(states, "sensor", "_speed") or {"attributes": {}}
        self.check(speed["attributes"].get("unit_of_measurement") == "km/h" and speed["attributes"].get("device_class") == "speed",
                   "the speed sensor is in km/h, device class speed", json.dumps(speed["attributes"]))
        course = self.entity(states, "sensor", "_course") or {"attributes": {}}
        self.check(course["attributes"].get("unit_of_measurement") == "°", "the course sensor is in degrees",
                   json.dumps(course["attributes"]))

        async def cruising():
            s = await self.vehicle_states()
            sp, co = self.entity(s, "sensor", "_speed"), self.entity(s, "sensor", "_course")
            try:
                return (sp["state"], co["state"]) if float(sp["state"]) == 72 and float(co["state"]) == 90 else None
            except (TypeError, ValueError, KeyError):
                return None

        # The simulated vehicle accelerates to 20 m/s (72 km/h) heading east (90°) on its first leg.
        seen = await self.wait_for("72 km/h and 90°", 30, cruising)
        states = await self.vehicle_states()
        self.check(seen is not None, f"speed and course while it drives east at 20 m/s: {seen} (km/h, °)",
                   f"{self.entity(states, 'sensor', '_speed')} {self.entity(states, 'sensor', '_course')}")

        # 2. Zone enter and exit as Home Assistant events.
        want = ["enter Depot", "exit Depot", "enter Customer", "exit Customer"]
        await self.wait_for("four zone events", 60, lambda: asyncio.sleep(0, self.zone_events()[:4] == want))
        self.check(self.zone_events()[:4] == want, "zone enter and exit as events of event.van_7_zone", str(self.zone_events()))

        # 3. Removal as docs/fleet-watch.md says: the agent stopped, the configs cleared, then
        # (once Home Assistant removed the device) the attributes and the fleet's topics.
        removal_log = self.log_size()
        self.stop("agent")

        async def unavailable():
            s = await self.vehicle_states()
            return s and all(v["state"] == "unavailable" for v in s.values() if not v["entity_id"].startswith("event."))
        self.check(bool(await self.wait_for("unavailable", 15, unavailable)), "stopped agent: its entities unavailable")
        # HOMEASSISTANT_CHECK_REMOVAL=fleet-first: this first removal in the order the docs gave
        # before (to see an older bridge's configs make Home Assistant log template errors).
        config_first = os.environ.get("HOMEASSISTANT_CHECK_REMOVAL") != "fleet-first"
        await self.remove(config_first=config_first)
        problems = self.log_problems(removal_log)
        self.check(not problems, f"removed ({'configs' if config_first else 'fleet topics'} first), Home Assistant's log clean",
                   "\n".join(problems))

        # 4. Started again: discovered again within 10 s, the bridge still the same process.
        started = time.monotonic()
        self.start("agent", agent_argv)
        states = await self.wait_for("the entities again", 30, discovered, interval=0.1)
        elapsed = time.monotonic() - started
        self.check(states is not None and elapsed < 10, f"rediscovered {elapsed:.1f} s after the agent started again (< 10 s)")
        self.check(self.processes["bridge"].poll() is None, "with no bridge restart")
        self.figure("agent restart to all four entities again", elapsed)

        # 5. Removed in the order the docs gave before (the fleet's topics first): the templates
        # read the cleared topics without an error.
        removal_log = self.log_size()
        self.stop("agent")
        await self.wait_for("unavailable", 15, unavailable)
        await self.remove(config_first=False)
        problems = self.log_problems(removal_log)
        self.check(not problems, "removed with the fleet's topics cleared first, log still clean", "\n".join(problems))

        # 6. The recorder's zone events (`record --zones` publishes them on fleetcast/zones/<vehicle>),
        # read by the event entity straight from there: a bridge with --recorder-zone-events.
        self.stop("bridge")
        self.start("bridge2", bridge_argv + ["--recorder-zone-events", "fleetcast/zones"])
        await asyncio.sleep(2)
        self.start("agent", agent_argv)
        await self.wait_for("the entities", 30, discovered)
        topic = f"homeassistant/event/{VEHICLE}/zone/config"
        config = await self.wait_for("the recorder's event config", 10,
                                     lambda: asyncio.to_thread(self.retained, topic))
        self.check(config is not None and '"state_topic":"fleetcast/zones/van-7"' in config, "event entity reads fleetcast/zones/van-7")
        await asyncio.sleep(2)
        before = len(self.zone_events())
        for kind in ("enter", "exit"):
            # The recorder's payload, as docs/operations.md gives it (the recorder itself needs
            # PostgreSQL; its publishing is tested in FleetHistoryTests).
            self.mosquitto_pub(f"fleetcast/zones/{VEHICLE}", json.dumps({
                "v": 1, "vehicle": VEHICLE, "zone": "Yard 2", "event": kind, "time": "2026-12-02T08:04:55.000Z",
                "lat": ORIGIN[0], "lon": ORIGIN[1]}, separators=(",", ":")), retain=False)
            await asyncio.sleep(1.2)  # an event entity's state is the event's time: one per second shows
        got = await self.wait_for("the recorder's events", 10,
                                  lambda: asyncio.sleep(0, self.zone_events()[before:] if len(self.zone_events()) >= before + 2 else None))
        self.check(got == ["enter Yard 2", "exit Yard 2"], "the recorder's zone events as Home Assistant events", str(got))
        self.stop("agent")

        problems = self.log_problems(log_start)
        self.check(not problems, "no warning or error in Home Assistant's log since MQTT was added", "\n".join(problems))
        print("== Home Assistant log (warnings and errors, whole run):", flush=True)
        for line in self.log_problems(0):
            print("   " + line)

    async def remove(self, config_first: bool):
        configs = [f"homeassistant/device_tracker/{VEHICLE}/config", f"homeassistant/sensor/{VEHICLE}/speed/config",
                   f"homeassistant/sensor/{VEHICLE}/course/config", f"homeassistant/event/{VEHICLE}/zone/config"]
        data = [f"fleetcast/homeassistant/{VEHICLE}/attributes"] + [f"fleet/{VEHICLE}/{c}" for c in ("fix", "heading", "status")]

        async def gone():
            return not await self.vehicle_states()
        first, then = (configs, data) if config_first else (data, configs)
        for topic in first:
            self.mosquitto_pub(topic, None)
        if config_first:
            self.check(bool(await self.wait_for("the entities removed", 15, gone)), "configs cleared: the entities removed")
        else:
            await asyncio.sleep(2)
        for topic in then:
            self.mosquitto_pub(topic, None)
        ok = await self.wait_for("the entities removed", 15, gone)
        await asyncio.sleep(2)  # what Home Assistant would log about it
        devices = [d for d in (await self.device_names()) if d == VEHICLE]
        self.check(bool(ok) and not devices, "the vehicle's device and entities are gone from Home Assistant")

    async def device_names(self) -> list:
        """The devices' names, through the WebSocket API's device registry."""
        async with self.session.ws_connect(self.base + "/api/websocket") as ws:
            await ws.receive_json()
            await ws.send_json({"type": "auth", "access_token": self.token})
            await ws.receive_json()
            await ws.send_json({"id": 1, "type": "config/device_registry/list"})
            result = (await ws.receive_json()).get("result") or []
            return [d.get("name") for d in result]

    async def close(self):
        for name in list(self.processes)[::-1]:
            self.stop(name)
        if hasattr(self, "watcher"):
            self.watcher.cancel()
        if hasattr(self, "session"):
            await self.session.close()


async def run(args) -> int:
    r = Run(args)
    try:
        await r.main()
    except Exception as error:  # noqa: BLE001 (the check reports whatever stopped it)
        import traceback
        traceback.print_exc()
        r.check(False, "the check ran to its end", repr(error))
    finally:
        await r.close()
    print(f"== {'all checks passed' if r.failures == 0 else f'{r.failures} checks failed'}; files in {r.dir}")
    return 0 if r.failures == 0 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fleet-watch", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--hass", required=True)
    sys.exit(asyncio.run(run(parser.parse_args())))
