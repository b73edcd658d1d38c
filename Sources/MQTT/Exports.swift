// The client's value types (configuration, QoS, errors, messages, the broker URL, traffic) are
// the pure MQTTCore's; a user of the client gets them with it, as NIO's users get NIOCore.
@_exported import MQTTCore
