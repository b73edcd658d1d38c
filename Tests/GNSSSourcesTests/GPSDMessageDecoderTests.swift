import FleetProtocol
import GNSS
import GNSSSources
import Testing

@Suite struct GPSDMessageDecoderTests {
    private func decode(_ lines: [String], into decoder: inout GPSDMessageDecoder) -> [GNSSEvent] {
        var events: [GNSSEvent] = []
        for line in lines {
            decoder.decode(line: Array(line.utf8)) { events.append($0) }
        }
        return events
    }

    @Test func tpvBecomesAFixWithGpsdUnits() throws {
        var d = GPSDMessageDecoder()
        let events = decode(
            [
                #"{"class":"SKY","device":"/dev/pts/1","hdop":0.8,"vdop":1.3,"pdop":1.5,"nSat":12,"uSat":9}"#,
                #"{"class":"TPV","device":"/dev/pts/1","status":2,"mode":3,"time":"2010-07-08T00:59:47.000Z","ept":0.005,"lat":37.261026667,"lon":-121.961181667,"altHAE":55.9,"altMSL":86.0,"geoidSep":-30.1,"track":12.5,"magvar":13.1,"speed":4.25,"climb":-0.1,"eph":2.1,"epv":3.4}"#,
            ], into: &d)
        let fix = try #require(events.fixes.first)
        #expect(events.count == 1)
        #expect(fix.time == UTCTimestamp(iso8601: "2010-07-08T00:59:47.000Z"))
        #expect(fix.latitude == 37.261026667)
        #expect(fix.longitude == -121.961181667)
        #expect(fix.altitudeHAE == 55.9)
        #expect(fix.altitudeMSL == 86.0)
        #expect(fix.geoidSeparation == -30.1)
        #expect(fix.speed == 4.25)
        #expect(fix.track == 12.5)
        #expect(fix.climb == -0.1)
        #expect(fix.mode == .threeD)
        #expect(fix.quality == .dgps)
        #expect(fix.satellitesUsed == 9)
        #expect(fix.hdop == 0.8)
        #expect(fix.eph == 2.1)
        #expect(fix.epv == 3.4)
        #expect(d.statistics.objects == 2)
        #expect(d.statistics.malformed == 0)
    }

    @Test func modeBelowTwoIsNoFix() {
        var d = GPSDMessageDecoder()
        let events = decode([#"{"class":"TPV","mode":1,"time":"2020-01-01T00:00:00.000Z"}"#, #"{"class":"TPV","mode":0}"#], into: &d)
        #expect(events == [.state(.noFix), .state(.noFix)])
    }

    @Test func attBecomesAHeading() throws {
        var d = GPSDMessageDecoder()
        let events = decode(
            [#"{"class":"ATT","device":"/dev/ttyUSB0","time":"2021-05-01T10:00:00.500Z","heading":271.5,"mheading":268.25,"pitch":1.0}"#],
            into: &d)
        let h = try #require(events.first?.heading)
        #expect(h.trueHeading == 271.5)
        #expect(h.magneticHeading == 268.25)
        #expect(h.source == .gpsd)
        #expect(h.time == UTCTimestamp(iso8601: "2021-05-01T10:00:00.500Z"))
    }

    @Test func skyWithoutUSatCountsUsedSatellites() throws {
        var d = GPSDMessageDecoder()
        let events = decode(
            [
                #"{"class":"SKY","satellites":[{"PRN":1,"used":true},{"PRN":2,"used":false},{"PRN":3,"used":true}]}"#,
                #"{"class":"TPV","mode":2,"time":"2020-01-01T00:00:01.000Z","lat":1.5,"lon":2.5}"#,
            ], into: &d)
        #expect(events.fixes.first?.satellitesUsed == 2)
        #expect(events.fixes.first?.mode == .twoD)
    }

    @Test func deactivatedDeviceIsReportedOnce() {
        var d = GPSDMessageDecoder()
        let events = decode(
            [
                #"{"class":"VERSION","release":"3.25","rev":"3.25","proto_major":3,"proto_minor":15}"#,
                #"{"class":"DEVICES","devices":[{"class":"DEVICE","path":"/dev/ttyUSB0","activated":"2024-01-01T00:00:00.000Z"}]}"#,
                #"{"class":"DEVICE","path":"/dev/ttyUSB0","activated":0}"#,
                #"{"class":"DEVICE","path":"/dev/ttyUSB0","activated":0}"#,
            ], into: &d)
        #expect(events.reconnectReasons == ["gpsd: device /dev/ttyUSB0 went away"])
        #expect(d.gpsdRelease == "3.25")
        #expect(d.devices == ["/dev/ttyUSB0": false])
    }

    @Test func aDeviceListWithNothingOpenIsToldApartFromNoListAndFromAnOpenReceiver() {
        var d = GPSDMessageDecoder()
        _ = decode([#"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#], into: &d)
        #expect(!d.listsNoOpenDevice(), "no list yet: nothing is known")
        _ = decode([#"{"class":"DEVICES","devices":[]}"#], into: &d)
        #expect(d.listsNoOpenDevice())
        #expect(d.listsNoOpenDevice("/dev/ttyACM0"))
        _ = decode([#"{"class":"DEVICE","path":"/dev/ttyACM0","activated":"2024-01-01T00:00:00.000Z"}"#], into: &d)
        #expect(!d.listsNoOpenDevice())
        #expect(!d.listsNoOpenDevice("/dev/ttyACM0"))
        #expect(d.listsNoOpenDevice("/dev/ttyUSB0"), "the watched device is not the open one")
    }

    @Test func gpsdsErrorIsKeptEscapedAndBounded() throws {
        var d = GPSDMessageDecoder()
        _ = decode([#"{"class":"ERROR","message":"No such device as /dev/ttyUSB0"}"#], into: &d)
        #expect(d.lastError == "No such device as /dev/ttyUSB0")
        // A hostile gpsd: a terminal escape and a newline reach no log raw; 200 characters at most.
        _ = decode([#"{"class":"ERROR","message":"\u001b[2Jx\n"# + String(repeating: "y", count: 5000) + #""}"#], into: &d)
        let error = try #require(d.lastError)
        #expect(error.hasPrefix(#"\u001b[2Jx\n"#), "\(error.prefix(40))")
        #expect(!error.unicodeScalars.contains { $0.value < 0x20 })
        #expect(error.count <= 200 + 10)  // 200 characters, two of them escaped in more
        #expect(d.statistics.malformed == 2)
    }

    @Test func aGpsdListingEndlessDevicesIsHeldToTheBound() {
        var d = GPSDMessageDecoder()
        let lines = (0..<1000).map { #"{"class":"DEVICE","path":"/dev/fake\#($0)","activated":0}"# }
        _ = decode(lines, into: &d)
        #expect(d.devices.count == GPSDMessageDecoder.maximumDevices)
        #expect(d.statistics.ignored == 1000 - GPSDMessageDecoder.maximumDevices)
        // A device already known is still followed.
        _ = decode([#"{"class":"DEVICE","path":"/dev/fake0","activated":"2024-01-01T00:00:00.000Z"}"#], into: &d)
        #expect(d.devices["/dev/fake0"] == true)
    }

    @Test(arguments: [
        "not json at all",
        "[1,2,3]",
        #"{"no":"class"}"#,
        #"{"class":"TPV","mode":"3","lat":1,"lon":2,"time":"2020-01-01T00:00:00Z"}"#,
        #"{"class":"TPV","mode":3,"lat":"north","lon":2,"time":"2020-01-01T00:00:00Z"}"#,
        #"{"class":"TPV","mode":3,"lat":1,"lon":2}"#,
        #"{"class":"TPV","mode":3,"lat":100,"lon":2,"time":"2020-01-01T00:00:00Z"}"#,
        #"{"class":"TPV","mode":3,"lat":1,"lon":2,"time":"yesterday"}"#,
        #"{"class":"ATT","heading":"north"}"#,
        #"{"class":"DEVICES","devices":"none"}"#,
        #"{"class":"TPV","mode":3,"lat":1,"lon":2,"time":"2020-01-01T00:00:00Z""#,
        "",
    ])
    func malformedObjectsAreCountedAndSkipped(line: String) {
        var d = GPSDMessageDecoder()
        let events = decode([line], into: &d)
        #expect(events.isEmpty)
        #expect(d.statistics.malformed == 1)
        // The decoder goes on with the next good object.
        let next = decode([#"{"class":"TPV","mode":2,"time":"2020-01-01T00:00:01.000Z","lat":1.5,"lon":2.5}"#], into: &d)
        #expect(next.fixes.count == 1)
    }

    @Test func unknownClassesAreIgnored() {
        var d = GPSDMessageDecoder()
        let events = decode([#"{"class":"PPS","real_sec":1}"#, #"{"class":"GST","rms":1.0}"#], into: &d)
        #expect(events.isEmpty)
        #expect(d.statistics.ignored == 2)
        #expect(d.statistics.malformed == 0)
    }

    /// Found by `deploy/fuzz.sh` (target gpsd; the crashing input's failing line, CRLF as
    /// recorded): a TPV track of 23005° went into the fix and the agent published a payload
    /// that every subscriber refuses whole. The encoder now leaves the out-of-range track out.
    @Test func fuzzFindingOutOfRangeTrackStillPublishesADecodableFix() throws {
        var d = GPSDMessageDecoder()
        let line =
            #"{"class":"TPV","mode":3,"time":"2018-08-20T09:49:40.000Z","ept":0.005,"lat":52.848236667,"lon":5.309265000,"epx":7.481,"epy":8.819,"epv":20.700,"track":23005,"lat":52.848236667,"lon":5.309265000,"epx":7.481,"epy":8.819,"epv":20.700,"track":234.8000,"magtrack":235.1000,"magvar":1.4,"speed":2.727,"eps":17.64,"epc":41.40,"geoidSep":43.516,"eph":11.400,"sep":20.900,"depth":5.400}"#
            + "\r"
        let events = decode([line], into: &d)
        let fix = try #require(events.fixes.first)
        let van = VehicleID("van-7")!
        let back = try FleetPayload.decodeFix(FleetPayload.encode(fix, vehicle: van.rawValue, seq: 7), vehicle: van)
        #expect(back.fix.track == nil)
        #expect(back.fix.latitude == fix.latitude && back.fix.speed == fix.speed && back.fix.magneticVariation == fix.magneticVariation)
    }

    /// Found by `deploy/fuzz.sh` (target gpsd; the crashing input's failing line, CRLF as
    /// recorded): a TPV `time` with a 100-digit fraction trapped on an arithmetic overflow in
    /// `UTCTimestamp(iso8601:)`. It decodes now, truncated to milliseconds.
    @Test func fuzzFindingLongTimeFractionDoesNotTrap() throws {
        var d = GPSDMessageDecoder()
        let line =
            #"{"class":"TPV","mode":3,"time":"2018-08-20T09:49:46.044444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444444400Z","ept":0.005,"lat":52.848150000,"lon":5.309065000,"altHAE":41.8000,"altMSL":-5.0000,"alt":-5.0000,"epv":20.700,"magvar":1.6,"speed":2.743,"geoidSep":46.800,"eph":11.400,"sep":20.900}"#
            + "\r"
        let fix = try #require(decode([line], into: &d).fixes.first)
        #expect(fix.time.iso8601 == "2018-08-20T09:49:46.044Z")
    }
}
