import FleetProtocol
import GNSS

/// What a receiver and an agent can plausibly send, judged message by message and the same way
/// by every consumer of the fleet's messages (``FleetMessageDecoder``: `watch`, `serve`,
/// `bridge` and `record` alike), so that one vehicle's hostile or broken messages cost the
/// fleet side little and never what a real vehicle could not have sent.
///
/// Pure: it looks only at the events' own times and numbers, never at a clock.
public enum FleetPlausibility {
    /// The most events of one kind (fixes, or headings) a batch may carry within any one second
    /// of their own time: a 20 Hz receiver (the fastest common ones; an agent publishes at its
    /// receiver's rate), with half as much again for jitter in the receiver's time stamps.
    public static let maximumEventsPerSecond = FleetPayload.maximumEventsPerSecond

    /// How far a numbering run (the agent's clock, in milliseconds since 1970, when its
    /// numbering began) may lie ahead of the event's own time: a day. A run further ahead is a
    /// clock set years ahead or a forged number; taken as the newest numbering, it would pin the
    /// vehicle's live position until every consumer restarts (a run of 2⁶⁴−1 dated 9999).
    public static let maximumRunLeadMilliseconds: Int64 = 86_400_000

    /// The largest `seq` or `run` a consumer takes: 2⁶³−1, which PostgreSQL's `bigint` holds
    /// (the recorder's key), so the live side and the history agree on what is a message.
    public static let maximumNumber = UInt64(Int64.max)

    /// Why a batch's events are implausible, or `nil`: more than ``maximumEventsPerSecond``
    /// fixes, or headings, within one second of their own times (a batch of 2,048 fixes 10 ms
    /// apart claims a 100 Hz receiver). O(n) for events in time order (as agents send them),
    /// O(n log n) otherwise; a batch holds at most ``FleetPayload/maximumBacklogEvents``.
    public static func batchProblem(_ events: [FleetPayload.BacklogEvent]) -> String? {
        var fixTimes: [Int64] = []
        var headingTimes: [Int64] = []
        for event in events {
            switch event {
            case .fix(let f): fixTimes.append(f.fix.time.millisecondsSince1970)
            case .heading(let h): if let time = h.heading.time { headingTimes.append(time.millisecondsSince1970) }
            }
        }
        for (kind, times) in [("fixes", fixTimes), ("headings", headingTimes)] {
            let densest = densestSecond(times)
            if densest > maximumEventsPerSecond {
                return "\(densest) \(kind) within one second of their own time (at most \(maximumEventsPerSecond): a 20 Hz receiver)"
            }
        }
        return nil
    }

    /// The most of `times` (milliseconds) within any window of one second.
    package static func densestSecond(_ times: [Int64]) -> Int {
        guard times.count > maximumEventsPerSecond else { return times.count }
        var sorted = times
        if zip(times, times.dropFirst()).contains(where: { $0 > $1 }) { sorted.sort() }
        var densest = 0
        var start = 0
        for end in sorted.indices {
            while sorted[end] &- sorted[start] >= 1_000 { start += 1 }
            densest = max(densest, end - start + 1)
        }
        return densest
    }

    /// Why an event's number is implausible, or `nil`: a `seq` or `run` above
    /// ``maximumNumber``, or a run more than ``maximumRunLeadMilliseconds`` ahead of the event's
    /// own `time` (when it has one).
    public static func numberProblem(_ number: MessageNumber?, time: UTCTimestamp?) -> String? {
        guard let number else { return nil }
        if number.seq > maximumNumber || number.run > maximumNumber {
            return "seq \(number.seq) or run \(number.run) above 2^63-1"
        }
        if let time, number.run > 0, Int64(number.run) &- time.millisecondsSince1970 > maximumRunLeadMilliseconds {
            return "run \(number.run) is more than a day ahead of the event's own time \(time.millisecondsSince1970)"
        }
        return nil
    }
}
