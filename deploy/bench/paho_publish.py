#!/usr/bin/env python3
"""Baseline for `fleetcast-bench mqtt`: paho-mqtt publishing the same payload.

usage: paho_publish.py HOST PORT QOS COUNT PAYLOAD_FILE
Publishes COUNT messages (topic bench/paho/fix) with up to 100 in flight, waits until every
one is acknowledged (QoS 1/2) or handed to the socket (QoS 0), prints "messages/s <rate>".
"""
import sys
import time

from paho_common import connected_client, seconds_until_published


def main():
    host, port, qos, count, payload_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    payload = open(payload_file, "rb").read()
    client = connected_client("paho-bench", host, port, 100)
    start = time.perf_counter()
    infos = [client.publish("bench/paho/fix", payload, qos=qos, retain=False) for _ in range(count)]
    elapsed = seconds_until_published(client, infos, start, timeout=60)
    print(f"messages/s {count / elapsed:.0f}")


if __name__ == "__main__":
    main()
