import ArgumentParser
import FleetBridges
import FleetProtocol
import FleetWatch
import Logging
import ServiceLifecycle

/// `fleet-watch bridge --to homeassistant|owntracks`: republishes the fleet's topics in Home
/// Assistant's (MQTT discovery) or OwnTracks' format on the same broker, so the vehicles send
/// nothing extra. All the logic is in the FleetBridges library (``FleetBridge``).
struct BridgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bridge",
        abstract: "Republishes the fleet for Home Assistant (MQTT discovery) or OwnTracks.",
        discussion: """
            homeassistant: retained discovery configs per vehicle, a device with a tracker \
            (<discovery-prefix>/device_tracker/<vehicle>/config), speed (km/h) and course sensors \
            (<discovery-prefix>/sensor/<vehicle>/speed/config, …/course/config), and its position \
            on <attributes-prefix>/<vehicle>/attributes; availability follows the vehicle's status. \
            A vehicle that comes back after going offline is discovered again (once its configs \
            were cleared to remove it, as docs/fleet-watch.md says). \
            owntracks: a retained location message per fix on owntracks/<owntracks-user>/<vehicle>. \
            The bridge publishes through a second connection whose client id and user name end in \
            -pub (bridge+owntracks reads, bridge+owntracks-pub publishes, with the same password; \
            see deploy/mosquitto/fleetcast.acl). With client certificates, give that connection \
            its own with --publish-cert-file and --publish-key-file: a broker that makes the \
            certificate's name the client id would otherwise close one connection for the other. \
            Under load each topic carries its vehicle's newest message (one not yet published is \
            replaced by a newer one) and the vehicles take turns, so one cannot crowd out the others. \
            With --zones, the fleet's zones: owntracks publishes the apps' enter and leave events \
            (_type transition) on owntracks/<owntracks-user>/<vehicle>/event, each one, never \
            replaced; homeassistant adds the zones a vehicle is in to its attributes ("zones") and \
            an event entity (<discovery-prefix>/event/<vehicle>/zone/config) whose enter and exit \
            events go on <attributes-prefix>/<vehicle>/zone, each one. With \
            --recorder-zone-events, that entity reads the zone events `record --zones` publishes \
            instead (the bridge then publishes none).
            """
    )

    /// The application to bridge to.
    enum Target: String, ExpressibleByArgument, CaseIterable {
        case homeassistant, owntracks
    }

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The application: homeassistant or owntracks.")
    var to: Target

    @Option(help: "OwnTracks: the user level of owntracks/<user>/<vehicle>.")
    var owntracksUser: String = "fleet"

    @Option(help: "Home Assistant: its MQTT discovery prefix.")
    var discoveryPrefix: String = "homeassistant"

    @Option(help: "Home Assistant: the prefix of the attributes topics the bridge publishes.")
    var attributesPrefix: String = "fleetcast/homeassistant"

    @Option(
        help: ArgumentHelp(
            "Home Assistant: the zone event entity reads the recorder's zone events on <prefix>/<vehicle>.",
            discussion: "The recorder's --zone-events-topic (its default: fleetcast/zones).", valueName: "prefix"))
    var recorderZoneEvents: String?

    @OptionGroup var zoneOptions: ZoneOptions

    @Option(help: "PEM client certificate of the publishing connection (default: --cert-file).")
    var publishCertFile: String?

    @Option(help: "PEM private key of --publish-cert-file.")
    var publishKeyFile: String?

    func validate() throws {
        if (publishCertFile == nil) != (publishKeyFile == nil) {
            throw ValidationError("--publish-cert-file and --publish-key-file go together")
        }
        do { _ = try OwnTracksTranslator(user: owntracksUser) } catch { throw ValidationError(error.description) }
        do { _ = try homeAssistantOptions() } catch { throw ValidationError("\(error)") }
    }

    /// The zones of --zones, for the translator; nil without.
    private func bridgeZones() throws -> BridgeZones? {
        try zoneOptions.load().map { BridgeZones(zones: $0, hysteresisMetres: zoneOptions.zoneHysteresis) }
    }

    private func homeAssistantOptions() throws -> HomeAssistantTranslator.Options {
        try HomeAssistantTranslator.Options(
            discoveryPrefix: discoveryPrefix, attributesPrefix: attributesPrefix, fleetTopics: connection.topics(),
            recorderZoneEvents: recorderZoneEvents)
    }

    func run() async throws {
        let logger = connection.makeLogger()
        // Subscribed comes after the publishing connection is up: then both are.
        let readiness = Readiness(["subscribed"])
        // The bridge reads every event at once (its publishing waits in its own per-vehicle
        // queue), so the subscription's buffer overflows only when the process cannot keep up
        // with decoding: an event lost there is said at warning, not debug.
        let subscriber = try connection.makeSubscriber(
            logger: logger, dropLogLevel: .warning, onSubscribed: { readiness.report("subscribed") })
        var publishing = FleetBridge<OwnTracksTranslator>.publishingConfiguration(for: subscriber.configuration)
        if let publishCertFile, let publishKeyFile, var tls = publishing.tls {
            tls.certificateFile = publishCertFile
            tls.keyFile = publishKeyFile
            publishing.tls = tls
        }
        let bridge: any Service =
            switch to {
            case .homeassistant:
                FleetBridge(
                    subscriber: subscriber,
                    translator: HomeAssistantTranslator(options: try homeAssistantOptions(), zones: try bridgeZones()),
                    publishing: publishing, logger: logger)
            case .owntracks:
                FleetBridge(
                    subscriber: subscriber, translator: try OwnTracksTranslator(user: owntracksUser, zones: try bridgeZones()),
                    publishing: publishing,
                    logger: logger)
            }
        // SIGTERM or SIGINT: unsubscribe, publish everything received, wait for the broker's
        // acknowledgements, exit 0.
        try await FleetWatchServices.run(
            [.init(service: bridge, successTerminationBehavior: .gracefullyShutdownGroup)],
            readiness: readiness, status: "bridging \(subscriber.filters.joined(separator: " ")) to \(to.rawValue)", logger: logger)
    }
}
