/// The topic layout of the contract: `{prefix}/{vehicle}/fix`, `…/heading`, `…/status`,
/// `…/backlog`, `…/batch`.
///
/// The prefix (default `fleet`) is one or more non-empty levels without wildcards, e.g.
/// `fleet` or `acme/fleet`. Build topics with ``fix(_:)``, ``heading(_:)``, ``status(_:)``;
/// take received topics apart with ``parse(_:)``.
public struct FleetTopics: Sendable, Hashable {
    /// The kind of message a topic carries: its last level.
    public enum Channel: String, Sendable, CaseIterable {
        case fix, heading, status
        /// Batches of fixes and headings that could not be delivered live, oldest first.
        case backlog
        /// Batches of current fixes and headings, oldest first, from a vehicle on a metered
        /// link that gathers them for up to `uplink.batch` seconds instead of sending each
        /// live (the backlog's payload; a subscriber takes its events as live ones).
        case batch
    }

    /// Why a prefix cannot be used.
    public struct InvalidPrefix: Error, Sendable, Equatable, CustomStringConvertible {
        /// The refused prefix.
        public let prefix: String
        public var description: String {
            "invalid topic prefix \"\(prefix.prefix(80))\": expected one or more non-empty levels separated by '/', without '+', '#', '$' at the start, control characters, or the '.', ' ', '*' and '>' that some brokers (NATS) treat specially (e.g. \"fleet\" or \"acme/fleet\")"
        }
    }

    /// The topic prefix, without a trailing `/`.
    public let prefix: String

    /// The default layout: prefix `fleet`.
    public static let `default` = FleetTopics(uncheckedPrefix: "fleet")

    /// Validates `prefix`; throws ``InvalidPrefix`` when it has empty levels, wildcards, a
    /// leading `$` (reserved by brokers), control characters, or a character that some broker
    /// treats specially: NATS maps topics to subjects, so a `.` or a space closes the
    /// connection of a client that publishes it, and `*` or `>` act as its wildcards.
    public init(prefix: String) throws(InvalidPrefix) {
        let levels = prefix.split(separator: "/", omittingEmptySubsequences: false)
        let refused: Set<UInt8> = [
            UInt8(ascii: "+"), UInt8(ascii: "#"), UInt8(ascii: "."), UInt8(ascii: " "), UInt8(ascii: "*"), UInt8(ascii: ">"),
        ]
        guard !prefix.isEmpty, prefix.utf8.count <= 512, !prefix.hasPrefix("$"),
            levels.allSatisfy({ !$0.isEmpty }),
            !prefix.utf8.contains(where: { refused.contains($0) || $0 < 0x20 || $0 == 0x7F })
        else { throw InvalidPrefix(prefix: prefix) }
        self.prefix = prefix
    }

    private init(uncheckedPrefix: String) { prefix = uncheckedPrefix }

    /// The topic of `vehicle`'s messages of one channel.
    public func topic(_ vehicle: VehicleID, _ channel: Channel) -> String {
        "\(prefix)/\(vehicle.rawValue)/\(channel.rawValue)"
    }

    /// `{prefix}/{vehicle}/fix`: fix JSON, retained.
    public func fix(_ vehicle: VehicleID) -> String { topic(vehicle, .fix) }
    /// `{prefix}/{vehicle}/heading`: heading JSON, retained.
    public func heading(_ vehicle: VehicleID) -> String { topic(vehicle, .heading) }
    /// `{prefix}/{vehicle}/status`: status JSON, retained; `offline` is the last will.
    public func status(_ vehicle: VehicleID) -> String { topic(vehicle, .status) }
    /// `{prefix}/{vehicle}/backlog`: backlog batch JSON, QoS 1, not retained.
    public func backlog(_ vehicle: VehicleID) -> String { topic(vehicle, .backlog) }
    /// `{prefix}/{vehicle}/batch`: a compact batch (binary) or batch JSON (the backlog's
    /// layout), QoS 1, retained (a new subscriber gets the vehicle's last batch, whose last fix
    /// is its newest position).
    public func batch(_ vehicle: VehicleID) -> String { topic(vehicle, .batch) }

    /// `{prefix}/{vehicle}/check`: `fleetcast-agent check`'s test message, not retained. Not
    /// part of the contract: subscribers ignore it (it proves the broker lets the vehicle publish).
    public func check(_ vehicle: VehicleID) -> String { "\(prefix)/\(vehicle.rawValue)/check" }

    /// Whether `topic` is a vehicle's ``check(_:)`` topic.
    public func isCheck(_ topic: String) -> Bool {
        guard topic.hasSuffix("/check"), topic.hasPrefix(prefix + "/") else { return false }
        let vehicle = topic.dropFirst(prefix.utf8.count + 1).dropLast("/check".utf8.count)
        return VehicleID(String(vehicle)) != nil
    }

    /// Subscription filters for the whole fleet (`{prefix}/+/+`) or for the given vehicles
    /// (`{prefix}/{vehicle}/+` each).
    public func filters(vehicles: [VehicleID] = []) -> [String] {
        vehicles.isEmpty ? ["\(prefix)/+/+"] : vehicles.map { "\(prefix)/\($0.rawValue)/+" }
    }

    /// Splits a received topic into vehicle and channel; `nil` when it does not fit the layout
    /// (other prefix, extra or missing levels, an invalid vehicle id, an unknown channel).
    public func parse(_ topic: String) -> (vehicle: VehicleID, channel: Channel)? {
        let utf8 = topic.utf8
        guard utf8.count > prefix.utf8.count + 1, topic.hasPrefix(prefix) else { return nil }
        let rest = utf8.dropFirst(prefix.utf8.count)
        guard rest.first == UInt8(ascii: "/") else { return nil }
        let levels = rest.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard levels.count == 2, VehicleID.isValid(levels[0]),
            let channel = Channel(rawValue: String(decoding: levels[1], as: UTF8.self)),
            let vehicle = VehicleID(String(decoding: levels[0], as: UTF8.self))
        else { return nil }
        return (vehicle, channel)
    }
}
