import ArgumentParser

@main
struct FleetWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-watch",
        abstract: "Shows the fleet live from its MQTT topics."
    )
}
