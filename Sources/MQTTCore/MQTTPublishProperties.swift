/// MQTT 5 properties sent with a publish. Ignored (not sent) on MQTT 3.1.1.
public struct MQTTPublishProperties: Sendable, Hashable {
    /// The MQTT 5 content type, e.g. `application/json`; `nil` sends none.
    public var contentType: String?
    /// The MQTT 5 message expiry interval in whole seconds; `nil` means the message never expires.
    public var messageExpirySeconds: UInt32?

    /// Creates publish properties.
    public init(contentType: String? = nil, messageExpirySeconds: UInt32? = nil) {
        self.contentType = contentType
        self.messageExpirySeconds = messageExpirySeconds
    }

    /// No properties.
    public static let none = MQTTPublishProperties()
    /// `application/json` content type, no expiry.
    public static let json = MQTTPublishProperties(contentType: "application/json")
}
