import AsyncAlgorithms
import Synchronization
import TelemetryHub

/// `fleetcast-bench hub [--values N] [--repeat R] [--subscribers 1,10,100]`
///
/// Values per second delivered by `Hub` and by swift-async-algorithms' `share()` on the same
/// workload: a source of N Ints, K subscribers each consuming all N, unbounded buffering on both
/// (lossless). The source is gated so every subscriber is registered before the first value;
/// the clock runs from opening the gate until every subscriber has seen the end. Best of R runs.
func runHubBenchmark(arguments: [String]) async {
    var values = 100_000
    var repeats = 3
    var subscriberCounts = [1, 10, 100]
    var remaining = arguments[...]
    while let option = remaining.popFirst() {
        let value = remaining.popFirst()
        switch option {
        case "--values": values = value.flatMap { Int($0) }.map { max(1, $0) } ?? values
        case "--repeat": repeats = value.flatMap { Int($0) }.map { max(1, $0) } ?? repeats
        case "--subscribers":
            let parsed = value?.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 } ?? []
            if !parsed.isEmpty { subscriberCounts = parsed }
        default:
            print("hub: unknown option \(option) (use --values N --repeat R --subscribers 1,10,100)")
            return
        }
    }

    print("hub broadcast: \(values) Ints per subscriber, unbounded buffers, best of \(repeats) runs")
    print("subscribers | Hub values/s | share() values/s | Hub/share")
    print("----------- | ------------ | ---------------- | ---------")
    for subscribers in subscriberCounts {
        var hubBest = 0.0
        var shareBest = 0.0
        for _ in 0..<repeats {
            hubBest = max(hubBest, await measureHub(values: values, subscribers: subscribers))
            shareBest = max(shareBest, await measureShare(values: values, subscribers: subscribers))
        }
        print(
            "\(pad(String(subscribers), 11)) | \(pad(format(hubBest), 12)) | \(pad(format(shareBest), 16)) | "
                + String(format1(hubBest / max(shareBest, 1))) + "x"
        )
    }
}

/// Ints 0..<count; the first `next()` waits until `gate` finishes.
private struct GatedRange: AsyncSequence, Sendable {
    typealias Failure = Never
    let count: Int
    let gate: AsyncStream<Never>

    struct AsyncIterator: AsyncIteratorProtocol {
        typealias Failure = Never
        let count: Int
        let gate: AsyncStream<Never>
        var current = 0
        var opened = false

        mutating func next() async -> Int? {
            if !opened {
                opened = true
                for await _ in gate {}
            }
            guard current < count else { return nil }
            defer { current += 1 }
            return current
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(count: count, gate: gate)
    }
}

private final class ReadyCounter: Sendable {
    let ready = Atomic<Int>(0)
}

/// Waits until `subscribers` consumers are registered, opens the gate, returns values/s.
private func run(
    subscribers: Int, values: Int, gate: AsyncStream<Never>.Continuation, counter: ReadyCounter,
    consumers: [Task<Int, Never>]
) async -> Double {
    while counter.ready.load(ordering: .acquiring) < subscribers {
        await Task.yield()
    }
    let clock = ContinuousClock()
    let start = clock.now
    gate.finish()
    var delivered = 0
    for consumer in consumers {
        delivered += await consumer.value
    }
    let elapsed = clock.now - start
    guard delivered == values * subscribers else {
        print("hub: a subscriber lost values (\(delivered) of \(values * subscribers))")
        return 0
    }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Double(delivered) / seconds
}

private func measureHub(values: Int, subscribers: Int) async -> Double {
    let (gate, gateContinuation) = AsyncStream<Never>.makeStream()
    let hub = Hub(source: GatedRange(count: values, gate: gate))
    let counter = ReadyCounter()
    let consumers = (0..<subscribers).map { _ in
        Task {
            let subscription = hub.subscribe(bufferingPolicy: .unbounded)
            counter.ready.add(1, ordering: .releasing)
            var count = 0
            do {
                for try await _ in subscription { count += 1 }
            } catch {
                return -1
            }
            return count
        }
    }
    return await run(
        subscribers: subscribers, values: values, gate: gateContinuation, counter: counter, consumers: consumers)
}

private func measureShare(values: Int, subscribers: Int) async -> Double {
    let (gate, gateContinuation) = AsyncStream<Never>.makeStream()
    let shared = GatedRange(count: values, gate: gate).share(bufferingPolicy: .unbounded)
    let counter = ReadyCounter()
    let consumers = (0..<subscribers).map { _ in
        Task {
            var iterator = shared.makeAsyncIterator()
            counter.ready.add(1, ordering: .releasing)
            var count = 0
            while await iterator.next(isolation: nil) != nil { count += 1 }
            return count
        }
    }
    return await run(
        subscribers: subscribers, values: values, gate: gateContinuation, counter: counter, consumers: consumers)
}

private func format(_ perSecond: Double) -> String {
    if perSecond >= 1e6 { return format1(perSecond / 1e6) + " M" }
    if perSecond >= 1e3 { return format1(perSecond / 1e3) + " k" }
    return format1(perSecond)
}

private func format1(_ value: Double) -> String {
    let tenths = (value * 10).rounded()
    return "\(Int(tenths) / 10).\(abs(Int(tenths)) % 10)"
}

private func pad(_ text: String, _ width: Int) -> String {
    String(repeating: " ", count: max(0, width - text.count)) + text
}
