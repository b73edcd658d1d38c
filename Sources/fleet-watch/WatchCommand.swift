import ArgumentParser
import FleetProtocol
import FleetWatch
import GNSS
import Logging

/// `fleet-watch [watch]`: shows the fleet live from its MQTT topics — a table on a terminal,
/// JSON lines with `--json`, plain lines when stdout is not a terminal, the retained snapshot
/// with `--once`. The default subcommand: `fleet-watch --broker …` runs it.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Shows the fleet live from its MQTT topics (the default)."
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "One JSON object per event per line, with \"kind\" and \"vehicle\"; with --zones, zone events as \"kind\":\"zone\".")
    var json = false

    @Flag(help: "Print the retained snapshot of the fleet and exit.")
    var once = false

    @Option(help: "Seconds without a message before a moving vehicle is marked stale (a parked one never is).")
    var staleAfter: Double = 150

    @Option(help: "With --once: seconds of quiet after the subscription that end the snapshot.")
    var quietPeriod: Double = 0.5

    @Option(help: "With --once: the most seconds to wait for the broker and the snapshot.")
    var timeout: Double = 10

    @OptionGroup var zoneOptions: ZoneOptions

    func validate() throws {
        guard staleAfter > 0, quietPeriod > 0, timeout > 0 else {
            throw ValidationError("--stale-after, --quiet-period and --timeout must be positive")
        }
        if once && connection.shareGroup != nil {
            throw ValidationError("--once cannot be combined with --share-group: brokers send no retained messages to shared subscriptions")
        }
    }

    func run() async throws {
        let logger = connection.makeLogger()
        let topics = try connection.topics()
        let readiness = Readiness(["subscribed"])
        let subscriber = try connection.makeSubscriber(logger: logger, onSubscribed: { readiness.report("subscribed") })
        let table = FleetTable(staleAfter: .milliseconds(Int64(staleAfter * 1000)))
        let formatter = FleetEventFormatter(topics: topics)
        let output = StandardOutput()

        if once {
            let events = try await subscriber.receivedSnapshot(
                quietPeriod: .milliseconds(Int64(quietPeriod * 1000)), timeout: .milliseconds(Int64(timeout * 1000)))
            if json {
                for received in events { output.writeLine(formatter.jsonLine(received.event)) }
            } else {
                var state = FleetState(topics: topics)
                let now = UTCTimestamp.wallClockNow
                for received in events { state.apply(received.event, at: now, retained: received.retained) }
                output.write(table.render(state, now: now))
            }
            return
        }

        // SIGTERM or SIGINT: unsubscribe, show what was already received, exit 0.
        let shown: WatchService.Output =
            json
            ? .json(formatter, output)
            : output.isTerminal ? .table(LiveTable(table: table, topics: topics, output: output)) : .plain(formatter, output)
        try await FleetWatchServices.run(
            [
                .init(
                    service: WatchService(
                        subscriber: subscriber, output: shown,
                        zones: try zoneOptions.load().map { BridgeZones(zones: $0, hysteresisMetres: zoneOptions.zoneHysteresis) }),
                    successTerminationBehavior: .gracefullyShutdownGroup)
            ],
            readiness: readiness, status: "watching \(subscriber.filters.joined(separator: " "))", logger: logger)
    }
}
