import Foundation
import GNSS

/// One UTC day of the track history: the unit of its partitions (`fleetcast_fixes_p20261128`
/// holds the fixes timed from 2026-11-28T00:00:00Z, included, to 2026-11-29T00:00:00Z,
/// excluded) and of its retention.
///
/// Pure: days since 1970-01-01 (UTC, proleptic Gregorian), no clock, no calendar library.
public struct HistoryDay: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Days since 1970-01-01; negative before.
    public var daysSince1970: Int64

    /// The milliseconds in a day.
    public static let milliseconds: Int64 = 86_400_000

    /// The day `daysSince1970` days after 1970-01-01.
    public init(daysSince1970: Int64) { self.daysSince1970 = daysSince1970 }

    /// The day `time` falls in.
    public init(_ time: UTCTimestamp) {
        let ms = time.millisecondsSince1970
        daysSince1970 = ms >= 0 ? ms / Self.milliseconds : -((-ms - 1) / Self.milliseconds) - 1
    }

    /// Its first instant (included in it).
    public var start: UTCTimestamp { UTCTimestamp(millisecondsSince1970: daysSince1970 &* Self.milliseconds) }

    /// The day `n` days later (earlier for negative `n`).
    public func adding(_ n: Int64) -> HistoryDay { HistoryDay(daysSince1970: daysSince1970 &+ n) }

    /// Year, month (1–12) and day (1–31).
    public var civil: (year: Int64, month: Int, day: Int) {
        let (y, m, d) = UTCTimestamp.civilFromDays(Int(daysSince1970))
        return (Int64(y), m, d)
    }

    /// The day of `year`, `month` and `day`, or `nil` when they name none (a 30 February).
    public init?(year: Int64, month: Int, day: Int) {
        guard (1...12).contains(month), (1...31).contains(day), (-1_000_000...1_000_000).contains(year) else { return nil }
        self.init(daysSince1970: Int64(UTCTimestamp.daysFromCivil(year: Int(year), month: month, day: day)))
        guard civil == (year, month, day) else { return nil }
    }

    /// `YYYYMMDD`, as in partition names (the year in four digits: see ``isNameable``).
    public var compact: String {
        let (y, m, d) = civil
        let year = String(y)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + (m < 10 ? "0" : "") + String(m) + (d < 10 ? "0" : "")
            + String(d)
    }

    /// `YYYY-MM-DD`.
    public var description: String {
        let (y, m, d) = civil
        return String(y) + (m < 10 ? "-0" : "-") + String(m) + (d < 10 ? "-0" : "-") + String(d)
    }

    /// The day of a `YYYYMMDD` text; `nil` for anything else.
    public init?(compact text: Substring) {
        guard text.utf8.count == 8, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let y = Int64(text.prefix(4)), let m = Int(text.dropFirst(4).prefix(2)), let d = Int(text.suffix(2))
        else { return nil }
        self.init(year: y, month: m, day: d)
    }

    /// Whether the day can name a partition: years 1–9999, which ``compact`` writes in eight
    /// digits (the years of ISO 8601 times, which is all the contract's `time` can say, less the
    /// year 0 PostgreSQL cannot write).
    public var isNameable: Bool { (1...9999).contains(civil.year) }

    public static func < (a: HistoryDay, b: HistoryDay) -> Bool { a.daysSince1970 < b.daysSince1970 }
}

/// How long `fleet-watch record` keeps history: whole days, or for ever. A day's partition is
/// dropped once all of it lies past the horizon (`now` less the retention), so what is kept
/// begins at the start of the day the horizon falls in (``keptFrom(now:)``).
public struct HistoryRetention: Sendable, Equatable, CustomStringConvertible {
    /// Days kept, from 1; `nil`: for ever.
    public var days: Int?

    /// For ever.
    public static let forever = HistoryRetention(days: nil)

    /// `days` days (at least 1), or for ever.
    public init(days: Int?) { self.days = days.map { max(1, $0) } }

    /// Reads `30d`, `8w` (weeks), `forever`, or an empty text (for ever: a configuration file
    /// that names none). Throws a message naming what is accepted.
    public init(parsing text: String) throws(HistoryRetentionError) {
        let text = text.trimmingCharacters(in: .whitespaces).lowercased()
        if text.isEmpty || text == "forever" {
            self.init(days: nil)
            return
        }
        let unit = text.last!
        guard let count = Int(text.dropLast()), count >= 1, count <= 100_000, unit == "d" || unit == "w" else {
            throw HistoryRetentionError(text: text)
        }
        self.init(days: unit == "w" ? count * 7 : count)
    }

    /// The first day kept at `now`: the day `days` days ago; `nil` for ever.
    public func keptFrom(now: UTCTimestamp) -> HistoryDay? {
        guard let days else { return nil }
        return HistoryDay(UTCTimestamp(millisecondsSince1970: now.millisecondsSince1970 &- Int64(days) * HistoryDay.milliseconds))
    }

    public var description: String { days.map { "\($0)d" } ?? "forever" }
}

/// A retention that is not `Nd`, `Nw` or `forever`.
public struct HistoryRetentionError: Error, Sendable, CustomStringConvertible {
    /// What was given.
    public var text: String
    public var description: String {
        "retention \"\(text.prefix(40))\": give days (30d), weeks (8w) or forever"
    }
}
