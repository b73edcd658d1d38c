/// Detects lost messages from a vehicle's `seq` numbers under at-least-once delivery.
///
/// A jump forward by more than one counts the skipped numbers as missing. A number at or
/// below the highest seen is a duplicate (already seen) or a late arrival (reordered): a late
/// arrival within the last ``window`` numbers fills its hole and is no longer counted missing,
/// so neither duplicates nor reordering count as gaps. The first number seen starts the count.
public struct SequenceTracker: Sendable, Equatable {
    /// How far back (in sequence numbers) late arrivals are matched against holes.
    public static let window: UInt64 = 64

    /// The highest sequence number seen, `nil` before the first.
    public private(set) var highest: UInt64?
    /// Messages skipped and not (yet) arrived late.
    public private(set) var missing: UInt64 = 0
    /// Messages seen more than once (at-least-once redelivery, retained repeats).
    public private(set) var duplicates: UInt64 = 0
    /// Bit i set: `highest - i` has been seen.
    private var seen: UInt64 = 0
    /// The first number seen: nothing before it was ever counted missing.
    private var first: UInt64 = 0

    /// An empty tracker.
    public init() {}

    /// What one sequence number was.
    public enum Outcome: Sendable, Equatable {
        /// The newest message so far (possibly after a gap of `skipped` messages).
        case newest(skipped: UInt64)
        /// An older message arriving late; it filled a hole when `filledGap`.
        case late(filledGap: Bool)
        /// A number already seen.
        case duplicate
    }

    /// Records `seq` and says whether it is new, late or a duplicate.
    @discardableResult
    public mutating func record(_ seq: UInt64) -> Outcome {
        guard let top = highest else {
            highest = seq
            first = seq
            seen = 1
            return .newest(skipped: 0)
        }
        if seq > top {
            let distance = seq - top
            let skipped = distance - 1
            missing &+= skipped
            seen = distance >= 64 ? 1 : (seen << distance) | 1
            highest = seq
            return .newest(skipped: skipped)
        }
        let back = top - seq
        guard back < Self.window else {
            // Too old to match against a hole: an old redelivery.
            duplicates &+= 1
            return .duplicate
        }
        let bit: UInt64 = 1 << back
        if seen & bit != 0 {
            duplicates &+= 1
            return .duplicate
        }
        seen |= bit
        // Holes were only counted between the first number seen and the highest.
        guard seq > first, missing > 0 else { return .late(filledGap: false) }
        missing -= 1
        return .late(filledGap: true)
    }
}
