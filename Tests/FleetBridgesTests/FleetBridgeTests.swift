import FleetBridges
import FleetProtocol
import FleetWatch
import MQTT
import Testing

@Suite struct FleetBridgeTests {
    @Test func theBridgeNeverPublishesWhatItsOwnSubscriptionWouldReadBack() throws {
        let mqtt = MQTTConfiguration(broker: try BrokerURL(parsing: "mqtt://127.0.0.1:1883"), clientID: "t")
        let owntracksFleet = try FleetSubscriber(
            configuration: mqtt, options: .init(topics: try FleetTopics(prefix: "owntracks")), logger: .init(label: "t"))
        let bridge = FleetBridge(subscriber: owntracksFleet, translator: try OwnTracksTranslator(user: "acme"), logger: .init(label: "t"))
        #expect(bridge.feedsBack("owntracks/acme/van-7"))
        #expect(!bridge.feedsBack("owntracks/acme/van-7/event"))
        #expect(bridge.publishing.clientID == "t-pub")
        #expect(bridge.publishing.username == nil, "anonymous: no user name made up")
        // Under a broker that makes the client id the user name, the two connections need two.
        let named = MQTTConfiguration(broker: try BrokerURL(parsing: "mqtts://bridge+owntracks@127.0.0.1"), clientID: "b", password: "pw")
        let publishing = FleetBridge<OwnTracksTranslator>.publishingConfiguration(for: named)
        #expect(publishing.username == "bridge+owntracks-pub" && publishing.clientID == "b-pub" && publishing.password == "pw")
        let plain = FleetBridge(
            subscriber: try FleetSubscriber(configuration: mqtt, logger: .init(label: "t")),
            translator: HomeAssistantTranslator(options: try .init()), logger: .init(label: "t"))
        #expect(!plain.feedsBack("homeassistant/device_tracker/van-7/config"))
        #expect(!plain.feedsBack("fleetcast/homeassistant/van-7/attributes"))
    }
}
