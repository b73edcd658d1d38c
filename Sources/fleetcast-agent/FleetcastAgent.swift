import ArgumentParser

/// `fleetcast-agent`: the edge agent. `run` (the default) publishes a GNSS receiver to MQTT;
/// `decode` turns NMEA recordings into the contract's JSON lines.
@main
struct FleetcastAgent: AsyncParsableCommand {
    /// The agent's version, reported in the retained `status`.
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "fleetcast-agent",
        abstract: "Reads a GNSS receiver and publishes its fixes and headings to MQTT.",
        version: version,
        subcommands: [RunCommand.self, CheckCommand.self, DecodeCommand.self],
        defaultSubcommand: RunCommand.self
    )
}
