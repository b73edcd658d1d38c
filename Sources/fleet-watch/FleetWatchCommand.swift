import ArgumentParser

/// `fleet-watch`: the fleet side of Fleetcast. Without a subcommand it watches the fleet
/// (``WatchCommand``, as it always has); `fleet-watch serve` shows it on a live map in the
/// browser (``ServeCommand``); `fleet-watch bridge` republishes the fleet for Home
/// Assistant or OwnTracks (``BridgeCommand``); `record` and `history` keep the fleet's tracks
/// in PostgreSQL and write them out (``RecordCommand``, ``HistoryCommand``).
@main
struct FleetWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleet-watch",
        abstract: "Shows the fleet live from its MQTT topics or on a map, bridges it to other applications, records its tracks.",
        discussion: """
            The password is read from --password-file or the environment variable \
            FLEETCAST_PASSWORD, never from the command line; the user name goes in the URL \
            (mqtts://user@host:8883).
            """,
        subcommands: [
            WatchCommand.self, ServeCommand.self, BridgeCommand.self, RecordCommand.self, HistoryCommand.self, GapsCommand.self,
            TripsCommand.self, ZoneEventsCommand.self, ReportCommand.self,
        ],
        defaultSubcommand: WatchCommand.self
    )
}
