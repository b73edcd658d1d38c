import ArgumentParser

@main
struct FleetcastAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleetcast-agent",
        abstract: "Reads a GNSS receiver and publishes its fixes and headings.",
        subcommands: [DecodeCommand.self]
    )
}
