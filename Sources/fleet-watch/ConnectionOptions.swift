import ArgumentParser
import FleetProtocol
import FleetWatch
import FleetcastCommandLine
import FleetcastCore
import Foundation
import JSONEscaping
import Logging
import MQTT

/// The options every fleet-watch subcommand shares: the broker and how to reach it (TLS,
/// credentials, client id), what to subscribe to (prefix, vehicles, share group), and logging.
struct ConnectionOptions: ParsableArguments {
    @Option(
        help:
            "The broker: mqtt://[user@]host[:port] or mqtts://… for TLS. Repeat it (or separate with commas) for the nodes of a cluster: fleet-watch connects to one and fails over to the others."
    )
    var broker: [String]

    @Option(name: .customLong("protocol"), help: "MQTT protocol: auto (5, or 3.1.1 with a broker that refuses 5), 5 or 3.1.1.")
    var protocolVersion: String = "auto"

    @Option(help: "The topic prefix of the fleet.")
    var prefix: String = "fleet"

    @Option(name: .customLong("vehicle"), help: "Only this vehicle (repeatable).")
    var vehicles: [String] = []

    @Option(help: "Join this MQTT shared-subscription group, to split the fleet between several fleet-watch processes.")
    var shareGroup: String?

    @OptionGroup var credentials: BrokerCredentialOptions

    @Option(
        help:
            "The MQTT client id (default: fleet-watch-<host>-<pid>; record: fleet-watch-record-<host>[-<share group>], then -2, -3… for the next recorders running at the same time on the host, the same again after a restart: see --state-dir)."
    )
    var clientID: String?

    @Option(help: "The largest MQTT packet taken, in bytes (announced to an MQTT 5 broker; larger messages are dropped unread).")
    var maxPacketSize: Int = FleetPayload.maximumPacketBytes

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        let urls = try brokerURLs()
        if let mixed = urls.first(where: { $0.usesTLS != urls[0].usesTLS }) {
            throw ValidationError("--broker \(urls[0]) and \(mixed) mix mqtt:// and mqtts://; the nodes of one broker take one scheme")
        }
        guard protocolSetting != nil else {
            throw ValidationError("--protocol must be auto, 5 or 3.1.1, not \"\(JSONString.escaped(String(protocolVersion.prefix(40))))\"")
        }
        do { _ = try FleetTopics(prefix: prefix) } catch { throw ValidationError(error.description) }
        for v in vehicles {
            do {
                let vehicle = try VehicleID(validating: v)
                if let problem = vehicle.portabilityProblem { throw ValidationError("--vehicle: \(problem)") }
            } catch let error as VehicleID.ValidationError { throw ValidationError(error.description) }
        }
        guard maxPacketSize >= 1_024 else { throw ValidationError("--max-packet-size must be at least 1024 bytes") }
        if (credentials.certFile == nil) != (credentials.keyFile == nil) {
            throw ValidationError("--cert-file and --key-file go together")
        }
    }

    /// Bootstraps logging to stderr at `--log-level` and returns the executable's logger.
    func makeLogger() -> Logger { logging.makeLogger() }

    /// The topic layout of `--prefix`.
    func topics() throws -> FleetTopics { try FleetTopics(prefix: prefix) }

    /// What a consumer that must lose nothing asks of the broker: a persistent session under
    /// a client id that stays the same across restarts, and acknowledgements only of what it
    /// has kept.
    struct Durability {
        /// The client id when `--client-id` is not given: the same at every start.
        var defaultClientID: String
        /// How long the broker keeps the session while the consumer is away.
        var sessionExpiry: Duration
        /// Messages the broker may send ahead of the acknowledgements (MQTT 5 Receive Maximum).
        var inFlight: Int
        /// How long a graceful stop in a share group keeps taking what the broker had already
        /// given it (``FleetSubscriber/Options/handOverLimit``).
        var handOverLimit: Duration = MQTTClient.handOverLimit
    }

    /// The subscriber of `--vehicle`s and `--share-group` with these connection settings;
    /// `bufferLimit`, `dropLogLevel` and `onSubscribed` as in ``FleetSubscriber/Options``; with
    /// `durability`, a persistent session that acknowledges after handling
    /// (``FleetSubscriber/deliveries()``).
    func makeSubscriber(
        logger: Logger, bufferLimit: Int = 10_000, dropLogLevel: Logger.Level = .debug, durability: Durability? = nil,
        onSubscribed: (@Sendable () -> Void)? = nil
    ) throws -> FleetSubscriber {
        let urls = try brokerURLs()
        let url = urls[0]
        var mqtt = MQTTConfiguration(
            broker: url,
            otherBrokers: Array(urls.dropFirst()),
            clientID: clientID ?? durability?.defaultClientID ?? "fleet-watch-\(Self.hostName)-\(getpid())",
            protocolVersion: protocolSetting ?? .auto,
            password: try readPassword(logger: logger),
            tls: url.usesTLS
                ? MQTTTLSConfiguration(
                    caFile: credentials.caFile, certificateFile: credentials.certFile, keyFile: credentials.keyFile) : nil
        )
        mqtt.maximumPacketSize = maxPacketSize
        if let durability {
            mqtt.session = .persistent(expiry: durability.sessionExpiry)
            mqtt.receiveMaximum = durability.inFlight
            mqtt.acknowledgement = .afterHandling
            // Bytes, not messages, bound what it holds: a message may carry 2,048 events.
            mqtt.receiveBudgetBytes = Self.receiveBudgetBytes
        }
        var options = FleetSubscriber.Options(
            topics: try topics(), vehicles: vehicles.compactMap(VehicleID.init), shareGroup: shareGroup, bufferLimit: bufferLimit,
            dropLogLevel: dropLogLevel, onSubscribed: onSubscribed)
        if let durability { options.handOverLimit = durability.handOverLimit }
        return try FleetSubscriber(configuration: mqtt, options: options, logger: logger)
    }

    /// `--protocol`; empty is `auto` (a unit's environment file from before it had PROTOCOL=).
    var protocolSetting: MQTTProtocolVersion? {
        protocolVersion.isEmpty ? .auto : MQTTProtocolVersion(parsing: protocolVersion)
    }

    /// Every `--broker`, in order (commas separate addresses too); at least one.
    func brokerURLs() throws -> [BrokerURL] {
        let texts = broker.flatMap { $0.split(separator: ",") }.map { String($0).trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
        guard !texts.isEmpty else { throw ValidationError("--broker is required") }
        guard texts.count <= 64 else { throw ValidationError("at most 64 --broker addresses, got \(texts.count)") }
        var urls: [BrokerURL] = []
        for text in texts {
            do { urls.append(try BrokerURL(parsing: text)) } catch { throw ValidationError(error.description) }
        }
        return urls
    }

    /// The payload bytes a consumer that acknowledges after handling (`record`) holds at most
    /// before it reads no more from the broker: 16 MiB, about 5 million compact fixes or
    /// 40,000 single-fix messages, bytes it decodes one message at a time.
    static let receiveBudgetBytes = 16 << 20

    /// This machine's name, as far as it can go into a client id (at most 32 characters).
    static var hostName: String { String(ProcessInfo.processInfo.hostName.prefix(32)) }

    /// The password from `--password-file` (its first line, as the agent reads it) or
    /// `FLEETCAST_PASSWORD`; never
    /// from the command line, never logged.
    private func readPassword(logger: Logger) throws -> String? {
        if let passwordFile = credentials.passwordFile {
            if FilePermissions.isReadableByOthers(passwordFile) {
                logger.warning(
                    "The MQTT password file can be read by every user of this machine; make it readable by fleet-watch's user only (chmod 0600)",
                    metadata: ["file": "\(passwordFile)"])
            }
            let password: String?
            do { password = try PasswordFile.read(passwordFile) } catch {
                throw ValidationError("--password-file: \(error)")
            }
            guard let password else { throw ValidationError("cannot read --password-file \(passwordFile): no such file") }
            return password
        }
        return ProcessInfo.processInfo.environment["FLEETCAST_PASSWORD"]
    }
}
