/// Topic-filter rules of MQTT: validation and matching of `+`, `#` and `$share/group/…`.
public enum MQTTTopicFilter {
    /// The part of a filter that topics are matched against: for a shared subscription
    /// `$share/group/filter` that is `filter`, otherwise the filter itself.
    public static func matchingPart(of filter: String) -> Substring {
        guard filter.hasPrefix("$share/") else { return Substring(filter) }
        let afterShare = filter.dropFirst("$share/".count)
        guard let slash = afterShare.firstIndex(of: "/") else { return Substring(filter) }
        return afterShare[afterShare.index(after: slash)...]
    }

    /// True when `topic` matches `filter` under the MQTT rules: `+` one level, `#` this level
    /// and all below (last only), and wildcards at the first level never match topics that
    /// start with `$` (such as `$SYS/…`).
    public static func matches(_ filter: String, topic: String) -> Bool {
        let filterLevels = matchingPart(of: filter).split(separator: "/", omittingEmptySubsequences: false)
        let topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)
        if topic.hasPrefix("$"), let first = filterLevels.first, first == "+" || first == "#" {
            return false
        }
        var index = 0
        while index < filterLevels.count {
            let level = filterLevels[index]
            if level == "#" { return index == filterLevels.count - 1 }
            guard index < topicLevels.count else { return false }
            if level != "+" && level != topicLevels[index] { return false }
            index += 1
        }
        return index == topicLevels.count
    }

    /// Checks a subscription filter; throws ``MQTTError/invalidTopic(_:reason:)`` when it is
    /// empty, has `#` anywhere but alone at the end, or `+` sharing a level with other text.
    public static func validate(filter: String) throws(MQTTError) {
        if filter.isEmpty { throw .invalidTopic(filter, reason: "empty filter") }
        if filter.hasPrefix("$share/") {
            let parts = filter.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[1].isEmpty, !parts[2].isEmpty,
                !parts[1].contains("+"), !parts[1].contains("#")
            else { throw .invalidTopic(filter, reason: "expected $share/group/filter") }
        }
        let levels = matchingPart(of: filter).split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level.contains("#") && (level != "#" || index != levels.count - 1) {
                throw .invalidTopic(filter, reason: "'#' must be a whole level and the last one")
            }
            if level.contains("+") && level != "+" {
                throw .invalidTopic(filter, reason: "'+' must be a whole level")
            }
        }
        if filter.utf8.count > 65_535 { throw .invalidTopic(filter, reason: "longer than 65535 bytes") }
    }

    /// Checks a topic to publish to: non-empty, no wildcards, at most 65535 bytes.
    public static func validate(topic: String) throws(MQTTError) {
        if topic.isEmpty { throw .invalidTopic(topic, reason: "empty topic") }
        if topic.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") }) {
            throw .invalidTopic(topic, reason: "wildcards are not allowed in a publish topic")
        }
        if topic.utf8.count > 65_535 { throw .invalidTopic(topic, reason: "longer than 65535 bytes") }
    }
}
