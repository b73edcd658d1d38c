"""What the paho-mqtt baselines share: the client set up as both publish, and the wait for
every message to be acknowledged before the clock stops."""
import time

import paho.mqtt.client as mqtt


def connected_client(client_id, host, port, inflight):
    """An MQTT 5 client with up to INFLIGHT messages awaiting acknowledgement, an unbounded
    queue, connected and with its network loop running."""
    # paho-mqtt 2 wants the callback API named; 1.6 (Debian 12's python3-paho-mqtt) has none.
    api = (mqtt.CallbackAPIVersion.VERSION2,) if hasattr(mqtt, "CallbackAPIVersion") else ()
    client = mqtt.Client(*api, client_id=client_id, protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(inflight)
    client.max_queued_messages_set(0)
    client.connect(host, port)
    client.loop_start()
    return client


def seconds_until_published(client, infos, start, timeout):
    """Waits for every message of INFOS (acknowledged at QoS 1/2, handed to the socket at QoS 0),
    then disconnects; returns the seconds since START (a time.perf_counter() reading) at the
    last acknowledgement."""
    for info in infos:
        info.wait_for_publish(timeout=timeout)
    elapsed = time.perf_counter() - start
    client.disconnect()
    client.loop_stop()
    return elapsed
