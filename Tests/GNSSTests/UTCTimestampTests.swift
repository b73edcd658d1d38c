import GNSS
import Testing

@Suite struct UTCTimestampTests {
    @Test func calendarRoundTripsThroughISO8601() throws {
        let t = try #require(UTCTimestamp(year: 2020, month: 3, day: 18, hour: 13, minute: 28, second: 19, millisecond: 600))
        #expect(t.iso8601 == "2020-03-18T13:28:19.600Z")
        #expect(UTCTimestamp(iso8601: "2020-03-18T13:28:19.600Z") == t)
        #expect(UTCTimestamp(iso8601: "2020-03-18T13:28:19.6Z") == t)
        #expect(UTCTimestamp(iso8601: "2020-03-18T13:28:19.6001234Z") == t)
        #expect(t.millisecondsSince1970 == 1_584_538_099_600)
    }

    @Test func epochAndLeapDays() throws {
        #expect(UTCTimestamp(year: 1970, month: 1, day: 1, hour: 0, minute: 0, second: 0)?.millisecondsSince1970 == 0)
        #expect(UTCTimestamp(year: 2024, month: 2, day: 29, hour: 23, minute: 59, second: 59)?.iso8601 == "2024-02-29T23:59:59.000Z")
        #expect(UTCTimestamp(year: 2023, month: 2, day: 29, hour: 0, minute: 0, second: 0) == nil)
        #expect(UTCTimestamp(year: 2100, month: 2, day: 29, hour: 0, minute: 0, second: 0) == nil)
        #expect(UTCTimestamp(year: 2000, month: 2, day: 29, hour: 0, minute: 0, second: 0) != nil)
    }

    @Test func rejectsMalformedText() {
        for text in ["", "2020-03-18", "2020-03-18T13:28:19.600", "2020-13-18T13:28:19Z", "2020-03-18T13:28:19.Z", "20x0-03-18T13:28:19Z"] {
            #expect(UTCTimestamp(iso8601: text) == nil, "\(text)")
        }
    }

    @Test func distanceBetweenFixes() throws {
        let t = UTCTimestamp(millisecondsSince1970: 0)
        let a = Fix(time: t, latitude: 0, longitude: 0, mode: .twoD)
        let b = Fix(time: t, latitude: 0, longitude: 1, mode: .twoD)
        // One degree of longitude on the equator is ~111.2 km on the mean sphere.
        #expect(abs(a.distance(to: b) - 111_195) < 1)
        #expect(a.distance(to: a) == 0)
    }

    /// Found by `deploy/fuzz.sh` (target gpsd): a fraction of more than 18 digits overflowed
    /// `Int` while its digits were checked, and trapped (a gpsd TPV could stop the agent).
    @Test func fuzzFindingLongFractionDoesNotOverflow() {
        let time = "2018-08-20T09:49:46.0" + String(repeating: "4", count: 100) + "00Z"
        #expect(UTCTimestamp(iso8601: time)?.iso8601 == "2018-08-20T09:49:46.044Z")
        #expect(
            UTCTimestamp(iso8601: "2018-08-20T09:49:46." + String(repeating: "9", count: 40) + "Z")?.iso8601
                == "2018-08-20T09:49:46.999Z")
        #expect(UTCTimestamp(iso8601: "2018-08-20T09:49:46." + String(repeating: "1", count: 30) + "xZ") == nil)
    }
}
