import Testing

@testable import TelemetryHub

@Suite("RingBuffer")
struct RingBufferTests {
    @Test("behaves as a FIFO queue across wrap-around, growth and release of storage")
    func matchesArrayModel() {
        var ring = RingBuffer<Int>()
        var model: [Int] = []
        var next = 0
        // A fixed, irregular pattern of pushes and pops that wraps the head many times.
        let pattern = [3, -2, 5, -4, 1, -1, 9, -7, 2, -5, 17, -3, -10, 40, -41]
        for _ in 0..<50 {
            for step in pattern {
                if step > 0 {
                    for _ in 0..<step {
                        ring.append(next)
                        model.append(next)
                        next += 1
                    }
                } else {
                    for _ in 0..<(-step) {
                        #expect(ring.popFirst() == (model.isEmpty ? nil : model.removeFirst()))
                    }
                }
                #expect(ring.count == model.count)
            }
        }
        while let value = ring.popFirst() {
            #expect(value == model.removeFirst())
        }
        #expect(model.isEmpty)
        #expect(ring.isEmpty)
    }

    @Test("a drained buffer gives back large storage")
    func releasesLargeStorage() {
        var ring = RingBuffer<Int>()
        for value in 0..<5_000 {
            ring.append(value)
        }
        #expect(ring.capacity >= 5_000)
        while ring.popFirst() != nil {}
        #expect(ring.capacity == 0)
    }
}
