#!/usr/bin/env python3
"""Baseline for `fleetcast-bench mqtt`: paho-mqtt publishing the same payload.

usage: paho_publish.py HOST PORT QOS COUNT PAYLOAD_FILE
Publishes COUNT messages (topic bench/paho/fix) with up to 100 in flight, waits until every
one is acknowledged (QoS 1/2) or handed to the socket (QoS 0), prints "messages/s <rate>".
"""
import sys
import time

import paho.mqtt.client as mqtt


def main():
    host, port, qos, count, payload_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    payload = open(payload_file, "rb").read()
    # paho-mqtt 2 wants the callback API named; 1.6 (Debian 12's python3-paho-mqtt) has none.
    api = (mqtt.CallbackAPIVersion.VERSION2,) if hasattr(mqtt, "CallbackAPIVersion") else ()
    client = mqtt.Client(*api, client_id="paho-bench", protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(100)
    client.max_queued_messages_set(0)
    client.connect(host, port)
    client.loop_start()
    start = time.perf_counter()
    infos = [client.publish("bench/paho/fix", payload, qos=qos, retain=False) for _ in range(count)]
    for info in infos:
        info.wait_for_publish(timeout=60)
    elapsed = time.perf_counter() - start
    client.disconnect()
    client.loop_stop()
    print(f"messages/s {count / elapsed:.0f}")


if __name__ == "__main__":
    main()
