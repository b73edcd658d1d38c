import FleetWatch
import ServiceLifecycle

/// `fleet-watch [watch]` without `--once`, as a Service: the live table on a terminal, or one
/// line per event (JSON or plain), until a graceful shutdown has handed the subscription over
/// and every event received is shown (``FleetSubscriber/events()``), or the subscription fails.
struct WatchService: Service {
    /// How events are shown.
    enum Output {
        case table(LiveTable)
        case json(FleetEventFormatter, StandardOutput)
        case plain(FleetEventFormatter, StandardOutput)
    }

    let subscriber: FleetSubscriber
    let output: Output

    func run() async throws {
        switch output {
        case .table(let table):
            try await table.run(subscriber.events())
        case .json(let formatter, let output):
            for try await event in subscriber.events() { output.writeLine(formatter.jsonLine(event)) }
        case .plain(let formatter, let output):
            for try await event in subscriber.events() { output.writeLine(formatter.plainLine(event)) }
        }
    }
}
