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

    @Test("a receiver that sends its heading after the fix (RMC GGA GSA VTG HDT): one message each, from the first instant on")
    func headingAfterFix() {
        var joiner = InstantJoiner()
        // First instant: nothing is known, the first event waits for its partner, which comes.
        #expect(joiner.fix(Fixes.fix(at: 0), at: at(0)).isEmpty)
        #expect(joiner.heading(heading(at: 0), at: at(5)) == [joined(Fixes.fix(at: 0), heading(at: 0))])
        for second in 1...5 {
            let t = Double(second)
            #expect(joiner.fix(Fixes.fix(at: t), at: at(second * 1000)).isEmpty, "held for its heading")
            #expect(joiner.heading(heading(at: t), at: at(second * 1000 + 5)) == [joined(Fixes.fix(at: t), heading(at: t))])
        }
        #expect(joiner.joined == 6)
        #expect(joiner.held == nil)
    }

    @Test("a receiver that sends its heading before the fix: the heading waits for the fix, the first instant's too")
    func headingBeforeFix() {
        var joiner = InstantJoiner()
        #expect(joiner.heading(heading(at: 0), at: at(0)).isEmpty, "nothing known yet: it waits")
        #expect(joiner.fix(Fixes.fix(at: 0), at: at(5)) == [joined(Fixes.fix(at: 0), heading(at: 0))], "one message, not split")
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
        #expect(joiner.joined == 3, "the first instant waits for its partner too")
    }

    @Test("a compass that stops: one fix waits one cycle, the next go at once")
    func compassStops() {
        var joiner = pairingJoiner()
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1000)).isEmpty)
        // No heading: the next cycle's fix lets it go, alone, and is not held itself.
        #expect(joiner.fix(Fixes.fix(at: 2), at: at(2000)) == [.fix(Fixes.fix(at: 1)), .fix(Fixes.fix(at: 2))])
        #expect(joiner.fix(Fixes.fix(at: 3), at: at(3000)) == [.fix(Fixes.fix(at: 3))])
        #expect(joiner.pairing == false)
    }

    @Test("a source without headings has its first fix held one cycle (nothing is known yet), then never")
    func noHeadings() {
        var joiner = InstantJoiner()
        #expect(joiner.fix(Fixes.fix(at: 0), at: at(0)).isEmpty)
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1000)) == [.fix(Fixes.fix(at: 0)), .fix(Fixes.fix(at: 1))])
        for second in 2..<10 {
            #expect(joiner.fix(Fixes.fix(at: Double(second)), at: at(second * 1000)) == [.fix(Fixes.fix(at: Double(second)))])
        }
    }

    @Test("a compass without fixes: the first heading waits for a fix at most until the next reading, then none waits")
    func headingsOnly() {
        var joiner = InstantJoiner()
        #expect(joiner.heading(heading(at: 0), at: at(0)).isEmpty)
        #expect(joiner.heading(heading(at: 0.1), at: at(100)) == [.heading(heading(at: 0)), .heading(heading(at: 0.1))])
        #expect(joiner.heading(heading(at: 0.2), at: at(200)) == [.heading(heading(at: 0.2))])
    }

    @Test("what is held goes alone after the longest hold, on a source state, and at the finish")
    func releases() {
        var joiner = pairingJoiner()
        #expect(joiner.fix(Fixes.fix(at: 1), at: at(1000)).isEmpty)
        #expect(joiner.releaseOverdue(at: at(1499)).isEmpty, "not yet")
        #expect(joiner.releaseOverdue(at: at(1500)) == [.fix(Fixes.fix(at: 1))])
        #expect(joiner.pairing == false, "a partner that late is not waited for")

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
