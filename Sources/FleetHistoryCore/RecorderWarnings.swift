/// What the recorder has named once per vehicle: each kind of refusal, and the messages set
/// aside. At most ``maximumVehicles`` vehicles a kind are named; past them the final summary
/// counts the rest (a thousand forged vehicles cannot flood the log).
package struct RecorderWarnings {
    package static let maximumVehicles = 1_000
    private var said: [String: Set<String>] = [:]

    /// Nothing said yet.
    package init() {}

    /// Whether `kind` is to be said for `vehicle` now (the first time, and within the bound).
    package mutating func first(_ kind: String, _ vehicle: String) -> Bool {
        guard (said[kind]?.count ?? 0) < Self.maximumVehicles else { return false }
        return said[kind, default: []].insert(vehicle).inserted
    }
}
