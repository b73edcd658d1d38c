/// Detects lost messages from a vehicle's `seq` numbers under at-least-once delivery, and
/// counts only what is still missing when late messages (reordered, or sent later on the
/// `backlog` topic) arrive.
///
/// A jump forward by more than one opens a *hole*: the skipped numbers count as missing. A
/// number inside a hole fills it (it no longer counts), however late it comes: the holes are
/// kept as a small sorted list of intervals, not a window. A number seen before is a duplicate.
/// The first number seen starts the count: a number below it (history from before fleet-watch
/// subscribed, as a backlog brings) is late but was never missing; the tracker still remembers
/// it, so that its redelivery is a duplicate. A number recorded as *history* (a retained
/// message: the newest of its topic from before the subscription) opens no counted hole either:
/// the retained heading and the retained fix say nothing of the numbers between them, which
/// went out before the subscriber was there.
///
/// Memory is bounded: at most ``maximumHoles`` intervals (24 bytes each) per tracker, none
/// while nothing is missing. Beyond the cap the smallest hole (the lowest of equals) is
/// *forgotten*: its numbers stay counted in ``missing`` (and in ``forgotten``) for good, and
/// should they arrive after all they count as duplicates. Big holes — a connection lost for an
/// hour, which the backlog fills oldest first — are the last to be forgotten.
public struct SequenceTracker: Sendable, Equatable {
    /// The most holes (intervals of missing numbers) remembered.
    public static let maximumHoles = 16

    /// The highest sequence number seen, `nil` before the first.
    public private(set) var highest: UInt64?
    /// The lowest sequence number seen, `nil` before the first.
    public private(set) var lowest: UInt64?
    /// Messages skipped and not (yet) arrived late: what is still missing.
    public private(set) var missing: UInt64 = 0
    /// Messages seen more than once (at-least-once redelivery, retained repeats).
    public private(set) var duplicates: UInt64 = 0
    /// Missing messages whose hole was forgotten beyond ``maximumHoles`` (included in
    /// ``missing``; they can no longer be filled).
    public private(set) var forgotten: UInt64 = 0

    /// Numbers not seen between ``lowest`` and ``highest``: sorted, disjoint, non-empty.
    private var holes: [Hole] = []

    private struct Hole: Sendable, Equatable {
        var lower: UInt64
        var upper: UInt64
        /// Whether its numbers count in ``missing`` (skipped after the first number seen);
        /// a hole below the first number seen does not.
        var counted: Bool
        var size: UInt64 { upper - lower + 1 }
    }

    /// An empty tracker.
    public init() {}

    /// What one sequence number was.
    public enum Outcome: Sendable, Equatable {
        /// The newest message so far (possibly after a gap of `skipped` messages).
        case newest(skipped: UInt64)
        /// An older message arriving late; it filled a counted hole (``missing`` went down by
        /// one) when `filledGap`.
        case late(filledGap: Bool)
        /// A number already seen.
        case duplicate
    }

    /// The number of holes remembered (at most ``maximumHoles``).
    public var holeCount: Int { holes.count }

    /// Records `seq` and says whether it is new, late or a duplicate; `history`: it was sent
    /// before the subscription (a retained message), so the numbers it skips cannot be missing.
    @discardableResult
    public mutating func record(_ seq: UInt64, history: Bool = false) -> Outcome {
        guard let top = highest, let bottom = lowest else {
            highest = seq
            lowest = seq
            return .newest(skipped: 0)
        }
        if seq > top {
            let skipped = history ? 0 : seq - top - 1
            if seq - top > 1 {
                missing &+= skipped
                holes.append(Hole(lower: top + 1, upper: seq - 1, counted: !history))
                enforceCap()
            }
            highest = seq
            return .newest(skipped: skipped)
        }
        if seq < bottom {
            // Older than anything seen: history from before the count started.
            if seq + 1 < bottom {
                holes.insert(Hole(lower: seq + 1, upper: bottom - 1, counted: false), at: 0)
                enforceCap()
            }
            lowest = seq
            return .late(filledGap: false)
        }
        guard let i = holeIndex(containing: seq) else {
            duplicates &+= 1
            return .duplicate
        }
        let hole = holes[i]
        if hole.lower == hole.upper {
            holes.remove(at: i)
        } else if seq == hole.lower {
            holes[i].lower += 1
        } else if seq == hole.upper {
            holes[i].upper -= 1
        } else {
            holes[i].upper = seq - 1
            holes.insert(Hole(lower: seq + 1, upper: hole.upper, counted: hole.counted), at: i + 1)
            enforceCap()
        }
        guard hole.counted else { return .late(filledGap: false) }
        missing -= 1
        return .late(filledGap: true)
    }

    /// The index of the hole holding `seq` (binary search), if any.
    private func holeIndex(containing seq: UInt64) -> Int? {
        var low = 0, high = holes.count
        while low < high {
            let mid = (low + high) / 2
            if holes[mid].upper < seq {
                low = mid + 1
            } else {
                high = mid
            }
        }
        return low < holes.count && holes[low].lower <= seq ? low : nil
    }

    /// Forgets the smallest hole (the lowest of equals) while there are too many.
    private mutating func enforceCap() {
        while holes.count > Self.maximumHoles {
            var smallest = 0
            for i in holes.indices.dropFirst() where holes[i].size < holes[smallest].size { smallest = i }
            if holes[smallest].counted { forgotten &+= holes[smallest].size }
            holes.remove(at: smallest)
        }
    }
}
