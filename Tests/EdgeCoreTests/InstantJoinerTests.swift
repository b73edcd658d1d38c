import EdgeCore
import FleetcastTestSupport
import GNSS
import Testing

/// The joining of each instant's heading into its fix, as plain values: the orders receivers
/// send them in, a compass faster than the receiver, a compass that stops, a source without
/// headings; nothing is ever dropped.
@Suite struct InstantJoinerTests {
    private static let start = ContinuousClock.now
    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { Self.start + .milliseconds(milliseconds) }

    private func heading(at seconds: Double, _ degrees: Double = 90) -> Heading {
        Heading(time: Fixes.time(seconds), trueHeading: degrees, source: .hdt)
    }

    /// A joiner that has seen one instant's fix and then its heading (second 0): it pairs.
    private func pairingJoiner() -> InstantJoiner {
        var joiner = InstantJoiner()
        _ = joiner.fix(Fixes.fix(at: 0), at: at(0))
        _ = joiner.heading(heading(at: 0), at: at(5))
        return joiner
    }

    private func joined(_ fix: Fix, _ heading: Heading) -> InstantJoiner.Output {
        var fix = fix
        fix.heading = heading
        return .fix(fix)
    }

    @Test("a receiver that sends its heading after the fix (RMC GGA GSA VTG HDT): from the second instant on, one message each")
    func headingAfterFix() {
        var joiner = InstantJoiner()
        // First instant: nothing is known, both go at once, and the joiner learns they pair.
        #expect(joiner.fix(Fixes.fix(at: 0), at: at(0)) == [.fix(Fixes.fix(at: 0))])
        #expect(joiner.heading(heading(at: 0), at: at(5)) == [.heading(heading(at: 0))])
        for second in 1...5 {
            let t = Double(second)
            #expect(joiner.fix(Fixes.fix(at: t), at: at(second * 1000)).isEmpty, "held for its heading")
            #expect(joiner.heading(heading(at: t), at: at(second * 1000 + 5)) == [joined(Fixes.fix(at: t), heading(at: t))])
        }
        #expect(joiner.joined == 5)
        #expect(joiner.held == nil)
    }

    @Test("a receiver that sends its heading before the fix: the heading waits for the fix")
    func headingBeforeFix() {
        var joiner = InstantJoiner()
        #expect(joiner.heading(heading(at: 0), at: at(0)) == [.heading(heading(at: 0))])
        #expect(joiner.fix(Fixes.fix(at: 0), at: at(5)) == [.fix(Fixes.fix(at: 0))], "learns they pair")
        #expect(joiner.heading(heading(at: 1), at: at(1000)).isEmpty)
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1005)) == [joined(Fixes.fix(at: 1), heading(at: 1))])
    }

    @Test("a 10 Hz compass beside a 1 Hz receiver: one reading rides in the fix, the nine others go alone, none is lost")
    func fastCompass() {
        var joiner = InstantJoiner()
        var out: [InstantJoiner.Output] = []
        for second in 0..<3 {
            let t = Double(second)
            out += joiner.fix(Fixes.fix(at: t), at: at(second * 1000))
            for reading in 0..<10 { out += joiner.heading(heading(at: t, Double(reading)), at: at(second * 1000 + reading * 100 + 1)) }
        }
        out += joiner.release()
        let fixes = out.filter { if case .fix = $0 { true } else { false } }
        let alone = out.count - fixes.count
        #expect(fixes.count == 3)
        #expect(alone + Int(joiner.joined) == 30, "every reading is published, in a fix or alone")
        #expect(joiner.joined == 2, "the first instant teaches the pairing")
    }

    @Test("a compass that stops: one fix waits one cycle, the next go at once")
    func compassStops() {
        var joiner = pairingJoiner()
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1000)).isEmpty)
        // No heading: the next cycle's fix lets it go, alone, and is not held itself.
        #expect(joiner.fix(Fixes.fix(at: 2), at: at(2000)) == [.fix(Fixes.fix(at: 1)), .fix(Fixes.fix(at: 2))])
        #expect(joiner.fix(Fixes.fix(at: 3), at: at(3000)) == [.fix(Fixes.fix(at: 3))])
        #expect(!joiner.pairing)
    }

    @Test("a source without headings never has a fix held")
    func noHeadings() {
        var joiner = InstantJoiner()
        for second in 0..<10 {
            #expect(joiner.fix(Fixes.fix(at: Double(second)), at: at(second * 1000)) == [.fix(Fixes.fix(at: Double(second)))])
        }
    }

    @Test("what is held goes alone after the longest hold, on a source state, and at the finish")
    func releases() {
        var joiner = pairingJoiner()
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1000)).isEmpty)
        #expect(joiner.releaseOverdue(at: at(1499)).isEmpty, "not yet")
        #expect(joiner.releaseOverdue(at: at(1500)) == [.fix(Fixes.fix(at: 1))])
        #expect(!joiner.pairing, "a partner that late is not waited for")

        _ = joiner.heading(heading(at: 1), at: at(1600))  // late, alone: pairing again
        #expect(joiner.fix(Fixes.fix(at: 2), at: at(2000)).isEmpty)
        #expect(joiner.release() == [.fix(Fixes.fix(at: 2))])
        #expect(joiner.release().isEmpty)
    }

    @Test("a corrected fix of the same time replaces the held one; a heading without time goes alone")
    func correctionsAndUntimed() {
        var joiner = pairingJoiner()
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1000)).isEmpty)
        let corrected = Fixes.fix(at: 1, north: 3)
        #expect(joiner.fix(corrected, at: at(1001)).isEmpty)
        #expect(joiner.superseded == 1, "the replaced fix is counted, not lost silently")
        let untimed = Heading(trueHeading: 12, source: .hdt)
        // An untimed heading is no partner: the held fix goes, alone, then the heading.
        #expect(joiner.heading(untimed, at: at(1002)) == [.fix(corrected), .heading(untimed)])
    }
}
