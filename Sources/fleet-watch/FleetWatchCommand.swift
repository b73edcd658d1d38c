import ArgumentParser
import FleetProtocol
import FleetWatch
import Foundation
import GNSS
import Logging
import MQTT

/// `fleet-watch`: shows the fleet live from its MQTT topics — a table on a terminal, JSON lines
/// with `--json`, plain lines when stdout is not a terminal, the retained snapshot with `--once`.
@main
struct FleetWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-watch",
        abstract: "Shows the fleet live from its MQTT topics.",
        discussion: """
            The password is read from --password-file or the environment variable \
            FLEETCAST_PASSWORD, never from the command line; the user name goes in the URL \
            (mqtts://user@host:8883).
            """
    )

    @Option(help: "The broker: mqtt://[user@]host[:port] or mqtts://… for TLS.")
    var broker: String

    @Option(help: "The topic prefix of the fleet.")
    var prefix: String = "fleet"

    @Option(name: .customLong("vehicle"), help: "Only this vehicle (repeatable).")
    var vehicles: [String] = []

    @Flag(help: "One JSON object per event per line, with \"kind\" and \"vehicle\".")
    var json = false

    @Flag(help: "Print the retained snapshot of the fleet and exit.")
    var once = false

    @Option(help: "Join this MQTT shared-subscription group, to split the fleet between several fleet-watch processes.")
    var shareGroup: String?

    @Option(help: "Seconds without a message before a vehicle is marked stale.")
    var staleAfter: Double = 30

    @Option(help: "With --once: seconds of quiet after the subscription that end the snapshot.")
    var quietPeriod: Double = 0.5

    @Option(help: "With --once: the most seconds to wait for the broker and the snapshot.")
    var timeout: Double = 10

    @Option(help: "PEM file of the CA that signs the broker's certificate (mqtts).")
    var caFile: String?

    @Option(help: "PEM client certificate (mqtts with client authentication).")
    var certFile: String?

    @Option(help: "PEM private key of the client certificate.")
    var keyFile: String?

    @Option(help: "File whose first line is the MQTT password.")
    var passwordFile: String?

    @Option(help: "The MQTT client id (default: fleet-watch-<host>-<pid>).")
    var clientID: String?

    @Option(help: "Log level on stderr: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func validate() throws {
        do { _ = try BrokerURL(parsing: broker) } catch { throw ValidationError(error.description) }
        do { _ = try FleetTopics(prefix: prefix) } catch { throw ValidationError(error.description) }
        for v in vehicles {
            do { _ = try VehicleID(validating: v) } catch { throw ValidationError(error.description) }
        }
        guard staleAfter > 0, quietPeriod > 0, timeout > 0 else {
            throw ValidationError("--stale-after, --quiet-period and --timeout must be positive")
        }
        if once && shareGroup != nil {
            throw ValidationError("--once cannot be combined with --share-group: brokers send no retained messages to shared subscriptions")
        }
        if (certFile == nil) != (keyFile == nil) {
            throw ValidationError("--cert-file and --key-file go together")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown --log-level \(logLevel)")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "fleet-watch")
        let url = try BrokerURL(parsing: broker)
        let mqtt = MQTTConfiguration(
            broker: url,
            clientID: clientID ?? "fleet-watch-\(ProcessInfo.processInfo.hostName.prefix(32))-\(getpid())",
            password: try readPassword(),
            tls: url.usesTLS ? MQTTTLSConfiguration(caFile: caFile, certificateFile: certFile, keyFile: keyFile) : nil
        )
        let topics = try FleetTopics(prefix: prefix)
        let options = FleetSubscriber.Options(
            topics: topics, vehicles: vehicles.compactMap(VehicleID.init), shareGroup: shareGroup)
        let subscriber = try FleetSubscriber(configuration: mqtt, options: options, logger: logger)
        let table = FleetTable(staleAfter: .milliseconds(Int64(staleAfter * 1000)))
        let formatter = FleetEventFormatter(topics: topics)
        let output = StandardOutput()

        if once {
            let events = try await subscriber.retainedSnapshot(
                quietPeriod: .milliseconds(Int64(quietPeriod * 1000)), timeout: .milliseconds(Int64(timeout * 1000)))
            if json {
                for event in events { output.writeLine(formatter.jsonLine(event)) }
            } else {
                var state = FleetState(topics: topics)
                let now = UTCTimestamp.now
                for event in events { state.apply(event, at: now) }
                output.write(table.render(state, now: now))
            }
            return
        }

        if json || !output.isTerminal {
            for try await event in subscriber.events() {
                output.writeLine(json ? formatter.jsonLine(event) : formatter.plainLine(event))
            }
        } else {
            try await LiveTable(table: table, topics: topics, output: output).run(subscriber.events())
        }
    }

    /// The password from `--password-file` (its first line) or `FLEETCAST_PASSWORD`; never
    /// from the command line, never logged.
    private func readPassword() throws -> String? {
        if let passwordFile {
            let text: String
            do { text = try String(contentsOfFile: passwordFile, encoding: .utf8) } catch {
                throw ValidationError("cannot read --password-file \(passwordFile): \(error.localizedDescription)")
            }
            return String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        }
        return ProcessInfo.processInfo.environment["FLEETCAST_PASSWORD"]
    }
}
