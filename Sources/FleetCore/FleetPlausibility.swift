import FleetProtocol
import GNSS

/// What a receiver and an agent can plausibly send, judged message by message and the same way
/// by every consumer of the fleet's messages (``FleetMessageDecoder``: `watch`, `serve`,
/// `bridge` and `record` alike), so that one vehicle's hostile or broken messages cost the
/// fleet side little and never what a real vehicle could not have sent.
///
/// Pure: it looks at the events' own times and numbers, and at the consumer's clock only as a
/// value it is given (``FleetMessageDecoder`` reads its clock once per message). A sender
/// chooses its events' times, so nothing is judged against them alone: a time or a numbering
/// run ahead of the consumer's own clock is what pins a live position, while an old time is
/// honest history (a replayed recording, a backlog).
public enum FleetPlausibility {
    /// The most events of one kind (fixes, or headings) a batch may carry within any one second
    /// of their own time: a 20 Hz receiver (the fastest common ones; an agent publishes at its
    /// receiver's rate), with half as much again for jitter in the receiver's time stamps.
    public static let maximumEventsPerSecond = FleetPayload.maximumEventsPerSecond

    /// How far an event's time, or its numbering run (the agent's clock, in milliseconds since
    /// 1970, when its numbering began), may lie ahead of the consumer's own clock: a day. A
    /// receiver or an agent a few hours off passes; further ahead is a clock set years ahead
    /// or a forged value, which, taken as the newest, would pin the vehicle's live position
    /// until that date (a fix dated 9999 with a run of that date). An event older than the
    /// consumer's clock, however old, is never refused here: a recording replayed a month
    /// later starts its run now and carries its own, old times.
    public static let maximumLeadMilliseconds: Int64 = 86_400_000

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

    /// Why an event's number or time is implausible at `now` (the consumer's clock), or `nil`:
    /// a `seq` or `run` above ``maximumNumber``, or a run or a time more than
    /// ``maximumLeadMilliseconds`` ahead of `now`.
    public static func numberProblem(_ number: MessageNumber?, time: UTCTimestamp?, now: UTCTimestamp) -> String? {
        if let number {
            if number.seq > maximumNumber || number.run > maximumNumber {
                return "seq \(number.seq) or run \(number.run) above 2^63-1"
            }
            if number.run > 0, Int64(number.run) &- now.millisecondsSince1970 > maximumLeadMilliseconds {
                return "run \(number.run) is more than a day ahead of this consumer's clock \(now.millisecondsSince1970)"
            }
        }
        if let time, time.millisecondsSince1970 &- now.millisecondsSince1970 > maximumLeadMilliseconds {
            return "time \(time) is more than a day ahead of this consumer's clock \(now)"
        }
        return nil
    }
}
