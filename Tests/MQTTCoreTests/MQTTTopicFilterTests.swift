import MQTTCore
import Testing

@Suite struct MQTTTopicFilterTests {
    @Test(arguments: [
        ("fleet/+/fix", "fleet/van-1/fix", true),
        ("fleet/+/fix", "fleet/van-1/heading", false),
        ("fleet/+/fix", "fleet/van-1/fix/extra", false),
        ("fleet/#", "fleet", true),
        ("fleet/#", "fleet/van-1/fix", true),
        ("#", "fleet/van-1/fix", true),
        ("#", "$SYS/broker/uptime", false),
        ("+/broker/uptime", "$SYS/broker/uptime", false),
        ("$SYS/#", "$SYS/broker/uptime", true),
        ("a/b", "a/b", true),
        ("a/b", "a/c", false),
        ("+", "a", true),
        ("+", "a/b", false),
        ("a/+/+", "a//", true),
        ("$share/group/fleet/+/fix", "fleet/van-1/fix", true),
        ("$share/group/fleet/+/fix", "fleet/van-1/status", false),
        ("$share/g/#", "anything/at/all", true),
    ])
    func matching(filter: String, topic: String, expected: Bool) {
        #expect(MQTTTopicFilter.matches(filter, topic: topic) == expected)
    }

    @Test(arguments: ["a/#/b", "a/b#", "a+/b", "", "$share/group", "$share//a", "$share/g+/a"])
    func invalidFiltersAreRefused(filter: String) {
        #expect(throws: MQTTError.self) { try MQTTTopicFilter.validate(filter: filter) }
    }

    @Test(arguments: ["a/#", "+/+/fix", "#", "$share/g/fleet/#", "fleet/van-1/fix"])
    func validFiltersPass(filter: String) throws {
        try MQTTTopicFilter.validate(filter: filter)
    }

    @Test(arguments: ["", "fleet/+/fix", "fleet/#"])
    func publishTopicsWithWildcardsAreRefused(topic: String) {
        #expect(throws: MQTTError.self) { try MQTTTopicFilter.validate(topic: topic) }
    }
}
