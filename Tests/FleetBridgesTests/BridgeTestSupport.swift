import FleetcastTestSupport
import MQTT

/// A bridged message's payload as the JSON object an application parses.
func jsonObject(_ message: MQTTMessage) throws -> [String: Any] {
    try jsonObject(String(decoding: message.payload, as: UTF8.self))
}
