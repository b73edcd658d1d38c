#!/usr/bin/env python3
"""Baseline for `fleetcast-bench e2e`: an NMEA-to-MQTT bridge written the usual way
(pynmea2 to parse, paho-mqtt to publish one JSON message per fix at QoS 1).

usage: nmea_bridge.py HOST PORT FILE [VEHICLE [INFLIGHT]]
Reads FILE as fast as possible, publishes a fix per RMC sentence with a valid position (merged
with the last GGA's altitude and satellites) to fleet/VEHICLE/fix (default vehicle "py"), with
INFLIGHT (default 100) messages awaiting PUBACK at once, waits for every PUBACK, prints
"fixes/s <rate>". The time is written as the contract says (ISO 8601, milliseconds, Z).
"""
import json
import sys
import time

import pynmea2
from paho_common import connected_client, seconds_until_published


def main():
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    vehicle = sys.argv[4] if len(sys.argv) > 4 else "py"
    inflight = int(sys.argv[5]) if len(sys.argv) > 5 else 100
    topic = f"fleet/{vehicle}/fix"
    client = connected_client(f"py-bridge-{vehicle}", host, port, inflight)
    seq, last_gga, infos = 0, None, []
    start = time.perf_counter()
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            try:
                msg = pynmea2.parse(line.strip(), check=True)
            except (pynmea2.ParseError, ValueError, AttributeError, TypeError):
                continue
            if isinstance(msg, pynmea2.types.talker.GGA):
                last_gga = msg
            elif isinstance(msg, pynmea2.types.talker.RMC) and msg.status == "A" and msg.datestamp:
                seq += 1
                t = msg.timestamp
                fix = {"v": 1, "vehicle": vehicle, "seq": seq,
                       "time": f"{msg.datestamp.isoformat()}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
                               f".{t.microsecond // 1000:03d}Z",
                       "lat": msg.latitude, "lon": msg.longitude,
                       "speed": float(msg.spd_over_grnd or 0) * 0.514444,
                       "track": float(msg.true_course or 0), "mode": 2}
                if last_gga is not None and last_gga.altitude is not None:
                    fix["altMSL"] = float(last_gga.altitude)
                    fix["sats"] = int(last_gga.num_sats or 0)
                    fix["mode"] = 3
                infos.append(client.publish(topic, json.dumps(fix), qos=1, retain=True))
    elapsed = seconds_until_published(client, infos, start, timeout=120)
    print(f"fixes/s {seq / elapsed:.0f} fixes {seq}")


if __name__ == "__main__":
    main()
