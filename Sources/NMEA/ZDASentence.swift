/// ZDA, time and date with a four-digit year.
public struct ZDASentence: Sendable, Equatable {
    /// UTC time of day, milliseconds since midnight.
    public var timeOfDay: Int?
    /// The date, when day, month and year (1900...2200, as gpsd) are all valid.
    public var date: NMEADate?

    init(_ f: NMEAFields) {
        timeOfDay = f.timeOfDay(1)
        if let d = f.int(2), let m = f.int(3), let y = f.int(4),
            (1900...2200).contains(y), (1...12).contains(m), (1...31).contains(d)
        {
            date = NMEADate(year: y, month: m, day: d)
        } else {
            date = nil
        }
    }
}
